//! Log compaction (`cleanup.policy=compact`): for every key only the record with the highest
//! offset in the whole log survives.
//!
//! Rules of one pass ([`Log::compact`]):
//! - Only records below the first uncleanable offset (the partition's last stable offset:
//!   the high watermark, or the start of the earliest open transaction if lower, as Kafka's
//!   cleaner bounds itself) count: a record past it may still be truncated away when
//!   leadership moves, so it must not be the reason an older, committed record of its key is
//!   removed. The key → latest offset map covers every record below that bound, in every
//!   segment, the active one included; only closed segments that end at or below the bound
//!   and whose largest timestamp is at least `min.compaction.lag.ms` old (a prefix of the
//!   log) are rewritten. The active segment is never touched.
//! - A record whose key has a later record anywhere is removed. A tombstone (null value) that
//!   is the latest for its key is removed once its segment's largest timestamp is more than
//!   `delete.retention.ms` old, and kept until then.
//! - Offsets never move. A batch that loses some records is rewritten with the survivors
//!   byte for byte (their offset and timestamp deltas unchanged) under the same header —
//!   base offset, lastOffsetDelta, base timestamp, producer id/epoch, base sequence — with a
//!   new record count, max timestamp and CRC-32C (`batch::with_records`). A batch that loses
//!   every record is dropped, and a closed segment that loses every batch is deleted (the
//!   first segment is kept, empty, so that the log start offset does not move). Dropping a
//!   batch cannot regress the producer state: it is snapshotted at every roll, i.e. past
//!   every closed segment, and rebuilt from the newest snapshot plus the active segment.
//! - Transactional batches (and markers) are kept whole and their keys are not read: see
//!   `compactable`, which keeps every committed value (more than Kafka keeps).
//! - Compressed and control batches are kept whole and their keys are not read (the engine
//!   does not decompress): a key last written in a compressed batch also keeps its older
//!   uncompressed records. Records without a key are kept (the append path refuses them on a
//!   compacted log, but only in uncompressed batches).
//!
//! Replacing a segment, crash-safe (directory operations are fsynced in this order):
//! 1. write `<base>.log.cleaned`, `<base>.index.cleaned`, `<base>.timeindex.cleaned`; fdatasync;
//! 2. rename `.log.cleaned` → `.log.swap` (the commit point: the swap file is complete);
//! 3. remove the old `.index` and `.timeindex` (they describe the old `.log`);
//! 4. rename `.log.swap` → `.log` (atomically replacing it), then `.timeindex.cleaned` →
//!    `.timeindex`, then `.index.cleaned` → `.index`.
//!
//! [`finish_interrupted`] runs when a log opens: it completes step 4 for every `.log.swap`
//! (removing that segment's index files first), deletes every `*.cleaned` file and every index
//! file without its `.log` (`.txnindex` included: a crash between a segment's removals). A
//! segment's `.txnindex` outlives its compaction unchanged: markers are kept, and offsets
//! never move. A missing index is rebuilt by the open scan, so a crash at any
//! point leaves either the old segment or the new one, never a mix. Readers that took the old
//! segment before the swap keep reading its open files (unlinked files stay readable).
//!
//! A copy that cannot be written for lack of space is removed and the pass refused: the log
//! stays as it was and usable, and a later pass tries again.
//!
//! The pass holds the log's writer lock: appends to this partition wait while it runs.

use super::batch::{self, BatchHeader, TimestampType};
use super::index::IndexFile;
use super::records::{self, RecordView};
use super::scan::{BatchScanner, Scanned, Verify};
use super::segment::{
    segment_path, IndexBuilder, Segment, SegmentFiles, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
};
use super::{Log, LogError};
use crate::io::{Storage, StorageFile};
use bytes::Bytes;
use std::collections::{HashMap, HashSet};
use std::io;
use std::path::Path;
use std::rc::Rc;

const CLEANED: &str = "cleaned";
const SWAP: &str = "swap";
/// Bytes gathered before each write of a cleaned segment.
const WRITE_CHUNK: usize = 1 << 20;

