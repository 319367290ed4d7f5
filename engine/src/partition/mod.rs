//! One partition replica: its log, idempotent-producer state, group commit, offsets and
//! append notification. This is the API the protocol layer codes against.

mod checkpoint_file;
pub mod high_watermarks;
mod idle_work;
pub mod leader_epochs;
mod producer_snapshot;
pub mod producer_state;
pub mod topic_id_file;
pub mod transactions;

use crate::io::{DirSync, ShardStorage, Storage};
use crate::local_sync::{LocalEvent, LocalListener, LocalLock};
pub use crate::log::RecordBytes;
use crate::log::{BatchHeader, Log};
use bytes::Bytes;
use laminar_model::{LeaderEpoch, Offset};
use producer_state::{Admission, BatchMetadata, ProducerStateTable};
use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;

use crate::log::batch::{self, BatchHeaders};
use crate::log::control::{parse_marker, Marker};
use crate::log::txn_index::AbortedTxnEntry;
pub use crate::log::{AppendInfo, CompactionOutcome, LogConfig, LogError, RetentionOutcome, TimestampType};
pub use idle_work::IdleList;
use idle_work::IdleWork;
use leader_epochs::{EpochEntry, LeaderEpochs};
pub use transactions::{AbortedTxn, ProducerDescription, TxnResult};

/// What a read returns: `data` is whole batches in offset order, in memory (`Vec<Bytes>`) or,
/// for [`Partition::read_for_send`], possibly left in the segment file ([`RecordBytes`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadResult<D = Vec<Bytes>> {
    pub data: D,
    pub high_watermark: Offset,
    pub last_stable_offset: Offset,
    pub log_start_offset: Offset,
    pub log_end_offset: Offset,
    /// For a read to the last stable offset ([`ReadEnd::LastStable`]): the aborted
    /// transactions whose records may be in `data` (see
    /// [`aborted_transactions`](Partition::aborted_transactions)); `None` for other reads.
    pub aborted_transactions: Option<Vec<AbortedTxn>>,
}

impl<D: Default> ReadResult<D> {
    /// What a read from `offset` of a partition never written answers (it has no files, and
    /// a read does not create them): nothing at offset 0, out of range past it.
    pub fn of_unwritten(offset: Offset) -> Result<Self, LogError> {
        if offset != Offset::ZERO {
            return Err(LogError::OffsetOutOfRange {
                offset: offset.get(),
                log_start: 0,
                log_end: 0,
            });
        }
        Ok(ReadResult::default())
    }
}

/// How far a read may go: consumers see only committed batches (below the high watermark;
/// read_committed ones below the last stable offset), followers copy everything the leader has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadEnd {
    HighWatermark,
    /// read_committed consumers: below the last stable offset (no open transaction's records).
    LastStable,
    LogEnd,
}

/// One partition. Owned by one shard; not Send. Used as `Rc<Partition>`; concurrent appends
/// from several connections are serialized by `append_lock`, which makes checking the
/// producer state, appending and recording the batches one step.
pub struct Partition<S: Storage = ShardStorage> {
    log: Log<S>,
    storage: Rc<S>,
    producers: RefCell<ProducerStateTable>,
    append_lock: LocalLock,
    /// Every offset below this is fdatasync'd.
    durable_offset: Cell<Offset>,
    /// One fdatasync at a time; waiters queue here and usually find their offset covered.
    sync_lock: LocalLock,
    appended: LocalEvent,
    closed: Cell<bool>,
    /// Told how long each fdatasync took (metrics live in the layer above).
    sync_observer: RefCell<Option<SyncObserver>>,
    /// The `now_ms` of the last append (0: none since the open).
    last_append_ms: Cell<i64>,
    /// The leader epoch cache, as its file holds it (`leader_epochs.rs`); changed only under
    /// `append_lock` (appends, truncations) or the log's own writers (retention, through
    /// [`Partition::trim_epochs_to_log_start`]).
    epochs: RefCell<LeaderEpochs>,
    /// Whether the partition has a `leader-epoch-checkpoint` file. Without one the list is
    /// implicit (epoch 0 from the log start: see [`open_epochs`]), and it stays so until an
    /// epoch above 0 comes, so a partition that never changed leader (every single-node one)
    /// writes no file: no creation and no fsyncs on its first append.
    epochs_file: Cell<bool>,
    /// The high watermark when a replication layer sets it
    /// ([`Partition::set_high_watermark`]); `None` in single-node mode, where every appended
    /// batch is committed and the high watermark is the log end offset.
    replicated_hw: Cell<Option<Offset>>,
    /// Its place in the shard's list of partitions the idle pass visits (`idle_work.rs`).
    idle: IdleWork<S>,
    /// The topic id its `partition.metadata` should name but does not yet; written at the next
    /// checkpoint, off the first write's path (`topic_id_file.rs`).
    topic_id_unrecorded: Cell<Option<[u8; 16]>>,
}

