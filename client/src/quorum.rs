//! The metadata quorum through a broker: DescribeQuorum (API 55), AddRaftVoter (80) and
//! RemoveRaftVoter (81), as Kafka's `kafka-metadata-quorum` sends them.

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    AddRaftVoterRequest, ApiKey, DescribeQuorumRequest, RemoveRaftVoterRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::connection::Connection;
use crate::error::{check_code, ClientError};

/// Kafka's name of the metadata log's topic (one partition, 0).
const METADATA_TOPIC: &str = "__cluster_metadata";

/// One member of the quorum and how far it has replicated (`None`: the leader has not heard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumMember {
    pub node_id: i32,
    pub log_end_offset: Option<i64>,
}

/// The quorum as its leader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumDescription {
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub high_watermark: i64,
    pub voters: Vec<QuorumMember>,
    pub observers: Vec<QuorumMember>,
}

impl Connection {
    /// DescribeQuorum of `__cluster_metadata-0` (cluster mode).
    pub fn describe_quorum(&mut self) -> Result<QuorumDescription, ClientError> {
        let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
        let response = self.request(&request)?;
        let message = response.error_message.as_ref().map(|m| m.to_string());
        check_code(
            ApiKey::DescribeQuorum,
            response.error_code,
            message.as_deref(),
            String::new,
        )?;
        let partition = response
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or_else(|| ClientError::MissingInResponse {
                api: ApiKey::DescribeQuorum,
                what: format!("{METADATA_TOPIC}-0"),
            })?;
        check_code(ApiKey::DescribeQuorum, partition.error_code, None, String::new)?;
        let members = |states: &[kafka_protocol::messages::describe_quorum_response::ReplicaState]| {
            let each = states.iter().map(|s| QuorumMember {
                node_id: s.replica_id.0,
                log_end_offset: (s.log_end_offset >= 0).then_some(s.log_end_offset),
            });
            each.collect()
        };
        Ok(QuorumDescription {
            leader_id: partition.leader_id.0,
            leader_epoch: partition.leader_epoch,
            high_watermark: partition.high_watermark,
            voters: members(&partition.current_voters),
            observers: members(&partition.observers),
        })
    }

    /// AddRaftVoter: makes observer `node_id` (caught up) a voter.
    pub fn add_raft_voter(&mut self, node_id: i32) -> Result<(), ClientError> {
        let request = AddRaftVoterRequest::default()
            .with_voter_id(node_id)
            .with_timeout_ms(30_000);
        let response = self.request(&request)?;
        let message = response.error_message.as_ref().map(|m| m.to_string());
        check_code(
            ApiKey::AddRaftVoter,
            response.error_code,
            message.as_deref(),
            || format!(" node {node_id}"),
        )
    }

    /// RemoveRaftVoter: makes voter `node_id` an observer.
    pub fn remove_raft_voter(&mut self, node_id: i32) -> Result<(), ClientError> {
        let request = RemoveRaftVoterRequest::default().with_voter_id(node_id);
        let response = self.request(&request)?;
        let message = response.error_message.as_ref().map(|m| m.to_string());
        check_code(
            ApiKey::RemoveRaftVoter,
            response.error_code,
            message.as_deref(),
            || format!(" node {node_id}"),
        )
    }
}
