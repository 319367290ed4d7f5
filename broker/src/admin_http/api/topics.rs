//! `/v1/topics`: list, describe, create, add partitions, delete, through the broker's own
//! Metadata, DescribeConfigs, CreateTopics, CreatePartitions and DeleteTopics handlers.

use crate::authorization::Access;
use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde::Deserialize;
use serde_json::json;

use super::{ok, ApiError, ApiResult, Query};
use crate::admin_http::routes::Response;
use crate::broker::{on_owning_shards, BrokerCtx, TopicPartition};
use crate::handlers::{create_partitions, create_topics, delete_topics, describe_configs, metadata};
use crate::kafka_listener::ListenerId;

/// How long an admin action may take on the broker (as the CLI's).
const ADMIN_TIMEOUT_MS: i32 = 30_000;
/// Kafka's resource type of a topic in DescribeConfigs.
const TOPIC_RESOURCE: i8 = 2;

/// A partition's offsets and size, as its owning shard sees it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    pub log_start_offset: i64,
    pub high_watermark: i64,
    /// Where a read_committed consumer stops: below the first open transaction's first record.
    pub last_stable_offset: i64,
    pub log_end_offset: i64,
    pub size_bytes: u64,
}

/// Whether reading a partition's figures may open it (partitions open on first use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// Only partitions already open answer (a list must not open every partition).
    OpenOnly,
    /// A written partition is opened to answer (one topic's page).
    OpenIfWritten,
}

/// The figures of each of `partitions` (`None`: not open, not led here, or failed).
pub async fn figures(
    ctx: &Rc<BrokerCtx>,
    partitions: Vec<TopicPartition>,
    opening: Opening,
) -> Vec<(TopicPartition, Option<Figures>)> {
    let items = partitions.into_iter().map(|tp| (tp, ())).collect();
    let answers = on_owning_shards(ctx, items, move |there, tp, ()| async move {
        let open = match opening {
            Opening::OpenOnly => there.state.partitions.get(&tp.topic, tp.partition),
            Opening::OpenIfWritten => match there.state.partition_to_read(&tp).await? {
                Some(partition) => Some(partition),
                // Never written: it has no files, and its offsets and size are 0.
                None => return Ok(Some(Figures::default())),
            },
        };
        Ok(open.map(|p| Figures {
            log_start_offset: p.log_start_offset().get(),
            high_watermark: p.high_watermark().get(),
            last_stable_offset: p.last_stable_offset().get(),
            log_end_offset: p.log_end_offset().get(),
            size_bytes: p.size_bytes(),
        }))
    })
    .await;
    answers
        .into_iter()
        .map(|(tp, answer)| (tp, answer.ok().flatten()))
        .collect()
}

/// `GET /v1/topics`: every topic with its partition count, replication factor, config
/// overrides, and the size and offsets of its open partitions.
pub async fn list(ctx: &Rc<BrokerCtx>, query: &Query) -> ApiResult {
    query.only(&[])?;
    let table = ctx.state.shared.metadata.current();
    let partitions: Vec<TopicPartition> = table
        .topics
        .values()
        .flat_map(|t| {
            let name: std::sync::Arc<str> = t.name.as_str().into();
            (0..t.partition_count).map(move |partition| TopicPartition::new(name.clone(), partition))
        })
        .collect();
    let mut per_topic: BTreeMap<String, (u64, i64, usize)> = BTreeMap::new();
    for (tp, found) in figures(ctx, partitions, Opening::OpenOnly).await {
        let entry = per_topic.entry(tp.topic.to_string()).or_default();
        if let Some(f) = found {
            entry.0 += f.size_bytes;
            entry.1 += (f.high_watermark - f.log_start_offset).max(0);
            entry.2 += 1;
        }
    }
    let topics: Vec<serde_json::Value> = table
        .topics
        .values()
        .map(|t| {
            let (size, records, open) = per_topic.get(&t.name).copied().unwrap_or_default();
            json!({
                "name": t.name,
                "internal": t.name.starts_with("__"),
                "partitions": t.partition_count,
                "replication_factor": t.replication_factor,
                "configs": t.configs,
                "size_bytes": size,
                "records": records,
                "partitions_open": open,
            })
        })
        .collect();
    ok(&json!({ "topics": topics }))
}

/// `GET /v1/topics/{name}`: partitions (leader, replicas, ISR, offsets, size) and configs.
pub async fn describe(ctx: &Rc<BrokerCtx>, name: &str, query: &Query) -> ApiResult {
    query.only(&[])?;
    let metadata = topic_metadata(ctx, name).await?;
    let topic = metadata
        .topics
        .first()
        .ok_or_else(|| ApiError::new(404, format!("unknown topic {name}")))?;
    if topic.error_code != 0 {
        return Err(ApiError::kafka(topic.error_code, Some(name)));
    }
    let wanted = topic
        .partitions
        .iter()
        .map(|p| TopicPartition {
            topic: name.into(),
            partition: p.partition_index,
        })
        .collect();
    let found: BTreeMap<i32, Figures> = figures(ctx, wanted, Opening::OpenIfWritten)
        .await
        .into_iter()
        .filter_map(|(tp, f)| Some((tp.partition, f?)))
        .collect();
    let mut partitions: Vec<serde_json::Value> = topic
        .partitions
        .iter()
        .map(|p| {
            let f = found.get(&p.partition_index);
            json!({
                "partition": p.partition_index,
                "leader": p.leader_id.0,
                "leader_epoch": p.leader_epoch,
                "replicas": p.replica_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
                "isr": p.isr_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
                "offline_replicas": p.offline_replicas.iter().map(|b| b.0).collect::<Vec<_>>(),
                "log_start_offset": f.map(|f| f.log_start_offset),
                "high_watermark": f.map(|f| f.high_watermark),
                "last_stable_offset": f.map(|f| f.last_stable_offset),
                "log_end_offset": f.map(|f| f.log_end_offset),
                "size_bytes": f.map(|f| f.size_bytes),
            })
        })
        .collect();
    partitions.sort_by_key(|p| p["partition"].as_i64());
    ok(&json!({
        "name": name,
        "internal": topic.is_internal,
        "partitions": partitions,
        "configs": topic_configs(ctx, name)?,
    }))
}

