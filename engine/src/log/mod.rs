//! The log of one partition: a directory of segments (docs/ARCHITECTURE.md invariant 4).
//!
//! `<dir>/<20-digit base offset>.log|.index|.timeindex` per segment (and `.txnindex` for one
//! that holds an ABORT marker, see `txn_index.rs`), plus
//! `log-start-offset` (see `retention.rs`) and `.laminar-log-state` (see `disk_state.rs`).
//! Compaction's temporary files (`*.cleaned`, `*.log.swap`) are described in `compaction.rs`.
//!
//! The state file says whether the files may hold anything a crash could have torn: when
//! clean, an open trusts the indexes and reads no more than the batch headers after the last
//! index entry (decision 0004). It says clean while the log is only read, and is overwritten
//! (dirty, fdatasync'd) before the first write of any kind: an append, a truncation, retention
//! or DeleteRecords deleting segments, a compaction rewriting one. It says clean again once
//! everything is synced: at a close, or at a checkpoint ([`Log::checkpoint`]) when the partition
//! went idle. So a crash sends to recovery only the logs written since their last checkpoint;
//! and closing a log nobody wrote closes its files and writes nothing.

pub mod batch;
pub mod checksum;
mod clean_state;
mod compaction;
mod config;
pub mod control;
pub mod disk_state;
mod error;
mod headers;
mod idle;
pub mod index;
mod open;
pub mod records;
mod recovery;
pub mod recycle;
mod retention;
mod rolled;
mod scan;
pub mod segment;
mod send;
mod staged;
pub mod timeindex;
pub mod txn_index;

use crate::local_sync::LocalLock;
pub use batch::{BatchError, BatchErrorKind, BatchHeader, Compression, TimestampType};
use clean_state::CleanState;
pub use compaction::CompactionOutcome;
pub use config::LogConfig;
use disk_state::{DiskState, StateRecord, SyncedPrefix};
pub use error::LogError;
pub use retention::RetentionOutcome;
pub use send::RecordBytes;

use crate::io::{Storage, StorageFile};

/// What the process does when a log fails (see [`set_failure_hook`]).
pub type FailureHook = fn(&std::path::Path, &io::Error);

static FAILURE_HOOK: std::sync::OnceLock<FailureHook> = std::sync::OnceLock::new();

/// Sets, once per process, what happens when a log fails, or first finds its disk full: the
/// log itself only refuses (every later operation, or the writes until there is space), and
/// knows nothing of what its owner should do about its disk (a broker in a cluster stops, so
/// that its replicas' leaderships move). Returns false if a hook was set already.
pub fn set_failure_hook(hook: FailureHook) -> bool {
    FAILURE_HOOK.set(hook).is_ok()
}
use batch::BatchIter;
use bytes::Bytes;
use laminar_model::{LeaderEpoch, Offset};
use records::check_keyed;
use segment::{Segment, SegmentFileMaker};
use staged::StagedAppend;
use std::cell::{Cell, RefCell};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// What an append did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: Offset,
    pub last_offset: Offset,
    /// The broker's timestamp for LogAppendTime topics, -1 for CreateTime.
    pub log_append_time_ms: i64,
    pub log_start_offset: Offset,
    pub record_count: u32,
    pub bytes: u32,
}

struct LogState<F> {
    config: LogConfig,
    /// Sorted by base offset; the last one is the active segment. Never empty.
    segments: Vec<Rc<Segment<F>>>,
    log_start_offset: i64,
    log_end_offset: i64,
    leader_epoch: LeaderEpoch,
}

