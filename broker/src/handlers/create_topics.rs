//! CreateTopics: new topics with partition counts, replication factor and config overrides;
//! `validate_only` checks everything and creates nothing. In cluster mode the controller quorum
//! creates them (placing replicas over the unfenced brokers) and the answer waits, a bounded
//! while, until this broker's view has them.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use laminar_engine::metadata::topic_table::validate_topic_name;

use crate::authorization::Access;
use crate::broker::{BrokerCtx, BrokerShared};
use crate::config::TopicConfig;
use crate::handlers::topic_admin::{validate_overrides, AdminError, PartitionBudget};
use crate::quorum::admin::{wait_for_view, with_retries};
use crate::quorum::view::alive_brokers;
use crate::quorum::ClusterLink;
use laminar_security::Operation;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let shared = &ctx.state.shared;
    let mut response = CreateTopicsResponse::default();
    let mut budget = PartitionBudget::new(shared.config.laminar_request_partitions_max);
    let may_create_any = access.allows_cluster(Operation::Create);
    for topic in &request.topics {
        // Kafka's check: Create on the cluster, or on the topic.
        let created = if !may_create_any && !access.allows_topic(Operation::Create, &topic.name) {
            Err(AdminError::new(
                ResponseError::TopicAuthorizationFailed,
                "Create on the topic or the cluster is needed",
            ))
        } else {
            match &shared.cluster {
                Some(link) => {
                    cluster_create(shared, link, topic, request.validate_only, version, &mut budget).await
                }
                None => create(shared, topic, request.validate_only, version, &mut budget),
            }
        };
        let result = match created {
            Ok(created) => created,
            Err(e) => CreatableTopicResult::default()
                .with_name(topic.name.clone())
                .with_error_code(e.code)
                .with_error_message(Some(StrBytes::from_string(e.message)))
                .with_num_partitions(-1)
                .with_replication_factor(-1),
        };
        response.topics.push(result);
    }
    response
}

/// What a valid topic of the request asks for.
struct Wanted {
    partition_count: i32,
    replication_factor: i16,
    configs: BTreeMap<String, String>,
}

/// Checks the name, counts and overrides of one topic (`alive`: brokers that may hold a
/// replica); nothing is created.
fn wanted(
    shared: &BrokerShared,
    topic: &CreatableTopic,
    alive: usize,
    budget: &PartitionBudget,
) -> Result<Wanted, AdminError> {
    validate_topic_name(topic.name.as_str())?;
    let partition_count = partition_count(shared, topic)?;
    budget.check(i64::from(partition_count))?;
    let replication_factor = replication_factor(shared, topic, alive)?;
    let mut configs = BTreeMap::new();
    for config in &topic.configs {
        if let Some(value) = &config.value {
            configs.insert(config.name.to_string(), value.to_string());
        }
    }
    validate_overrides(&configs)?;
    Ok(Wanted {
        partition_count,
        replication_factor,
        configs,
    })
}

/// The answer for a topic created (or validated) as `wanted`, with id `id`.
fn created(
    shared: &BrokerShared,
    topic: &CreatableTopic,
    wanted: &Wanted,
    id: [u8; 16],
    version: i16,
) -> CreatableTopicResult {
    let result = CreatableTopicResult::default().with_name(topic.name.clone());
    // The effective configs are part of the answer from v5 on.
    if version < 5 {
        return result;
    }
    result
        .with_topic_id(uuid::Uuid::from_bytes(id))
        .with_num_partitions(wanted.partition_count)
        .with_replication_factor(wanted.replication_factor)
        .with_configs(Some(describe(&wanted.configs, shared)))
}

/// Cluster mode: the quorum creates the topic; the answer waits for this broker's view.
async fn cluster_create(
    shared: &BrokerShared,
    link: &ClusterLink,
    topic: &CreatableTopic,
    validate_only: bool,
    version: i16,
    budget: &mut PartitionBudget,
) -> Result<CreatableTopicResult, AdminError> {
    let name = topic.name.as_str();
    let inter_broker = crate::kafka_listener::inter_broker_name(&shared.config);
    let alive = alive_brokers(&link.image().metadata, inter_broker).len();
    let wanted = wanted(shared, topic, alive, budget)?;
    let exists = || {
        AdminError::new(
            ResponseError::TopicAlreadyExists,
            format!("topic '{name}' already exists"),
        )
    };
    if validate_only {
        if link.image().metadata.topic_by_name(name).is_some() {
            return Err(exists());
        }
        budget.spend(i64::from(wanted.partition_count));
        return Ok(created(shared, topic, &wanted, [0u8; 16], version));
    }
    let request = laminar_controller::api::CreatableTopic {
        name: name.to_string(),
        num_partitions: wanted.partition_count,
        replication_factor: wanted.replication_factor,
        configs: wanted.configs.clone(),
        assignments: Vec::new(),
        topic_id: None,
    };
    let results = with_retries(|| link.handle.create_topics(vec![request.clone()])).await?;
    let result = results
        .into_iter()
        .next()
        .ok_or_else(|| AdminError::new(ResponseError::UnknownServerError, "no answer for the topic"))?;
    let topic_id = result.result?;
    wait_for_view(link, |image| image.metadata.topic_by_name(name).is_some()).await;
    tracing::info!(topic = name, partitions = wanted.partition_count, "created topic");
    budget.spend(i64::from(wanted.partition_count));
    Ok(created(shared, topic, &wanted, topic_id, version))
}

