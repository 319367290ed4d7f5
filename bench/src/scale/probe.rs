//! What the kernel says the broker costs: its resident memory, descriptors and CPU time from
//! `/proc/<pid>`, and the disk blocks its data dir holds.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::step::StepLog;

/// Filesystem block granularity used to tell data blocks from blocks reserved past the end.
const BLOCK_BYTES: u64 = 4096;

/// Resident memory of `pid` (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_bytes(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .context("no VmRSS line in /proc/<pid>/status")?;
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .context("an empty VmRSS line")?
        .parse()
        .context("VmRSS is not a number")?;
    Ok(kib * 1024)
}

/// Descriptors `pid` holds open (entries of `/proc/<pid>/fd`).
pub fn open_fds(pid: u32) -> anyhow::Result<u64> {
    let entries =
        std::fs::read_dir(format!("/proc/{pid}/fd")).with_context(|| format!("listing /proc/{pid}/fd"))?;
    Ok(entries.count() as u64)
}

/// User and system CPU time `pid` has used, in seconds (`/proc/<pid>/stat`, 10 ms ticks on
/// most kernels).
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    Ok(stat_cpu(&format!("/proc/{pid}/stat"))?.1)
}

/// Each live thread of `pid`: its name (`comm`, at most 15 bytes) and the user and system CPU
/// time it has used, in seconds. Threads that exit during the walk are skipped; those that
/// exited before it are in [`cpu_seconds`] only.
pub fn thread_cpu_seconds(pid: u32) -> anyhow::Result<Vec<(String, f64)>> {
    let tasks = format!("/proc/{pid}/task");
    let entries = std::fs::read_dir(&tasks).with_context(|| format!("listing {tasks}"))?;
    let mut threads = Vec::new();
    for entry in entries {
        let path = entry?.path().join("stat");
        match stat_cpu(&path.to_string_lossy()) {
            Ok(thread) => threads.push(thread),
            Err(error) if path.exists() => return Err(error),
            Err(_) => {}
        }
    }
    Ok(threads)
}

/// `(comm, utime + stime in seconds)` of a `stat` file of proc(5).
fn stat_cpu(path: &str) -> anyhow::Result<(String, f64)> {
    let stat = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    // The command name in parentheses may hold spaces: fields are counted after its ')'.
    let (before, after_name) = stat.rsplit_once(')').context("no ')' in a stat file")?;
    let name = before.split_once('(').map_or("", |(_, name)| name).to_owned();
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5); field 3 is the first after the name.
    let ticks = |index: usize| -> anyhow::Result<u64> {
        let field = fields.get(index - 3).context("a short stat file")?;
        field.parse().context("a CPU time that is not a number")
    };
    let seconds = (ticks(14)? + ticks(15)?) as f64 / laminar_sys::process::clock_ticks_per_second() as f64;
    Ok((name, seconds))
}

/// The blocks under a directory, as `du` counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskUsage {
    /// Blocks allocated to files and directories (`st_blocks` × 512).
    pub allocated_bytes: u64,
    /// Sizes of the regular files (what `ls -l` adds up).
    pub apparent_bytes: u64,
    /// Blocks of regular files past their last 4 KiB block of data: space reserved ahead of
    /// appends (`fallocate` with KEEP_SIZE), which no data uses yet.
    pub reserved_ahead_bytes: u64,
    /// Regular files.
    pub files: u64,
    /// Directories, the top one included.
    pub dirs: u64,
}

/// Walks `dir`. Files that vanish during the walk (a segment deleted meanwhile) are skipped.
pub fn disk_usage(dir: &Path) -> io::Result<DiskUsage> {
    let mut usage = DiskUsage::default();
    let mut pending: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
            Err(error) => return Err(error),
        };
        let allocated = meta.blocks() * 512;
        usage.allocated_bytes += allocated;
        if meta.is_dir() {
            usage.dirs += 1;
            match std::fs::read_dir(&path) {
                Ok(entries) => pending.extend(entries.filter_map(|e| e.ok().map(|e| e.path()))),
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(error),
            }
        } else if meta.is_file() {
            usage.files += 1;
            usage.apparent_bytes += meta.len();
            let data_blocks = meta.len().div_ceil(BLOCK_BYTES) * BLOCK_BYTES;
            usage.reserved_ahead_bytes += allocated.saturating_sub(data_blocks);
        }
    }
    Ok(usage)
}

