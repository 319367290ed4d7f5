//! DescribeQuorum (API 55, v0–2): the controller quorum's leader, term, high watermark and each
//! voter's and observer's log end, as the quorum's leader sees them
//! (`laminar_controller::quorum_description`; a request reaching another node is forwarded
//! there). Needs Describe on the cluster. Cluster mode only. The request must name Kafka's
//! metadata partition, `__cluster_metadata-0`, as Kafka's does; anything else is
//! UNKNOWN_TOPIC_OR_PARTITION for that partition. Voters' fetch times are not kept, so v1's
//! timestamps are -1 (unknown). v2 (KIP-853) adds each member's controller listener, named as
//! this broker's is; directory ids are not part of the quorum's membership, so they are zero.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_controller::quorum_description::{QuorumDescription, ReplicaProgress};

use crate::broker::BrokerCtx;
use crate::quorum::admin::with_retries;

/// Kafka's name of the metadata log's topic; its one partition is 0.
const METADATA_TOPIC: &str = "__cluster_metadata";

/// The first version with the members' listeners (KIP-853): older ones cannot encode them.
const FIRST_NODES_VERSION: i16 = 2;

pub async fn handle(ctx: &BrokerCtx, request: DescribeQuorumRequest, version: i16) -> DescribeQuorumResponse {
    let Some(link) = &ctx.state.shared.cluster else {
        return DescribeQuorumResponse::default().with_error_code(ResponseError::InvalidRequest.code());
    };
    let names_metadata_partition = match &request.topics[..] {
        [topic] => {
            topic.topic_name.as_str() == METADATA_TOPIC
                && matches!(&topic.partitions[..], [partition] if partition.partition_index == 0)
        }
        _ => false,
    };
    if !names_metadata_partition {
        return answer(ResponseError::UnknownTopicOrPartition.code(), None);
    }
    match with_retries(|| link.handle.describe_quorum()).await {
        Ok(description) if version >= FIRST_NODES_VERSION => {
            let cluster = ctx.state.shared.config.cluster.as_ref();
            let listener = cluster.map(|c| c.controller_listener.name.clone());
            answer(0, Some(&description)).with_nodes(nodes(&description, listener.unwrap_or_default()))
        }
        Ok(description) => answer(0, Some(&description)),
        Err(refusal) => DescribeQuorumResponse::default().with_error_code(refusal.response_error().code()),
    }
}

/// v2's nodes: every member with its controller listener, named `listener_name`.
fn nodes(description: &QuorumDescription, listener_name: String) -> Vec<Node> {
    let each = description.addresses.iter().filter_map(|(id, address)| {
        let (host, port) = address.rsplit_once(':')?;
        let listener = Listener::default()
            .with_name(StrBytes::from_string(listener_name.clone()))
            .with_host(StrBytes::from_string(
                host.trim_start_matches('[').trim_end_matches(']').to_string(),
            ))
            .with_port(port.parse().ok()?);
        Some(
            Node::default()
                .with_node_id(BrokerId(id_of(*id)))
                .with_listeners(vec![listener]),
        )
    });
    each.collect()
}

/// The answer for the metadata partition: `description`'s, or `error_code` alone.
fn answer(error_code: i16, description: Option<&QuorumDescription>) -> DescribeQuorumResponse {
    let mut partition = PartitionData::default()
        .with_partition_index(0)
        .with_error_code(error_code)
        .with_leader_id(BrokerId(-1))
        .with_leader_epoch(-1)
        .with_high_watermark(-1);
    if let Some(quorum) = description {
        partition = partition
            .with_leader_id(BrokerId(id_of(quorum.leader_id)))
            .with_leader_epoch(i32::try_from(quorum.leader_epoch).unwrap_or(i32::MAX))
            .with_high_watermark(offset_of(Some(quorum.high_watermark)))
            .with_current_voters(quorum.voters.iter().map(replica_state).collect())
            .with_observers(quorum.observers.iter().map(replica_state).collect());
    }
    let topic = TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
        .with_partitions(vec![partition]);
    DescribeQuorumResponse::default().with_topics(vec![topic])
}

fn replica_state(progress: &ReplicaProgress) -> ReplicaState {
    ReplicaState::default()
        .with_replica_id(BrokerId(id_of(progress.replica_id)))
        .with_log_end_offset(offset_of(progress.log_end_offset))
}

/// Node ids are i32 in Kafka's protocol (and in `node.id`): a larger Raft id cannot occur.
fn id_of(raft_id: u64) -> i32 {
    i32::try_from(raft_id).unwrap_or(-1)
}

/// Kafka's "unknown" offset is -1.
fn offset_of(index: Option<u64>) -> i64 {
    index.and_then(|i| i64::try_from(i).ok()).unwrap_or(-1)
}
