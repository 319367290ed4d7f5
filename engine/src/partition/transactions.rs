//! Transactions in one partition: control batches (COMMIT / ABORT markers) that end a
//! producer's open transaction, the last stable offset, and the aborted transactions a
//! read_committed fetch lists (docs/ARCHITECTURE.md, Transactions). The rules are in
//! `producer_state.rs`, the markers' bytes in `log/control.rs`, the index of aborted
//! transactions in `log/txn_index.rs`.

use bytes::Bytes;
use laminar_model::Offset;

use super::{producer_state, Partition};
use crate::io::Storage;
use crate::log::batch::BatchHeader;
use crate::log::control::{self, Marker};
use crate::log::{AppendInfo, LogError};

pub use crate::log::control::TxnResult;

/// An aborted transaction as Fetch lists it for read_committed consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: Offset,
}

impl AbortedTxn {
    pub fn new(producer_id: i64, first_offset: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id,
            first_offset: Offset::new(first_offset),
        }
    }
}

/// One producer's state as DescribeProducers answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerDescription {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// -1 when no batch of the current epoch is known.
    pub last_sequence: i32,
    /// The max timestamp of its last batch, -1 when none is known.
    pub last_timestamp_ms: i64,
    /// -1 when no marker was seen.
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction, -1 when none is open.
    pub current_txn_start_offset: i64,
}

impl<S: Storage> Partition<S> {
    /// Appends a control batch ending `producer_id`'s transaction with `result`, as leader.
    /// A marker of an epoch older than the producer's is refused (InvalidProducerEpoch), and
    /// one from an older coordinator than the last marker's (CoordinatorFenced); a newer
    /// epoch fences the older ones. Without an open transaction it is still written
    /// (a coordinator's retry), and changes no offset.
    pub async fn append_txn_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        result: TxnResult,
        coordinator_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        if producer_id < 0 {
            return Err(crate::log::BatchError::TransactionalWithoutProducer.into());
        }
        let _idle = self.noting_idle_work();
        self.check_open()?;
        let _append = self.append_lock.lock().await;
        self.producers
            .borrow()
            .check_marker(producer_id, producer_epoch, coordinator_epoch)?;
        let marker = Marker {
            result,
            coordinator_epoch,
        };
        let records = Bytes::from(control::marker_batch(
            (producer_id, producer_epoch),
            marker,
            now_ms,
        ));
        let header = BatchHeader::parse(&records).expect("a marker batch parses");
        self.append_locked(records, [header].into_iter().collect(), Some(marker), now_ms)
            .await
    }

    /// Appends batches a coordinator wrote (transactional offset commits into
    /// `__consumer_offsets`): as [`append`](Self::append), without sequence checks (they
    /// carry none), but their transactions are tracked and older epochs fenced.
    pub async fn append_from_coordinator(&self, records: Bytes, now_ms: i64) -> Result<AppendInfo, LogError> {
        let _idle = self.noting_idle_work();
        self.check_open()?;
        let _append = self.append_lock.lock().await;
        let headers = super::producer_headers(&records);
        producer_state::check_client_batches(&headers)?;
        let producers = headers.iter().filter(|h| h.producer_id >= 0);
        self.producers
            .borrow()
            .check_epochs(producers.map(|h| (h.producer_id, h.producer_epoch)))?;
        self.append_locked(records, headers, None, now_ms).await
    }

    /// The first offset of the earliest transaction still open or whose marker is not yet
    /// below the high watermark (Kafka's first unstable offset), or the high watermark if
    /// lower; never below the log start (retention or DeleteRecords may have removed the start of
    /// a transaction still open). O(log n) in open transactions.
    pub fn last_stable_offset(&self) -> Offset {
        let hw = self.high_watermark();
        match self.producers.borrow_mut().first_unstable_txn(hw.get()) {
            Some(first) => hw.min(Offset::new(first).max(self.log_start_offset())),
            None => hw,
        }
    }

    /// The aborted transactions whose records may lie in `[from, to)`, in the order their
    /// markers were written. Reads the index files of the segments from the one holding
    /// `from` on, one at a time, keeping only what matches (`log/txn_index.rs`): memory is
    /// bounded by the answer.
    pub async fn aborted_transactions(&self, from: Offset, to: Offset) -> Result<Vec<AbortedTxn>, LogError> {
        let _idle = self.noting_idle_work();
        self.check_open()?;
        let entries = self.log.aborted_txns_between(from.get(), to.get()).await?;
        let listed = entries.iter().map(|e| AbortedTxn {
            producer_id: e.producer_id,
            first_offset: Offset::new(e.first_offset),
        });
        Ok(listed.collect())
    }

    /// Whether `producer_id` has a transaction open here: its next transactional batch
    /// continues it, so the coordinator need not be asked again (KIP-890).
    pub fn has_open_txn(&self, producer_id: i64) -> bool {
        self.producers
            .borrow()
            .get(producer_id)
            .is_some_and(|entry| entry.txn_first_offset.is_some())
    }

    /// Every producer the partition knows, by ascending id (DescribeProducers).
    pub fn producers(&self) -> Vec<ProducerDescription> {
        let table = self.producers.borrow();
        let described = table
            .entries_sorted()
            .into_iter()
            .map(|(producer_id, e)| ProducerDescription {
                producer_id,
                producer_epoch: e.epoch,
                last_sequence: e.last_seq().unwrap_or(-1),
                last_timestamp_ms: e.batches.back().map_or(-1, |b| b.max_timestamp),
                coordinator_epoch: e.coordinator_epoch,
                current_txn_start_offset: e.txn_first_offset.unwrap_or(-1),
            });
        described.collect()
    }
}
