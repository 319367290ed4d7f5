//! Opening a log: listing its directory, reading its state file, deciding from them what
//! recovery must verify (`disk_state.rs`: a clean state whose prefix no longer describes the
//! files counts as dirty from it), and opening its segments.

use super::clean_state::CleanState;
use super::disk_state::{self, DiskState, StateRecord};
use super::index::{Entry, IndexEntry};
use super::recovery::{self, OffsetGaps};
use super::scan::Verify;
use super::segment::{self, parse_log_name, Segment, SegmentFileMaker, SegmentFiles};
use super::{compaction, retention, timeindex, txn_index, Log, LogConfig, LogError, LogState};
use crate::io::{Storage, StorageFile};
use crate::local_sync::LocalLock;
use laminar_model::LeaderEpoch;
use std::cell::{Cell, RefCell};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

impl<S: Storage> Log<S> {
    /// Opens (creating when missing) the log in `dir`, recovering after a crash.
    pub async fn open(storage: Rc<S>, dir: PathBuf, config: LogConfig) -> Result<Self, LogError> {
        Ok(Self::open_listing(storage, dir, config).await?.0)
    }

    /// [`open`](Self::open), which lists `dir`; also returns the names it found there, so
    /// that the owner looks for its own files without a stat each.
    pub async fn open_listing(
        storage: Rc<S>,
        dir: PathBuf,
        config: LogConfig,
    ) -> Result<(Self, Vec<String>), LogError> {
        assert!(config.segment_bytes <= i32::MAX as u64, "index positions are u32");
        let names = Self::list_or_create(&*storage, &dir).await?;
        let on_disk = disk_state::read(&*storage, &dir, &names).await?;
        let mut bases: Vec<i64> = names.iter().filter_map(|n| parse_log_name(n)).collect();
        bases.sort_unstable();
        let checkpoint = if names.iter().any(|n| n == retention::START_OFFSET_FILE) {
            retention::read_start_offset(&*storage, &dir).await?
        } else {
            None
        };
        let interval = config.index_interval_bytes;
        let files = SegmentFileMaker::new(storage.clone(), dir.clone());
        files.adopt_spare(&names).await?;
        let (segments, record) = Self::open_segments(&files, &dir, (&bases, interval), on_disk).await?;
        let clean = record.state == DiskState::Clean;
        let mut segments: Vec<_> = segments.into_iter().map(Rc::new).collect();
        let state_file = names.iter().any(|n| n == disk_state::STATE_FILE);
        let created = segments.is_empty();
        if created {
            let base = checkpoint.unwrap_or(0);
            segments.push(Rc::new(Self::new_segment(&files, base).await?));
            // No state file yet: a log without one is dirty, which a new log is. The first
            // checkpoint (or synced-prefix step) creates it, off the first write's path: one
            // file fewer to create per new partition (decision 0023, partition files made at first write).
            // Its directory
            // is fsynced at its first durable point too (`dirs_unsynced`, the same decision).
        }
        let first_base = segments[0].base_offset;
        let log_end_offset = segments.last().expect("non-empty").meta().next_offset;
        let log_start_offset = checkpoint
            .unwrap_or(first_base)
            .max(first_base)
            .min(log_end_offset);
        // The state stays clean until the first write (`mark_dirty`). A clean record's prefix
        // holds after a crash too: recovery only verified and cut past it.
        let clean_state = CleanState::at_open(state_file.then_some(on_disk), record.state, created);
        let synced_prefix = match (on_disk.state, on_disk.synced) {
            (DiskState::Clean, Some(prefix)) => Some(prefix),
            _ => clean.then(|| segments.last().expect("non-empty").synced_prefix()),
        };
        let state = LogState {
            config,
            segments,
            log_start_offset,
            log_end_offset,
            leader_epoch: LeaderEpoch::FIRST,
        };
        let log = Log {
            storage,
            files,
            dir,
            state: RefCell::new(state),
            writer: LocalLock::new(),
            failure: RefCell::new(None),
            exhausted: Cell::new(false),
            clean_state: Cell::new(clean_state),
            opened_without_producer_state: clean && record.no_producer_state,
            synced_prefix: Cell::new(synced_prefix),
            rolled: RefCell::new(None),
            rolled_sync_claimed: Cell::new(false),
            rolled_sync: LocalLock::new(),
            truncations: Cell::new(0),
            deleted: Cell::new(false),
            dirs_unsynced: Cell::new(created),
            txn_indexes: RefCell::new(txn_index::TxnIndexes::listed(&names)),
        };
        Ok((log, names))
    }