/// One partition's segmented log. Owned by one shard; not Send. Writers (append, roll,
/// retention, truncation, close) are serialized by an async mutex; reads run concurrently
/// on a snapshot of the segment list and see only fully written batches.
pub struct Log<S: Storage> {
    storage: Rc<S>,
    /// Opens and makes the segments' files (index files at their first entry).
    files: Rc<SegmentFileMaker<S>>,
    dir: PathBuf,
    state: RefCell<LogState<S::File>>,
    writer: LocalLock,
    failure: RefCell<Option<String>>,
    /// The last write was refused for lack of space or descriptors (so that the change is
    /// logged once each way). Independent of the disk state: cleared by the next write that
    /// succeeds.
    exhausted: Cell<bool>,
    /// What the state file says and whether the log was written since; changed only through
    /// [`transition`](Self::transition), which checks the change.
    clean_state: Cell<CleanState>,
    /// The state file said at the open: clean, and no producer state then (`disk_state.rs`).
    opened_without_producer_state: bool,
    /// What of the active segment the last clean state had synced, recorded with the dirty
    /// state so that recovery starts after it (`disk_state.rs`); `None` when unknown.
    synced_prefix: Cell<Option<SyncedPrefix>>,
    /// The segment that rolled, until it is synced (`rolled.rs`); at most one.
    rolled: RefCell<Option<Rc<Segment<S::File>>>>,
    /// Whether a caller was told to sync `rolled` in the background (so that one caller is,
    /// once per roll).
    rolled_sync_claimed: Cell<bool>,
    /// Callers syncing `rolled` take turns, so that the second finds it done.
    rolled_sync: LocalLock,
    /// Counts truncations, which rewrite what a synced prefix taken before them described.
    truncations: Cell<u64>,
    /// The directory was removed ([`Log::delete`]): a background sync of the segment that
    /// rolled, ending after it, records nothing.
    deleted: Cell<bool>,
    /// A new log whose directory (its files' entries) and whose entry in the log directory are
    /// not yet covered by fsyncs: its first durable point ([`Log::sync`], or the first state
    /// file of a checkpoint or close) does both, the log directory's shared with the shard's
    /// other new logs. Until then a power cut may take the new log whole, which breaks no
    /// promise: nothing in it was durable (decision 0023, partition files made at first write).
    dirs_unsynced: Cell<bool>,
    /// Which segments have an aborted-transaction index (`txn_index.rs`).
    txn_indexes: RefCell<txn_index::TxnIndexes>,
}

impl<S: Storage> Log<S> {
    /// Whether nothing was written since everything was last synced (the disk state is clean).
    pub fn is_clean(&self) -> bool {
        self.clean_state.get().is_clean()
    }

    /// Whether the open found the log clean at a point where its owner had no producer state
    /// (it checkpointed so: [`checkpoint`](Self::checkpoint)). Says nothing of later writes.
    pub fn opened_without_producer_state(&self) -> bool {
        self.opened_without_producer_state
    }

    /// Before an append (writer lock held): from now on a crash must be recovered. When the
    /// state file says clean with a synced prefix, the append itself says so, as it grows the
    /// log past that prefix, which the next open checks (`written_since_clean`): no write and
    /// no fdatasync of the state file on the first append after each checkpoint (decision
    /// 0022, open on first use and the log state file). Otherwise as [`mark_dirty`](Self::mark_dirty).
    async fn mark_dirty_for_append(&self) -> Result<(), LogError> {
        match self.clean_state.get() {
            CleanState::Clean => self.transition(CleanState::AppendedSinceClean),
            CleanState::AppendedSinceClean => {}
            CleanState::NoFile | CleanState::Dirty | CleanState::CleanWithoutPrefix => {
                return self.mark_dirty().await
            }
        }
        Ok(())
    }

    /// Makes the disk state dirty, durably, unless it says so already: from now on a crash
    /// must be recovered. Every writer but appends calls it, holding the writer lock, before
    /// its first write: a removal, a compaction or a new start may leave the active segment
    /// as long as the clean state's prefix says.
    async fn mark_dirty(&self) -> Result<(), LogError> {
        if matches!(self.clean_state.get(), CleanState::NoFile | CleanState::Dirty) {
            return Ok(());
        }
        let record = StateRecord::new(DiskState::Dirty, self.synced_prefix.get());
        let marked = self.write_state(record).await;
        marked.map_err(|e| self.fail(e))
    }

