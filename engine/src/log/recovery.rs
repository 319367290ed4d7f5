//! Opening segments: trusting what a clean shutdown left, repairing what a crash left.
//!
//! After a clean shutdown (marker present) a segment's indexes are trusted when sane, and only
//! the batch headers after the last index entry are read to find the segment's end.
//!
//! After a crash the active segment is verified batch by batch (CRC-32C included) and cut at
//! the first invalid or torn batch; its indexes are rebuilt from the scan. The scan starts at
//! the segment's first byte rather than at the last index entry: the offset and time indexes
//! are written without fsync and lose unsynced entries independently of each other and of the
//! log, so neither can vouch for where the valid data ends, nor for the running max timestamp
//! retention relies on. The cost is bounded by `segment.bytes`. Older segments were fsynced
//! when they rolled and are opened as after a clean shutdown; an index found damaged is
//! rebuilt by a verifying scan.

use super::index::{offset_index_sane_prefix, EntryFile, IndexEntry};
use super::scan::{BatchScanner, Scanned};
use super::segment::{IndexBuilder, Segment, SegmentMeta};
use super::timeindex::{time_index_sane_prefix, TimeEntry};
use crate::io::{Storage, StorageFile};
use std::io;
use std::path::Path;

/// What scanning a segment found.
struct ScanOutcome {
    meta: SegmentMeta,
    offsets: Vec<IndexEntry>,
    times: Vec<TimeEntry>,
    /// Where the valid batches end when something else follows, and why.
    invalid: Option<(u64, String)>,
}

/// Scans `log` from `start` (the batch of index entry `from`, or the file start) to its end.
async fn scan<F: StorageFile>(
    log: &F,
    base_offset: i64,
    interval: u32,
    from: Option<IndexEntry>,
    last_time: Option<TimeEntry>,
    verify: bool,
    gaps_allowed: bool,
) -> io::Result<ScanOutcome> {
    let start = from.map_or(0, |e| e.position as u64);
    let mut meta = Segment::<F>::empty_meta(base_offset);
    meta.max_timestamp = last_time.map_or(-1, |t| t.timestamp);
    let mut builder = IndexBuilder::new(interval, last_time, from);
    let mut scanner = BatchScanner::new(log, start, log.len(), verify);
    let mut invalid = None;
    loop {
        match scanner.next().await? {
            Scanned::Batch { position, header } => {
                let expected = if position == start {
                    from.map(|e| e.relative_offset)
                } else {
                    None
                };
                let relative = header.base_offset - base_offset;
                // Offsets are contiguous, except in closed segments where compaction removed
                // batches; the base offset is outside the CRC, so this is what catches a
                // damaged one.
                let in_sequence = header.base_offset == meta.next_offset
                    || (gaps_allowed && header.base_offset > meta.next_offset);
                let in_order = in_sequence
                    && (0..=u32::MAX as i64).contains(&relative)
                    && expected.is_none_or(|r| r as i64 == relative);
                if !in_order {
                    let why = format!("batch offset {} out of sequence", header.base_offset);
                    invalid = Some((position, why));
                    break;
                }
                builder.add(&mut meta, base_offset, position, &header);
            }
            Scanned::End => break,
            Scanned::Invalid { position, error } => {
                invalid = Some((position, error.to_string()));
                break;
            }
        }
    }
    meta.size = invalid.as_ref().map_or(scanner.position(), |(p, _)| *p);
    Ok(ScanOutcome {
        meta,
        offsets: builder.offsets,
        times: builder.times,
        invalid,
    })
}

/// Opens the segment at `base_offset`. `verify` asks for the crash path (see module docs);
/// `gaps_allowed` for a closed segment, which compaction may have left with offset gaps (the
/// active segment is never compacted, so a gap there is damage).
/// Returns the segment and the number of bytes cut off its end.
pub async fn open_segment<S: Storage>(
    storage: &S,
    dir: &Path,
    base_offset: i64,
    interval: u32,
    verify: bool,
    gaps_allowed: bool,
) -> io::Result<(Segment<S::File>, u64)> {
    let files = Segment::<S::File>::open_files(storage, dir, base_offset).await?;
    let (log, index_file, time_file) = (&files.0, &files.1, &files.2);
    if !verify {
        let offsets = EntryFile::<S::File, IndexEntry>::read_all(index_file).await?;
        let times = EntryFile::<S::File, TimeEntry>::read_all(time_file).await?;
        let whole = index_file.len() % 8 == 0 && time_file.len() % 12 == 0;
        let sane_offsets = offset_index_sane_prefix(&offsets, log.len()) == offsets.len();
        let sane_times = time_index_sane_prefix(&times, &offsets, u32::MAX) == times.len();
        if whole && sane_offsets && sane_times {
            let (last, last_time) = (offsets.last().copied(), times.last().copied());
            let tail = scan(
                &**log,
                base_offset,
                interval,
                last,
                last_time,
                false,
                gaps_allowed,
            )
            .await?;
            if tail.invalid.is_none() {
                let meta = tail.meta;
                // Entries the tail scan made (a lost or missing index) go to the files too.
                let segment = Segment::new(base_offset, files, offsets, times, meta);
                segment.index.append(&tail.offsets).await?;
                segment.time_index.append(&tail.times).await?;
                return Ok((segment, 0));
            }
        }
        tracing::warn!(base_offset, dir = %dir.display(), "segment index damaged: rebuilding");
    }
    let outcome = scan(&**log, base_offset, interval, None, None, true, gaps_allowed).await?;
    let cut = log.len() - outcome.meta.size;
    if let Some((position, why)) = &outcome.invalid {
        tracing::warn!(
            base_offset,
            dir = %dir.display(),
            position,
            bytes_truncated = cut,
            reason = %why,
            "truncating segment at the first invalid batch"
        );
        log.truncate(outcome.meta.size).await?;
    }
    let segment = Segment::new(base_offset, files, Vec::new(), Vec::new(), outcome.meta);
    segment.index.rewrite(0, &outcome.offsets).await?;
    segment.time_index.rewrite(0, &outcome.times).await?;
    Ok((segment, cut))
}

/// Recomputes a segment's metadata and indexes from its batches (after a truncation, which
/// may make a compacted segment the active one: its gaps are accepted).
pub async fn rebuild<F: StorageFile>(segment: &Segment<F>, interval: u32) -> io::Result<()> {
    let outcome = scan(
        &*segment.log,
        segment.base_offset,
        interval,
        None,
        None,
        false,
        true,
    )
    .await?;
    if let Some((position, why)) = outcome.invalid {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("segment {} invalid at {position}: {why}", segment.base_offset),
        ));
    }
    segment.index.rewrite(0, &outcome.offsets).await?;
    segment.time_index.rewrite(0, &outcome.times).await?;
    segment.set_meta(outcome.meta);
    Ok(())
}
