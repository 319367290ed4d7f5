//! Engine and routing errors as Kafka error codes. Operating errors are logged here once, where
//! they become a code, so the client's view and the operator's view agree.

use kafka_protocol::error::ResponseError;
use laminar_engine::partition::LogError;

use crate::broker::PartitionAccessError;

pub fn partition_error_code(error: &PartitionAccessError) -> i16 {
    let code = match error {
        PartitionAccessError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        PartitionAccessError::NamedTwice => ResponseError::InvalidRequest,
        PartitionAccessError::ShardGone(_) | PartitionAccessError::NotLeader => {
            ResponseError::NotLeaderOrFollower
        }
        PartitionAccessError::Log(log) => log_error(log),
        PartitionAccessError::Refused(code) => *code,
    };
    code.code()
}

fn log_error(error: &LogError) -> ResponseError {
    match error {
        LogError::Batch(batch) if batch.is_corrupt() => ResponseError::CorruptMessage,
        LogError::Batch(_) => ResponseError::InvalidRecord,
        LogError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
        LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        LogError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        LogError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        LogError::Closed => ResponseError::NotLeaderOrFollower,
        // Retriable, and logged where it began and ended rather than for every request: a
        // full log dir (the engine), no descriptor to open the partition (its shard).
        LogError::Exhausted(_) => ResponseError::KafkaStorageError,
        other if other.is_out_of_descriptors() => ResponseError::KafkaStorageError,
        other => {
            tracing::error!(error = %other, "storage failure");
            ResponseError::KafkaStorageError
        }
    }
}
