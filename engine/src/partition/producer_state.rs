//! Idempotent-producer state of one partition (Kafka's producer state, idempotence part).
//!
//! Per producer id the partition keeps the producer's current epoch and the metadata of its
//! last [`BATCHES_KEPT`] batches: enough to answer a retried batch with its original offsets
//! instead of writing it twice (a client keeps at most 5 requests in flight per connection),
//! and to refuse a batch that would leave a gap or comes from a fenced epoch.
//!
//! The rules, per batch with a producer id >= 0, in request order (Kafka's, for idempotent
//! producers; see `check`):
//! - a batch of the producer's current epoch whose sequence range equals one of the kept
//!   batches is a duplicate: nothing is written, the original offsets are the answer;
//! - an epoch older than the current one is fenced: INVALID_PRODUCER_EPOCH;
//! - a newer epoch must start at sequence 0; the same epoch must continue at last sequence + 1,
//!   where `i32::MAX` is followed by 0: otherwise OUT_OF_ORDER_SEQUENCE_NUMBER;
//! - an unknown producer id is accepted at any sequence, as current Kafka does: its state may
//!   have expired or been removed with old segments while the producer kept going;
//! - a known producer with no batch of its current epoch (a marker bumped it) starts at 0.
//!
//! Transactions (KIP-98), see `check_client_batches`, `check_txn_state` and `end_txn`:
//! - a transactional batch opens its producer's transaction at its base offset unless one is
//!   open; a non-transactional batch of a producer with an open transaction is refused
//!   (INVALID_TXN_STATE); clients produce no control batches, and no transactional batch
//!   without a producer id (INVALID_RECORD);
//! - a marker (control batch) ends the open transaction; one of an older epoch than the
//!   producer's is fenced, a newer one becomes the producer's epoch (its batches go: the
//!   next one starts at sequence 0). A marker without an open transaction changes no offset.
//! - open transactions are also kept ordered by first offset: the earliest bounds the last
//!   stable offset.

use std::collections::{BTreeSet, HashMap, VecDeque};

use crate::log::control::{Marker, TxnResult};
use crate::log::txn_index::AbortedTxnEntry;
use crate::log::{BatchError, BatchHeader, LogError};

/// Batches remembered per producer: Kafka clients keep at most 5 requests in flight.
pub const BATCHES_KEPT: usize = 5;

/// What the partition remembers of one appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The batch's max timestamp as stored (the broker's clock on LogAppendTime topics), for
    /// answering a duplicate exactly as the original was answered.
    pub max_timestamp: i64,
}

/// One producer id's state in one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// Oldest first, all of `epoch`, at most [`BATCHES_KEPT`]; none after a marker bumped the
    /// epoch, or when only markers or a coordinator's batches (no sequence) were seen.
    pub batches: VecDeque<BatchMetadata>,
    /// When the producer last appended (ms): what expiration measures idleness from.
    pub last_timestamp_ms: i64,
    /// The coordinator epoch of the last marker (-1: none seen).
    pub coordinator_epoch: i32,
    /// The first offset of the producer's open transaction.
    pub txn_first_offset: Option<i64>,
}

impl ProducerEntry {
    fn new(epoch: i16, timestamp_ms: i64) -> ProducerEntry {
        ProducerEntry {
            epoch,
            batches: VecDeque::with_capacity(BATCHES_KEPT),
            last_timestamp_ms: timestamp_ms,
            coordinator_epoch: -1,
            txn_first_offset: None,
        }
    }

    /// The last sequence written at the current epoch (`None`: none yet).
    pub fn last_seq(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_seq)
    }

    /// Takes `epoch` (a newer one: appends check that first): the old epoch's batches can no
    /// longer repeat, and the new epoch's sequence starts again.
    fn bump_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.epoch = epoch;
            self.batches.clear();
        }
    }

    fn find_duplicate(&self, header: &BatchHeader) -> Option<BatchMetadata> {
        if header.producer_epoch != self.epoch {
            return None;
        }
        let last = last_sequence(header);
        self.batches
            .iter()
            .find(|b| b.first_seq == header.base_sequence && b.last_seq == last)
            .copied()
    }
}