    /// Writes the clean state (creating the state file the first time), saying whether the
    /// owner has producer state. Everything must be synced before: the active segment
    /// (`sync_all`) and the one that rolled (`sync_rolled`).
    async fn mark_clean(&self, no_producer_state: bool) -> io::Result<()> {
        let synced = self.active().synced_prefix();
        let record = if no_producer_state {
            StateRecord::clean_without_producer_state(synced)
        } else {
            StateRecord::new(DiskState::Clean, Some(synced))
        };
        self.write_state(record).await?;
        self.synced_prefix.set(Some(synced));
        Ok(())
    }

    /// Before a write below the active segment's synced prefix (a truncation): the state on
    /// disk no longer records one, so recovery verifies the whole active segment.
    async fn forget_synced_prefix(&self) -> Result<(), LogError> {
        // Written even when this log knows of no prefix: one opened after a crash still has
        // the old one on disk, which must not outlive the bytes it describes (it also says
        // that every segment before it is synced, `rolled.rs`).
        self.synced_prefix.set(None);
        if !matches!(
            self.clean_state.get(),
            CleanState::Dirty | CleanState::AppendedSinceClean
        ) {
            // A clean log records none when it turns dirty (`mark_dirty`); without a state
            // file there is none on disk.
            return Ok(());
        }
        let written = self.write_state(StateRecord::DIRTY).await;
        written.map_err(|e| self.fail(e))
    }

    /// For a log written without pause (never idle long enough for a checkpoint): once the
    /// active segment holds `step` bytes past its synced prefix, syncs it and its indexes and
    /// records the new prefix with the dirty state, so that recovery after a crash verifies at
    /// most about `step` bytes of it. Returns whether it did.
    ///
    /// The fdatasync of the segment's `.log`, the long part (all of `step` may be unwritten),
    /// runs without the writer lock, so that appends go on meanwhile; the prefix is what the
    /// segment held before it, and is recorded only if no truncation or roll came in between.
    pub async fn advance_synced_prefix(&self, step: u64) -> Result<bool, LogError> {
        let (active, prefix, truncations) = {
            let _writer = self.writer.lock().await;
            self.check_ok()?;
            let active = self.active();
            let from = match self.synced_prefix.get() {
                Some(prefix) if prefix.base_offset == active.base_offset => prefix.log_len,
                _ => 0,
            };
            if self.is_clean() || active.meta().size < from + step {
                return Ok(false);
            }
            active.write_indexes().await.map_err(|e| self.fail(e))?;
            (active.clone(), active.synced_prefix(), self.truncations.get())
        };
        self.sync_rolled().await?;
        active.log.fdatasync().await.map_err(|e| self.fail(e))?;
        let _writer = self.writer.lock().await;
        self.check_ok()?;
        let unchanged = truncations == self.truncations.get() && Rc::ptr_eq(&active, &self.active());
        if self.is_clean() || !unchanged {
            return Ok(false);
        }
        let recorded = async {
            active.sync_indexes().await?;
            self.write_state(StateRecord::new(DiskState::Dirty, Some(prefix)))
                .await
        }
        .await;
        recorded.map_err(|e| self.fail(e))?;
        self.synced_prefix.set(Some(prefix));
        Ok(true)
    }

    /// Syncs the active segment and its indexes and marks the disk state clean, unless it is:
    /// a crash from now until the next write needs no recovery. `no_producer_state`: the
    /// owner has none at the log end, which the next open learns (see
    /// [`opened_without_producer_state`](Self::opened_without_producer_state)). Returns
    /// whether it wrote.
    pub async fn checkpoint(&self, no_producer_state: bool) -> Result<bool, LogError> {
        let _writer = self.writer.lock().await;
        self.check_ok()?;
        if self.is_clean() {
            return Ok(false);
        }
        self.sync_rolled().await?;
        let synced = async {
            self.active().sync_all().await?;
            self.mark_clean(no_producer_state).await
        }
        .await;
        synced.map_err(|e| self.fail(e))?;
        // A checkpoint comes after a while without appends: the next use of this log is most
        // likely a read of its `.log`, which its index files' descriptors would have pushed out
        // of the budget (decision 0021, file cache and descriptor budget).
        self.active().close_indexes_until_used().await;
        Ok(true)
    }

