//! `laminar iotune`'s append cases: the write pattern of acks=all with `laminar.fsync=always`
//! into a new segment — appends that grow a file, each group of them followed by one
//! fdatasync — once through the page cache and once with O_DIRECT through io_uring, as
//! `laminar.storage.write_mode` would write them. They decide the write mode the profile
//! recommends (`recommend_write_mode`); docs/decisions/0050 has the rule and its figures.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use laminar_sys::memory::AlignedBuffer;
use laminar_sys::uring::{BlockRing, Completion, Direction};
use serde::{Deserialize, Serialize};

/// One append: about what a partition's write carries under load (0049 measured 290 KiB on
/// average for the ring's writes).
pub const APPEND_BYTES: usize = 256 * 1024;
/// Appends in flight before each fdatasync: four partitions' writes, one each, as the
/// benchmark's default four partitions keep in flight.
pub const APPENDS_PER_SYNC: usize = 4;
/// The file is emptied and grown again past this, so every append allocates new blocks (as a
/// new segment's do) and the scratch file stays bounded.
pub const APPEND_FILE_BYTES_MAX: u64 = 256 * 1024 * 1024;
/// O_DIRECT must beat the page cache by this factor at the disk before the broker writes
/// O_DIRECT: its appends also cost a copy into the shard's staging buffer and one into its
/// cache, which the page cache path does not pay (see docs/decisions/0050).
pub const DIRECT_WRITE_MARGIN: f64 = 1.3;

/// How an append case wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AppendMode {
    Buffered,
    Direct,
}

impl AppendMode {
    /// The `laminar.storage.write_mode` value that writes this way.
    pub fn write_mode_name(self) -> &'static str {
        match self {
            AppendMode::Buffered => "buffered",
            AppendMode::Direct => "direct",
        }
    }
}

/// One append case's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppendCase {
    pub mode: AppendMode,
    pub append_bytes: usize,
    pub appends_per_sync: usize,
    pub bytes: u64,
    pub syncs: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
}

/// Runs the buffered case then the direct one (when the filesystem takes O_DIRECT) on a scratch
/// file at `path`, each for `budget`.
pub fn run_append_cases(path: &Path, budget: Duration, direct_io: bool) -> anyhow::Result<Vec<AppendCase>> {
    let mut cases = vec![append_case(path, AppendMode::Buffered, budget)?];
    if direct_io {
        cases.push(append_case(path, AppendMode::Direct, budget)?);
    }
    Ok(cases)
}

/// `direct` when the direct case beat the buffered one by [`DIRECT_WRITE_MARGIN`], else
/// `buffered` (also when there is no direct case: the filesystem refused O_DIRECT).
pub fn recommend_write_mode(cases: &[AppendCase]) -> AppendMode {
    let rate = |mode| cases.iter().find(|c| c.mode == mode).map(|c| c.mb_per_s);
    match (rate(AppendMode::Buffered), rate(AppendMode::Direct)) {
        (Some(buffered), Some(direct)) if direct >= DIRECT_WRITE_MARGIN * buffered => AppendMode::Direct,
        _ => AppendMode::Buffered,
    }
}

fn append_case(path: &Path, mode: AppendMode, budget: Duration) -> anyhow::Result<AppendCase> {
    let flags = match mode {
        AppendMode::Buffered => 0,
        AppendMode::Direct => libc::O_DIRECT,
    };
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(flags)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    let mut writer = match mode {
        AppendMode::Buffered => AppendWriter::Buffered(patterned(0)),
        AppendMode::Direct => {
            let buffers = (0..APPENDS_PER_SYNC).map(|i| patterned(i as u64));
            AppendWriter::Direct(Box::new(
                BlockRing::new(buffers.collect()).context("io_uring_setup")?,
            ))
        }
    };
    let started = Instant::now();
    let (mut offset, mut bytes, mut syncs) = (0u64, 0u64, 0u64);
    // At least a few groups, so that a slow disk still yields a rate.
    while syncs < 4 || started.elapsed() < budget {
        if offset + (APPEND_BYTES * APPENDS_PER_SYNC) as u64 > APPEND_FILE_BYTES_MAX {
            file.set_len(0).context("emptying the append scratch file")?;
            offset = 0;
        }
        writer.append_group(&file, offset)?;
        file.sync_data().context("fdatasync after appends")?;
        let group = (APPEND_BYTES * APPENDS_PER_SYNC) as u64;
        offset += group;
        bytes += group;
        syncs += 1;
    }
    let seconds = started.elapsed().as_secs_f64().max(1e-9);
    Ok(AppendCase {
        mode,
        append_bytes: APPEND_BYTES,
        appends_per_sync: APPENDS_PER_SYNC,
        bytes,
        syncs,
        seconds,
        mb_per_s: bytes as f64 / seconds / 1e6,
    })
}