/// What a request's batches may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Write them.
    Append,
    /// A retry of an appended batch: write nothing, answer with these offsets.
    Duplicate(BatchMetadata),
}

/// The producer state of one partition. Owned by the partition's shard; not shared.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStateTable {
    entries: HashMap<i64, ProducerEntry>,
    /// (first offset, producer id) of every open transaction: the same as the entries'
    /// `txn_first_offset`, ordered.
    open_txns: BTreeSet<(i64, i64)>,
    /// (first offset, marker offset) of transactions whose marker was appended but may not
    /// be below the high watermark yet: they hold the last stable offset until it is, so
    /// no read_committed consumer reads a transaction whose end could still be lost with
    /// the leader. Pruned as the high watermark passes; empty without replication.
    ended_unreplicated: BTreeSet<(i64, i64)>,
    /// The same transactions by marker offset, to prune them in order.
    ended_by_marker: std::collections::BTreeMap<i64, i64>,
}

/// Refuses what no client may produce: control batches, and transactional batches without a
/// producer id (INVALID_RECORD).
pub fn check_client_batches(headers: &[BatchHeader]) -> Result<(), LogError> {
    for header in headers {
        if header.is_control() {
            return Err(BatchError::ControlFromClient.into());
        }
        if header.is_transactional() && header.producer_id < 0 {
            return Err(BatchError::TransactionalWithoutProducer.into());
        }
    }
    Ok(())
}

/// The sequence of a batch's last record: sequences wrap from `i32::MAX` to 0.
pub fn last_sequence(header: &BatchHeader) -> i32 {
    increment_sequence(header.base_sequence, header.last_offset_delta)
}

fn increment_sequence(sequence: i32, by: i32) -> i32 {
    debug_assert!(by >= 0);
    ((sequence as i64 + by as i64) % (i32::MAX as i64 + 1)) as i32
}

fn follows(last_seq: i32, next_seq: i32) -> bool {
    next_seq == increment_sequence(last_seq, 1)
}

impl ProducerStateTable {
    /// Decides whether `headers` (one request's batches for this partition, in order, all
    /// validated or about to be) may be appended. Later batches are checked against the state
    /// the earlier ones would leave; duplicates are looked up in the appended state only, as
    /// Kafka does, and the first one found answers the whole request.
    pub fn check(&self, headers: &[BatchHeader]) -> Result<Admission, LogError> {
        // Epoch and last sequence per producer as this request's earlier batches leave them.
        let mut pending: HashMap<i64, (i16, Option<i32>)> = HashMap::new();
        for header in headers.iter().filter(|h| h.producer_id >= 0) {
            let id = header.producer_id;
            let appended = self.entries.get(&id);
            if let Some(duplicate) = appended.and_then(|e| e.find_duplicate(header)) {
                return Ok(Admission::Duplicate(duplicate));
            }
            let current = pending
                .get(&id)
                .copied()
                .or_else(|| appended.map(|e| (e.epoch, e.last_seq())));
            check_sequence(header, current)?;
            pending.insert(id, (header.producer_epoch, Some(last_sequence(header))));
        }
        self.check_txn_state(headers)?;
        Ok(Admission::Append)
    }

    /// A non-transactional batch of a producer whose transaction is open, or opened by an
    /// earlier batch of the same request, is refused (INVALID_TXN_STATE).
    fn check_txn_state(&self, headers: &[BatchHeader]) -> Result<(), LogError> {
        let mut opening: smallvec::SmallVec<[i64; 2]> = smallvec::SmallVec::new();
        for header in headers.iter().filter(|h| h.producer_id >= 0) {
            let id = header.producer_id;
            if header.is_transactional() {
                opening.push(id);
                continue;
            }
            let open = opening.contains(&id)
                || self
                    .entries
                    .get(&id)
                    .is_some_and(|e| e.txn_first_offset.is_some());
            if open {
                return Err(LogError::InvalidTxnState { producer_id: id });
            }
        }
        Ok(())
    }

