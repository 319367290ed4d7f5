//! Errors of the log and partition API.

use super::batch::BatchError;

/// What went wrong with a log operation. `Batch` and `MessageTooLarge` are the client's fault
/// (the protocol layer maps them to CORRUPT_MESSAGE / INVALID_RECORD / MESSAGE_TOO_LARGE);
/// `OffsetOutOfRange` is OFFSET_OUT_OF_RANGE; `Io` and `Failed` mean the log dir failed
/// (KAFKA_STORAGE_ERROR) and the partition accepts nothing more. `OutOfOrderSequence` and
/// `InvalidProducerEpoch` are an idempotent producer's batch refused by the producer state
/// (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH). `Exhausted` is a write refused for
/// lack of space in the log dir (or of a descriptor for a new segment's files): nothing of it
/// was kept, the partition stays usable, and the same request may succeed once space returns
/// (KAFKA_STORAGE_ERROR, which clients retry).
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("invalid batch: {0}")]
    Batch(#[from] BatchError),
    #[error("batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge { size: usize, max: usize },
    #[error("offset {offset} outside [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        log_end: i64,
    },
    #[error("producer {producer_id} epoch {epoch}: sequence {sequence} does not follow {last_sequence}")]
    OutOfOrderSequence {
        producer_id: i64,
        epoch: i16,
        sequence: i32,
        /// -1 when the batch's own sequence or epoch is invalid.
        last_sequence: i32,
    },
    #[error("producer {producer_id} epoch {epoch} is fenced by epoch {current_epoch}")]
    InvalidProducerEpoch {
        producer_id: i64,
        epoch: i16,
        current_epoch: i16,
    },
    /// A marker from a coordinator older than the one that wrote the producer's last marker
    /// (TRANSACTION_COORDINATOR_FENCED).
    #[error("producer {producer_id}: coordinator epoch {coordinator_epoch} is fenced by {current}")]
    CoordinatorFenced {
        producer_id: i64,
        coordinator_epoch: i32,
        current: i32,
    },
    /// A non-transactional batch of a producer whose transaction is open (INVALID_TXN_STATE).
    #[error("producer {producer_id} has an open transaction: its batches must be transactional")]
    InvalidTxnState { producer_id: i64 },
    #[error("no space or no descriptor left for this write; nothing of it was kept (retriable): {0}")]
    Exhausted(std::io::Error),
    #[error("storage error: {0}")]
    Io(#[from] std::io::Error),
    #[error("log failed earlier and accepts no more operations: {reason}")]
    Failed { reason: String },
    #[error("log is closed")]
    Closed,
    /// A follower's batches do not start at the log end, or do not follow each other.
    #[error("replicated batch at offset {got} where offset {expected} was expected")]
    UnexpectedOffset { expected: i64, got: i64 },
    /// A follower's batch carries a leader epoch below the latest one its log holds.
    #[error("{0}")]
    LeaderEpochOutOfOrder(#[from] crate::partition::leader_epochs::EpochOutOfOrder),
}

impl LogError {
    /// True for errors that mean the storage failed (as opposed to a bad request).
    pub fn is_storage_failure(&self) -> bool {
        matches!(self, LogError::Io(_) | LogError::Failed { .. })
    }

    /// True when no descriptor was left to open the partition's files.
    pub fn is_out_of_descriptors(&self) -> bool {
        matches!(self, LogError::Io(e) | LogError::Exhausted(e) if crate::io::is_out_of_descriptors(e))
    }
}