/// What a compaction pass changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionOutcome {
    pub segments_rewritten: usize,
    pub segments_deleted: usize,
    /// Records removed, tombstones included.
    pub records_removed: u64,
    pub tombstones_removed: u64,
    /// Sizes of the segments rewritten or deleted, before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// Every key's highest offset in the log.
type LatestOffsets = HashMap<Box<[u8]>, i64>;

#[derive(Default)]
struct Removed {
    records: u64,
    tombstones: u64,
}

/// What becomes of a segment that compaction leaves without a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IfEmptied {
    /// The log's first segment: kept, empty, so that the log start offset does not move.
    Keep,
    Remove,
}

/// What compaction keeps of one batch.
enum Filtered {
    Whole,
    Nothing,
    Part(Vec<u8>),
}

impl<S: Storage> Log<S> {
    /// One compaction pass over the closed segments (see the module docs). A no-op unless the
    /// log is compacted. A read error (corrupt closed segment) is returned and changes
    /// nothing; an error while replacing a segment fails the log, but for a lack of space
    /// while writing the copy, which only refuses the pass ([`LogError::Exhausted`]).
    pub async fn compact(&self, now_ms: i64, uncleanable_from: i64) -> Result<CompactionOutcome, LogError> {
        let _writer = self.writer.lock().await;
        self.check_ok()?;
        let config = self.config();
        let mut outcome = CompactionOutcome::default();
        if !config.cleanup_policy_compact {
            return Ok(outcome);
        }
        let segments = self.segments();
        let closed = &segments[..segments.len() - 1];
        let lag_ms = config.min_compaction_lag_ms;
        let eligible = closed
            .iter()
            .take_while(|s| {
                now_ms - s.meta().max_timestamp >= lag_ms && s.meta().next_offset <= uncleanable_from
            })
            .count();
        if eligible == 0 {
            return Ok(outcome);
        }
        // Recovery verifies segments from the recorded prefix on and cuts the log at one that
        // ends short of the next: none of them may be compacted (`rolled.rs`).
        self.settle_rolled().await?;
        let latest = latest_offsets(&segments, uncleanable_from).await?;
        for (i, segment) in closed[..eligible].iter().enumerate() {
            let expire = now_ms - segment.meta().max_timestamp > config.delete_retention_ms;
            let removed = plan(segment, &latest, expire).await?;
            if removed.records == 0 {
                continue;
            }
            self.mark_dirty().await?;
            outcome.records_removed += removed.records;
            outcome.tombstones_removed += removed.tombstones;
            outcome.bytes_before += segment.meta().size;
            let interval = config.index_interval_bytes;
            // The first segment stays, empty, so that the log start offset does not move.
            let if_emptied = if i == 0 {
                IfEmptied::Keep
            } else {
                IfEmptied::Remove
            };
            match self
                .replace(segment, &latest, expire, interval, if_emptied)
                .await?
            {
                Some(size) => {
                    outcome.segments_rewritten += 1;
                    outcome.bytes_after += size;
                }
                None => outcome.segments_deleted += 1,
            }
        }
        if outcome.records_removed > 0 {
            tracing::info!(dir = %self.dir.display(), ?outcome, "log compacted");
        }
        Ok(outcome)
    }

    /// Rewrites `old` without what compaction removes and swaps it in; deletes it instead when
    /// nothing survives and `if_emptied` says so. Returns the new size, None if deleted.
    async fn replace(
        &self,
        old: &Rc<Segment<S::File>>,
        latest: &LatestOffsets,
        expire: bool,
        interval: u32,
        if_emptied: IfEmptied,
    ) -> Result<Option<u64>, LogError> {
        let cleaned = self.write_copy(old, latest, expire, interval).await?;
        let swapped = self.swap_in(old, cleaned, if_emptied).await;
        swapped.map_err(|e| self.fail(e))
    }

    /// Writes the compacted copy of `old`. Nothing is swapped yet if that fails, so the log is
    /// as it was: the partial copy is removed (it holds space a full disk lacks), and a lack of
    /// space only postpones the pass.
    async fn write_copy(
        &self,
        old: &Segment<S::File>,
        latest: &LatestOffsets,
        expire: bool,
        interval: u32,
    ) -> Result<Segment<S::File>, LogError> {
        let (storage, dir, base) = (&*self.storage, &self.dir, old.base_offset);
        let error = match write_cleaned(storage, dir, old, latest, expire, interval).await {
            Ok(cleaned) => return Ok(cleaned),
            Err(error) => error,
        };
        match remove_cleaned(storage, dir, base).await {
            Ok(()) => Err(self.refuse_or_fail(error)),
            Err(cleanup) => Err(self.fail(cleanup)),
        }
    }

