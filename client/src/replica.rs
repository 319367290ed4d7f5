//! What a follower broker asks of its leader: Fetch with its replica id and broker epoch (so the
//! leader reads to its log end and records the follower's progress), and OffsetForLeaderEpoch
//! to find where its log and the leader's diverge.

use std::collections::HashMap;

use kafka_protocol::messages::fetch_request::{FetchPartition, ReplicaState};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchResponse, OffsetForLeaderEpochRequest};

use kafka_protocol::protocol::StrBytes;
use laminar_model::{BrokerEpoch, LeaderEpoch, NodeId, Offset, TopicPartition};

use crate::connection::Connection;
use crate::data::{by_topic, fetch_request, fetched_partitions, FetchSpec, FetchedPartition};
use crate::error::{check_code, ClientError, KafkaError};

/// The Fetch version a follower sends: the first that carries its broker epoch (`ReplicaState`,
/// KIP-903), which a cluster's leader requires. It names topics by id.
pub const REPLICA_FETCH_VERSION: i16 = 15;

/// A follower broker as it fetches: its id, and the epoch it registered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replica {
    pub id: NodeId,
    pub broker_epoch: BrokerEpoch,
}

/// One partition a follower fetches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaFetchPosition {
    pub tp: TopicPartition,
    /// The topic's id, which names it in the request.
    pub topic_id: [u8; 16],
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
    /// Fetches as follower `replica` at [`REPLICA_FETCH_VERSION`]; partition errors are
    /// reported per partition.
    pub fn fetch_as_replica(
        &mut self,
        replica: Replica,
        spec: &FetchSpec,
        positions: &[ReplicaFetchPosition],
    ) -> Result<Vec<FetchedPartition>, ClientError> {
        self.check_replica_fetch_version()?;
        let partitions = positions.iter().map(|position| {
            let partition = FetchPartition::default()
                .with_partition(position.tp.partition)
                .with_fetch_offset(position.offset.get())
                .with_current_leader_epoch(position.current_leader_epoch.get())
                .with_log_start_offset(position.log_start_offset.get())
                .with_partition_max_bytes(position.partition_max_bytes);
            (&*position.tp.topic, partition)
        });
        let state = ReplicaState::default()
            .with_replica_id(BrokerId(replica.id.get()))
            .with_replica_epoch(replica.broker_epoch.get());
        let mut request = fetch_request(-1, spec, partitions).with_replica_state(state);
        // One entry per topic, not per partition: a follower fetches thousands of partitions.
        let ids: HashMap<&str, [u8; 16]> = positions.iter().map(|p| (&*p.tp.topic, p.topic_id)).collect();
        for topic in &mut request.topics {
            let id = ids.get(topic.topic.as_str()).copied().unwrap_or_default();
            topic.topic_id = uuid::Uuid::from_bytes(id);
        }
        let pending = self.send_at(&request, REPLICA_FETCH_VERSION, true)?;
        let mut response: FetchResponse = self.receive(pending)?;
        check_code(ApiKey::Fetch, response.error_code, None, String::new)?;
        let names: HashMap<[u8; 16], &str> = ids.into_iter().map(|(name, id)| (id, name)).collect();
        for topic in &mut response.responses {
            if let Some(name) = names.get(topic.topic_id.as_bytes()) {
                topic.topic.0 = StrBytes::from_string((*name).to_string());
            }
        }
        Ok(fetched_partitions(response))
    }

    fn check_replica_fetch_version(&self) -> Result<(), ClientError> {
        let broker = self.versions().broker_range(ApiKey::Fetch);
        if broker.is_some_and(|range| (range.min..=range.max).contains(&REPLICA_FETCH_VERSION)) {
            return Ok(());
        }
        Err(ClientError::UnsupportedApi {
            api: ApiKey::Fetch,
            client_min: REPLICA_FETCH_VERSION,
            client_max: REPLICA_FETCH_VERSION,
            broker: broker.map_or_else(|| "nothing".to_owned(), |range| range.to_string()),
        })
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
