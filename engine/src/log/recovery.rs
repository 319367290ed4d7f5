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

use super::batch::BatchHeader;
use super::index::{offset_index_sane_prefix, Entry, EntryFile, IndexEntry};
use super::scan::{BatchScanner, Scanned, Verify};
use super::segment::{IndexBuilder, Segment, SegmentMeta};
use super::timeindex::{time_index_sane_prefix, TimeEntry};
use crate::io::{Storage, StorageFile};
use std::io;
use std::path::Path;
use std::rc::Rc;

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
    let mut builder = IndexBuilder::new(interval, from.last_time, from.entry);
    let mut scanner = BatchScanner::new(log, start, log.len(), verify);
    let invalid = loop {
        match scanner.next().await? {
            Scanned::Batch { position, header } => {
                let indexed = from.entry.filter(|_| position == start);
                let expected = indexed.map(|e| e.relative_offset);
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
pub async fn open_segment<S: Storage>(
    storage: &S,
    dir: &Path,
    base_offset: i64,
    interval: u32,
    verify: Verify,
    gaps: OffsetGaps,
) -> io::Result<(Segment<S::File>, u64)> {
    let files = Segment::<S::File>::open_files(storage, dir, base_offset).await?;
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
    files: &(Rc<F>, Rc<F>, Rc<F>),
    base_offset: i64,
    interval: u32,
    gaps: OffsetGaps,
) -> io::Result<Option<Segment<F>>> {
    let (log, index_file, time_file) = files;
    let offsets = EntryFile::<F, IndexEntry>::read_all(index_file).await?;
    let times = EntryFile::<F, TimeEntry>::read_all(time_file).await?;
    let whole =
        index_file.len() % IndexEntry::LEN as u64 == 0 && time_file.len() % TimeEntry::LEN as u64 == 0;
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
    files: (Rc<F>, Rc<F>, Rc<F>),
    dir: &Path,
    base_offset: i64,
    interval: u32,
    gaps: OffsetGaps,
) -> io::Result<(Segment<F>, u64)> {
    let log = &files.0;
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
    use crate::io::FaultyStorage;
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