/// Records the broker's RSS and descriptors, and the data dir's blocks, under `log`; per
/// partition too when `per` is given: `(partitions, the same figures before them)`.
pub fn sample_broker(
    log: &StepLog,
    pid: u32,
    data_dir: &Path,
    per: Option<(u64, &Baseline)>,
) -> anyhow::Result<Baseline> {
    let now = Baseline {
        rss_bytes: rss_bytes(pid)?,
        fds: open_fds(pid)?,
        disk: disk_usage(data_dir).with_context(|| format!("walking {}", data_dir.display()))?,
    };
    log.put("rss_bytes", now.rss_bytes as f64);
    log.put("fds", now.fds as f64);
    log.put("disk_allocated_bytes", now.disk.allocated_bytes as f64);
    log.put("disk_apparent_bytes", now.disk.apparent_bytes as f64);
    log.put("disk_reserved_ahead_bytes", now.disk.reserved_ahead_bytes as f64);
    log.put("files", now.disk.files as f64);
    log.put("dirs", now.disk.dirs as f64);
    if let Some((partitions, before)) = per {
        if partitions == 0 {
            bail!("no partitions to divide by");
        }
        let per_partition = |now: u64, before: u64| (now as f64 - before as f64) / partitions as f64;
        log.put(
            "rss_bytes_per_partition",
            per_partition(now.rss_bytes, before.rss_bytes),
        );
        log.put("fds_per_partition", per_partition(now.fds, before.fds));
        let allocated = per_partition(now.disk.allocated_bytes, before.disk.allocated_bytes);
        log.put("disk_allocated_bytes_per_partition", allocated);
        let reserved = per_partition(now.disk.reserved_ahead_bytes, before.disk.reserved_ahead_bytes);
        log.put("disk_reserved_ahead_bytes_per_partition", reserved);
    }
    Ok(now)
}

/// The broker's costs at one moment, to compare a later sample with.
#[derive(Debug, Clone, Copy, Default)]
pub struct Baseline {
    /// Resident memory.
    pub rss_bytes: u64,
    /// Open descriptors.
    pub fds: u64,
    /// Blocks of the data dir.
    pub disk: DiskUsage,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn this_process_has_memory_descriptors_and_cpu_time() {
        let pid = std::process::id();
        assert!(rss_bytes(pid).expect("rss") > 1 << 20);
        assert!(open_fds(pid).expect("fds") >= 3);
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(50) {
            std::hint::black_box(spin.elapsed());
        }
        assert!(cpu_seconds(pid).expect("cpu") > 0.0);
        let threads = thread_cpu_seconds(pid).expect("threads");
        assert!(!threads.is_empty() && threads.iter().all(|(_, s)| *s >= 0.0));
    }

    #[test]
    fn disk_usage_counts_blocks_not_sizes() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("t-0")).expect("mkdir");
        let mut small = std::fs::File::create(dir.path().join("t-0/a.log")).expect("create");
        small.write_all(&[7u8; 100]).expect("write");
        small.sync_all().expect("sync");
        let sparse = std::fs::File::create(dir.path().join("t-0/a.index")).expect("create");
        sparse.set_len(10 << 20).expect("a sparse file");
        let usage = disk_usage(dir.path()).expect("walk");
        assert_eq!((usage.files, usage.dirs), (2, 2));
        assert_eq!(usage.apparent_bytes, 100 + (10 << 20));
        assert!(
            usage.allocated_bytes < 1 << 20,
            "{usage:?}: sparse bytes hold no blocks"
        );
        assert_eq!(usage.reserved_ahead_bytes, 0);
    }
}
