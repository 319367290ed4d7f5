//! Metadata: brokers, topics, partitions and leaders; auto-creates topics when allowed. In
//! cluster mode all of it comes from the controller quorum's metadata (alive brokers with their
//! endpoints, each partition's leader, epoch, replicas and ISR) and auto-creation goes there.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_engine::metadata::{MetadataError, TopicMetadata};

use laminar_controller::api::CreatableTopic;
use laminar_controller::{Refusal, TopicState, NO_LEADER};
use laminar_engine::metadata::topic_table::validate_topic_name;

use crate::authorization::Access;
use crate::broker::{BrokerCtx, BrokerShared};
use crate::handlers::broker_ids;
use crate::kafka_listener::{self, ListenerId};
use crate::quorum::admin::{wait_for_view, with_retries};
use crate::quorum::view::alive_brokers;
use crate::quorum::ClusterLink;
use laminar_security::Operation;

/// Kafka's "authorized operations not requested" marker.
const OPERATIONS_OMITTED: i32 = i32::MIN;

/// Metadata, with the brokers' addresses on `listener`, the one the request came in on.
pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    (access, listener): (&Access, ListenerId),
    request: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let (names, unknown_ids) = requested_names(&ctx.state.shared, access, &request, version);
    let mut response = by_names(ctx, (access, listener), names, (&request, version)).await;
    response.topics.extend(unknown_ids.into_iter().map(|id| {
        MetadataResponseTopic::default()
            .with_error_code(ResponseError::UnknownTopicId.code())
            .with_topic_id(id)
            .with_topic_authorized_operations(OPERATIONS_OMITTED)
    }));
    response
}

/// The topics a request names (`None`: all), with those it names by id (from v10: KIP-516;
/// consumers of KIP-848's protocol learn their topics by id) resolved, and the ids no topic
/// has (or the principal may not describe: UNKNOWN_TOPIC_ID, as Kafka answers both).
fn requested_names(
    shared: &BrokerShared,
    access: &Access,
    request: &MetadataRequest,
    version: i16,
) -> (Option<Vec<String>>, Vec<uuid::Uuid>) {
    let Some(topics) = &request.topics else {
        return (None, Vec::new());
    };
    // v0 has no "all topics" null: an empty list means all.
    if version == 0 && topics.is_empty() {
        return (None, Vec::new());
    }
    let table = shared.metadata.current();
    let (mut names, mut unknown) = (Vec::with_capacity(topics.len()), Vec::new());
    for topic in topics {
        match (&topic.name, table.get_by_id(topic.topic_id.as_bytes())) {
            (Some(name), _) => names.push(name.to_string()),
            (None, Some(found)) if access.allows_topic(Operation::Describe, &found.name) => {
                names.push(found.name.clone())
            }
            (None, _) => unknown.push(topic.topic_id),
        }
    }
    (Some(names), unknown)
}

