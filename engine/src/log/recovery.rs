//! Opening segments: trusting what a clean shutdown left, repairing what a crash left.
//!
//! After a clean shutdown (the state file says clean) a segment's indexes are trusted when sane,
//! and only the batch headers after the last index entry are read to find the segment's end.
//!
//! After a crash the active segment is verified batch by batch (CRC-32C included) and cut at
//! the first invalid or torn batch; its indexes are rebuilt from the scan. Where the state file
//! records a synced prefix of the segment (its length and index entry counts, all fsynced), that
//! prefix is trusted once the files still match it, and the verifying scan starts at its end
//! (`open_active_after`); without one, or when the files do not match it, the scan starts at the
//! segment's first byte: the offset and time indexes are written without fsync and lose unsynced
//! entries independently of each other and of the log, so past a synced point neither can vouch
//! for where the valid data ends, nor for the running max timestamp retention relies on. The cost
//! is bounded by what was written since the last synced point, at most `segment.bytes`. A segment that rolled is
//! fsynced in the background (`rolled.rs`), so the one before the active segment may need the
//! same verification: `Log::open_segments` picks the segments from the state file's promise.
//! The others are opened as after a clean shutdown; an index found damaged is rebuilt by a
//! verifying scan.

use super::batch::BatchHeader;
use super::disk_state::SyncedPrefix;
use super::index::{offset_index_sane_prefix, Entry, IndexEntry};
use super::scan::{BatchScanner, Scanned, Verify};
use super::segment::{IndexBuilder, Segment, SegmentFiles, SegmentMeta};
use super::timeindex::{time_index_sane_prefix, TimeEntry};
use crate::io::StorageFile;
use std::io;
use std::path::Path;

/// Whether a segment may skip offsets between batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetGaps {
    /// A closed segment: compaction may have removed batches.
    Allowed,
    /// The active segment, which is never compacted: a gap there is damage.
    Refused,
}

/// Where a scan starts: the segment's first byte, or the batch of its last offset-index entry
/// together with its last time entry (where the running max timestamp starts).
#[derive(Debug, Clone, Copy)]
struct ScanStart {
    entry: Option<IndexEntry>,
    last_time: Option<TimeEntry>,
}

impl ScanStart {
    const FILE_START: ScanStart = ScanStart {
        entry: None,
        last_time: None,
    };
}

/// What scanning a segment found.
struct ScanOutcome {
    meta: SegmentMeta,
    offsets: Vec<IndexEntry>,
    times: Vec<TimeEntry>,
    /// Where the valid batches end when something else follows, and why.
    invalid: Option<(u64, String)>,
}

/// Scans `log` from `from` to its end.
async fn scan<F: StorageFile>(
    log: &F,
    base_offset: i64,
    interval: u32,
    from: ScanStart,
    verify: Verify,
    gaps: OffsetGaps,
) -> io::Result<ScanOutcome> {
    let start = from.entry.map_or(0, |e| u64::from(e.position));
    let mut meta = Segment::<F>::empty_meta(base_offset);
    // The batch an index entry points at starts at the entry's offset: the scan continues the
    // segment from there (starting at the segment's base instead made the active segment, whose
    // offsets must be contiguous, fail at its first batch and be rebuilt by a verifying scan
    // after every clean close).
    meta.next_offset = from
        .entry
        .map_or(base_offset, |e| base_offset + i64::from(e.relative_offset));
    meta.max_timestamp = from.last_time.map_or(-1, |t| t.timestamp);
    let continued = Continued {
        position: start,
        meta,
        expected_first: from.entry.map(|e| e.relative_offset),
    };
    scan_range(
        log,
        (base_offset, interval),
        from,
        continued,
        (log.len(), verify, gaps),
    )
    .await
}

/// Where a scan goes on from: its position and the segment's metadata up to it.
#[derive(Debug, Clone, Copy)]
struct Continued {
    position: u64,
    meta: SegmentMeta,
    /// The relative offset an index entry gives the batch at `position`, if one does.
    expected_first: Option<u32>,
}