async fn topic_metadata(ctx: &Rc<BrokerCtx>, name: &str) -> Result<MetadataResponse, ApiError> {
    laminar_engine::metadata::topic_table::validate_topic_name(name)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic_name(name)))
        ]))
        .with_allow_auto_topic_creation(false);
    Ok(metadata::handle(ctx, (&Access::unrestricted(), ListenerId(0)), request, 9).await)
}

/// Every config of the topic with its value and where it comes from (DescribeConfigs).
fn topic_configs(ctx: &Rc<BrokerCtx>, name: &str) -> Result<Vec<serde_json::Value>, ApiError> {
    let request = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(TOPIC_RESOURCE)
        .with_resource_name(StrBytes::from_string(name.to_string()))]);
    let response = describe_configs::handle(ctx, &Access::unrestricted(), request, 1);
    let Some(result) = response.results.first() else {
        return Ok(Vec::new());
    };
    if result.error_code != 0 {
        return Err(ApiError::kafka(
            result.error_code,
            result.error_message.as_deref(),
        ));
    }
    Ok(result
        .configs
        .iter()
        .map(|c| {
            json!({
                "name": c.name.as_str(),
                "value": c.value.as_deref(),
                "source": config_source(c.config_source),
                "read_only": c.read_only,
            })
        })
        .collect())
}

/// Kafka's config source codes, by name.
fn config_source(code: i8) -> &'static str {
    match code {
        1 => "topic",
        4 => "static_broker",
        5 => "default",
        _ => "other",
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// `POST /v1/topics`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewTopic {
    pub name: String,
    /// Default: the broker's `num.partitions`.
    pub partitions: Option<i32>,
    /// Default: the broker's `default.replication.factor`.
    pub replication_factor: Option<i16>,
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
}

/// `POST /v1/topics`: creates a topic (CreateTopics); 201 with what was created.
pub async fn create(ctx: &Rc<BrokerCtx>, new: NewTopic) -> ApiResult {
    let configs = new
        .configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_value(Some(StrBytes::from_string(v.clone())))
        })
        .collect();
    let topic = CreatableTopic::default()
        .with_name(topic_name(&new.name))
        .with_num_partitions(new.partitions.unwrap_or(-1))
        .with_replication_factor(new.replication_factor.unwrap_or(-1))
        .with_configs(configs);
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(ADMIN_TIMEOUT_MS);
    let response = create_topics::handle(ctx, &Access::unrestricted(), request, 5).await;
    let result = response
        .topics
        .first()
        .ok_or_else(|| ApiError::new(500, "CreateTopics answered nothing"))?;
    if result.error_code != 0 {
        return Err(ApiError::kafka(
            result.error_code,
            result.error_message.as_deref(),
        ));
    }
    Ok(Response::json(
        201,
        &json!({
            "name": new.name,
            "partitions": result.num_partitions,
            "replication_factor": result.replication_factor,
        }),
    ))
}

/// `POST /v1/topics/{name}/partitions`'s body: the new partition count (more than today's).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionCount {
    pub count: i32,
}

/// `POST /v1/topics/{name}/partitions`: raises the partition count (CreatePartitions).
pub async fn add_partitions(ctx: &Rc<BrokerCtx>, name: &str, wanted: PartitionCount) -> ApiResult {
    let request = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic_name(name))
            .with_count(wanted.count)])
        .with_timeout_ms(ADMIN_TIMEOUT_MS);
    let response = create_partitions::handle(ctx, &Access::unrestricted(), request).await;
    let result = response
        .results
        .first()
        .ok_or_else(|| ApiError::new(500, "CreatePartitions answered nothing"))?;
    if result.error_code != 0 {
        return Err(ApiError::kafka(
            result.error_code,
            result.error_message.as_deref(),
        ));
    }
    ok(&json!({ "name": name, "partitions": wanted.count }))
}

/// `DELETE /v1/topics/{name}`: deletes the topic and its data (DeleteTopics).
pub async fn delete(ctx: &Rc<BrokerCtx>, name: &str, query: &Query) -> ApiResult {
    query.only(&[])?;
    let request = DeleteTopicsRequest::default()
        .with_topic_names(vec![topic_name(name)])
        .with_timeout_ms(ADMIN_TIMEOUT_MS);
    let response = delete_topics::handle(ctx, &Access::unrestricted(), request, 5).await;
    let result = response
        .responses
        .first()
        .ok_or_else(|| ApiError::new(500, "DeleteTopics answered nothing"))?;
    if result.error_code != 0 {
        return Err(ApiError::kafka(
            result.error_code,
            result.error_message.as_deref(),
        ));
    }
    ok(&json!({ "deleted": name }))
}
