//! Engine and routing errors as Kafka error codes. Operating errors are logged here once, where
//! they become a code, so the client's view and the operator's view agree.

use kafka_protocol::error::ResponseError;
use laminar_engine::partition::LogError;
use laminar_model::LeaderEpoch;

use crate::broker::PartitionAccessError;

/// KIP-320: a request naming a leader epoch other than `current` is refused,
/// FENCED_LEADER_EPOCH when it is older, UNKNOWN_LEADER_EPOCH when newer; one naming none is not.
pub fn leader_epoch_fencing(named: LeaderEpoch, current: LeaderEpoch) -> Option<ResponseError> {
    named.stale_or_ahead_of(current).map(|ordering| match ordering {
        std::cmp::Ordering::Less => ResponseError::FencedLeaderEpoch,
        _ => ResponseError::UnknownLeaderEpoch,
    })
}

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
        // Control batches from clients, transactional ones without a producer id included.
        LogError::Batch(_) => ResponseError::InvalidRecord,
        LogError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
        LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        LogError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        LogError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        LogError::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
        LogError::CoordinatorFenced { .. } => ResponseError::TransactionCoordinatorFenced,
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

#[cfg(test)]
mod tests {
    use super::*;
    use laminar_engine::log::BatchError;

    fn code_of(error: LogError) -> i16 {
        partition_error_code(&PartitionAccessError::Log(error))
    }

    #[test]
    fn transaction_refusals_have_kafkas_codes() {
        assert_eq!(code_of(LogError::InvalidTxnState { producer_id: 7 }), 48);
        let fenced = LogError::InvalidProducerEpoch {
            producer_id: 7,
            epoch: 1,
            current_epoch: 2,
        };
        assert_eq!(code_of(fenced), 47);
        assert_eq!(code_of(BatchError::ControlFromClient.into()), 87);
        assert_eq!(code_of(BatchError::TransactionalWithoutProducer.into()), 87);
        let stale = LogError::CoordinatorFenced {
            producer_id: 7,
            coordinator_epoch: 1,
            current: 2,
        };
        assert_eq!(code_of(stale), 52);
    }
}