    /// Puts the complete copy `cleaned` in place of `old` (see the module docs for the steps).
    async fn swap_in(
        &self,
        old: &Rc<Segment<S::File>>,
        cleaned: Segment<S::File>,
        if_emptied: IfEmptied,
    ) -> io::Result<Option<u64>> {
        let (storage, dir, base) = (&*self.storage, &self.dir, old.base_offset);
        let size = cleaned.meta().size;
        if size == 0 && if_emptied == IfEmptied::Remove {
            self.state.borrow_mut().segments.retain(|s| !Rc::ptr_eq(s, old));
            remove_cleaned(storage, dir, base).await?;
            old.remove_files(storage, dir).await?;
            storage.sync_dir(dir).await?;
            return Ok(None);
        }
        let swap = segment_path(dir, base, &format!("{LOG_SUFFIX}.{SWAP}"));
        storage
            .rename(&segment_path(dir, base, &cleaned_suffix(LOG_SUFFIX)), &swap)
            .await?;
        storage.sync_dir(dir).await?;
        remove_indexes(storage, dir, base).await?;
        storage.sync_dir(dir).await?;
        storage
            .rename(&swap, &segment_path(dir, base, LOG_SUFFIX))
            .await?;
        for suffix in [TIME_INDEX_SUFFIX, INDEX_SUFFIX] {
            let from = segment_path(dir, base, &cleaned_suffix(suffix));
            storage.rename(&from, &segment_path(dir, base, suffix)).await?;
        }
        storage.sync_dir(dir).await?;
        let mut state = self.state.borrow_mut();
        let at = state.segments.iter().position(|s| Rc::ptr_eq(s, old));
        state.segments[at.expect("the writer lock keeps the segment in the log")] = Rc::new(cleaned);
        Ok(Some(size))
    }
}

fn cleaned_suffix(suffix: &str) -> String {
    format!("{suffix}.{CLEANED}")
}

fn invalid(segment_base: i64, what: impl std::fmt::Display) -> io::Error {
    let message = format!("segment {segment_base}: {what}");
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// The whole, CRC-checked batches of a segment, in order. A batch that cannot be where it is
/// (an offset outside the segment's 32-bit relative offsets or below the batch before it, a
/// position past 32 bits) is an error: the base offset is outside the CRC, and the segment's
/// indexes could not point at it.
struct WholeBatches<'a, F> {
    scanner: BatchScanner<'a, F>,
    base_offset: i64,
    /// The offset after the last batch returned (the segment's base offset before the first).
    next_offset: i64,
}

impl<'a, F: StorageFile> WholeBatches<'a, F> {
    fn new(segment: &'a Segment<F>) -> Self {
        WholeBatches {
            scanner: BatchScanner::new(&*segment.log, 0, segment.meta().size, Verify::Checksums),
            base_offset: segment.base_offset,
            next_offset: segment.base_offset,
        }
    }

    async fn next(&mut self) -> io::Result<Option<(BatchHeader, Bytes)>> {
        match self.scanner.next().await? {
            Scanned::Batch { position, header } => {
                let relative = header.base_offset - self.base_offset;
                let indexable = position <= u64::from(u32::MAX) && relative <= i64::from(u32::MAX);
                if header.base_offset < self.next_offset || !indexable {
                    let what = format!("batch offset {} at {position} out of place", header.base_offset);
                    return Err(invalid(self.base_offset, what));
                }
                self.next_offset = header.next_offset();
                Ok(Some((header, self.scanner.batch_bytes(position, &header))))
            }
            Scanned::End => Ok(None),
            Scanned::Invalid { position, error } => {
                Err(invalid(self.base_offset, format!("at {position}: {error}")))
            }
        }
    }
}