fn create(
    shared: &BrokerShared,
    topic: &CreatableTopic,
    validate_only: bool,
    version: i16,
    budget: &mut PartitionBudget,
) -> Result<CreatableTopicResult, AdminError> {
    let name = topic.name.as_str();
    let wanted = wanted(shared, topic, 1, budget)?;
    let Wanted {
        partition_count,
        replication_factor,
        ..
    } = wanted;
    let id = if validate_only {
        if shared.metadata.current().get(name).is_some() {
            return Err(AdminError::new(
                ResponseError::TopicAlreadyExists,
                format!("topic '{name}' already exists"),
            ));
        }
        shared.metadata.check_room(i64::from(partition_count))?;
        [0u8; 16]
    } else {
        let created = shared.metadata.create_topic(
            name,
            partition_count,
            replication_factor,
            wanted.configs.clone(),
        )?;
        tracing::info!(topic = name, partitions = partition_count, "created topic");
        created.id
    };
    budget.spend(i64::from(partition_count));
    Ok(created(shared, topic, &wanted, id, version))
}

/// The partitions `topic` asks for: from its explicit assignment, or its count, or the default.
fn partition_count(shared: &BrokerShared, topic: &CreatableTopic) -> Result<i32, AdminError> {
    let node_id = shared.node_id();
    let partition_count = if !topic.assignments.is_empty() && shared.cluster.is_some() {
        return Err(AdminError::new(
            ResponseError::InvalidReplicaAssignment,
            "manual replica assignments are not supported in cluster mode yet",
        ));
    } else if !topic.assignments.is_empty() {
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err(AdminError::new(
                ResponseError::InvalidRequest,
                "give either assignments or num_partitions/replication_factor, not both",
            ));
        }
        let foreign = topic
            .assignments
            .iter()
            .flat_map(|a| &a.broker_ids)
            .any(|b| b.0 != node_id.get());
        if foreign {
            return Err(AdminError::new(
                ResponseError::InvalidReplicaAssignment,
                "unknown broker in assignment",
            ));
        }
        topic.assignments.len() as i32
    } else if topic.num_partitions == -1 {
        shared.config.num_partitions
    } else {
        topic.num_partitions
    };
    if partition_count < 1 {
        return Err(AdminError::new(
            ResponseError::InvalidPartitions,
            "partitions must be at least 1",
        ));
    }
    Ok(partition_count)
}

/// The replication factor `topic` asks for, or the default; each of the `alive` brokers holds
/// at most one replica (Kafka's INVALID_REPLICATION_FACTOR beyond them).
fn replication_factor(
    shared: &BrokerShared,
    topic: &CreatableTopic,
    alive: usize,
) -> Result<i16, AdminError> {
    let replication_factor = if topic.replication_factor == -1 {
        shared.config.default_replication_factor
    } else {
        topic.replication_factor
    };
    let fits = usize::try_from(replication_factor).is_ok_and(|rf| rf >= 1 && rf <= alive);
    if !fits {
        let brokers = if alive == 1 { "broker" } else { "brokers" };
        return Err(AdminError::new(
            ResponseError::InvalidReplicationFactor,
            format!("replication factor {replication_factor} is larger than the {alive} available {brokers}"),
        ));
    }
    Ok(replication_factor)
}

fn describe(configs: &BTreeMap<String, String>, shared: &BrokerShared) -> Vec<CreatableTopicConfigs> {
    TopicConfig::describe(configs, &shared.effective_config.current())
        .into_iter()
        .map(|entry| {
            CreatableTopicConfigs::default()
                .with_name(StrBytes::from_string(entry.name))
                .with_value(entry.value.map(StrBytes::from_string))
                .with_read_only(entry.read_only)
                .with_config_source(entry.source.kafka_code())
                .with_is_sensitive(entry.sensitive)
        })
        .collect()
}