    async fn new_segment(files: &Rc<SegmentFileMaker<S>>, base: i64) -> io::Result<Segment<S::File>> {
        let files = files.create(base).await?;
        let segment = Segment::new(
            base,
            files,
            Vec::new(),
            Vec::new(),
            Segment::<S::File>::empty_meta(base),
        );
        segment.assume_new_indexes_synced();
        Ok(segment)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> LogConfig {
        self.state.borrow().config.clone()
    }

    pub fn set_config(&self, config: LogConfig) {
        assert!(config.segment_bytes <= i32::MAX as u64, "index positions are u32");
        self.state.borrow_mut().config = config;
    }

    /// The leader epoch stamped into every appended batch (KIP-101).
    pub fn set_leader_epoch(&self, epoch: LeaderEpoch) {
        self.state.borrow_mut().leader_epoch = epoch;
    }

    /// The leader epoch the next append stamps.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.state.borrow().leader_epoch
    }

    pub fn log_start_offset(&self) -> i64 {
        self.state.borrow().log_start_offset
    }

    pub fn log_end_offset(&self) -> i64 {
        self.state.borrow().log_end_offset
    }

    pub fn size_bytes(&self) -> u64 {
        self.state.borrow().segments.iter().map(|s| s.meta().size).sum()
    }

    pub fn segment_count(&self) -> usize {
        self.state.borrow().segments.len()
    }

    fn segments(&self) -> Vec<Rc<Segment<S::File>>> {
        self.state.borrow().segments.clone()
    }

    /// One pass of a prefetch over many partitions' logs (`ShardPartitions::prefetch`): what an
    /// append or a read touches first, a level per pass, each level reached through the one
    /// before, which the previous pass brought into the cache. Level 0 is the active segment's
    /// place in the segment list, 1 the segment, 2 the object of its `.log` file, and the next
    /// ones that file's own (`StorageFile::prefetch_append` at the log end).
    pub fn prefetch(&self, level: u8) {
        // A hint: a log borrowed for a change right now is skipped, never waited for.
        let Ok(state) = self.state.try_borrow() else {
            return;
        };
        let Some(active) = state.segments.last() else {
            unreachable!("a log has an active segment")
        };
        match level {
            0 => laminar_sys::memory::prefetch_value(active),
            1 => laminar_sys::memory::prefetch_rc(active),
            2 => laminar_sys::memory::prefetch_rc(&active.log),
            _ => active.log.prefetch_append(level - 3, active.meta().size),
        }
    }

    fn active(&self) -> Rc<Segment<S::File>> {
        self.state.borrow().segments.last().expect("never empty").clone()
    }

    /// Fails fast once an operating error has been seen (never retried, never hidden).
    pub fn check_ok(&self) -> Result<(), LogError> {
        match &*self.failure.borrow() {
            None => Ok(()),
            Some(reason) => Err(LogError::Failed {
                reason: reason.clone(),
            }),
        }
    }

    /// Records an operating error: from now on every operation fails. The first one of this
    /// log also goes to the process's [failure hook](set_failure_hook), if one was set.
    pub fn fail(&self, error: io::Error) -> LogError {
        tracing::error!(dir = %self.dir.display(), %error, "log failed");
        let first = self.failure.borrow().is_none();
        self.failure.borrow_mut().get_or_insert_with(|| error.to_string());
        if let (true, Some(hook)) = (first, FAILURE_HOOK.get()) {
            hook(&self.dir, &error);
        }
        LogError::Io(error)
    }