/// Whether compaction reads and filters this batch's keys: uncompressed data outside
/// transactions. A transactional batch is kept whole and its keys shadow nothing: an aborted
/// transaction's records must not remove the committed older values of their keys, and
/// which transactions aborted is not looked up here, so none of them is counted.
fn compactable(header: &BatchHeader) -> bool {
    records::readable(header) && !header.is_transactional()
}

fn readable_records<'a>(
    segment_base: i64,
    h: &BatchHeader,
    bytes: &'a [u8],
) -> io::Result<Vec<RecordView<'a>>> {
    records::records(bytes, h).map_err(|e| invalid(segment_base, format!("batch {}: {e}", h.base_offset)))
}

/// Every key's highest offset below `uncleanable_from`.
async fn latest_offsets<F: StorageFile>(
    segments: &[Rc<Segment<F>>],
    uncleanable_from: i64,
) -> io::Result<LatestOffsets> {
    let mut latest = LatestOffsets::new();
    for segment in segments {
        let mut batches = WholeBatches::new(segment);
        while let Some((header, bytes)) = batches.next().await? {
            if !compactable(&header) {
                continue;
            }
            for record in readable_records(segment.base_offset, &header, &bytes)? {
                let offset = header.base_offset + record.offset_delta as i64;
                if let (Some(key), true) = (record.key, offset < uncleanable_from) {
                    latest.insert(key.into(), offset);
                }
            }
        }
    }
    Ok(latest)
}

/// What compaction would remove from `segment` (a dry run).
async fn plan<F: StorageFile>(
    segment: &Segment<F>,
    latest: &LatestOffsets,
    expire: bool,
) -> io::Result<Removed> {
    let mut removed = Removed::default();
    let mut batches = WholeBatches::new(segment);
    while let Some((header, bytes)) = batches.next().await? {
        filter_batch(segment.base_offset, &header, &bytes, latest, expire, &mut removed)?;
    }
    Ok(removed)
}

fn filter_batch(
    segment_base: i64,
    header: &BatchHeader,
    bytes: &[u8],
    latest: &LatestOffsets,
    expire_tombstones: bool,
    removed: &mut Removed,
) -> io::Result<Filtered> {
    if !compactable(header) || header.record_count == 0 {
        return Ok(Filtered::Whole);
    }
    let all = readable_records(segment_base, header, bytes)?;
    let mut kept = Vec::with_capacity(all.len());
    for record in &all {
        let offset = header.base_offset + record.offset_delta as i64;
        let keep = match record.key {
            None => true,
            Some(key) => {
                let is_latest = latest.get(key).is_none_or(|&l| l <= offset);
                is_latest && !(record.value.is_none() && expire_tombstones)
            }
        };
        if keep {
            kept.push(record);
        } else {
            removed.records += 1;
            removed.tombstones += u64::from(record.value.is_none());
        }
    }
    if kept.len() == all.len() {
        return Ok(Filtered::Whole);
    }
    if kept.is_empty() {
        return Ok(Filtered::Nothing);
    }
    let max_timestamp = match header.timestamp_type() {
        TimestampType::CreateTime if header.base_timestamp != batch::NO_TIMESTAMP => {
            let delta = kept.iter().map(|r| r.timestamp_delta).max().expect("non-empty");
            header.base_timestamp + delta
        }
        _ => header.max_timestamp,
    };
    let body: Vec<u8> = kept.iter().flat_map(|r| r.bytes.iter().copied()).collect();
    Ok(Filtered::Part(batch::with_records(
        bytes,
        kept.len() as i32,
        max_timestamp,
        &body,
    )))
}

