//! A partition as requests name it (the domain's [`TopicPartition`]), and why one could not be
//! reached: plain types every layer of the broker uses (handlers, replication, groups), in a
//! module of their own so that none of those depends on `crate::broker` for them.

use laminar_engine::partition::LogError;
use laminar_engine::shard::ShardGone;
pub use laminar_model::TopicPartition;

/// Why a partition could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum PartitionAccessError {
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    /// Cluster mode: another broker leads the partition (or it has no leader now).
    #[error("this broker does not lead the partition")]
    NotLeader,
    /// The request names this partition more than once where once is the rule (Produce).
    #[error("partition named more than once in the request")]
    NamedTwice,
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    ShardGone(#[from] ShardGone),
    /// A Kafka error the replication layer answers with (NOT_ENOUGH_REPLICAS,
    /// FENCED_LEADER_EPOCH, REQUEST_TIMED_OUT, ...).
    #[error("refused: {0:?}")]
    Refused(kafka_protocol::error::ResponseError),
}
