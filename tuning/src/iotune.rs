//! `laminar iotune`: measures the data directory's disk — sequential write and read bandwidth
//! at 4 KiB, 128 KiB and 1 MiB blocks, queue depth 1 and 8 (io_uring, O_DIRECT where the
//! filesystem allows it), and fdatasync latency after 4 KiB appends — in a bounded time, and
//! derives the write batch size and I/O depth the broker should use.
//!
//! The profile is written as JSON (`iotune.json`, format [`IoProfile`]). The broker reads
//! `recommended_write_batch_bytes` and `recommended_io_depth` from it to size its write-behind
//! (`laminar.iotune.profile`; by default `iotune.json` in the first log dir).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use laminar_sys::memory::AlignedBuffer;
use laminar_sys::page_cache::drop_page_cache;
use laminar_sys::uring::{BlockRing, Completion, Direction};
use serde::{Deserialize, Serialize};

use crate::blockdev::block_devices_of;
use crate::hostfs::HostFs;
use crate::iotune_appends::{recommend_write_mode, run_append_cases, AppendCase, AppendMode};
use crate::write_pattern::fill_pattern;

pub const BLOCK_SIZES: [usize; 3] = [4096, 128 * 1024, 1024 * 1024];
pub const QUEUE_DEPTHS: [usize; 2] = [1, 8];
const FSYNC_APPEND_BYTES: usize = 4096;
/// The `version` field of the profiles this build writes (and the broker reads).
pub const IO_PROFILE_VERSION: u32 = 1;

#[derive(Debug, Clone)]
pub struct IoTuneOptions {
    pub data_dir: PathBuf,
    /// Whole run, all cases together (the CLI's `--duration`).
    pub duration: Duration,
    /// Size of the scratch file the bandwidth cases cycle over.
    pub file_bytes: u64,
}

impl IoTuneOptions {
    pub fn for_data_dir(data_dir: impl Into<PathBuf>) -> IoTuneOptions {
        IoTuneOptions {
            data_dir: data_dir.into(),
            duration: Duration::from_secs(10),
            file_bytes: 256 * 1024 * 1024,
        }
    }
}

/// One bandwidth measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoCase {
    /// `write` or `read`.
    pub op: String,
    pub block_bytes: usize,
    pub queue_depth: usize,
    pub bytes: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
    pub iops: f64,
}

/// The `iotune.json` profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoProfile {
    /// Format version of this file.
    pub version: u32,
    pub data_dir: String,
    /// Whole disks behind the data dir, comma-separated; `None` on a virtual filesystem.
    pub device: Option<String>,
    /// False when the filesystem refused O_DIRECT: then reads were measured after dropping the
    /// page cache, and writes include the page cache.
    pub direct_io: bool,
    pub file_bytes: u64,
    pub duration_ms: u64,
    pub cases: Vec<IoCase>,
    pub fdatasync_samples: usize,
    pub fdatasync_latency_us_p50: f64,
    pub fdatasync_latency_us_p99: f64,
    /// Smallest write size that reaches 80 % of the best measured write bandwidth (at the
    /// depth of that best case).
    pub recommended_write_batch_bytes: usize,
    /// Queue depth of the best write case.
    pub recommended_io_depth: usize,
    /// Appends that grow a file, each group followed by an fdatasync, through the page cache
    /// and (where the filesystem takes it) O_DIRECT (`iotune_appends.rs`). Absent from
    /// profiles written before they were measured.
    #[serde(default)]
    pub append_cases: Vec<AppendCase>,
    /// The `laminar.storage.write_mode` those cases favour; `None` in older profiles.
    #[serde(default)]
    pub recommended_write_mode: Option<AppendMode>,
}