    /// Refuses batches (a coordinator's, checked without sequences) or a marker whose epoch is
    /// older than their producer's.
    pub fn check_epochs(&self, producers: impl IntoIterator<Item = (i64, i16)>) -> Result<(), LogError> {
        for (producer_id, epoch) in producers {
            match self.entries.get(&producer_id) {
                Some(e) if epoch < e.epoch => {
                    return Err(LogError::InvalidProducerEpoch {
                        producer_id,
                        epoch,
                        current_epoch: e.epoch,
                    })
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Refuses a marker of an epoch older than its producer's, or from a coordinator older than
    /// the one that wrote the producer's last marker.
    pub fn check_marker(&self, producer_id: i64, epoch: i16, coordinator_epoch: i32) -> Result<(), LogError> {
        self.check_epochs([(producer_id, epoch)])?;
        match self.entries.get(&producer_id) {
            Some(e) if coordinator_epoch < e.coordinator_epoch => Err(LogError::CoordinatorFenced {
                producer_id,
                coordinator_epoch,
                current: e.coordinator_epoch,
            }),
            _ => Ok(()),
        }
    }

    /// Records an appended batch (its base offset assigned) at time `timestamp_ms`, a data
    /// batch or a marker (`marker`: what a control batch says, `None` for other control
    /// batches, which change nothing). Returns the transaction an ABORT marker ended, as its
    /// index entry.
    pub fn record(
        &mut self,
        header: &BatchHeader,
        marker: Option<Marker>,
        timestamp_ms: i64,
    ) -> Option<AbortedTxnEntry> {
        if header.producer_id < 0 {
            return None;
        }
        if header.is_control() {
            return self.end_txn(header, marker?, timestamp_ms);
        }
        let entry = self
            .entries
            .entry(header.producer_id)
            .or_insert_with(|| ProducerEntry::new(header.producer_epoch, timestamp_ms));
        entry.bump_epoch(header.producer_epoch);
        // A coordinator's batches carry no sequence: nothing to remember for retries.
        if header.base_sequence >= 0 {
            if entry.batches.len() == BATCHES_KEPT {
                entry.batches.pop_front();
            }
            entry.batches.push_back(BatchMetadata {
                first_seq: header.base_sequence,
                last_seq: last_sequence(header),
                first_offset: header.base_offset,
                last_offset: header.last_offset(),
                max_timestamp: header.max_timestamp,
            });
        }
        entry.last_timestamp_ms = entry.last_timestamp_ms.max(timestamp_ms);
        if header.is_transactional() && entry.txn_first_offset.is_none() {
            entry.txn_first_offset = Some(header.base_offset);
            self.open_txns.insert((header.base_offset, header.producer_id));
        }
        None
    }

    /// Records the marker `header` (checked: its epoch is not older than its producer's).
    fn end_txn(
        &mut self,
        header: &BatchHeader,
        marker: Marker,
        timestamp_ms: i64,
    ) -> Option<AbortedTxnEntry> {
        let id = header.producer_id;
        let entry = self
            .entries
            .entry(id)
            .or_insert_with(|| ProducerEntry::new(header.producer_epoch, timestamp_ms));
        entry.bump_epoch(header.producer_epoch.max(entry.epoch));
        entry.coordinator_epoch = marker.coordinator_epoch;
        entry.last_timestamp_ms = entry.last_timestamp_ms.max(timestamp_ms);
        let first_offset = entry.txn_first_offset.take()?;
        let removed = self.open_txns.remove(&(first_offset, id));
        assert!(removed, "an open transaction is listed");
        self.ended_unreplicated.insert((first_offset, header.base_offset));
        self.ended_by_marker.insert(header.base_offset, first_offset);
        if marker.result == TxnResult::Commit {
            return None;
        }
        let marker_offset = header.base_offset;
        let last_stable_offset = self.first_open_txn().unwrap_or(marker_offset + 1);
        Some(AbortedTxnEntry {
            producer_id: id,
            first_offset,
            last_offset: marker_offset,
            last_stable_offset,
        })
    }

    /// The first offset of the earliest open transaction.
    pub fn first_open_txn(&self) -> Option<i64> {
        self.open_txns.first().map(|(offset, _)| *offset)
    }

    /// The first offset of the earliest transaction that is open or whose marker is not yet
    /// below `high_watermark`; forgets the ended ones the high watermark has passed.
    pub fn first_unstable_txn(&mut self, high_watermark: i64) -> Option<i64> {
        while let Some(entry) = self.ended_by_marker.first_entry() {
            if *entry.key() >= high_watermark {
                break;
            }
            let (marker_offset, first_offset) = entry.remove_entry();
            self.ended_unreplicated.remove(&(first_offset, marker_offset));
        }
        let ended = self.ended_unreplicated.first().map(|(first, _)| *first);
        match (self.first_open_txn(), ended) {
            (Some(open), Some(ended)) => Some(open.min(ended)),
            (open, ended) => open.or(ended),
        }
    }

    /// Forgets producers idle for `max_idle_ms` or longer, but those in a transaction (its
    /// marker must still find it); returns how many.
    pub fn expire(&mut self, now_ms: i64, max_idle_ms: i64) -> usize {
        let before = self.entries.len();
        self.entries.retain(|_, e| {
            e.txn_first_offset.is_some() || now_ms.saturating_sub(e.last_timestamp_ms) < max_idle_ms
        });
        before - self.entries.len()
    }

    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.entries.get(&producer_id)
    }

    /// Adds a whole entry (when loading a snapshot; ids not yet in the table).
    pub fn insert(&mut self, producer_id: i64, entry: ProducerEntry) {
        assert!(producer_id >= 0, "producer ids are non-negative");
        assert!(
            entry.batches.len() <= BATCHES_KEPT,
            "an entry keeps at most 5 batches"
        );
        if let Some(first_offset) = entry.txn_first_offset {
            self.open_txns.insert((first_offset, producer_id));
        }
        let replaced = self.entries.insert(producer_id, entry);
        assert!(replaced.is_none(), "each producer is inserted once");
    }

    /// Every entry, by ascending producer id.
    pub fn entries_sorted(&self) -> Vec<(i64, &ProducerEntry)> {
        let mut all: Vec<_> = self.entries.iter().map(|(id, e)| (*id, e)).collect();
        all.sort_unstable_by_key(|(id, _)| *id);
        all
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The epoch and sequence rules for one new (non-duplicate) batch; `current` is the producer's
/// (epoch, last sequence at it), `None` when the partition does not know it.
fn check_sequence(header: &BatchHeader, current: Option<(i16, Option<i32>)>) -> Result<(), LogError> {
    let out_of_order = |last_sequence| LogError::OutOfOrderSequence {
        producer_id: header.producer_id,
        epoch: header.producer_epoch,
        sequence: header.base_sequence,
        last_sequence,
    };
    if header.base_sequence < 0 || header.producer_epoch < 0 {
        return Err(out_of_order(-1));
    }
    let Some((epoch, last_seq)) = current else {
        return Ok(());
    };
    if header.producer_epoch < epoch {
        return Err(LogError::InvalidProducerEpoch {
            producer_id: header.producer_id,
            epoch: header.producer_epoch,
            current_epoch: epoch,
        });
    }
    let in_order = match last_seq {
        Some(last_seq) if header.producer_epoch == epoch => follows(last_seq, header.base_sequence),
        _ => header.base_sequence == 0,
    };
    if !in_order {
        return Err(out_of_order(last_seq.unwrap_or(-1)));
    }
    Ok(())
}

/// A batch header of `count` records from producer `id`/`epoch` at `seq`, placed at `offset`,
/// with (base, max) `timestamps`: what the producer-state tests feed the table.
#[cfg(test)]
pub(super) fn test_header(
    id: i64,
    epoch: i16,
    seq: i32,
    count: i32,
    offset: i64,
    timestamps: (i64, i64),
) -> BatchHeader {
    BatchHeader {
        base_offset: offset,
        batch_length: 100,
        partition_leader_epoch: 0,
        magic: 2,
        crc: 0,
        attributes: 0,
        last_offset_delta: count - 1,
        base_timestamp: timestamps.0,
        max_timestamp: timestamps.1,
        producer_id: id,
        producer_epoch: epoch,
        base_sequence: seq,
        record_count: count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header of `count` records from producer `id`/`epoch` at `seq`, placed at `offset`.
    fn batch(id: i64, epoch: i16, seq: i32, count: i32, offset: i64) -> BatchHeader {
        test_header(id, epoch, seq, count, offset, (1_000, 1_000 + offset))
    }

    /// Checks then records `header` as appended at its offset; returns the admission.
    fn append(table: &mut ProducerStateTable, header: BatchHeader) -> Result<Admission, LogError> {
        let admission = table.check(&[header])?;
        if admission == Admission::Append {
            table.record(&header, None, 5);
        }
        Ok(admission)
    }

    fn is_out_of_order(result: Result<Admission, LogError>) -> bool {
        matches!(result, Err(LogError::OutOfOrderSequence { .. }))
    }

    #[test]
    fn a_retried_batch_gets_its_original_offsets() {
        let mut t = ProducerStateTable::default();
        assert_eq!(
            append(&mut t, batch(7, 0, 0, 10, 100)).unwrap(),
            Admission::Append
        );
        assert_eq!(
            append(&mut t, batch(7, 0, 10, 5, 110)).unwrap(),
            Admission::Append
        );
        let Admission::Duplicate(d) = append(&mut t, batch(7, 0, 0, 10, 999)).unwrap() else {
            panic!("a retry of the first batch is a duplicate");
        };
        assert_eq!(
            (d.first_offset, d.last_offset, d.first_seq, d.last_seq),
            (100, 109, 0, 9)
        );
        assert_eq!(d.max_timestamp, 1_100);
        // Same start, other length: not the same batch, and not in sequence either.
        assert!(is_out_of_order(append(&mut t, batch(7, 0, 0, 3, 999))));
        assert_eq!(
            append(&mut t, batch(7, 0, 15, 1, 115)).unwrap(),
            Admission::Append
        );
    }

    #[test]
    fn a_gap_or_an_old_sequence_is_out_of_order() {
        let mut t = ProducerStateTable::default();
        append(&mut t, batch(1, 0, 0, 5, 0)).unwrap();
        assert!(
            is_out_of_order(append(&mut t, batch(1, 0, 6, 1, 5))),
            "gap of one"
        );
        assert!(is_out_of_order(append(&mut t, batch(1, 0, 2, 3, 5))), "overlap");
        assert!(
            is_out_of_order(append(&mut t, batch(1, 0, -1, 1, 5))),
            "no sequence"
        );
        assert_eq!(append(&mut t, batch(1, 0, 5, 1, 5)).unwrap(), Admission::Append);
    }

    #[test]
    fn an_old_epoch_is_fenced_and_a_new_epoch_starts_at_zero() {
        let mut t = ProducerStateTable::default();
        append(&mut t, batch(3, 2, 0, 4, 0)).unwrap();
        let fenced = append(&mut t, batch(3, 1, 4, 1, 4));
        assert!(matches!(
            fenced,
            Err(LogError::InvalidProducerEpoch {
                producer_id: 3,
                epoch: 1,
                current_epoch: 2
            })
        ));
        assert!(
            is_out_of_order(append(&mut t, batch(3, 3, 4, 1, 4))),
            "new epoch at 4"
        );
        assert_eq!(append(&mut t, batch(3, 3, 0, 2, 4)).unwrap(), Admission::Append);
        let entry = t.get(3).unwrap();
        assert_eq!(
            (entry.epoch, entry.batches.len()),
            (3, 1),
            "the old epoch's batches go"
        );
        // The old epoch's batch is no duplicate any more: it is fenced.
        let stale_retry = append(&mut t, batch(3, 2, 0, 4, 0));
        assert!(matches!(stale_retry, Err(LogError::InvalidProducerEpoch { .. })));
    }

    #[test]
    fn an_unknown_producer_may_start_at_any_sequence() {
        let mut t = ProducerStateTable::default();
        assert_eq!(
            append(&mut t, batch(9, 4, 12_345, 2, 0)).unwrap(),
            Admission::Append
        );
        assert_eq!(
            append(&mut t, batch(9, 4, 12_347, 1, 2)).unwrap(),
            Admission::Append
        );
        assert!(is_out_of_order(append(&mut t, batch(9, 4, 0, 1, 3))));
    }

    #[test]
    fn sequences_wrap_after_i32_max() {
        let mut t = ProducerStateTable::default();
        let near_end = i32::MAX - 2;
        append(&mut t, batch(5, 0, near_end, 2, 0)).unwrap(); // MAX-2, MAX-1
                                                              // MAX, then 0 and 1: a batch that itself wraps.
        let wrapping = batch(5, 0, i32::MAX, 3, 2);
        assert_eq!(last_sequence(&wrapping), 1);
        assert_eq!(append(&mut t, wrapping).unwrap(), Admission::Append);
        assert_eq!(append(&mut t, batch(5, 0, 2, 1, 5)).unwrap(), Admission::Append);
        let Admission::Duplicate(d) = append(&mut t, wrapping).unwrap() else {
            panic!("the wrapping batch repeats");
        };
        assert_eq!((d.first_seq, d.last_seq, d.first_offset), (i32::MAX, 1, 2));
        let mut fresh = ProducerStateTable::default();
        append(&mut fresh, batch(6, 0, i32::MAX, 1, 0)).unwrap();
        assert_eq!(
            append(&mut fresh, batch(6, 0, 0, 1, 1)).unwrap(),
            Admission::Append
        );
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut t = ProducerStateTable::default();
        for i in 0..7 {
            append(&mut t, batch(2, 0, i * 2, 2, i as i64 * 2)).unwrap();
        }
        assert_eq!(t.get(2).unwrap().batches.len(), BATCHES_KEPT);
        for i in 2..7 {
            let retry = append(&mut t, batch(2, 0, i * 2, 2, 1_000)).unwrap();
            assert!(
                matches!(retry, Admission::Duplicate(d) if d.first_offset == i as i64 * 2),
                "batch {i} is in the window"
            );
        }
        for i in 0..2 {
            assert!(
                is_out_of_order(append(&mut t, batch(2, 0, i * 2, 2, 1_000))),
                "batch {i}"
            );
        }
    }

    #[test]
    fn several_batches_in_one_request_are_checked_in_order() {
        let mut t = ProducerStateTable::default();
        append(&mut t, batch(4, 0, 0, 2, 0)).unwrap();
        let in_order = [
            batch(4, 0, 2, 2, 2),
            batch(-1, -1, -1, 3, 4),
            batch(4, 0, 4, 1, 7),
        ];
        assert_eq!(t.check(&in_order).unwrap(), Admission::Append);
        let gap_in_second = [batch(4, 0, 2, 2, 2), batch(4, 0, 5, 1, 4)];
        assert!(matches!(
            t.check(&gap_in_second),
            Err(LogError::OutOfOrderSequence {
                sequence: 5,
                last_sequence: 3,
                ..
            })
        ));
        let retry_after_new = [batch(4, 0, 2, 2, 2), batch(4, 0, 0, 2, 4)];
        assert!(matches!(t.check(&retry_after_new).unwrap(), Admission::Duplicate(d) if d.first_offset == 0));
        let other_producers = [batch(8, 0, 0, 1, 2), batch(9, 0, 0, 1, 3)];
        assert_eq!(t.check(&other_producers).unwrap(), Admission::Append);
        assert_eq!(t.get(4).unwrap().batches.len(), 1, "check changes nothing");
    }

    #[test]
    fn idle_producers_expire() {
        let mut t = ProducerStateTable::default();
        t.record(&batch(1, 0, 0, 1, 0), None, 1_000);
        t.record(&batch(2, 0, 0, 1, 1), None, 5_000);
        assert_eq!(t.expire(10_999, 10_000), 0);
        assert_eq!(t.expire(11_000, 10_000), 1);
        assert!(t.get(1).is_none() && t.get(2).is_some());
        // Forgotten, producer 1 may resume at any sequence.
        assert_eq!(append(&mut t, batch(1, 0, 77, 1, 2)).unwrap(), Admission::Append);
    }
}