async fn by_names(
    ctx: &Rc<BrokerCtx>,
    (access, listener): (&Access, ListenerId),
    names: Option<Vec<String>>,
    (request, version): (&MetadataRequest, i16),
) -> MetadataResponse {
    let shared = &ctx.state.shared;
    let node_id = BrokerId(shared.node_id().get());
    let auto_create =
        shared.config.auto_create_topics_enable && (version < 4 || request.allow_auto_topic_creation);
    if let Some(link) = &shared.cluster {
        let listener = kafka_listener::name_of(&shared.config, listener);
        return cluster_metadata(shared, link, (names, listener), auto_create).await;
    }
    // ACLs exist on a single node only (config::broker refuses them in a cluster): Kafka's
    // checks are made here. All topics lists those the principal may describe.
    let topics = match names {
        None => shared
            .metadata
            .current()
            .topics
            .values()
            .filter(|t| access.allows_topic(Operation::Describe, &t.name))
            .map(|t| describe_topic(t, node_id))
            .collect(),
        Some(names) => names
            .iter()
            .map(|name| authorized_lookup(shared, access, name, auto_create, node_id))
            .collect(),
    };
    let (host, port) = advertised(shared, listener);
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

/// The address clients of `listener` should use: its advertised address.
pub fn advertised(shared: &BrokerShared, listener: ListenerId) -> (String, i32) {
    let config = &shared.config;
    let name = kafka_listener::name_of(config, listener);
    let advertised = config
        .advertised_listeners
        .iter()
        .find(|a| a.name == name)
        .unwrap_or(&config.listeners[listener.0]);
    (advertised.host.clone(), i32::from(advertised.port))
}

/// A named topic, as the principal may see it: refused without Describe; created only with
/// Create on the cluster or the topic (else a missing topic is refused, as Kafka answers).
fn authorized_lookup(
    shared: &BrokerShared,
    access: &Access,
    name: &str,
    auto_create: bool,
    node_id: BrokerId,
) -> MetadataResponseTopic {
    let refused = || {
        MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
    };
    if !access.allows_topic(Operation::Describe, name) {
        return refused();
    }
    let may_create = access.allows_cluster(Operation::Create) || access.allows_topic(Operation::Create, name);
    let found = lookup_or_create(shared, name, auto_create && may_create, node_id);
    let missing = found.error_code == ResponseError::UnknownTopicOrPartition.code();
    if missing && auto_create && !may_create {
        return refused();
    }
    found
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

/// Cluster mode's answer, from the quorum's metadata as this broker last saw it.
async fn cluster_metadata(
    shared: &BrokerShared,
    link: &ClusterLink,
    (names, listener): (Option<Vec<String>>, &str),
    auto_create: bool,
) -> MetadataResponse {
    let image = link.image();
    let topics = match names {
        None => image.metadata.topics.values().map(|t| cluster_topic(t)).collect(),
        Some(names) => {
            let mut topics = Vec::with_capacity(names.len());
            for name in &names {
                topics.push(cluster_lookup_or_create(shared, link, name, auto_create).await);
            }
            topics
        }
    };
    let brokers = alive_brokers(&link.image().metadata, listener)
        .into_iter()
        .map(|b| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.id.get()))
                .with_host(StrBytes::from_string(b.host))
                .with_port(b.port)
                .with_rack(b.rack.map(StrBytes::from_string))
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_string(shared.cluster_id.clone())))
        .with_controller_id(BrokerId(link.controller_id()))
        .with_topics(topics)
        .with_cluster_authorized_operations(OPERATIONS_OMITTED)
}

async fn cluster_lookup_or_create(
    shared: &BrokerShared,
    link: &ClusterLink,
    name: &str,
    auto_create: bool,
) -> MetadataResponseTopic {
    if let Some(topic) = link.image().metadata.topic_by_name(name) {
        return cluster_topic(topic);
    }
    let error = if !auto_create {
        ResponseError::UnknownTopicOrPartition
    } else if let Err(e) = validate_topic_name(name) {
        tracing::debug!(error = %e, "auto-create refused");
        ResponseError::InvalidTopicException
    } else {
        let topic = CreatableTopic {
            name: name.to_string(),
            num_partitions: shared.config.num_partitions,
            replication_factor: shared.config.default_replication_factor,
            configs: Default::default(),
            assignments: Vec::new(),
            topic_id: None,
        };
        let created = with_retries(|| link.handle.create_topics(vec![topic.clone()])).await;
        match created.map(|r| r.into_iter().next().map(|r| r.result)) {
            Ok(Some(Ok(_) | Err(Refusal::TopicAlreadyExists))) => {
                wait_for_view(link, |image| image.metadata.topic_by_name(name).is_some()).await;
                if let Some(topic) = link.image().metadata.topic_by_name(name) {
                    tracing::info!(topic = name, "auto-created topic");
                    return cluster_topic(topic);
                }
                ResponseError::LeaderNotAvailable
            }
            Ok(None) => ResponseError::UnknownServerError,
            Ok(Some(Err(refusal))) | Err(refusal) => refusal.response_error(),
        }
    };
    MetadataResponseTopic::default()
        .with_error_code(error.code())
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
        .with_topic_authorized_operations(OPERATIONS_OMITTED)
}

fn cluster_topic(topic: &TopicState) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .map(|(index, p)| {
            let error = if p.leader == NO_LEADER {
                ResponseError::LeaderNotAvailable.code()
            } else {
                0
            };
            MetadataResponsePartition::default()
                .with_error_code(error)
                .with_partition_index(*index)
                .with_leader_id(BrokerId(p.leader.get()))
                .with_leader_epoch(p.leader_epoch.get())
                .with_replica_nodes(broker_ids(&p.replicas))
                .with_isr_nodes(broker_ids(&p.isr))
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(uuid::Uuid::from_bytes(topic.topic_id))
        .with_is_internal(topic.name.starts_with("__"))
        .with_partitions(partitions)
        .with_topic_authorized_operations(OPERATIONS_OMITTED)
}
