//! Metadata: brokers, topics, partitions and leaders; auto-creates topics when allowed.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_engine::cluster::{MetadataError, TopicMetadata};

use crate::broker::{BrokerCtx, BrokerShared};

/// Kafka's "authorized operations not requested" marker.
const OPERATIONS_OMITTED: i32 = i32::MIN;

pub async fn handle(ctx: &Rc<BrokerCtx>, request: MetadataRequest, version: i16) -> MetadataResponse {
    let shared = &ctx.state.shared;
    let node_id = BrokerId(shared.node_id());
    let names: Option<Vec<String>> = match &request.topics {
        // v0 has no "all topics" null: an empty list means all.
        Some(topics) if version == 0 && topics.is_empty() => None,
        Some(topics) => Some(
            topics
                .iter()
                .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
                .collect(),
        ),
        None => None,
    };
    let auto_create =
        shared.config.auto_create_topics_enable && (version < 4 || request.allow_auto_topic_creation);
    let topics = match names {
        None => shared
            .metadata
            .current()
            .topics
            .values()
            .map(|t| describe_topic(t, node_id))
            .collect(),
        Some(names) => names
            .iter()
            .map(|name| lookup_or_create(shared, name, auto_create, node_id))
            .collect(),
    };
    let (host, port) = advertised(shared);
    MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(node_id)
            .with_host(StrBytes::from_string(host))
            .with_port(port)])
        .with_cluster_id(Some(StrBytes::from_string(shared.cluster_id.clone())))
        .with_controller_id(node_id)
        .with_topics(topics)
        .with_cluster_authorized_operations(OPERATIONS_OMITTED)
}

/// The address clients should use: the first advertised listener.
pub fn advertised(shared: &BrokerShared) -> (String, i32) {
    let listener = shared
        .config
        .advertised_listeners
        .first()
        .or(shared.config.listeners.first())
        .expect("the config always has a listener");
    (listener.host.clone(), i32::from(listener.port))
}

fn lookup_or_create(
    shared: &BrokerShared,
    name: &str,
    auto_create: bool,
    node_id: BrokerId,
) -> MetadataResponseTopic {
    if let Some(topic) = shared.metadata.current().get(name) {
        return describe_topic(topic, node_id);
    }
    let error = if !auto_create {
        ResponseError::UnknownTopicOrPartition
    } else {
        let partitions = shared.config.num_partitions;
        let replication = shared.config.default_replication_factor;
        match shared
            .metadata
            .create_topic(name, partitions, replication, Default::default())
        {
            Ok(topic) => {
                tracing::info!(topic = name, partitions, "auto-created topic");
                return describe_topic(&topic, node_id);
            }
            Err(MetadataError::TopicAlreadyExists(_)) => match shared.metadata.current().get(name) {
                Some(topic) => return describe_topic(topic, node_id),
                None => ResponseError::LeaderNotAvailable,
            },
            Err(MetadataError::InvalidTopicName { .. }) => ResponseError::InvalidTopicException,
            Err(e @ MetadataError::PartitionLimit { .. }) => {
                tracing::warn!(topic = name, error = %e, "auto-create refused");
                ResponseError::PolicyViolation
            }
            Err(e) => {
                tracing::error!(topic = name, error = %e, "auto-create failed");
                ResponseError::UnknownServerError
            }
        }
    };
    MetadataResponseTopic::default()
        .with_error_code(error.code())
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
        .with_topic_authorized_operations(OPERATIONS_OMITTED)
}

fn describe_topic(topic: &TopicMetadata, node_id: BrokerId) -> MetadataResponseTopic {
    let partitions = (0..topic.partition_count)
        .map(|index| {
            MetadataResponsePartition::default()
                .with_partition_index(index)
                .with_leader_id(node_id)
                .with_leader_epoch(0)
                .with_replica_nodes(vec![node_id])
                .with_isr_nodes(vec![node_id])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(uuid::Uuid::from_bytes(topic.id))
        .with_is_internal(topic.name.starts_with("__"))
        .with_partitions(partitions)
        .with_topic_authorized_operations(OPERATIONS_OMITTED)
}
