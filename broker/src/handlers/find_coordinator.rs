//! FindCoordinator: a single node coordinates every group and transaction itself (v4+ answers a
//! batch of keys). In cluster mode a group's coordinator is the leader of its
//! `__consumer_offsets` partition, which is created through the quorum when first needed.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use laminar_controller::api::CreatableTopic;

use crate::broker::BrokerCtx;
use crate::group::store::offsets_topic_configs;
use crate::group::{partition_for, OFFSETS_TOPIC};
use crate::handlers::metadata::advertised;
use crate::kafka_listener::{self, ListenerId};
use crate::quorum::admin::with_retries;
use crate::quorum::view::{alive_broker, alive_brokers, AliveBroker};
use crate::quorum::ClusterLink;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;
/// Kafka's default `offsets.topic.replication.factor`.
const OFFSETS_REPLICATION_FACTOR: usize = 3;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    request: FindCoordinatorRequest,
    version: i16,
    listener: ListenerId,
) -> FindCoordinatorResponse {
    let shared = &ctx.state.shared;
    if let Some(link) = &shared.cluster {
        let listener = kafka_listener::name_of(&shared.config, listener);
        return cluster_response(ctx, (link, listener), &request, version).await;
    }
    let (host, port) = advertised(shared, listener);
    response(&request, version, shared.node_id().get(), &host, port)
}

pub fn response(
    request: &FindCoordinatorRequest,
    version: i16,
    node_id: i32,
    host: &str,
    port: i32,
) -> FindCoordinatorResponse {
    let error = match request.key_type {
        KEY_TYPE_GROUP | KEY_TYPE_TRANSACTION => None,
        _ => Some(ResponseError::InvalidRequest),
    };
    let (node_id, host, port) = match error {
        None => (node_id, host, port),
        Some(_) => (-1, "", -1),
    };
    let message = error.map(|_| StrBytes::from_static_str("unknown coordinator key type"));
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(BrokerId(node_id))
                    .with_host(StrBytes::from_string(host.to_string()))
                    .with_port(port)
                    .with_error_code(error.map_or(0, |e| e.code()))
                    .with_error_message(message.clone())
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let response = FindCoordinatorResponse::default()
        .with_error_code(error.map_or(0, |e| e.code()))
        .with_node_id(BrokerId(node_id))
        .with_host(StrBytes::from_string(host.to_string()))
        .with_port(port);
    if version >= 1 {
        response.with_error_message(message)
    } else {
        response
    }
}

/// Cluster mode: each key's coordinator, or why there is none yet.
async fn cluster_response(
    ctx: &Rc<BrokerCtx>,
    (link, listener): (&ClusterLink, &str),
    request: &FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let keys: Vec<StrBytes> = if version >= 4 {
        request.coordinator_keys.clone()
    } else {
        vec![request.key.clone()]
    };
    let mut coordinators = Vec::with_capacity(keys.len());
    for key in keys {
        let found = coordinator(ctx, (link, listener), request.key_type, &key).await;
        let (id, host, port, error) = match found {
            Ok(b) => (b.id.get(), b.host, b.port, None),
            Err(e) => (-1, String::new(), -1, Some(e)),
        };
        coordinators.push(
            Coordinator::default()
                .with_key(key)
                .with_node_id(BrokerId(id))
                .with_host(StrBytes::from_string(host))
                .with_port(port)
                .with_error_code(error.map_or(0, |e| e.code()))
                .with_error_message(error.map(|e| StrBytes::from_string(e.to_string()))),
        );
    }
    if version >= 4 {
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let Some(c) = coordinators.pop() else {
        return FindCoordinatorResponse::default();
    };
    let response = FindCoordinatorResponse::default()
        .with_error_code(c.error_code)
        .with_node_id(c.node_id)
        .with_host(c.host)
        .with_port(c.port);
    if version >= 1 {
        response.with_error_message(c.error_message)
    } else {
        response
    }
}

/// The leader of the group's `__consumer_offsets` partition, or of the transactional id's
/// `__transaction_state` partition.
async fn coordinator(
    ctx: &Rc<BrokerCtx>,
    (link, listener): (&ClusterLink, &str),
    key_type: i8,
    key: &str,
) -> Result<AliveBroker, ResponseError> {
    match key_type {
        KEY_TYPE_GROUP => {}
        KEY_TYPE_TRANSACTION => return transaction_coordinator(ctx, (link, listener), key).await,
        _ => return Err(ResponseError::InvalidRequest),
    }
    let image = link.image();
    let Some(topic) = image.metadata.topic_by_name(OFFSETS_TOPIC) else {
        create_offsets_topic(ctx, link).await;
        return Err(ResponseError::CoordinatorNotAvailable);
    };
    let partition = partition_for(key, ctx.state.groups.offsets_partition_count);
    let leader = topic
        .partitions
        .get(&partition)
        .ok_or(ResponseError::CoordinatorNotAvailable)?
        .leader;
    alive_broker(&image.metadata, leader, listener).ok_or(ResponseError::CoordinatorNotAvailable)
}

async fn transaction_coordinator(
    ctx: &Rc<BrokerCtx>,
    (link, listener): (&ClusterLink, &str),
    key: &str,
) -> Result<AliveBroker, ResponseError> {
    crate::transactions::store::ensure_topic(ctx).await?;
    let count =
        crate::transactions::store::partition_count(ctx).ok_or(ResponseError::CoordinatorNotAvailable)?;
    let image = link.image();
    let partition = partition_for(key, count);
    let state = image
        .metadata
        .partition_by_name(crate::transactions::TRANSACTION_TOPIC, partition);
    let leader = state.ok_or(ResponseError::CoordinatorNotAvailable)?.leader;
    alive_broker(&image.metadata, leader, listener).ok_or(ResponseError::CoordinatorNotAvailable)
}

/// Creates `__consumer_offsets` with Kafka's `offsets.topic.replication.factor` (3), or fewer
/// replicas while fewer brokers are up; the client asks again after COORDINATOR_NOT_AVAILABLE.
async fn create_offsets_topic(ctx: &Rc<BrokerCtx>, link: &ClusterLink) {
    let inter_broker = kafka_listener::inter_broker_name(&ctx.state.shared.config);
    let alive = alive_brokers(&link.image().metadata, inter_broker).len();
    let topic = CreatableTopic {
        name: OFFSETS_TOPIC.to_string(),
        num_partitions: ctx.state.groups.offsets_partition_count,
        replication_factor: i16::try_from(alive.clamp(1, OFFSETS_REPLICATION_FACTOR)).unwrap_or(1),
        configs: offsets_topic_configs(),
        assignments: Vec::new(),
        topic_id: None,
    };
    match with_retries(|| link.handle.create_topics(vec![topic.clone()])).await {
        Ok(_) => tracing::info!(replicas = topic.replication_factor, "created {OFFSETS_TOPIC}"),
        Err(error) => tracing::warn!(%error, "cannot create {OFFSETS_TOPIC} yet"),
    }
}
