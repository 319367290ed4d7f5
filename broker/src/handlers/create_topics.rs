//! CreateTopics: new topics with partition counts, replication factor and config overrides;
//! `validate_only` checks everything and creates nothing.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use laminar_engine::cluster::metadata::validate_topic_name;

use crate::broker::{BrokerCtx, BrokerShared};
use crate::config::TopicConfig;
use crate::handlers::topic_admin::{validate_overrides, AdminError, PartitionBudget};

pub async fn handle(ctx: &Rc<BrokerCtx>, request: CreateTopicsRequest, version: i16) -> CreateTopicsResponse {
    let shared = &ctx.state.shared;
    let mut response = CreateTopicsResponse::default();
    let mut budget = PartitionBudget::new(shared.config.laminar_request_partitions_max);
    for topic in &request.topics {
        let result = match create(shared, topic, request.validate_only, version, &mut budget) {
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

fn create(
    shared: &BrokerShared,
    topic: &CreatableTopic,
    validate_only: bool,
    version: i16,
    budget: &mut PartitionBudget,
) -> Result<CreatableTopicResult, AdminError> {
    let name = topic.name.as_str();
    validate_topic_name(name)?;
    let partition_count = partition_count(shared, topic)?;
    budget.check(i64::from(partition_count))?;
    let replication_factor = replication_factor(shared, topic)?;
    let mut configs = BTreeMap::new();
    for config in &topic.configs {
        if let Some(value) = &config.value {
            configs.insert(config.name.to_string(), value.to_string());
        }
    }
    validate_overrides(&configs)?;
    let described = describe(&configs, shared);
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
        let created = shared
            .metadata
            .create_topic(name, partition_count, replication_factor, configs)?;
        tracing::info!(topic = name, partitions = partition_count, "created topic");
        created.id
    };
    budget.spend(i64::from(partition_count));
    let result = CreatableTopicResult::default().with_name(topic.name.clone());
    // The effective configs are part of the answer from v5 on.
    if version < 5 {
        return Ok(result);
    }
    Ok(result
        .with_topic_id(uuid::Uuid::from_bytes(id))
        .with_num_partitions(partition_count)
        .with_replication_factor(replication_factor)
        .with_configs(Some(described)))
}

/// The partitions `topic` asks for: from its explicit assignment, or its count, or the default.
fn partition_count(shared: &BrokerShared, topic: &CreatableTopic) -> Result<i32, AdminError> {
    let node_id = shared.node_id();
    let partition_count = if !topic.assignments.is_empty() {
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
            .any(|b| b.0 != node_id);
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

/// The replication factor `topic` asks for, or the default; one broker holds one replica.
fn replication_factor(shared: &BrokerShared, topic: &CreatableTopic) -> Result<i16, AdminError> {
    let replication_factor = if topic.replication_factor == -1 {
        shared.config.default_replication_factor
    } else {
        topic.replication_factor
    };
    if replication_factor != 1 {
        return Err(AdminError::new(
            ResponseError::InvalidReplicationFactor,
            format!("replication factor {replication_factor} is larger than the 1 available broker"),
        ));
    }
    Ok(replication_factor)
}

fn describe(configs: &BTreeMap<String, String>, shared: &BrokerShared) -> Vec<CreatableTopicConfigs> {
    TopicConfig::describe(configs, &shared.config)
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