    /// For a write whose leftovers are already undone (or that changed nothing): lack of space,
    /// or of descriptors, refuses this one operation and leaves the log usable, so that it
    /// resumes by itself once they return; any other error fails the log.
    pub fn refuse_or_fail(&self, error: io::Error) -> LogError {
        let lacking = if crate::io::is_out_of_space(&error) {
            "space in the log dir"
        } else if crate::io::is_out_of_descriptors(&error) {
            "file descriptors"
        } else {
            return self.fail(error);
        };
        if !self.exhausted.replace(true) {
            tracing::warn!(dir = %self.dir.display(), %error, "no {lacking} left: writes are refused until there is");
            // A full disk is the owner's to judge too: a broker in a cluster stops, so that
            // replicas with space lead instead (`set_failure_hook`).
            if let (true, Some(hook)) = (crate::io::is_out_of_space(&error), FAILURE_HOOK.get()) {
                hook(&self.dir, &error);
            }
        }
        LogError::Exhausted(error)
    }

    fn resumed(&self) {
        if self.exhausted.replace(false) {
            tracing::info!(dir = %self.dir.display(), "writes resume");
        }
    }

    /// Validates every batch, then appends all of them (or none) at the log end.
    pub async fn append(&self, records: Bytes, now_ms: i64) -> Result<AppendInfo, LogError> {
        let _writer = self.writer.lock().await;
        self.check_ok()?;
        let config = self.config();
        let max = config.max_message_bytes as usize;
        let mut headers = batch::BatchHeaders::new();
        for item in BatchIter::new(&records, usize::MAX) {
            let (range, header) = item?;
            if config.cleanup_policy_compact {
                check_keyed(&records[range], &header)?;
            }
            if header.total_len() > max {
                return Err(LogError::MessageTooLarge {
                    size: header.total_len(),
                    max,
                });
            }
            headers.push(header);
        }
        if headers.is_empty() {
            return Err(BatchError::NeedMore {
                needed: batch::HEADER_LEN,
                available: 0,
            }
            .into());
        }
        let span: i64 = headers.iter().map(|h| h.last_offset_delta as i64 + 1).sum();
        self.mark_dirty_for_append().await?;
        self.roll_if_needed(&config, records.len() as u64, span, now_ms)
            .await?;
        let (base_offset, epoch) = {
            let state = self.state.borrow();
            (state.log_end_offset, state.leader_epoch.get())
        };
        let append_time = config.timestamp_type == TimestampType::LogAppendTime;
        let staged = if append_time {
            StagedAppend::rewritten(&records, &mut headers, base_offset, epoch, now_ms)
        } else {
            StagedAppend::prefixed(&records, &mut headers, base_offset, epoch)
        };
        let mut info = self
            .write_at_end(&staged.parts(&records), &headers, &config, now_ms)
            .await?;
        if append_time {
            info.log_append_time_ms = now_ms;
        }
        Ok(info)
    }

    /// Writes validated batches (`parts`, described by `headers`, whose offsets follow the log
    /// end) to the active segment and moves the log end past them. Caller holds the writer
    /// lock, made the state dirty and rolled if needed.
    async fn write_at_end(
        &self,
        parts: &[&[u8]],
        headers: &[BatchHeader],
        config: &LogConfig,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let (Some(first), Some(last)) = (headers.first(), headers.last()) else {
            unreachable!("an append writes at least one batch");
        };
        assert_eq!(
            first.base_offset,
            self.log_end_offset(),
            "batches follow the log end"
        );
        let bytes = parts.iter().map(|p| p.len()).sum::<usize>() as u32;
        let active = self.active();
        let appended = active
            .append(parts, headers, config.index_interval_bytes, now_ms)
            .await;
        appended.map_err(|e| self.refuse_or_fail(e))?;
        self.resumed();
        let mut state = self.state.borrow_mut();
        state.log_end_offset = last.next_offset();
        Ok(AppendInfo {
            base_offset: Offset::new(first.base_offset),
            last_offset: Offset::new(last.last_offset()),
            log_append_time_ms: -1,
            log_start_offset: Offset::new(state.log_start_offset),
            record_count: headers.iter().map(|h| h.record_count as u32).sum(),
            bytes,
        })
    }

