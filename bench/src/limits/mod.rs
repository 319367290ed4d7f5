//! This machine's physical limits, measured in a few seconds so that every benchmark result can
//! be read as a share of them: sequential write and read bandwidth of the data disk (O_DIRECT and
//! buffered, through io_uring), fdatasync latency, synced appends (the ceiling for acks=all), and
//! loopback TCP bandwidth.

mod sequential;

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use crate::stats::new_histogram;
use laminar_sys::memory::AlignedBuffer;
use laminar_sys::page_cache::drop_page_cache;
use laminar_sys::sockets::send_file;
use laminar_sys::uring::Direction;
use sequential::sequential_io;

/// How long each probe may run and how much it may write.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Time per bandwidth probe.
    pub per_probe: Duration,
    /// Size of the scratch file the disk probes write and read (wrapping past it).
    pub file_bytes: u64,
    /// Operation size of the bandwidth probes.
    pub block_bytes: usize,
    /// Operations in flight.
    pub queue_depth: usize,
}

impl Default for Budget {
    /// About 6 s in all: 0.6 s per disk probe (1.2 s for synced appends), 1 s of loopback
    /// (3 probes), 1 MiB at queue depth 8 (as in LIMITS.md's fio runs) over a 512 MiB file.
    fn default() -> Budget {
        Budget {
            per_probe: Duration::from_millis(600),
            file_bytes: 512 << 20,
            block_bytes: 1 << 20,
            queue_depth: 8,
        }
    }
}

/// The limits measured. Bandwidths in MB/s (10^6 bytes).
#[derive(Debug, Clone, Serialize)]
pub struct Limits {
    /// The directory whose disk was measured.
    pub dir: String,
    /// Sequential write, O_DIRECT.
    pub disk_write_direct_mb_per_sec: f64,
    /// Sequential read, O_DIRECT.
    pub disk_read_direct_mb_per_sec: f64,
    /// Sequential write through the page cache, including the fdatasync at the end.
    pub disk_write_buffered_mb_per_sec: f64,
    /// Sequential read through the page cache after dropping the file's pages.
    pub disk_read_buffered_mb_per_sec: f64,
    /// Appends of 4 KiB each followed by fdatasync, per second.
    pub fdatasync_per_sec: f64,
    /// fdatasync latency percentiles (µs).
    pub fdatasync_us_p50: u64,
    /// 99th percentile.
    pub fdatasync_us_p99: u64,
    /// Largest.
    pub fdatasync_us_max: u64,
    /// [`SYNCED_APPEND_STREAMS`] files at once, each appended [`SYNCED_APPEND_KIB`] KiB at a
    /// time with an fdatasync after every append: what the filesystem gives acks=all produce
    /// to that many partitions (one fdatasync per batch), with the broker costing nothing.
    pub disk_synced_append_mb_per_sec: f64,
    /// Files appended to at once.
    pub disk_synced_append_streams: usize,
    /// KiB per append.
    pub disk_synced_append_kib: usize,
    /// One TCP stream over loopback, two threads: the best of [`LOOPBACK_PROBES`] probes.
    pub loopback_mb_per_sec: f64,
    /// The same stream fed with `sendfile` from a file in the page cache ([`SENDFILE_FILE_BYTES`]
    /// unless the budget's file is smaller), the zero-copy fetch path: what a consumer reading a log larger than the CPU's
    /// caches can get over one connection. Best of [`LOOPBACK_PROBES`].
    pub loopback_sendfile_mb_per_sec: f64,
    /// Time the measurement took (s).
    pub seconds: f64,
}

impl Limits {
    /// A human-readable block.
    pub fn describe(&self) -> String {
        format!(
            "limits of this machine ({}; measured in {:.1} s):\n  disk write O_DIRECT {:.0} MB/s, buffered+fdatasync {:.0} MB/s\n  disk read O_DIRECT {:.0} MB/s, buffered (cold) {:.0} MB/s\n  fdatasync after 4 KiB: {:.0}/s, p50 {} us, p99 {} us, max {} us\n  synced appends, {} files x {} KiB + fdatasync each: {:.0} MB/s\n  loopback TCP, 1 stream, best of 3: {:.0} MB/s; fed by sendfile from the page cache: {:.0} MB/s",
            self.dir,
            self.seconds,
            self.disk_write_direct_mb_per_sec,
            self.disk_write_buffered_mb_per_sec,
            self.disk_read_direct_mb_per_sec,
            self.disk_read_buffered_mb_per_sec,
            self.fdatasync_per_sec,
            self.fdatasync_us_p50,
            self.fdatasync_us_p99,
            self.fdatasync_us_max,
            self.disk_synced_append_streams,
            self.disk_synced_append_kib,
            self.disk_synced_append_mb_per_sec,
            self.loopback_mb_per_sec,
            self.loopback_sendfile_mb_per_sec,
        )
    }
}

