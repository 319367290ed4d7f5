//! Transactions in one partition: control batches (COMMIT / ABORT markers) that end a
//! producer's open transaction, the last stable offset, and the aborted transactions a
//! read_committed fetch lists (docs/ARCHITECTURE.md, Transactions).

use laminar_model::Offset;

use super::Partition;
use crate::io::Storage;
use crate::log::{AppendInfo, LogError};

/// How a transaction ended: the type of its control record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnResult {
    Abort,
    Commit,
}

/// An aborted transaction as Fetch lists it for read_committed consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: Offset,
}

impl<S: Storage> Partition<S> {
    /// Appends a control batch ending `producer_id`'s transaction with `result`, as leader.
    pub async fn append_txn_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        result: TxnResult,
        coordinator_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let _ = (producer_id, producer_epoch, result, coordinator_epoch, now_ms);
        unimplemented!("transaction markers")
    }

    /// Appends batches a coordinator wrote (transactional offset commits into
    /// `__consumer_offsets`): as [`append`](Self::append), without sequence checks.
    pub async fn append_from_coordinator(
        &self,
        records: bytes::Bytes,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.append(records, now_ms).await
    }

    /// The first offset of the earliest open transaction, or the high watermark if lower.
    pub fn last_stable_offset(&self) -> Offset {
        self.high_watermark()
    }

    /// The aborted transactions whose records may lie in `[from, to)`.
    pub async fn aborted_transactions(
        &self,
        from: Offset,
        to: Offset,
    ) -> Result<Vec<AbortedTxn>, LogError> {
        let _ = (from, to);
        Ok(Vec::new())
    }
}