/// A checkpoint or close writes no producer snapshot when there is no producer state and the
/// log is one segment shorter than this: an open after a crash replays that little from the
/// log (after a clean close it replays nothing: the clean state says the table was empty).
pub const SNAPSHOT_SKIP_BYTES: u64 = 1 << 20;

/// How long a written partition takes no append before the shard's maintenance checkpoints it.
pub const CHECKPOINT_IDLE_MS: i64 = 10_000;

/// A partition written without pause has its synced prefix moved each time its active segment
/// grew this much past it: after a crash, at most about this much of it is verified.
pub const SYNCED_PREFIX_STEP_BYTES: u64 = 64 << 20;

/// Receives the duration of every fdatasync a partition makes. Owned by one shard.
pub type SyncObserver = Rc<dyn Fn(std::time::Duration)>;

impl<S: Storage> Partition<S> {
    pub async fn open(storage: Rc<S>, dir: PathBuf, config: LogConfig) -> Result<Self, LogError> {
        let (log, names) = Log::open_listing(storage.clone(), dir, config).await?;
        let producers = if log.opened_without_producer_state() {
            ProducerStateTable::default()
        } else {
            producer_snapshot::rebuild(&*storage, &log, wall_clock_ms()).await?
        };
        let listed_epochs = names.iter().any(|n| n == leader_epochs::LEADER_EPOCH_FILE);
        let (epochs, epochs_file) = open_epochs(&*storage, &log, listed_epochs).await?;
        // What recovery kept is what was on disk: durable by definition.
        let durable = Offset::new(log.log_end_offset());
        Ok(Partition {
            epochs: RefCell::new(epochs),
            epochs_file: Cell::new(epochs_file),
            replicated_hw: Cell::new(None),
            log,
            storage,
            producers: RefCell::new(producers),
            append_lock: LocalLock::new(),
            durable_offset: Cell::new(durable),
            sync_lock: LocalLock::new(),
            appended: LocalEvent::new(),
            closed: Cell::new(false),
            sync_observer: RefCell::new(None),
            last_append_ms: Cell::new(0),
            idle: IdleWork::default(),
            topic_id_unrecorded: Cell::new(None),
        })
    }

    /// Has the next checkpoint (a close's included) write `topic_id` to `partition.metadata`.
    pub fn record_topic_id(&self, topic_id: [u8; 16]) {
        self.topic_id_unrecorded.set(Some(topic_id));
    }

    /// The partition's directory (for messages about it).
    pub fn dir(&self) -> &std::path::Path {
        self.log.dir()
    }

    /// Closed or deleted: nothing more may be done with it.
    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    fn check_open(&self) -> Result<(), LogError> {
        if self.closed.get() {
            return Err(LogError::Closed);
        }
        self.log.check_ok()
    }

    /// Levels of [`prefetch`](Self::prefetch), each reached through the one before.
    pub const PREFETCH_LEVELS: u8 = 6;

    /// One pass of a prefetch over many partitions (`ShardPartitions::prefetch`): level 0 is
    /// the partition itself, the next ones its log's (`Log::prefetch`).
    pub fn prefetch(self: &Rc<Self>, level: u8) {
        match level {
            0 => laminar_sys::memory::prefetch_rc(self),
            _ => self.log.prefetch(level - 1),
        }
    }

    /// Appends a produce request's batches for this partition, all or none. A retried batch of
    /// an idempotent producer is not written again: the answer carries its original offsets,
    /// with `record_count` and `bytes` 0 (nothing was appended).
    pub async fn append(&self, records: Bytes, now_ms: i64) -> Result<AppendInfo, LogError> {
        let _idle = self.noting_idle_work();
        self.check_open()?;
        let _append = self.append_lock.lock().await;
        let headers = producer_headers(&records);
        if let Some(duplicate) = self.admit_client(&records, &headers)? {
            return Ok(duplicate);
        }
        self.append_locked(records, headers, None, now_ms).await
    }