    /// The names in the log's directory, made when missing (no stat when it exists), after
    /// finishing a compaction a crash interrupted.
    async fn list_or_create(storage: &S, dir: &Path) -> io::Result<Vec<String>> {
        let names = match storage.list_dir(dir).await {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                storage.create_dir_all(dir).await?;
                Vec::new()
            }
            listed => listed?,
        };
        if compaction::finish_interrupted(storage, dir, &names).await? {
            return storage.list_dir(dir).await;
        }
        Ok(names)
    }

    /// Opens the segments at `bases` (sorted). After a crash (`record` dirty) the segments
    /// that may hold unsynced bytes are verified and fdatasync'd (what recovery kept counts as
    /// durable from then on): the active one, from its synced prefix when the record has one
    /// for it, and those from the prefix's segment on (`rolled.rs`). When one of those before
    /// the active one ends short of the next (the crash took batches of it), the segments
    /// after it are removed and it becomes the active one.
    async fn open_segments(
        files: &Rc<SegmentFileMaker<S>>,
        dir: &Path,
        (bases, interval): (&[i64], u32),
        record: StateRecord,
    ) -> io::Result<(Vec<Segment<S::File>>, StateRecord)> {
        let (record, mut last_files) = Self::written_since_clean(files, bases, record).await?;
        let verify_from = match (record.state, record.synced) {
            (DiskState::Clean, _) => None,
            _ if record.rolled_synced => bases.last().copied(),
            (DiskState::Dirty, Some(prefix)) => Some(prefix.base_offset),
            (DiskState::Dirty, None) => bases.len().checked_sub(2).map(|i| bases[i]),
        };
        let mut segments = Vec::with_capacity(bases.len());
        for (i, &base) in bases.iter().enumerate() {
            let next_base = bases.get(i + 1).copied();
            let suspect = record.state == DiskState::Dirty
                && (next_base.is_none() || verify_from.is_some_and(|from| base >= from));
            let opened_first = if next_base.is_none() {
                last_files.take()
            } else {
                None
            };
            let segment_files = match opened_first {
                Some(opened) => opened,
                None => files.open(base).await?,
            };
            let opened = Self::open_segment(
                segment_files,
                dir,
                (base, interval),
                record,
                (suspect, next_base.is_none()),
            );
            let (segment, _cut) = opened.await?;
            if suspect {
                segment.log.fdatasync().await?;
            }
            // Whether it lost batches: it ends short of the next segment. Bytes cut past a
            // segment that reaches the next one held no batch of it (the zero padding of an
            // O_DIRECT block, a mapped window's length, a recycled file's old bytes).
            let short = next_base.is_some_and(|next| segment.meta().next_offset != next);
            segments.push(segment);
            if suspect && short {
                let lost = &bases[i + 1..];
                tracing::warn!(dir = %dir.display(), base_offset = base, later_segments = lost.len(),
                    "a segment that rolled lost its unsynced tail in the crash: the segments after it are removed");
                for &later in lost {
                    segment::remove_segment_files(files.storage(), dir, later).await?;
                }
                files.storage().sync_dir(dir).await?;
                break;
            }
        }
        Ok((segments, record))
    }

    /// The record an open acts on. Appends after a clean state write nothing to the state file
    /// ([`mark_dirty_for_append`](Self::mark_dirty_for_append)): they only grow the log past
    /// the state's synced prefix. So a clean record whose prefix no longer describes the files
    /// (a segment after its own, or its segment longer, or index entries past its count) counts
    /// as dirty from that prefix, as the state file would have said before. Returns the last
    /// segment's files when it opened them (a clean record with a prefix).
    async fn written_since_clean(
        files: &Rc<SegmentFileMaker<S>>,
        bases: &[i64],
        record: StateRecord,
    ) -> io::Result<(StateRecord, Option<SegmentFiles<S::File>>)> {
        let (DiskState::Clean, Some(prefix), Some(&last)) = (record.state, record.synced, bases.last())
        else {
            return Ok((record, None));
        };
        // Written by this version since: segments that rolled were synced in the background
        // (`rolled.rs`), whatever the record's format promised of earlier ones.
        let dirty = StateRecord {
            state: DiskState::Dirty,
            no_producer_state: false,
            rolled_synced: false,
            ..record
        };
        if last != prefix.base_offset {
            return Ok((dirty, None));
        }
        let opened = files.open(last).await?;
        let entries_len = |count: u32, len: usize| u64::from(count) * len as u64;
        let described = opened.log.len() == prefix.log_len
            && opened.index.len() == entries_len(prefix.offset_entries, IndexEntry::LEN)
            && opened.time_index.len() == entries_len(prefix.time_entries, timeindex::TimeEntry::LEN);
        Ok((if described { record } else { dirty }, Some(opened)))
    }

    /// Opens the segment at `base`, verifying its batches (`suspect`) from the record's synced
    /// prefix when it has one for it; returns it and the bytes cut from its end. Only the
    /// active segment is never compacted, and neither is one recovery verifies (`rolled.rs`).
    async fn open_segment(
        files: SegmentFiles<S::File>,
        dir: &Path,
        (base, interval): (i64, u32),
        record: StateRecord,
        (suspect, last): (bool, bool),
    ) -> io::Result<(Segment<S::File>, u64)> {
        let (verify, gaps) = match (suspect, last) {
            (false, false) => (Verify::HeadersOnly, OffsetGaps::Allowed),
            (false, true) => (Verify::HeadersOnly, OffsetGaps::Refused),
            (true, _) => match record.synced.filter(|p| p.base_offset == base) {
                Some(synced) => {
                    return recovery::open_active_after(files, dir, (base, interval), synced).await
                }
                None => (Verify::Checksums, OffsetGaps::Refused),
            },
        };
        recovery::open_segment(files, dir, base, interval, verify, gaps).await
    }
}