/// Removes the scratch file however the probe ends.
struct ScratchFile(PathBuf);

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Measures all limits, using scratch files in `dir` (removed afterwards).
pub fn measure(dir: &Path, budget: &Budget) -> anyhow::Result<Limits> {
    let started = Instant::now();
    let scratch = ScratchFile(dir.join(format!(".laminar-limits-{}.tmp", std::process::id())));
    let (direct, file_bytes) = direct_bandwidth(&scratch.0, budget)?;
    let buffered = buffered_bandwidth(&scratch.0, budget, file_bytes)?;
    let sync = fdatasync_latency(&scratch.0, budget.per_probe)?;
    // Twice as long as the other probes: short bursts of synced appends read high on a disk
    // with a volatile cache in front (0.6 s gave 720–820 MB/s where 2 s gave 480–530).
    let synced_append = synced_append_bandwidth(dir, budget.per_probe * 2)?;
    let loopback_duration = budget.per_probe.max(Duration::from_secs(1));
    let chunk = vec![0x33u8; LOOPBACK_WRITE_BYTES];
    let loopback = best_loopback_bandwidth(loopback_duration, |stream| stream.write_all(&chunk))?;
    let sendfile_bytes = budget.file_bytes.min(SENDFILE_FILE_BYTES);
    let loopback_sendfile = sendfile_loopback_bandwidth(dir, sendfile_bytes, loopback_duration)?;
    Ok(Limits {
        dir: dir.display().to_string(),
        disk_write_direct_mb_per_sec: direct.write_mb_per_sec,
        disk_read_direct_mb_per_sec: direct.read_mb_per_sec,
        disk_write_buffered_mb_per_sec: buffered.write_mb_per_sec,
        disk_read_buffered_mb_per_sec: buffered.read_mb_per_sec,
        fdatasync_per_sec: sync.0,
        fdatasync_us_p50: sync.1,
        fdatasync_us_p99: sync.2,
        fdatasync_us_max: sync.3,
        disk_synced_append_mb_per_sec: synced_append,
        disk_synced_append_streams: SYNCED_APPEND_STREAMS,
        disk_synced_append_kib: SYNCED_APPEND_KIB,
        loopback_mb_per_sec: loopback,
        loopback_sendfile_mb_per_sec: loopback_sendfile,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Sequential write, then read, bandwidth of one file (MB/s).
struct Bandwidth {
    write_mb_per_sec: f64,
    read_mb_per_sec: f64,
}

/// `budget.queue_depth` zeroed buffers of `budget.block_bytes`.
fn aligned_buffers(budget: &Budget) -> Vec<AlignedBuffer> {
    (0..budget.queue_depth)
        .map(|_| AlignedBuffer::new(budget.block_bytes))
        .collect()
}

/// O_DIRECT bandwidth of the scratch file at `path`: writes for a probe's time (wrapping at
/// `budget.file_bytes`), then reads what was written. Also returns the bytes written, in
/// whole blocks, which the buffered probes reuse.
fn direct_bandwidth(path: &Path, budget: &Budget) -> anyhow::Result<(Bandwidth, u64)> {
    let direct = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .with_context(|| format!("opening {} with O_DIRECT", path.display()))?;
    let (written, write_mb_per_sec) = timed(|| {
        sequential_io(
            &direct,
            Direction::Write,
            filled(aligned_buffers(budget)),
            budget.file_bytes,
            u64::MAX,
            Instant::now() + budget.per_probe,
        )
    })?;
    direct.sync_data()?;
    let file_bytes =
        (written.min(budget.file_bytes) / budget.block_bytes as u64).max(1) * budget.block_bytes as u64;
    let (_, read_mb_per_sec) = timed(|| {
        sequential_io(
            &direct,
            Direction::Read,
            aligned_buffers(budget),
            file_bytes,
            u64::MAX,
            Instant::now() + budget.per_probe,
        )
    })?;
    let bandwidth = Bandwidth {
        write_mb_per_sec,
        read_mb_per_sec,
    };
    Ok((bandwidth, file_bytes))
}

/// Buffered bandwidth of the first `file_bytes` of the scratch file at `path`: one pass of
/// writes up to fdatasync, then, with its pages dropped from the cache, one pass of reads.
fn buffered_bandwidth(path: &Path, budget: &Budget, file_bytes: u64) -> anyhow::Result<Bandwidth> {
    let buffered = OpenOptions::new().read(true).write(true).open(path)?;
    let (_, write_mb_per_sec) = timed(|| {
        let done = sequential_io(
            &buffered,
            Direction::Write,
            filled(aligned_buffers(budget)),
            file_bytes,
            file_bytes,
            Instant::now() + budget.per_probe,
        )?;
        buffered.sync_data()?;
        Ok(done)
    })?;
    drop_page_cache(buffered.as_raw_fd(), 0, 0)?;
    let (_, read_mb_per_sec) = timed(|| {
        sequential_io(
            &buffered,
            Direction::Read,
            aligned_buffers(budget),
            file_bytes,
            file_bytes,
            Instant::now() + budget.per_probe,
        )
    })?;
    Ok(Bandwidth {
        write_mb_per_sec,
        read_mb_per_sec,
    })
}

/// Fills write buffers with non-zero bytes (a disk or hypervisor might special-case zeros).
fn filled(mut buffers: Vec<AlignedBuffer>) -> Vec<AlignedBuffer> {
    for buffer in &mut buffers {
        for (index, byte) in buffer.as_mut_slice().iter_mut().enumerate() {
            *byte = (index * 31 % 251) as u8 + 1;
        }
    }
    buffers
}

/// Runs a probe returning bytes moved; returns the bytes and MB/s.
fn timed(probe: impl FnOnce() -> std::io::Result<u64>) -> anyhow::Result<(u64, f64)> {
    let started = Instant::now();
    let bytes = probe()?;
    let seconds = started.elapsed().as_secs_f64();
    Ok((bytes, bytes as f64 / 1e6 / seconds.max(1e-9)))
}

/// [`fdatasync_latency`] for `duration` on a scratch file in `dir` (removed afterwards).
pub fn fdatasync_probe(dir: &Path, duration: Duration) -> anyhow::Result<(f64, u64, u64, u64)> {
    let scratch = ScratchFile(dir.join(format!(".laminar-fdatasync-{}.tmp", std::process::id())));
    fdatasync_latency(&scratch.0, duration)
}

/// 4 KiB appends each followed by fdatasync: `(per second, p50 µs, p99 µs, max µs)`.
fn fdatasync_latency(path: &Path, duration: Duration) -> anyhow::Result<(f64, u64, u64, u64)> {
    let file = File::create(path)?;
    let block = [0x5au8; 4096];
    let mut histogram = new_histogram();
    let started = Instant::now();
    let mut offset = 0u64;
    while started.elapsed() < duration {
        let before = Instant::now();
        file.write_all_at(&block, offset)?;
        file.sync_data()?;
        histogram.saturating_record((before.elapsed().as_micros() as u64).max(1));
        offset += block.len() as u64;
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok((
        histogram.len() as f64 / seconds,
        histogram.value_at_quantile(0.5),
        histogram.value_at_quantile(0.99),
        histogram.max(),
    ))
}

/// Files the synced-append probe writes at once: the partitions of the workload.
pub const SYNCED_APPEND_STREAMS: usize = 4;
/// KiB per synced append: the harness's default batch.
pub const SYNCED_APPEND_KIB: usize = 256;

/// [`SYNCED_APPEND_STREAMS`] threads, each appending [`SYNCED_APPEND_KIB`] KiB to its own
/// scratch file in `dir` and calling fdatasync after every append, for `duration`: MB/s in all.
/// Fresh files, as a new topic's segments are, so each fdatasync also commits the blocks and
/// size the append added.
fn synced_append_bandwidth(dir: &Path, duration: Duration) -> anyhow::Result<f64> {
    let started = Instant::now();
    let streams: Vec<_> = (0..SYNCED_APPEND_STREAMS)
        .map(|stream| {
            let path = dir.join(format!(
                ".laminar-limits-{}-append-{stream}.tmp",
                std::process::id()
            ));
            std::thread::spawn(move || -> std::io::Result<u64> {
                let scratch = ScratchFile(path);
                let file = File::create(&scratch.0)?;
                let block = vec![0x6bu8; SYNCED_APPEND_KIB * 1024];
                let mut written = 0u64;
                while started.elapsed() < duration {
                    file.write_all_at(&block, written)?;
                    file.sync_data()?;
                    written += block.len() as u64;
                }
                Ok(written)
            })
        })
        .collect();
    let mut bytes = 0u64;
    for stream in streams {
        bytes += stream.join().expect("synced-append thread")?;
    }
    Ok(bytes as f64 / 1e6 / started.elapsed().as_secs_f64().max(1e-9))
}

/// Loopback probes per measurement. A limit is what the machine can do, and on a shared VM one
/// probe of a second read anywhere from 1.5 to 4.4 GB/s (steal, a busy neighbour, writeback
/// from the disk probes); the best of several short probes is the steadier estimate.
pub const LOOPBACK_PROBES: u32 = 3;

/// The best of [`LOOPBACK_PROBES`] loopback probes sharing `duration`; `send` writes the next
/// piece of the stream.
fn best_loopback_bandwidth(
    duration: Duration,
    mut send: impl FnMut(&mut TcpStream) -> std::io::Result<()>,
) -> anyhow::Result<f64> {
    let mut best = 0f64;
    for _ in 0..LOOPBACK_PROBES {
        best = best.max(loopback_bandwidth(duration / LOOPBACK_PROBES, &mut send)?);
    }
    Ok(best)
}

/// Bytes per write of the plain loopback probe.
const LOOPBACK_WRITE_BYTES: usize = 1 << 20;
/// Size of the page-cached file the sendfile probe sends, round and round: larger than any
/// CPU cache, as a log is.
pub const SENDFILE_FILE_BYTES: u64 = 256 << 20;

/// [`loopback_bandwidth`] fed by sendfile, 1 MiB at a time, from a scratch file of
/// `file_bytes` in `dir` that is first written and read through the page cache (so it is
/// cached, and the probe measures the network path, not the disk).
fn sendfile_loopback_bandwidth(dir: &Path, file_bytes: u64, duration: Duration) -> anyhow::Result<f64> {
    let scratch = ScratchFile(dir.join(format!(".laminar-sendfile-{}.tmp", std::process::id())));
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&scratch.0)
        .with_context(|| format!("creating {}", scratch.0.display()))?;
    let block = vec![0x5au8; LOOPBACK_WRITE_BYTES];
    let file_bytes = file_bytes.max(block.len() as u64) / block.len() as u64 * block.len() as u64;
    for _ in 0..file_bytes / block.len() as u64 {
        file.write_all(&block)?;
    }
    std::io::copy(&mut File::open(&scratch.0)?, &mut std::io::sink())?;
    let mut offset = 0u64;
    best_loopback_bandwidth(duration, |stream| {
        let sent = send_file(stream.as_raw_fd(), file.as_raw_fd(), offset, LOOPBACK_WRITE_BYTES)?;
        offset = (offset + sent as u64) % file_bytes;
        Ok(())
    })
}

/// One TCP stream over loopback for `duration`, written by `send`: MB/s seen by the receiver.
fn loopback_bandwidth(
    duration: Duration,
    send: &mut impl FnMut(&mut TcpStream) -> std::io::Result<()>,
) -> anyhow::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let receiver = std::thread::spawn(move || -> std::io::Result<(u64, f64)> {
        let (mut stream, _) = listener.accept()?;
        let mut buffer = vec![0u8; 1 << 20];
        let mut bytes = 0u64;
        let started = Instant::now();
        loop {
            match stream.read(&mut buffer)? {
                0 => return Ok((bytes, started.elapsed().as_secs_f64())),
                read => bytes += read as u64,
            }
        }
    });
    let mut sender = TcpStream::connect(address)?;
    let started = Instant::now();
    while started.elapsed() < duration {
        send(&mut sender)?;
    }
    drop(sender);
    let (bytes, seconds) = receiver.join().expect("loopback receiver thread")?;
    Ok(bytes as f64 / 1e6 / seconds.max(1e-9))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_sane_and_bounded_in_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let budget = Budget {
            per_probe: Duration::from_millis(150),
            file_bytes: 32 << 20,
            block_bytes: 1 << 20,
            queue_depth: 4,
        };
        let limits = measure(dir.path(), &budget).expect("measure");
        // Each probe measured something: a rate above zero and below 1 TB/s. No floor beyond
        // zero: a 150 ms probe of a disk other processes are busy with may see a few MB/s (a
        // release build beside CI's run made the direct read 5.9 MB/s).
        for (name, mb_per_sec) in [
            ("write direct", limits.disk_write_direct_mb_per_sec),
            ("read direct", limits.disk_read_direct_mb_per_sec),
            ("write buffered", limits.disk_write_buffered_mb_per_sec),
            ("read buffered", limits.disk_read_buffered_mb_per_sec),
            ("synced append", limits.disk_synced_append_mb_per_sec),
            ("loopback", limits.loopback_mb_per_sec),
            ("loopback sendfile", limits.loopback_sendfile_mb_per_sec),
        ] {
            assert!(mb_per_sec > 0.0 && mb_per_sec < 1e6, "{name}: {mb_per_sec} MB/s");
        }
        assert!(limits.fdatasync_per_sec > 0.0, "{limits:?}");
        assert!(limits.fdatasync_us_p50 <= limits.fdatasync_us_p99);
        assert!(limits.fdatasync_us_p99 <= limits.fdatasync_us_max);
        assert!(limits.seconds < 5.0, "took {} s", limits.seconds);
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("dir").count(),
            0,
            "scratch removed"
        );
        assert!(limits.describe().contains("loopback TCP"));
        assert!(limits.describe().contains("fed by sendfile from the page cache"));
        assert!(limits.describe().contains("synced appends, 4 files x 256 KiB"));
    }
}