    /// Checks a client's batches against the producer state (see `producer_state.rs`):
    /// `Some` answers a retried batch; a refusal of bad bytes is reported as such.
    fn admit_client(&self, records: &Bytes, headers: &[BatchHeader]) -> Result<Option<AppendInfo>, LogError> {
        let client_rules = producer_state::check_client_batches(headers);
        let admission = match client_rules {
            Ok(()) if headers.iter().all(|h| h.producer_id < 0) => return Ok(None),
            Ok(()) => self.producers.borrow().check(headers),
            Err(refused) => Err(refused),
        };
        match admission {
            Ok(Admission::Append) => Ok(None),
            refusal => {
                batch::BatchIter::new(records, usize::MAX).try_for_each(|b| b.map(drop))?;
                match refusal? {
                    Admission::Duplicate(original) => Ok(Some(self.duplicate_info(&original))),
                    Admission::Append => unreachable!("matched above"),
                }
            }
        }
    }

    /// Appends checked batches as leader (append lock held), records them in the producer
    /// state, and indexes the transactions an ABORT `marker` ends (`marker`: what the one
    /// control batch of a marker append says).
    async fn append_locked(
        &self,
        records: Bytes,
        headers: BatchHeaders,
        marker: Option<Marker>,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let active_before = self.log.active_base_offset();
        // Recorded before the batches are written: a crash that loses them leaves an entry at
        // the log end, which the next open drops (see `leader_epochs.rs`).
        self.record_epoch(self.log.leader_epoch(), self.log_end_offset())
            .await?;
        let info = self.log.append(records, now_ms).await?;
        self.last_append_ms.set(now_ms);
        if self.log.active_base_offset() != active_before {
            // The log rolled before this append: the state so far covers exactly the batches
            // below the new segment (should a crash lose some of them, the open removes the
            // snapshot, then past the log end).
            self.snapshot_producers(info.base_offset).await?;
        }
        let mut next = info.base_offset.get();
        let mut placed = BatchHeaders::new();
        for mut header in headers {
            header.base_offset = next;
            next = header.next_offset();
            placed.push(header);
        }
        let contiguous = next == info.last_offset.next().get();
        assert!(contiguous, "the log assigned contiguous offsets");
        self.record_appended(placed.iter().map(|h| (h, marker)), now_ms)
            .await?;
        self.appended.notify_all();
        Ok(info)
    }

    /// Records appended batches (with what each marker says) in the producer state, and the
    /// transactions ABORT markers end in the aborted-transaction index.
    async fn record_appended<'h>(
        &self,
        batches: impl Iterator<Item = (&'h BatchHeader, Option<Marker>)>,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let mut aborted: smallvec::SmallVec<[AbortedTxnEntry; 1]> = smallvec::SmallVec::new();
        {
            let mut producers = self.producers.borrow_mut();
            for (header, marker) in batches {
                aborted.extend(producers.record(header, marker, now_ms));
            }
        }
        for entry in aborted {
            self.log.append_aborted_txn(entry).await?;
        }
        Ok(())
    }

    /// Appends a follower's copy of its leader's batches, unchanged (same offsets, leader
    /// epochs, timestamps and bytes): they must start at the log end and follow each other,
    /// and be whole and valid (see `batch::validate_replica_batches`). The producer state
    /// records them as recovery replays them (no sequence check: the leader made it), with
    /// their transaction markers, and the leader epoch cache takes each batch's partition
    /// leader epoch.
    pub async fn append_as_follower(&self, records: Bytes) -> Result<AppendInfo, LogError> {
        let _idle = self.noting_idle_work();
        self.check_open()?;
        let _append = self.append_lock.lock().await;
        let headers = batch::validate_replica_batches(&records, self.log.log_end_offset())?;
        let mut epochs = self.epochs.borrow().clone();
        let mut changed = false;
        for h in &headers {
            let epoch = LeaderEpoch::new(h.partition_leader_epoch);
            changed |= epochs.assign(epoch, Offset::new(h.base_offset))?;
        }
        if changed {
            self.save_epochs(epochs).await?;
        }
        let now_ms = wall_clock_ms();
        let active_before = self.log.active_base_offset();
        let info = self.log.append_as_follower(&records, &headers, now_ms).await?;
        self.last_append_ms.set(now_ms);
        if self.log.active_base_offset() != active_before {
            self.snapshot_producers(info.base_offset).await?;
        }
        let mut position = 0;
        let with_markers = headers.iter().map(|h| {
            let batch = &records[position..position + h.total_len()];
            position += h.total_len();
            (h, h.is_control().then(|| parse_marker(batch, h)).flatten())
        });
        self.record_appended(with_markers, now_ms).await?;
        self.appended.notify_all();
        Ok(info)
    }