/// Writes and fdatasyncs the `.cleaned` files of `old`; returns them as a segment (its
/// handles follow the renames of [`Log::replace`]).
async fn write_cleaned<S: Storage>(
    storage: &S,
    dir: &Path,
    old: &Segment<S::File>,
    latest: &LatestOffsets,
    expire: bool,
    interval: u32,
) -> io::Result<Segment<S::File>> {
    let base = old.base_offset;
    let mut files = Vec::with_capacity(3);
    for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
        let file = storage
            .open(&segment_path(dir, base, &cleaned_suffix(suffix)), true)
            .await?;
        file.truncate(0).await?;
        files.push(file);
    }
    let (time, index, log) = (files.pop(), files.pop(), files.pop());
    let log = log.expect("three files");
    let mut meta = Segment::<S::File>::empty_meta(base);
    meta.rolling_timestamp = old.meta().rolling_timestamp;
    let mut builder = IndexBuilder::new(interval, None, None);
    let (mut pending, mut written) = (Vec::new(), 0u64);
    let mut batches = WholeBatches::new(old);
    while let Some((header, bytes)) = batches.next().await? {
        let out = match filter_batch(base, &header, &bytes, latest, expire, &mut Removed::default())? {
            Filtered::Whole => bytes,
            Filtered::Nothing => continue,
            Filtered::Part(rewritten) => Bytes::from(rewritten),
        };
        let header = BatchHeader::parse(&out).expect("a batch compaction wrote");
        builder.add(&mut meta, base, written + pending.len() as u64, &header);
        pending.extend_from_slice(&out);
        if pending.len() >= WRITE_CHUNK {
            log.write_at(written, &[&pending]).await?;
            written += pending.len() as u64;
            pending.clear();
        }
    }
    if !pending.is_empty() {
        let len = pending.len() as u64;
        log.write_at(written, &[&pending]).await?;
        written += len;
    }
    meta.size = written;
    let files = SegmentFiles {
        log,
        index: IndexFile::Open(index.expect("three files")),
        time_index: IndexFile::Open(time.expect("three files")),
    };
    let segment = Segment::new(base, files, Vec::new(), Vec::new(), meta);
    segment.index.append(&builder.offsets).await?;
    segment.time_index.append(&builder.times).await?;
    segment.sync_all().await?;
    Ok(segment)
}

async fn remove_if_present<S: Storage>(storage: &S, path: &Path) -> io::Result<()> {
    match storage.remove_file(path).await {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

async fn remove_indexes<S: Storage>(storage: &S, dir: &Path, base: i64) -> io::Result<()> {
    for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
        remove_if_present(storage, &segment_path(dir, base, suffix)).await?;
    }
    Ok(())
}

async fn remove_cleaned<S: Storage>(storage: &S, dir: &Path, base: i64) -> io::Result<()> {
    for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
        remove_if_present(storage, &segment_path(dir, base, &cleaned_suffix(suffix))).await?;
    }
    Ok(())
}

/// The base offset of a `<20 digits>.<suffix>` name.
fn parse_base(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?.strip_suffix('.')?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit())).then(|| stem.parse().ok())?
}

/// Completes or undoes a replacement a crash interrupted (see the module docs), and removes
/// index files left without their `.log`. Returns true when it changed the directory.
pub async fn finish_interrupted<S: Storage>(storage: &S, dir: &Path, names: &[String]) -> io::Result<bool> {
    let mut changed = false;
    for base in names
        .iter()
        .filter_map(|n| parse_base(n, &format!("{LOG_SUFFIX}.{SWAP}")))
    {
        tracing::warn!(base_offset = base, dir = %dir.display(), "completing an interrupted compaction swap");
        remove_indexes(storage, dir, base).await?;
        let swap = segment_path(dir, base, &format!("{LOG_SUFFIX}.{SWAP}"));
        storage
            .rename(&swap, &segment_path(dir, base, LOG_SUFFIX))
            .await?;
        changed = true;
    }
    let logs: HashSet<i64> = names
        .iter()
        .filter_map(|n| parse_base(n, LOG_SUFFIX).or_else(|| parse_base(n, &format!("{LOG_SUFFIX}.{SWAP}"))))
        .collect();
    for name in names {
        let leftover = name.ends_with(&format!(".{CLEANED}"));
        let orphan = [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX]
            .iter()
            .any(|s| parse_base(name, s).is_some_and(|base| !logs.contains(&base)));
        if leftover || orphan {
            tracing::info!(file = name, dir = %dir.display(), "removing a leftover of an interrupted compaction or deletion");
            remove_if_present(storage, &dir.join(name)).await?;
            changed = true;
        }
    }
    if changed {
        storage.sync_dir(dir).await?;
    }
    Ok(changed)
}

#[cfg(test)]
#[path = "compaction_tests.rs"]
mod tests;