    /// Appends a follower's copy of its leader's batches unchanged: same offsets, leader
    /// epochs, timestamps and bytes. `headers` describe `records` and were checked by
    /// [`batch::validate_replica_batches`] against this log's end, which nothing moved since
    /// (the partition's append lock); the first base offset is checked again here.
    pub async fn append_as_follower(
        &self,
        records: &Bytes,
        headers: &[BatchHeader],
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let _writer = self.writer.lock().await;
        self.check_ok()?;
        let log_end = self.log_end_offset();
        let (Some(first), Some(last)) = (headers.first(), headers.last()) else {
            return Err(BatchError::NeedMore {
                needed: batch::HEADER_LEN,
                available: 0,
            }
            .into());
        };
        if first.base_offset != log_end {
            return Err(LogError::UnexpectedOffset {
                expected: log_end,
                got: first.base_offset,
            });
        }
        let config = self.config();
        self.mark_dirty_for_append().await?;
        let span = last.next_offset() - log_end;
        self.roll_if_needed(&config, records.len() as u64, span, now_ms)
            .await?;
        self.write_at_end(&[&records[..]], headers, &config, now_ms).await
    }

    async fn roll_if_needed(
        &self,
        config: &LogConfig,
        bytes: u64,
        span: i64,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let active = self.active();
        let meta = active.meta();
        let full = meta.size + bytes > config.segment_bytes;
        let old = meta
            .rolling_timestamp
            .is_some_and(|t| now_ms - t > config.segment_ms);
        let offsets_overflow = meta.next_offset + span - active.base_offset > u32::MAX as i64;
        if meta.size > 0 && (full || old || offsets_overflow) {
            self.roll().await?;
        }
        Ok(())
    }

    /// Starts a new active segment at the log end, leaving the old one to be fsynced in the
    /// background (`rolled.rs`). Caller holds the writer lock. Without space
    /// for the old segment's last index entries, or space or descriptors for the new segment's
    /// files, the roll is refused and the old segment stays active (files of the new one that
    /// were created are reused by the next try, or are an empty segment at the log end after a
    /// restart).
    async fn roll(&self) -> Result<(), LogError> {
        self.sync_rolled().await?;
        let active = self.active();
        active.write_indexes().await.map_err(|e| self.refuse_or_fail(e))?;
        let base = self.log_end_offset();
        assert_eq!(
            active.meta().next_offset,
            base,
            "the active segment ends at the log end"
        );
        let segment = Self::new_segment(&self.files, base).await;
        let segment = segment.map_err(|e| self.refuse_or_fail(e))?;
        self.storage.sync_dir(&self.dir).await.map_err(|e| self.fail(e))?;
        let mut state = self.state.borrow_mut();
        assert_eq!(
            segment.base_offset, state.log_end_offset,
            "a new segment starts at the log end"
        );
        state.segments.push(Rc::new(segment));
        drop(state);
        self.leave_rolled(active);
        Ok(())
    }

    /// Whole batches from the one holding `offset`, read into memory; empty at the log end.
    pub async fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<Vec<Bytes>, LogError> {
        match self.locate(offset).await? {
            Some((segment, position, _)) => {
                Ok(segment.read_batches(position, max_bytes, min_one_batch).await?)
            }
            None => Ok(Vec::new()),
        }
    }