impl IoProfile {
    pub fn write_json(&self, path: &Path) -> io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(io::Error::other)?;
        std::fs::write(path, text + "\n")
    }

    pub fn read_json(path: &Path) -> io::Result<IoProfile> {
        let text = std::fs::read_to_string(path)?;
        serde_json::from_str(&text).map_err(io::Error::other)
    }

    /// A human summary, one line per case.
    pub fn render_table(&self) -> String {
        let mut out = format!(
            "device {} (O_DIRECT: {})\n{:<6} {:>9} {:>5} {:>10} {:>10}\n",
            self.device.as_deref().unwrap_or("unknown"),
            if self.direct_io { "yes" } else { "no" },
            "OP",
            "BLOCK",
            "QD",
            "MB/s",
            "IOPS"
        );
        for c in &self.cases {
            out.push_str(&format!(
                "{:<6} {:>8}K {:>5} {:>10.1} {:>10.0}\n",
                c.op,
                c.block_bytes / 1024,
                c.queue_depth,
                c.mb_per_s,
                c.iops
            ));
        }
        out.push_str(&format!(
            "fdatasync after 4 KiB append: p50 {:.0} us, p99 {:.0} us ({} samples)\n\
             recommended write batch {} KiB at io depth {}\n",
            self.fdatasync_latency_us_p50,
            self.fdatasync_latency_us_p99,
            self.fdatasync_samples,
            self.recommended_write_batch_bytes / 1024,
            self.recommended_io_depth
        ));
        for c in &self.append_cases {
            out.push_str(&format!(
                "appends of {} KiB, fdatasync every {}, {}: {:.1} MB/s\n",
                c.append_bytes / 1024,
                c.appends_per_sync,
                c.mode.write_mode_name(),
                c.mb_per_s
            ));
        }
        if let Some(mode) = self.recommended_write_mode {
            out.push_str(&format!("recommended write mode {}\n", mode.write_mode_name()));
        }
        out
    }
}

