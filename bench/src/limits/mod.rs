//! This machine's physical limits, measured in a few seconds so that every benchmark result can
//! be read as a share of them: sequential write and read bandwidth of the data disk (O_DIRECT and
//! buffered, through io_uring), fdatasync latency, and loopback TCP bandwidth.

mod uring;

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use crate::stats::new_histogram;
use uring::{drop_page_cache, sequential_io, AlignedBuffer, Direction};

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
    /// About 4 s in all: 0.6 s per disk probe, 1 s of loopback (3 probes), 1 MiB at queue depth 8 (as in
    /// LIMITS.md's fio runs) over a 512 MiB file.
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
    /// One TCP stream over loopback, two threads: the best of [`LOOPBACK_PROBES`] probes.
    pub loopback_mb_per_sec: f64,
    /// Time the measurement took (s).
    pub seconds: f64,
}

impl Limits {
    /// A human-readable block.
    pub fn describe(&self) -> String {
        format!(
            "limits of this machine ({}; measured in {:.1} s):\n  disk write O_DIRECT {:.0} MB/s, buffered+fdatasync {:.0} MB/s\n  disk read O_DIRECT {:.0} MB/s, buffered (cold) {:.0} MB/s\n  fdatasync after 4 KiB: {:.0}/s, p50 {} us, p99 {} us, max {} us\n  loopback TCP, 1 stream, best of 3: {:.0} MB/s",
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
            self.loopback_mb_per_sec,
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
    let buffers = || {
        (0..budget.queue_depth)
            .map(|_| AlignedBuffer::new(budget.block_bytes))
            .collect::<Vec<_>>()
    };
    let direct = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&scratch.0)
        .with_context(|| format!("opening {} with O_DIRECT", scratch.0.display()))?;
    let (written, write_direct) = timed(|| {
        sequential_io(
            &direct,
            Direction::Write,
            filled(buffers()),
            budget.file_bytes,
            u64::MAX,
            Instant::now() + budget.per_probe,
        )
    })?;
    direct.sync_data()?;
    let file_bytes =
        (written.min(budget.file_bytes) / budget.block_bytes as u64).max(1) * budget.block_bytes as u64;
    let (_, read_direct) = timed(|| {
        sequential_io(
            &direct,
            Direction::Read,
            buffers(),
            file_bytes,
            u64::MAX,
            Instant::now() + budget.per_probe,
        )
    })?;
    drop(direct);

    let buffered = OpenOptions::new().read(true).write(true).open(&scratch.0)?;
    let (_, write_buffered) = timed(|| {
        let done = sequential_io(
            &buffered,
            Direction::Write,
            filled(buffers()),
            file_bytes,
            file_bytes,
            Instant::now() + budget.per_probe,
        )?;
        buffered.sync_data()?;
        Ok(done)
    })?;
    drop_page_cache(&buffered)?;
    let (_, read_buffered) = timed(|| {
        sequential_io(
            &buffered,
            Direction::Read,
            buffers(),
            file_bytes,
            file_bytes,
            Instant::now() + budget.per_probe,
        )
    })?;
    drop(buffered);

    let sync = fdatasync_latency(&scratch.0, budget.per_probe)?;
    let loopback = best_loopback_bandwidth(budget.per_probe.max(Duration::from_secs(1)))?;
    Ok(Limits {
        dir: dir.display().to_string(),
        disk_write_direct_mb_per_sec: write_direct,
        disk_read_direct_mb_per_sec: read_direct,
        disk_write_buffered_mb_per_sec: write_buffered,
        disk_read_buffered_mb_per_sec: read_buffered,
        fdatasync_per_sec: sync.0,
        fdatasync_us_p50: sync.1,
        fdatasync_us_p99: sync.2,
        fdatasync_us_max: sync.3,
        loopback_mb_per_sec: loopback,
        seconds: started.elapsed().as_secs_f64(),
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

/// Loopback probes per measurement. A limit is what the machine can do, and on a shared VM one
/// probe of a second read anywhere from 1.5 to 4.4 GB/s (steal, a busy neighbour, writeback
/// from the disk probes); the best of several short probes is the steadier estimate.
pub const LOOPBACK_PROBES: u32 = 3;

/// The best of [`LOOPBACK_PROBES`] loopback probes sharing `duration`.
fn best_loopback_bandwidth(duration: Duration) -> anyhow::Result<f64> {
    let mut best = 0f64;
    for _ in 0..LOOPBACK_PROBES {
        best = best.max(loopback_bandwidth(duration / LOOPBACK_PROBES)?);
    }
    Ok(best)
}

/// One TCP stream over loopback for `duration`, 1 MiB writes: MB/s seen by the receiver.
fn loopback_bandwidth(duration: Duration) -> anyhow::Result<f64> {
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
    let chunk = vec![0x33u8; 1 << 20];
    let started = Instant::now();
    while started.elapsed() < duration {
        sender.write_all(&chunk)?;
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
        // Any disk or loopback this code runs on moves more than 10 MB/s and less than 1 TB/s.
        for (name, mb_per_sec) in [
            ("write direct", limits.disk_write_direct_mb_per_sec),
            ("read direct", limits.disk_read_direct_mb_per_sec),
            ("write buffered", limits.disk_write_buffered_mb_per_sec),
            ("read buffered", limits.disk_read_buffered_mb_per_sec),
            ("loopback", limits.loopback_mb_per_sec),
        ] {
            assert!((10.0..1e6).contains(&mb_per_sec), "{name}: {mb_per_sec} MB/s");
        }
        assert!(limits.fdatasync_per_sec > 10.0, "{limits:?}");
        assert!(limits.fdatasync_us_p50 <= limits.fdatasync_us_p99);
        assert!(limits.fdatasync_us_p99 <= limits.fdatasync_us_max);
        assert!(limits.seconds < 5.0, "took {} s", limits.seconds);
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("dir").count(),
            0,
            "scratch removed"
        );
        assert!(limits.describe().contains("loopback TCP"));
    }
}