    /// Records that `epoch` starts at `start_offset` in the leader epoch cache, writing its
    /// file when that changes it (once per new epoch).
    async fn record_epoch(&self, epoch: LeaderEpoch, start_offset: Offset) -> Result<(), LogError> {
        if self.epochs.borrow().is_latest(epoch) {
            // Every append but an epoch's first: nothing to record, and no copy of the list.
            return Ok(());
        }
        let mut epochs = self.epochs.borrow().clone();
        if epochs.assign(epoch, start_offset)? {
            self.save_epochs(epochs).await?;
        }
        Ok(())
    }

    /// Replaces the leader epoch cache and its file. Lack of space or descriptors refuses the
    /// operation that needed it (the old file stays whole); any other error fails the log.
    async fn save_epochs(&self, epochs: LeaderEpochs) -> Result<(), LogError> {
        if !self.epochs_file.get() && epochs.is_implicit() {
            // What an open without a file rebuilds (`open_epochs`): nothing to write.
            *self.epochs.borrow_mut() = epochs;
            return Ok(());
        }
        let written = leader_epochs::write(&*self.storage, self.log.dir(), &epochs).await;
        written.map_err(|e| self.log.refuse_or_fail(e))?;
        self.epochs_file.set(true);
        *self.epochs.borrow_mut() = epochs;
        Ok(())
    }

    /// The leader epoch cache entries, oldest first.
    pub fn leader_epochs(&self) -> Vec<EpochEntry> {
        self.epochs.borrow().entries().to_vec()
    }