    /// As [`read`](Self::read), but leaves the batches in the segment file when they are in the
    /// page cache, for the caller to send without copying them (see `send.rs`).
    /// Nothing at or past `end` is read: a batch holding `end` is left out whole (a consumer's
    /// read stops at the high watermark, which a replicated log's batches end on).
    pub async fn read_for_send(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        end: i64,
    ) -> Result<RecordBytes, LogError> {
        self.check_ok()?;
        self.check_offset(offset)?;
        // Nothing to send, so no batch to look for: the read was granted nothing (a fetch whose
        // budget went to partitions before it), or starts at the end (a caught-up consumer).
        let granted_nothing = max_bytes == 0 && !min_one_batch;
        if granted_nothing || offset >= end.min(self.log_end_offset()) {
            return Ok(RecordBytes::default());
        }
        // Boxed: finding and reading the batches holds kilobytes of state, which a fetch of
        // thousands of partitions would otherwise move into every partition's future.
        Box::pin(self.located_for_send(offset, max_bytes, min_one_batch, end)).await
    }

    async fn located_for_send(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        end: i64,
    ) -> Result<RecordBytes, LogError> {
        let Some((segment, position, first)) = self.locate(offset).await? else {
            return Ok(RecordBytes::default());
        };
        if first.base_offset >= end {
            return Ok(RecordBytes::default());
        }
        let mut max_bytes = max_bytes;
        let mut min_one_batch = min_one_batch;
        if let Some((end_position, _)) = segment.find_batch(end).await? {
            let below_end = usize::try_from(end_position - position).unwrap_or(usize::MAX);
            if below_end == 0 {
                return Ok(RecordBytes::default());
            }
            max_bytes = max_bytes.min(below_end);
            min_one_batch &= first.total_len() <= below_end;
        }
        Ok(segment
            .records_for_send(position, &first, max_bytes, min_one_batch)
            .await?)
    }

