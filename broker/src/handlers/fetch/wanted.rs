//! What a fetch asks of each partition (`Wanted`), who asks (`Reader`), and what its reads give
//! back (`Reads`): the words every step of a fetch shares, in a file of their own so that the
//! steps depend on them and not on the handler.

use laminar_engine::partition::{ReadEnd, ReadResult, RecordBytes};
use laminar_model::{LeaderEpoch, NodeId, Offset};

use crate::broker::{PartitionAccessError, TopicPartition};

#[derive(Clone, Copy)]
pub(super) struct Wanted {
    pub(super) offset: Offset,
    pub(super) max_bytes: usize,
    /// Whether a first batch larger than `max_bytes` still comes back (so the client progresses).
    pub(super) min_one_batch: bool,
    /// Who reads: a consumer (to the high watermark) or a follower (to the log end).
    pub(super) reader: Reader,
    /// A consumer's read_committed fetch (isolation level 1): it reads to the last stable
    /// offset, and learns the aborted transactions among what it reads.
    pub(super) read_committed: bool,
    /// The leader epoch the fetcher knows (-1: none given).
    pub(super) current_leader_epoch: LeaderEpoch,
    /// Whether the fetcher may read the topic (ACLs): if not, the partition answers
    /// TOPIC_AUTHORIZATION_FAILED and nothing is read.
    pub(super) authorized: bool,
    /// KIP-392: the replica the consumer should read from instead of this leader; then
    /// nothing is read, and the answer names it.
    pub(super) preferred_replica: Option<NodeId>,
    /// KIP-392: a consumer's fetch (v11+) that this broker may serve as a follower.
    pub(super) follower_may_serve: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Reader {
    Consumer,
    /// A follower broker with this id (Kafka's `replica_id` ≥ 0).
    Follower(NodeId),
}

impl Reader {
    /// Where this reader's reads end; `read_committed` matters only for consumers (a
    /// follower copies the whole log).
    pub(super) fn read_end(self, read_committed: bool) -> ReadEnd {
        match self {
            Reader::Consumer if read_committed => ReadEnd::LastStable,
            Reader::Consumer => ReadEnd::HighWatermark,
            Reader::Follower(_) => ReadEnd::LogEnd,
        }
    }
}

pub(super) type Reads = Vec<(
    TopicPartition,
    Result<ReadResult<RecordBytes>, PartitionAccessError>,
)>;