    /// The leader epoch the next leader append stamps (see [`set_leader_epoch`](Self::set_leader_epoch)).
    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.log.leader_epoch()
    }

    /// OffsetForLeaderEpoch's answer for `epoch`: (the epoch found, its end offset), as Kafka
    /// computes it (`LeaderEpochs::end_offset_for`).
    pub fn end_offset_for(&self, epoch: LeaderEpoch) -> (LeaderEpoch, Offset) {
        self.epochs.borrow().end_offset_for(epoch, self.log_end_offset())
    }

    /// OffsetForLeaderEpoch as this partition's leader at `leader_epoch` answers it. Kafka's
    /// leader records its epoch at the log end when elected; Laminar records it at the epoch's
    /// first append, so until then the answer counts it as if recorded (without writing it).
    pub fn end_offset_for_leader(
        &self,
        epoch: LeaderEpoch,
        leader_epoch: LeaderEpoch,
    ) -> (LeaderEpoch, Offset) {
        let log_end = self.log_end_offset();
        let mut epochs = self.epochs.borrow().clone();
        // Refused only below the cache's latest epoch, which then already answers.
        let _ = epochs.assign(leader_epoch, log_end);
        epochs.end_offset_for(epoch, log_end)
    }

    /// After the log start moved (retention, DeleteRecords): the cache's first entry starts
    /// there too.
    async fn trim_epochs_to_log_start(&self) -> Result<(), LogError> {
        let mut epochs = self.epochs.borrow().clone();
        if epochs.truncate_from_start(self.log_start_offset()) {
            self.save_epochs(epochs).await?;
        }
        Ok(())
    }

    /// Writes the producer state snapshot at a roll to `offset`. A snapshot only shortens the
    /// replay at the next open (it starts from an older one instead), so one there is no space
    /// or descriptor for is skipped: the append it follows has happened and must be answered
    /// as such.
    async fn snapshot_producers(&self, offset: Offset) -> Result<(), LogError> {
        // The index entries below the snapshot are not written again at the next open.
        self.log.sync_txn_indexes().await?;
        let table = self.producers.borrow().clone();
        let at = (&table, offset.get());
        let written = producer_snapshot::write(&*self.storage, self.log.dir(), at, DirSync::Now).await;
        match written {
            Err(error) if crate::io::is_out_of_space(&error) || crate::io::is_out_of_descriptors(&error) => {
                tracing::warn!(dir = %self.log.dir().display(), %offset, %error, "producer snapshot skipped");
                Ok(())
            }
            other => other.map_err(|e| self.log.fail(e)),
        }
    }

    fn duplicate_info(&self, original: &BatchMetadata) -> AppendInfo {
        let append_time = self.log.config().timestamp_type == TimestampType::LogAppendTime;
        AppendInfo {
            base_offset: Offset::new(original.first_offset),
            last_offset: Offset::new(original.last_offset),
            log_append_time_ms: if append_time { original.max_timestamp } else { -1 },
            log_start_offset: self.log_start_offset(),
            record_count: 0,
            bytes: 0,
        }
    }

    /// Forgets idle producers (`producer.id.expiration.ms`); returns how many.
    pub fn expire_producers(&self, now_ms: i64, max_idle_ms: i64) -> usize {
        self.producers.borrow_mut().expire(now_ms, max_idle_ms)
    }

    /// The producer state of `producer_id` (for tests and introspection).
    pub fn producer_entry(&self, producer_id: i64) -> Option<producer_state::ProducerEntry> {
        self.producers.borrow().get(producer_id).cloned()
    }

    /// acks=1: returns once every batch appended so far is in the kernel's hands (a kill of
    /// the process no longer loses it), which only storage staging its writes in memory (O_DIRECT
    /// appends) makes wait. Several waits share the writes.
    pub async fn wait_written(&self) -> Result<(), LogError> {
        self.check_open()?;
        self.log.wait_written().await
    }

    /// Group commit: returns once every batch up to `offset` is fdatasync'd. One fdatasync
    /// covers everything appended before it started; waiters that queue meanwhile share the
    /// next one. A failed fdatasync fails the partition for good.
    pub async fn wait_durable(&self, offset: Offset) -> Result<(), LogError> {
        if offset < self.durable_offset.get() {
            return self.log.check_ok();
        }
        let _sync = self.sync_lock.lock().await;
        self.check_open()?;
        if offset < self.durable_offset.get() {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let covered = Offset::new(self.log.sync().await?);
        if let Some(observe) = self.sync_observer.borrow().as_ref() {
            observe(started.elapsed());
        }
        self.durable_offset.set(self.durable_offset.get().max(covered));
        if offset >= covered {
            // Truncated away meanwhile, or never appended: not durable, so never acknowledged.
            return Err(LogError::OffsetOutOfRange {
                offset: offset.get(),
                log_start: self.log_start_offset().get(),
                log_end: covered.get(),
            });
        }
        Ok(())
    }

    pub async fn read(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<ReadResult, LogError> {
        let _idle = self.noting_idle_work();
        self.check_open()?;
        let data = self.log.read(offset.get(), max_bytes, min_one_batch).await?;
        Ok(self.read_result(data))
    }

    /// Where reads of this kind end now: the high watermark for consumers, the log end for
    /// followers.
    pub fn read_end_offset(&self, end: ReadEnd) -> Offset {
        match end {
            ReadEnd::HighWatermark => self.high_watermark(),
            ReadEnd::LastStable => self.last_stable_offset(),
            ReadEnd::LogEnd => self.log_end_offset(),
        }
    }

    /// As [`read`](Self::read), for a socket: cached batches stay in the file (see `log/send.rs`).
    /// Up to the high watermark for consumers (the last stable offset for read_committed ones,
    /// with the aborted transactions among the data), the log end for followers (`ReadEnd`).
    pub async fn read_for_send(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one_batch: bool,
        end: ReadEnd,
    ) -> Result<ReadResult<RecordBytes>, LogError> {
        self.check_open()?;
        let end_offset = self.read_end_offset(end);
        // A read from its end (a caught-up consumer's, thousands per poll) or granted nothing
        // (a fetch's budget went to the partitions before it: thousands per fetch over 10 000)
        // looks nothing up: it brings no index entries back, so there is nothing to note.
        let looks_up = offset < end_offset && (max_bytes > 0 || min_one_batch);
        let _idle = looks_up.then(|| self.noting_idle_work());
        let data = self
            .log
            .read_for_send(offset.get(), max_bytes, min_one_batch, end_offset.get())
            .await?;
        let aborted = match (end, data.next_offset()) {
            (ReadEnd::LastStable, Some(data_end)) => {
                Some(self.aborted_transactions(offset, Offset::new(data_end)).await?)
            }
            (ReadEnd::LastStable, None) => Some(Vec::new()),
            _ => None,
        };
        Ok(ReadResult {
            aborted_transactions: aborted,
            ..self.read_result(data)
        })
    }

    /// What a read answers with `data` (also for reads answered without the log: a throttled
    /// follower, a consumer sent to another replica).
    pub fn read_result<D>(&self, data: D) -> ReadResult<D> {
        ReadResult {
            data,
            high_watermark: self.high_watermark(),
            last_stable_offset: self.last_stable_offset(),
            log_start_offset: self.log_start_offset(),
            log_end_offset: self.log_end_offset(),
            aborted_transactions: None,
        }
    }

    /// ListOffsets by timestamp: the offset of the first batch whose max timestamp is at least
    /// `ts_ms`, and that max timestamp.
    pub async fn offset_for_timestamp(&self, ts_ms: i64) -> Result<Option<(Offset, i64)>, LogError> {
        let _idle = self.noting_idle_work();
        self.check_open()?;
        let found = self.log.offset_for_timestamp(ts_ms).await?;
        Ok(found.map(|(offset, max_timestamp)| (Offset::new(offset), max_timestamp)))
    }

    pub fn log_start_offset(&self) -> Offset {
        Offset::new(self.log.log_start_offset())
    }

    pub fn log_end_offset(&self) -> Offset {
        Offset::new(self.log.log_end_offset())
    }

    /// The high watermark: in single-node mode (nothing ever called
    /// [`set_high_watermark`](Self::set_high_watermark)) every appended batch is committed and
    /// it is the log end offset; with replication, what was set, never past the log end.
    pub fn high_watermark(&self) -> Offset {
        let end = self.log_end_offset();
        self.replicated_hw.get().map_or(end, |hw| hw.min(end))
    }

    /// Puts the partition under replication with high watermark `hw` (a leader's, advanced
    /// over its ISR, or a follower's, taken from its leader's fetch answers or, at open, from
    /// the `replication-offset-checkpoint`; see `high_watermarks.rs`). Clamped to the log's
    /// offsets: a checkpoint may be older or newer than what recovery kept.
    /// A rise wakes what waits on [`appended`](Self::appended): consumers' long polls and
    /// acks=all produces.
    pub fn set_high_watermark(&self, hw: Offset) {
        let clamped = hw.clamp(self.log_start_offset(), self.log_end_offset());
        let before = self.high_watermark();
        self.replicated_hw.set(Some(clamped));
        if clamped > before {
            self.appended.notify_all();
        }
    }

    /// Whether a replication layer sets the high watermark (see
    /// [`set_high_watermark`](Self::set_high_watermark)).
    pub fn is_replicated(&self) -> bool {
        self.replicated_hw.get().is_some()
    }

    /// Reports the duration of every later fdatasync to `observer`.
    pub fn observe_syncs(&self, observer: SyncObserver) {
        *self.sync_observer.borrow_mut() = Some(observer);
    }

    /// Offsets below this are known to be fdatasync'd.
    pub fn durable_offset(&self) -> Offset {
        self.durable_offset.get()
    }

    pub fn size_bytes(&self) -> u64 {
        self.log.size_bytes()
    }

    pub fn segment_count(&self) -> usize {
        self.log.segment_count()
    }

    /// Resolves at the next append or high-watermark rise after this call (long-poll fetches
    /// and acks=all produces wait on it).
    pub fn appended(&self) -> LocalListener {
        self.appended.listen()
    }

    pub async fn set_config(&self, config: LogConfig) {
        self.log.set_config(config);
    }

    pub fn set_leader_epoch(&self, epoch: LeaderEpoch) {
        self.log.set_leader_epoch(epoch);
    }

    pub async fn apply_retention(&self, now_ms: i64) -> Result<RetentionOutcome, LogError> {
        let _idle = self.noting_idle_work();
        self.check_open()?;
        let outcome = self.log.apply_retention(now_ms).await?;
        if outcome.segments_deleted > 0 {
            self.trim_epochs_to_log_start().await?;
        }
        Ok(outcome)
    }

    /// One compaction pass when the topic is compacted (`cleanup.policy` has `compact`);
    /// otherwise nothing. Appends wait while it runs. Records at or past the last stable
    /// offset are left out: they may still be truncated away, or belong to an open
    /// transaction.
    pub async fn compact(&self, now_ms: i64) -> Result<CompactionOutcome, LogError> {
        let _idle = self.noting_idle_work();
        self.check_open()?;
        self.log.compact(now_ms, self.last_stable_offset().get()).await
    }

    /// Drops from memory the index entries of segments nothing used since the last call (a
    /// later read brings them back); returns how many indexes it dropped.
    pub fn release_unused_indexes(&self) -> usize {
        self.log.release_unused_indexes()
    }

    /// Gives back the disk blocks reserved ahead of appends when none came for a while (see
    /// `log::segment::reserve_ahead_bytes`); returns whether it did.
    pub async fn release_idle_reservation(&self, now_ms: i64) -> Result<bool, LogError> {
        self.check_open()?;
        self.log.release_idle_reservation(now_ms).await
    }

    pub async fn delete_records_before(&self, offset: Offset) -> Result<Offset, LogError> {
        let _idle = self.noting_idle_work();
        self.check_open()?;
        let start = self.log.delete_records_before(offset.get()).await?;
        self.trim_epochs_to_log_start().await?;
        Ok(Offset::new(start))
    }

    /// Cuts the log at `offset` (a follower or former leader, at the offset OffsetForLeaderEpoch
    /// gave it); returns the new log end. A batch holding `offset` goes whole: the log then ends
    /// at that batch's base offset, below `offset` (logged), never inside a batch. Nothing
    /// happens at or past the log end. The indexes, the producer state (rebuilt from the last
    /// snapshot below the cut and the log), the leader epoch cache and the high watermark
    /// follow; the log's state file first drops its synced prefix (`Log::truncate_to`).
    pub async fn truncate_to(&self, offset: Offset) -> Result<Offset, LogError> {
        let _idle = self.noting_idle_work();
        self.check_open()?;
        let _append = self.append_lock.lock().await;
        self.log.truncate_to(offset.get()).await?;
        let end = self.log_end_offset();
        if end < offset {
            tracing::info!(dir = %self.log.dir().display(), %offset, %end, "truncated to the start of the batch holding the offset");
        }
        self.durable_offset.set(self.durable_offset.get().min(end));
        if let Some(hw) = self.replicated_hw.get() {
            self.replicated_hw.set(Some(hw.min(end)));
        }
        let mut epochs = self.epochs.borrow().clone();
        if epochs.truncate_from_end(end) {
            self.save_epochs(epochs).await?;
        }
        let rebuilt = producer_snapshot::rebuild(&*self.storage, &self.log, wall_clock_ms()).await?;
        *self.producers.borrow_mut() = rebuilt;
        Ok(end)
    }

    /// Empties the partition and starts it again at `offset`, past its log end (a follower
    /// behind its leader's log start): no batches, no producer state, no epochs, the high
    /// watermark at `offset`.
    pub async fn start_again_at(&self, offset: Offset) -> Result<(), LogError> {
        let _idle = self.noting_idle_work();
        self.check_open()?;
        let _append = self.append_lock.lock().await;
        self.log.start_again_at(offset.get()).await?;
        self.durable_offset.set(offset);
        if self.replicated_hw.get().is_some() {
            self.replicated_hw.set(Some(offset));
        }
        self.save_epochs(LeaderEpochs::implicit(offset, offset)).await?;
        let removed = producer_snapshot::remove_all(&*self.storage, self.log.dir()).await;
        removed.map_err(|e| self.log.fail(e))?;
        *self.producers.borrow_mut() = ProducerStateTable::default();
        Ok(())
    }

    /// fdatasyncs everything appended so far.
    pub async fn flush(&self) -> Result<(), LogError> {
        let end = self.log_end_offset();
        if let Some(last) = end.previous() {
            self.wait_durable(last).await?;
        }
        Ok(())
    }

    /// Flushes, snapshots the producer state at the log end (see [`SNAPSHOT_SKIP_BYTES`]),
    /// syncs the indexes and marks the log's disk state clean (see `log::disk_state`): a crash
    /// from now until the next write needs no recovery. Nothing to do for a partition not
    /// written since it was last clean. Returns whether it wrote.
    pub async fn checkpoint(&self) -> Result<bool, LogError> {
        self.check_open()?;
        let _append = self.append_lock.lock().await;
        self.checkpoint_locked().await
    }

    /// [`checkpoint`](Self::checkpoint)s the partition when no append came for `idle_ms` before
    /// `now_ms` (the shard's maintenance calls it, so that only partitions written lately are
    /// recovered after a crash, or have anything to do at shutdown).
    pub async fn checkpoint_if_idle(&self, now_ms: i64, idle_ms: i64) -> Result<bool, LogError> {
        if self.log.is_clean() || now_ms.saturating_sub(self.last_append_ms.get()) < idle_ms {
            return Ok(false);
        }
        self.checkpoint().await
    }

    /// Once per roll: whether the caller should run [`finish_rolled_sync`] in the background
    /// (see `Log::claim_rolled_sync`).
    ///
    /// [`finish_rolled_sync`]: Partition::finish_rolled_sync
    pub fn claim_rolled_sync(&self) -> bool {
        self.log.claim_rolled_sync()
    }

    /// Fsyncs the segment that last rolled while appends go on (see `log/rolled.rs`).
    pub async fn finish_rolled_sync(&self) -> Result<(), LogError> {
        self.check_open()?;
        self.log.finish_rolled_sync().await
    }

    /// For a partition written without pause: once its active segment holds
    /// [`SYNCED_PREFIX_STEP_BYTES`] past what recovery would trust, syncs it and moves that
    /// point (see `Log::advance_synced_prefix`); returns whether it did.
    pub async fn advance_synced_prefix(&self) -> Result<bool, LogError> {
        self.check_open()?;
        self.log.advance_synced_prefix(SYNCED_PREFIX_STEP_BYTES).await
    }

    async fn checkpoint_locked(&self) -> Result<bool, LogError> {
        if let Some(topic_id) = self.topic_id_unrecorded.get() {
            topic_id_file::write(&*self.storage, self.log.dir(), topic_id)
                .await
                .map_err(|e| self.log.fail(e))?;
            self.topic_id_unrecorded.set(None);
        }
        if self.log.is_clean() {
            return Ok(false);
        }
        self.flush().await?;
        self.log.sync_txn_indexes().await?;
        let table = self.producers.borrow().clone();
        let replay_is_short = self.log.segment_count() == 1 && self.log.size_bytes() < SNAPSHOT_SKIP_BYTES;
        if !(table.is_empty() && replay_is_short) {
            // No directory fsync: until one, a crash leaves the older snapshot, and the open
            // replays more of the log from it.
            let end = self.log.log_end_offset();
            producer_snapshot::write(&*self.storage, self.log.dir(), (&table, end), DirSync::ByCaller)
                .await
                .map_err(|e| self.log.fail(e))?;
        }
        // An empty table is also said in the clean state: an open that finds the log still
        // clean replays nothing (decision 0022, open on first use and the log state file). The snapshot above
        // bounds the
        // replay after a crash.
        self.log.checkpoint(table.is_empty()).await
    }

    /// Checkpoints the partition (see [`checkpoint`](Self::checkpoint)) and closes its files.
    pub async fn close(&self) -> Result<(), LogError> {
        self.check_open()?;
        let _append = self.append_lock.lock().await;
        self.checkpoint_locked().await?;
        self.closed.set(true);
        self.log.close().await
    }

    /// Closes and removes the partition directory.
    pub async fn delete(&self) -> Result<(), LogError> {
        self.closed.set(true);
        self.log.delete().await
    }
}

/// The headers of a produce payload's batches, read without validation; empty when the bytes
/// do not parse (the log's validation then reports why).
fn producer_headers(records: &[u8]) -> BatchHeaders {
    let mut headers = BatchHeaders::new();
    let mut rest = records;
    while !rest.is_empty() {
        match BatchHeader::parse(rest) {
            // A negative record count is refused by the append's validation; the producer
            // rules never see it.
            Ok(h) if h.total_len() <= rest.len() && h.last_offset_delta >= 0 => {
                rest = &rest[h.total_len()..];
                headers.push(h);
            }
            _ => return BatchHeaders::new(),
        }
    }
    headers
}

/// The leader epoch cache of `log` as its file holds it, without the entries at or past the
/// log end (a crash lost what they describe; the file is rewritten without them), and whether
/// there is a file. Without one, every batch of the log has epoch 0: an epoch above 0 is
/// written to the file before any batch of it (`record_epoch`), so the list is epoch 0 from
/// the log start (empty for an empty log). `listed`: the file was among the names the log's
/// open listed (so that a partition without one, every single-node one, stats nothing).
async fn open_epochs<S: Storage>(
    storage: &S,
    log: &Log<S>,
    listed: bool,
) -> Result<(LeaderEpochs, bool), LogError> {
    let read = if listed {
        leader_epochs::read(storage, log.dir()).await?
    } else {
        None
    };
    let log_end = Offset::new(log.log_end_offset());
    let Some(mut epochs) = read else {
        let log_start = Offset::new(log.log_start_offset());
        return Ok((LeaderEpochs::implicit(log_start, log_end), false));
    };
    if epochs.truncate_from_end(log_end) {
        leader_epochs::write(storage, log.dir(), &epochs).await?;
    }
    Ok((epochs, true))
}

/// The wall clock in ms, for stamping producer state rebuilt from the log.
fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod full_disk_tests;
#[cfg(test)]
mod producer_tests;
#[cfg(test)]
mod replication_tests;
#[cfg(test)]
mod roll_tests;
#[cfg(test)]
mod send_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod transaction_model_tests;
#[cfg(test)]
mod transaction_tests;
#[cfg(test)]
mod write_path_tests;