/// Deletes the scratch files however the run ends.
struct Scratch(Vec<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Runs every case within about `options.duration`.
pub fn run_iotune(options: &IoTuneOptions) -> anyhow::Result<IoProfile> {
    let largest = *BLOCK_SIZES.iter().max().expect("block sizes") as u64;
    anyhow::ensure!(
        options.file_bytes >= largest * QUEUE_DEPTHS[1] as u64,
        "scratch file of {} bytes is smaller than one round of the largest case",
        options.file_bytes
    );
    let file_bytes = options.file_bytes / largest * largest;
    std::fs::create_dir_all(&options.data_dir)
        .with_context(|| format!("creating {}", options.data_dir.display()))?;
    let pid = std::process::id();
    let data_path = options.data_dir.join(format!(".laminar-iotune-{pid}.tmp"));
    let fsync_path = options.data_dir.join(format!(".laminar-iotune-fsync-{pid}.tmp"));
    let _scratch = Scratch(vec![data_path.clone(), fsync_path.clone()]);
    let (file, direct_io) = open_scratch(&data_path)?;

    let started = Instant::now();
    // The bandwidth cases, two slices of fsync probe and two of append cases.
    let phases = (BLOCK_SIZES.len() * QUEUE_DEPTHS.len() * 2 + 4) as u32;
    let slice = options.duration / phases;
    // Reads of never-written blocks would not touch the disk: fill the file first.
    run_case(
        &file,
        Direction::Write,
        largest as usize,
        8,
        file_bytes,
        Duration::ZERO,
    )?;
    let mut cases = Vec::new();
    for direction in [Direction::Write, Direction::Read] {
        for &block in &BLOCK_SIZES {
            for &depth in &QUEUE_DEPTHS {
                if direction == Direction::Read && !direct_io {
                    file.sync_data()?;
                    drop_page_cache(file.as_raw_fd(), 0, 0)?;
                }
                cases.push(run_case(&file, direction, block, depth, file_bytes, slice)?);
            }
        }
    }
    let mut latencies_us = fsync_latencies_us(&fsync_path, slice * 2)?;
    latencies_us.sort_by(f64::total_cmp);
    let append_cases = run_append_cases(&fsync_path, slice, direct_io)?;
    let (batch, depth) = recommend(&cases);
    let device = block_devices_of(&HostFs::real(), &options.data_dir)
        .ok()
        .map(|disks| disks.iter().map(|d| d.name.clone()).collect::<Vec<_>>().join(","));
    Ok(IoProfile {
        version: IO_PROFILE_VERSION,
        data_dir: options.data_dir.display().to_string(),
        device,
        direct_io,
        file_bytes,
        duration_ms: started.elapsed().as_millis() as u64,
        cases,
        fdatasync_samples: latencies_us.len(),
        fdatasync_latency_us_p50: percentile(&latencies_us, 0.50),
        fdatasync_latency_us_p99: percentile(&latencies_us, 0.99),
        recommended_write_batch_bytes: batch,
        recommended_io_depth: depth,
        recommended_write_mode: Some(recommend_write_mode(&append_cases)),
        append_cases,
    })
}

/// Opens the scratch file with O_DIRECT, or buffered where the filesystem refuses it (tmpfs).
fn open_scratch(path: &Path) -> anyhow::Result<(File, bool)> {
    let open = |flags: i32| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(flags)
            .open(path)
    };
    match open(libc::O_DIRECT) {
        Ok(file) => Ok((file, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok((
            open(0).with_context(|| format!("creating {}", path.display()))?,
            false,
        )),
        Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
    }
}

/// Keeps `depth` sequential `block`-sized operations in flight, cycling over the file, for
/// `budget` (or exactly one pass over the file when `budget` is zero).
fn run_case(
    file: &File,
    direction: Direction,
    block: usize,
    depth: usize,
    file_bytes: u64,
    budget: Duration,
) -> anyhow::Result<IoCase> {
    let buffers = (0..depth).map(|i| {
        let mut buf = AlignedBuffer::new(block);
        fill_pattern(buf.as_mut_slice(), i as u64);
        buf
    });
    // A ring dropped on an error below keeps the buffers of its operations in flight.
    let mut ring = BlockRing::new(buffers.collect()).context("io_uring_setup")?;
    let one_pass = budget.is_zero();
    let fd = file.as_raw_fd();
    let mut cursor = 0u64;
    let mut next_offset = || {
        let offset = cursor;
        cursor = (cursor + block as u64) % file_bytes;
        offset
    };
    let started = Instant::now();
    let mut queued_bytes = 0u64;
    for slot in 0..depth {
        ring.queue(slot, fd, next_offset(), direction)?;
        queued_bytes += block as u64;
    }
    let (mut done_bytes, mut ops) = (0u64, 0u64);
    while ring.in_flight() > 0 {
        let completed = ring.submit_and_wait().context("io_uring_enter")?;
        for Completion { slot, result } in completed {
            if result < 0 {
                return Err(io::Error::from_raw_os_error(-result)).context("disk I/O");
            }
            anyhow::ensure!(
                result as usize == block,
                "short {direction:?}: {result} of {block}"
            );
            done_bytes += block as u64;
            ops += 1;
            let more = if one_pass {
                queued_bytes < file_bytes
            } else {
                started.elapsed() < budget
            };
            if more {
                ring.queue(slot, fd, next_offset(), direction)?;
                queued_bytes += block as u64;
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64().max(1e-9);
    Ok(IoCase {
        op: match direction {
            Direction::Write => "write",
            Direction::Read => "read",
        }
        .to_string(),
        block_bytes: block,
        queue_depth: depth,
        bytes: done_bytes,
        seconds,
        mb_per_s: done_bytes as f64 / seconds / 1e6,
        iops: ops as f64 / seconds,
    })
}

/// Appends 4 KiB and times the fdatasync that follows, until `budget` is spent (at least 10
/// samples, so that a slow disk still yields percentiles).
fn fsync_latencies_us(path: &Path, budget: Duration) -> anyhow::Result<Vec<f64>> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    let mut block = vec![0u8; FSYNC_APPEND_BYTES];
    fill_pattern(&mut block, 99);
    let started = Instant::now();
    let mut latencies = Vec::new();
    let mut offset = 0u64;
    while latencies.len() < 10 || started.elapsed() < budget {
        file.write_all_at(&block, offset).context("fsync probe append")?;
        offset += block.len() as u64;
        let t = Instant::now();
        file.sync_data().context("fdatasync")?;
        latencies.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(latencies)
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// (write batch bytes, io depth): the depth of the best write case, and the smallest block
/// that reaches 80 % of it at that depth.
fn recommend(cases: &[IoCase]) -> (usize, usize) {
    let writes: Vec<&IoCase> = cases.iter().filter(|c| c.op == "write").collect();
    let Some(best) = writes.iter().max_by(|a, b| a.mb_per_s.total_cmp(&b.mb_per_s)) else {
        return (BLOCK_SIZES[BLOCK_SIZES.len() - 1], 1);
    };
    let batch = writes
        .iter()
        .filter(|c| c.queue_depth == best.queue_depth && c.mb_per_s >= 0.8 * best.mb_per_s)
        .map(|c| c.block_bytes)
        .min()
        .unwrap_or(best.block_bytes);
    (batch, best.queue_depth)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(op: &str, block_bytes: usize, queue_depth: usize, mb_per_s: f64) -> IoCase {
        IoCase {
            op: op.into(),
            block_bytes,
            queue_depth,
            bytes: 0,
            seconds: 1.0,
            mb_per_s,
            iops: 0.0,
        }
    }

    #[test]
    fn recommendation_and_percentiles() {
        let cases = [
            case("write", 4096, 1, 100.0),
            case("write", 131072, 1, 700.0),
            case("write", 1048576, 1, 900.0),
            case("write", 4096, 8, 300.0),
            case("write", 131072, 8, 1700.0),
            case("write", 1048576, 8, 2000.0),
            case("read", 1048576, 8, 9000.0),
        ];
        assert_eq!(recommend(&cases), (131072, 8));
        let sorted = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 100.0];
        assert_eq!(percentile(&sorted, 0.5), 5.0);
        assert_eq!(percentile(&sorted, 0.99), 100.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn short_run_measures_every_case_and_writes_json() {
        let dir = tempfile::tempdir().unwrap();
        let options = IoTuneOptions {
            data_dir: dir.path().join("data"),
            duration: Duration::from_millis(700),
            file_bytes: 16 * 1024 * 1024,
        };
        let profile = run_iotune(&options).unwrap();
        println!("{}", profile.render_table());
        assert_eq!(profile.cases.len(), 12);
        for c in &profile.cases {
            assert!(c.bytes >= (c.block_bytes * c.queue_depth) as u64, "{c:?}");
            assert!(c.mb_per_s > 0.0 && c.iops > 0.0, "{c:?}");
        }
        assert!(profile.fdatasync_samples >= 10);
        assert!(profile.fdatasync_latency_us_p99 >= profile.fdatasync_latency_us_p50);
        assert!(profile.fdatasync_latency_us_p50 > 0.0);
        assert!(BLOCK_SIZES.contains(&profile.recommended_write_batch_bytes));
        assert!(QUEUE_DEPTHS.contains(&profile.recommended_io_depth));
        assert_eq!(profile.append_cases.len(), if profile.direct_io { 2 } else { 1 });
        let recommended = crate::iotune_appends::recommend_write_mode(&profile.append_cases);
        assert_eq!(profile.recommended_write_mode, Some(recommended));
        assert!(profile.duration_ms < 5_000, "bounded: {} ms", profile.duration_ms);
        let leftovers: Vec<_> = std::fs::read_dir(&options.data_dir).unwrap().collect();
        assert!(leftovers.is_empty(), "scratch files removed");
        let path = dir.path().join("iotune.json");
        profile.write_json(&path).unwrap();
        let back = IoProfile::read_json(&path).unwrap();
        assert_eq!(back.cases.len(), profile.cases.len());
        assert_eq!(
            back.recommended_write_batch_bytes,
            profile.recommended_write_batch_bytes
        );
        assert_eq!(back.device, profile.device);
        let modes_and_bytes = |p: &IoProfile| {
            p.append_cases
                .iter()
                .map(|c| (c.mode, c.bytes))
                .collect::<Vec<_>>()
        };
        assert_eq!(modes_and_bytes(&back), modes_and_bytes(&profile));
        assert_eq!(back.recommended_write_mode, profile.recommended_write_mode);
        let relative = (back.cases[0].mb_per_s - profile.cases[0].mb_per_s).abs();
        assert!(
            relative <= 1e-9 * profile.cases[0].mb_per_s,
            "float survives JSON"
        );
    }
}