/// Scans `log` from `at` to `end`; `last` names the index entries before `at` (the builder of
/// new entries goes on from them).
async fn scan_range<F: StorageFile>(
    log: &F,
    (base_offset, interval): (i64, u32),
    last: ScanStart,
    at: Continued,
    (end, verify, gaps): (u64, Verify, OffsetGaps),
) -> io::Result<ScanOutcome> {
    let mut meta = at.meta;
    let mut builder = IndexBuilder::new(interval, last.last_time, last.entry);
    let mut scanner = BatchScanner::new(log, at.position, end, verify);
    let invalid = loop {
        match scanner.next().await? {
            Scanned::Batch { position, header } => {
                let expected = at.expected_first.filter(|_| position == at.position);
                if let Some(why) = misplaced(&meta, base_offset, position, &header, expected, gaps) {
                    break Some((position, why));
                }
                builder.add(&mut meta, base_offset, position, &header);
            }
            Scanned::End => break None,
            Scanned::Invalid { position, error } => break Some((position, error.to_string())),
        }
    };
    meta.size = invalid.as_ref().map_or(scanner.position(), |(p, _)| *p);
    Ok(ScanOutcome {
        meta,
        offsets: builder.offsets,
        times: builder.times,
        invalid,
    })
}

/// Why the batch `header` at `position` cannot come next in the segment scanned so far
/// (`meta`), if it cannot. `expected` is the relative offset an index entry gives it.
fn misplaced(
    meta: &SegmentMeta,
    base_offset: i64,
    position: u64,
    header: &BatchHeader,
    expected: Option<u32>,
    gaps: OffsetGaps,
) -> Option<String> {
    if position > u64::from(u32::MAX) {
        return Some(format!(
            "batch at {position}, past the 32-bit positions of the index"
        ));
    }
    let relative = header.base_offset - base_offset;
    // Offsets are contiguous, except in closed segments where compaction removed batches; the
    // base offset is outside the CRC, so this is what catches a damaged one.
    let in_sequence = header.base_offset == meta.next_offset
        || (gaps == OffsetGaps::Allowed && header.base_offset > meta.next_offset);
    let in_order = in_sequence
        && (0..=i64::from(u32::MAX)).contains(&relative)
        && expected.is_none_or(|r| i64::from(r) == relative);
    (!in_order).then(|| format!("batch offset {} out of sequence", header.base_offset))
}

/// Opens the segment at `base_offset`. `Verify::Checksums` asks for the crash path (see module
/// docs); `Verify::HeadersOnly` trusts sane indexes and reads the headers after them.
/// Returns the segment and the number of bytes cut off its end.
pub async fn open_segment<F: StorageFile>(
    files: SegmentFiles<F>,
    dir: &Path,
    base_offset: i64,
    interval: u32,
    verify: Verify,
    gaps: OffsetGaps,
) -> io::Result<(Segment<F>, u64)> {
    if verify == Verify::HeadersOnly {
        if let Some(segment) = open_with_indexes(&files, base_offset, interval, gaps).await? {
            return Ok((segment, 0));
        }
        tracing::warn!(base_offset, dir = %dir.display(), "segment index damaged: rebuilding");
    }
    open_verified(files, dir, base_offset, interval, gaps).await
}

/// The segment with the entries of its index files, if they are whole and sane and the
/// batches after the last entry are valid; entries for those batches go to the files too.
async fn open_with_indexes<F: StorageFile>(
    files: &SegmentFiles<F>,
    base_offset: i64,
    interval: u32,
    gaps: OffsetGaps,
) -> io::Result<Option<Segment<F>>> {
    let log = &files.log;
    let offsets: Vec<IndexEntry> = files.index.read_entries().await?;
    let times: Vec<TimeEntry> = files.time_index.read_entries().await?;
    let whole = files.index.len().is_multiple_of(IndexEntry::LEN as u64)
        && files.time_index.len().is_multiple_of(TimeEntry::LEN as u64);
    let sane_offsets = offset_index_sane_prefix(&offsets, log.len()) == offsets.len();
    let sane_times = time_index_sane_prefix(&times, &offsets, u32::MAX) == times.len();
    if !(whole && sane_offsets && sane_times) {
        return Ok(None);
    }
    let from = ScanStart {
        entry: offsets.last().copied(),
        last_time: times.last().copied(),
    };
    let tail = scan(&**log, base_offset, interval, from, Verify::HeadersOnly, gaps).await?;
    if tail.invalid.is_some() {
        return Ok(None);
    }
    let segment = Segment::new(base_offset, files.clone(), offsets, times, tail.meta);
    // Entries the tail scan made (a lost or missing index).
    segment.index.append(&tail.offsets).await?;
    segment.time_index.append(&tail.times).await?;
    Ok(Some(segment))
}