    /// The segment, position and header of the first batch at or after `offset`.
    async fn locate(
        &self,
        offset: i64,
    ) -> Result<Option<(Rc<Segment<S::File>>, u64, BatchHeader)>, LogError> {
        self.check_ok()?;
        self.check_offset(offset)?;
        let segments = self.state.borrow().segments.clone();
        let first = segments
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1);
        for segment in &segments[first..] {
            // Compaction leaves gaps, even whole segments: the next batch after them answers.
            let offset = offset.max(segment.base_offset);
            if let Some((position, header)) = segment.find_batch(offset).await? {
                segment.note_read_found(offset, position, header);
                return Ok(Some((segment.clone(), position, header)));
            }
        }
        Ok(None)
    }

    /// Whether `offset` may be read: from the log start to the log end, both included.
    fn check_offset(&self, offset: i64) -> Result<(), LogError> {
        let state = self.state.borrow();
        let (log_start, log_end) = (state.log_start_offset, state.log_end_offset);
        if offset < log_start || offset > log_end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start,
                log_end,
            });
        }
        Ok(())
    }

    /// ListOffsets by timestamp: the first batch whose max timestamp is >= `ts`, as
    /// (offset, that batch's max timestamp).
    pub async fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(i64, i64)>, LogError> {
        self.check_ok()?;
        let log_start = self.log_start_offset();
        for segment in self.segments() {
            if segment.meta().next_offset <= log_start {
                continue;
            }
            if let Some((_, h)) = segment.find_timestamp(ts).await? {
                if h.next_offset() > log_start {
                    return Ok(Some((h.base_offset.max(log_start), h.max_timestamp)));
                }
            }
        }
        Ok(None)
    }

    /// Waits until every batch appended so far is in the kernel's hands (see
    /// [`StorageFile::wait_written`]): the active segment's, and the one that rolled if it
    /// waits for its sync (whose sync writes everything first).
    pub async fn wait_written(&self) -> Result<(), LogError> {
        self.check_ok()?;
        self.sync_rolled().await?;
        self.active().log.wait_written().await.map_err(|e| self.fail(e))
    }

    /// fdatasyncs the active segment, and the one that rolled if it waits for its sync;
    /// returns the log end offset they cover.
    pub async fn sync(&self) -> Result<i64, LogError> {
        self.check_ok()?;
        let (active, covered) = (self.active(), self.log_end_offset());
        self.sync_rolled().await?;
        active.log.fdatasync().await.map_err(|e| self.fail(e))?;
        if self.dirs_unsynced.get() {
            // After the fdatasync: on a journaled file system it committed the creations too,
            // which leaves these fsyncs little to do.
            let dirs = self.sync_dirs().await;
            dirs.map_err(|e| self.refuse_or_fail(e))?;
        }
        Ok(covered)
    }

    /// fsyncs the log's directory and, at a new log's first durable point, the directory
    /// holding it, so that a new log survives a power cut. Shard storage shares each fsync
    /// among the logs that ask at once.
    async fn sync_dirs(&self) -> io::Result<()> {
        self.storage.sync_dir(&self.dir).await?;
        if !self.dirs_unsynced.get() {
            return Ok(());
        }
        if let Some(parent) = self.dir.parent() {
            self.storage.sync_dir(parent).await?;
        }
        self.dirs_unsynced.set(false);
        Ok(())
    }

    /// Removes every batch whose last offset is >= `offset` (for replication): a batch that
    /// holds `offset` goes whole, so the log then ends at that batch's base offset.
    pub async fn truncate_to(&self, offset: i64) -> Result<(), LogError> {
        let _writer = self.writer.lock().await;
        self.check_ok()?;
        let (log_start, log_end) = (self.log_start_offset(), self.log_end_offset());
        if offset >= log_end {
            return Ok(());
        }
        if offset < log_start {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start,
                log_end,
            });
        }
        self.sync_rolled().await?;
        self.forget_synced_prefix().await?;
        self.mark_dirty().await?;
        self.truncations.set(self.truncations.get() + 1);
        let result = self.truncate_locked(offset).await;
        result.map_err(|e| self.fail(e))
    }

    async fn truncate_locked(&self, offset: i64) -> io::Result<()> {
        let removed = {
            let mut state = self.state.borrow_mut();
            let keep = state.segments.partition_point(|s| s.base_offset <= offset).max(1);
            state.segments.split_off(keep)
        };
        for segment in &removed {
            segment.remove_files(&*self.storage, &self.dir).await?;
        }
        let active = self.active();
        let new_end = match active.find_batch(offset).await? {
            Some((position, h)) => {
                active.truncate_at(position, h.base_offset).await?;
                recovery::rebuild(&active, self.config().index_interval_bytes).await?;
                h.base_offset
            }
            None => active.meta().next_offset,
        };
        active.sync_all().await?;
        self.storage.sync_dir(&self.dir).await?;
        let mut state = self.state.borrow_mut();
        state.log_end_offset = new_end;
        state.log_start_offset = state.log_start_offset.min(new_end);
        Ok(())
    }

    /// fdatasyncs everything, closes the files and marks the disk state clean. A log not
    /// written since it was last clean only closes its files.
    pub async fn close(&self) -> Result<(), LogError> {
        let _writer = self.writer.lock().await;
        self.check_ok()?;
        let dirty = !self.is_clean();
        self.sync_rolled().await?;
        let result = async {
            if dirty {
                self.active().sync_all().await?;
            }
            for segment in self.segments() {
                segment.close().await?;
            }
            self.files.remove_spare().await?;
            if dirty {
                // Said of nothing here: the owner checkpoints first when it knows.
                self.mark_clean(false).await?;
            }
            Ok(())
        }
        .await;
        result.map_err(|e| self.fail(e))
    }

    /// Removes the whole directory, durably (`io::remove_dir_durably`).
    pub async fn delete(&self) -> Result<(), LogError> {
        let _writer = self.writer.lock().await;
        // A background sync of the rolled segment in flight ends first, on open files, and
        // none records anything after (`rolled.rs`).
        let _no_rolled_sync = self.rolled_sync.lock().await;
        self.rolled.borrow_mut().take();
        self.deleted.set(true);
        for segment in self.segments() {
            segment.close().await.ok();
        }
        crate::io::remove_dir_durably(&*self.storage, &self.dir).await?;
        Ok(())
    }
}