/// An [`APPEND_BYTES`] buffer of non-repeating bytes.
fn patterned(seed: u64) -> AlignedBuffer {
    let mut buffer = AlignedBuffer::new(APPEND_BYTES);
    crate::write_pattern::fill_pattern(buffer.as_mut_slice(), seed);
    buffer
}

enum AppendWriter {
    /// One buffer written with `pwrite` [`APPENDS_PER_SYNC`] times: copies into the page cache.
    Buffered(AlignedBuffer),
    /// One ring slot per append of a group, all in flight together.
    Direct(Box<BlockRing>),
}

impl AppendWriter {
    /// Writes one group of appends from `offset` and returns once all are written.
    fn append_group(&mut self, file: &File, offset: u64) -> anyhow::Result<()> {
        let at = |i: usize| offset + (i * APPEND_BYTES) as u64;
        match self {
            AppendWriter::Buffered(buffer) => {
                for i in 0..APPENDS_PER_SYNC {
                    file.write_all_at(buffer.as_slice(), at(i))
                        .context("buffered append")?;
                }
            }
            AppendWriter::Direct(ring) => {
                for slot in 0..APPENDS_PER_SYNC {
                    ring.queue(slot, file.as_raw_fd(), at(slot), Direction::Write)?;
                }
                while ring.in_flight() > 0 {
                    for Completion { result, .. } in ring.submit_and_wait().context("io_uring_enter")? {
                        anyhow::ensure!(
                            result >= 0,
                            "O_DIRECT append: {}",
                            std::io::Error::from_raw_os_error(-result)
                        );
                        anyhow::ensure!(
                            result as usize == APPEND_BYTES,
                            "short O_DIRECT append: {result} of {APPEND_BYTES}"
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(mode: AppendMode, mb_per_s: f64) -> AppendCase {
        AppendCase {
            mode,
            append_bytes: APPEND_BYTES,
            appends_per_sync: APPENDS_PER_SYNC,
            bytes: 1,
            syncs: 1,
            seconds: 1.0,
            mb_per_s,
        }
    }

    #[test]
    fn direct_is_recommended_only_past_the_margin() {
        let buffered = case(AppendMode::Buffered, 100.0);
        let direct_past = case(AppendMode::Direct, 100.0 * DIRECT_WRITE_MARGIN);
        let direct_short = case(AppendMode::Direct, 100.0 * DIRECT_WRITE_MARGIN - 0.1);
        assert_eq!(
            recommend_write_mode(&[buffered.clone(), direct_past]),
            AppendMode::Direct
        );
        assert_eq!(
            recommend_write_mode(&[buffered.clone(), direct_short]),
            AppendMode::Buffered
        );
        assert_eq!(recommend_write_mode(&[buffered]), AppendMode::Buffered);
        assert_eq!(recommend_write_mode(&[]), AppendMode::Buffered);
    }

    #[test]
    fn both_cases_write_and_sync_whole_groups() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("appends.tmp");
        let cases = run_append_cases(&path, Duration::from_millis(100), true).unwrap();
        assert_eq!(cases.len(), 2);
        for (c, mode) in cases.iter().zip([AppendMode::Buffered, AppendMode::Direct]) {
            assert_eq!(c.mode, mode);
            assert!(c.syncs >= 4, "{c:?}");
            assert_eq!(
                c.bytes,
                c.syncs * (APPEND_BYTES * APPENDS_PER_SYNC) as u64,
                "{c:?}"
            );
            assert!(c.mb_per_s > 0.0, "{c:?}");
        }
        let written = std::fs::metadata(&path).unwrap().len();
        assert!(
            written > 0 && written <= APPEND_FILE_BYTES_MAX,
            "bounded scratch file: {written}"
        );
    }
}
