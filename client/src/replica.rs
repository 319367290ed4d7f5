//! What a follower broker asks of its leader: Fetch with its replica id (so the leader reads
//! to its log end and records the follower's progress), and OffsetForLeaderEpoch to find where
//! its log and the leader's diverge.

use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{BrokerId, OffsetForLeaderEpochRequest};

use laminar_model::{LeaderEpoch, NodeId, Offset, TopicPartition};

use crate::connection::Connection;
use crate::data::{by_topic, fetch_request, FetchSpec, FetchedPartition};
use crate::error::{ClientError, KafkaError};

/// One partition a follower fetches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaFetchPosition {
    pub tp: TopicPartition,
    /// The follower's log end offset.
    pub offset: Offset,
    /// The leader epoch the follower knows (the leader refuses another).
    pub current_leader_epoch: LeaderEpoch,
    pub log_start_offset: Offset,
    pub partition_max_bytes: i32,
}

/// "Where does `leader_epoch` end in your log?", for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochEndQuery {
    pub tp: TopicPartition,
    pub current_leader_epoch: LeaderEpoch,
    pub leader_epoch: LeaderEpoch,
}

/// The leader's answer: the largest epoch it has up to the asked one, and where it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochEnd {
    pub tp: TopicPartition,
    pub error: Option<KafkaError>,
    pub leader_epoch: LeaderEpoch,
    pub end_offset: Offset,
}

impl Connection {
    /// Fetches as follower `replica_id`; partition errors are reported per partition.
    pub fn fetch_as_replica(
        &mut self,
        replica_id: NodeId,
        spec: &FetchSpec,
        positions: &[ReplicaFetchPosition],
    ) -> Result<Vec<FetchedPartition>, ClientError> {
        let partitions = positions.iter().map(|position| {
            let partition = FetchPartition::default()
                .with_partition(position.tp.partition)
                .with_fetch_offset(position.offset.get())
                .with_current_leader_epoch(position.current_leader_epoch.get())
                .with_log_start_offset(position.log_start_offset.get())
                .with_partition_max_bytes(position.partition_max_bytes);
            (&*position.tp.topic, partition)
        });
        let request = fetch_request(replica_id.get(), spec, partitions);
        let pending = self.send(&request)?;
        self.receive_fetch(pending)
    }

    /// Asks the leader where each queried epoch ends, as follower `replica_id`.
    pub fn offsets_for_leader_epoch(
        &mut self,
        replica_id: NodeId,
        queries: &[EpochEndQuery],
    ) -> Result<Vec<EpochEnd>, ClientError> {
        let partitions = queries.iter().map(|query| {
            let partition = OffsetForLeaderPartition::default()
                .with_partition(query.tp.partition)
                .with_current_leader_epoch(query.current_leader_epoch.get())
                .with_leader_epoch(query.leader_epoch.get());
            (&*query.tp.topic, partition)
        });
        let topics = by_topic(partitions)
            .into_iter()
            .map(|(topic, partitions)| {
                OffsetForLeaderTopic::default()
                    .with_topic(topic)
                    .with_partitions(partitions)
            })
            .collect();
        let request = OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(replica_id.get()))
            .with_topics(topics);
        let response = self.request(&request)?;
        let mut ends = Vec::new();
        for topic in response.topics {
            for partition in topic.partitions {
                ends.push(EpochEnd {
                    tp: TopicPartition::new(topic.topic.as_str(), partition.partition),
                    error: KafkaError::from_code(partition.error_code, None),
                    leader_epoch: LeaderEpoch::new(partition.leader_epoch),
                    end_offset: Offset::new(partition.end_offset),
                });
            }
        }
        Ok(ends)
    }
}