/// The segment as a verifying scan of every batch finds it, cut at the first invalid one, its
/// indexes rebuilt. Returns it and the number of bytes cut off.
async fn open_verified<F: StorageFile>(
    files: SegmentFiles<F>,
    dir: &Path,
    base_offset: i64,
    interval: u32,
    gaps: OffsetGaps,
) -> io::Result<(Segment<F>, u64)> {
    let log = &files.log;
    let outcome = scan(
        &**log,
        base_offset,
        interval,
        ScanStart::FILE_START,
        Verify::Checksums,
        gaps,
    )
    .await?;
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

/// The active segment after a crash, when its first `synced.log_len` bytes and index entries
/// were fdatasync'd at the last clean state and nothing wrote below them since (see
/// `disk_state.rs`): those are trusted (their batch headers after the last trusted index entry
/// are read), and only the bytes after them are verified batch by batch with CRC-32C, cut at the
/// first invalid batch, and indexed again. Files that do not match what was recorded (shorter,
/// entries out of order or out of the prefix, headers not ending at its length) fall back to
/// the verifying scan of the whole segment. Returns the segment and the bytes cut off.
pub async fn open_active_after<F: StorageFile>(
    files: SegmentFiles<F>,
    dir: &Path,
    (base_offset, interval): (i64, u32),
    synced: SyncedPrefix,
) -> io::Result<(Segment<F>, u64)> {
    assert_eq!(synced.base_offset, base_offset, "the prefix of this segment");
    match trusted_prefix(&files, base_offset, interval, synced).await? {
        Some(trusted) => verify_after(files, dir, (base_offset, interval), trusted).await,
        None => {
            tracing::warn!(base_offset, dir = %dir.display(), "synced prefix does not match the files: verifying the whole segment");
            open_verified(files, dir, base_offset, interval, OffsetGaps::Refused).await
        }
    }
}

/// The synced prefix as read back: its index entries, and a headers-only scan from the last
/// of them to its end.
struct Trusted {
    offsets: Vec<IndexEntry>,
    times: Vec<TimeEntry>,
    head: ScanOutcome,
}

async fn trusted_prefix<F: StorageFile>(
    files: &SegmentFiles<F>,
    base_offset: i64,
    interval: u32,
    synced: SyncedPrefix,
) -> io::Result<Option<Trusted>> {
    let log = &files.log;
    let mut offsets: Vec<IndexEntry> = files.index.read_entries().await?;
    let mut times: Vec<TimeEntry> = files.time_index.read_entries().await?;
    let (n_offsets, n_times) = (synced.offset_entries as usize, synced.time_entries as usize);
    if log.len() < synced.log_len || offsets.len() < n_offsets || times.len() < n_times {
        return Ok(None);
    }
    offsets.truncate(n_offsets);
    times.truncate(n_times);
    let sane = offset_index_sane_prefix(&offsets, synced.log_len) == n_offsets
        && time_index_sane_prefix(&times, &offsets, u32::MAX) == n_times;
    if !sane {
        return Ok(None);
    }
    let last = ScanStart {
        entry: offsets.last().copied(),
        last_time: times.last().copied(),
    };
    let mut meta = Segment::<F>::empty_meta(base_offset);
    meta.next_offset = last
        .entry
        .map_or(base_offset, |e| base_offset + i64::from(e.relative_offset));
    meta.max_timestamp = last.last_time.map_or(-1, |t| t.timestamp);
    let at = Continued {
        position: last.entry.map_or(0, |e| u64::from(e.position)),
        meta,
        expected_first: last.entry.map(|e| e.relative_offset),
    };
    let range = (synced.log_len, Verify::HeadersOnly, OffsetGaps::Refused);
    let head = scan_range(&**log, (base_offset, interval), last, at, range).await?;
    if head.invalid.is_some() || head.meta.size != synced.log_len {
        return Ok(None);
    }
    Ok(Some(Trusted { offsets, times, head }))
}

/// Verifies what follows the trusted prefix and makes the segment from both.
async fn verify_after<F: StorageFile>(
    files: SegmentFiles<F>,
    dir: &Path,
    (base_offset, interval): (i64, u32),
    trusted: Trusted,
) -> io::Result<(Segment<F>, u64)> {
    let log = &files.log;
    let Trusted { offsets, times, head } = trusted;
    let last = ScanStart {
        entry: head.offsets.last().or(offsets.last()).copied(),
        last_time: head.times.last().or(times.last()).copied(),
    };
    let at = Continued {
        position: head.meta.size,
        meta: head.meta,
        expected_first: None,
    };
    let range = (log.len(), Verify::Checksums, OffsetGaps::Refused);
    let tail = scan_range(&**log, (base_offset, interval), last, at, range).await?;
    let cut = log.len() - tail.meta.size;
    if let Some((position, why)) = &tail.invalid {
        tracing::warn!(base_offset, dir = %dir.display(), position, bytes_truncated = cut, reason = %why, "truncating segment at the first invalid batch");
        log.truncate(tail.meta.size).await?;
    }
    let (kept_offsets, kept_times) = (offsets.len(), times.len());
    let segment = Segment::new(base_offset, files, offsets, times, tail.meta);
    // The files may hold entries past the trusted ones (written, never synced): replaced.
    let new_offsets: Vec<IndexEntry> = head.offsets.into_iter().chain(tail.offsets).collect();
    let new_times: Vec<TimeEntry> = head.times.into_iter().chain(tail.times).collect();
    segment.index.rewrite(kept_offsets, &new_offsets).await?;
    segment.time_index.rewrite(kept_times, &new_times).await?;
    Ok((segment, cut))
}

/// Recomputes a segment's metadata and indexes from its batches (after a truncation, which
/// may make a compacted segment the active one: its gaps are accepted).
pub async fn rebuild<F: StorageFile>(segment: &Segment<F>, interval: u32) -> io::Result<()> {
    let (log, base) = (&*segment.log, segment.base_offset);
    let from = ScanStart::FILE_START;
    let outcome = scan(
        log,
        base,
        interval,
        from,
        Verify::HeadersOnly,
        OffsetGaps::Allowed,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FaultyStorage, Storage};
    use crate::log::batch::testing::BatchBuilder;

    type File = <FaultyStorage as Storage>::File;

    fn header_at(base_offset: i64) -> BatchHeader {
        let bytes = BatchBuilder::new(1_000)
            .base_offset(base_offset)
            .record(None, Some(b"v"), 0)
            .build();
        BatchHeader::parse(&bytes).unwrap()
    }

    #[test]
    fn a_batch_past_the_32_bit_positions_of_the_index_is_misplaced() {
        let meta = Segment::<File>::empty_meta(100);
        let header = header_at(100);
        let last = u64::from(u32::MAX);
        assert_eq!(
            misplaced(&meta, 100, last, &header, None, OffsetGaps::Refused),
            None
        );
        let why = misplaced(&meta, 100, last + 1, &header, None, OffsetGaps::Refused);
        assert!(why.is_some_and(|why| why.contains("32-bit positions")));
    }

    #[test]
    fn a_batch_offset_outside_the_segment_or_out_of_sequence_is_misplaced() {
        let mut meta = Segment::<File>::empty_meta(100);
        meta.next_offset = 110;
        let at = |offset, gaps| misplaced(&meta, 100, 4096, &header_at(offset), None, gaps);
        assert_eq!(at(110, OffsetGaps::Refused), None);
        assert!(
            at(120, OffsetGaps::Refused).is_some(),
            "a gap in the active segment"
        );
        assert_eq!(at(120, OffsetGaps::Allowed), None);
        assert!(at(109, OffsetGaps::Allowed).is_some(), "an offset going back");
        assert!(at(100 + (1 << 32), OffsetGaps::Allowed).is_some(), "past 32 bits");
        let expected = |r| misplaced(&meta, 100, 4096, &header_at(110), Some(r), OffsetGaps::Refused);
        assert_eq!(expected(10), None);
        assert!(expected(11).is_some(), "not where the index entry says");
    }
}
