//! What the topic administration handlers share: config validation with Kafka error codes, and
//! running an action on every partition of a topic on its owning shard.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use laminar_controller::Refusal;
use laminar_engine::metadata::{MetadataError, TopicMetadata};

use crate::broker::{on_owning_shards, BrokerCtx, PartitionAccessError, TopicPartition};
use crate::config::topic::validate_topic_override;

/// A failed admin request: a Kafka error code and a message for the client.
#[derive(Debug)]
pub struct AdminError {
    pub code: i16,
    pub message: String,
}

impl AdminError {
    pub fn new(code: ResponseError, message: impl Into<String>) -> Self {
        Self {
            code: code.code(),
            message: message.into(),
        }
    }
}

impl From<MetadataError> for AdminError {
    fn from(e: MetadataError) -> Self {
        let code = match &e {
            MetadataError::TopicAlreadyExists(_) => ResponseError::TopicAlreadyExists,
            MetadataError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
            MetadataError::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
            MetadataError::InvalidPartitions { .. } => ResponseError::InvalidPartitions,
            // Kafka has no code of its own for it (KIP-578's RESOURCE_LIMIT_REACHED never
            // shipped); POLICY_VIOLATION is what Kafka answers when its create-topic policy, the
            // means it offers today to bound partitions, refuses a request.
            MetadataError::PartitionLimit { .. } => ResponseError::PolicyViolation,
            // In a cluster every topic change goes through the quorum; a local write is refused.
            MetadataError::FollowsController => ResponseError::InvalidRequest,
            MetadataError::Io { .. } | MetadataError::Invalid { .. } => {
                tracing::error!(error = %e, "topic metadata write failed");
                ResponseError::KafkaStorageError
            }
        };
        AdminError::new(code, e.to_string())
    }
}

/// What the controller quorum refused: the request as a whole (no leader within the wait,
/// ...) or one topic of it.
impl From<Refusal> for AdminError {
    fn from(refusal: Refusal) -> Self {
        AdminError::new(refusal.response_error(), refusal.to_string())
    }
}

/// What one CreateTopics or CreatePartitions request may still add, all its topics together
/// (`laminar.request.partitions.max`). Lives for one request on one shard's task.
pub struct PartitionBudget {
    left: i64,
    max: i32,
}

impl PartitionBudget {
    pub fn new(max: i32) -> Self {
        Self {
            left: i64::from(max),
            max,
        }
    }

    /// Refuses a topic that would add `added` partitions (its count, or its growth) when the
    /// request has not that many left, with INVALID_PARTITIONS: the count is out of range.
    pub fn check(&self, added: i64) -> Result<(), AdminError> {
        if added > self.left {
            return Err(AdminError::new(
                ResponseError::InvalidPartitions,
                format!(
                    "{added} new partitions would make this request add more than \
                     laminar.request.partitions.max={} partitions",
                    self.max
                ),
            ));
        }
        Ok(())
    }

    /// Counts `added` partitions the request did add (or validated).
    pub fn spend(&mut self, added: i64) {
        self.left -= added;
    }
}

/// Checks every topic config override; the message names the key.
pub fn validate_overrides(configs: &BTreeMap<String, String>) -> Result<(), AdminError> {
    for (name, value) in configs {
        validate_topic_override(name, value)
            .map_err(|e| AdminError::new(ResponseError::InvalidConfig, e.to_string()))?;
    }
    Ok(())
}

/// Applies the topic's current log settings to its open partitions (configs take effect live).
pub async fn push_configs(ctx: &Rc<BrokerCtx>, topic: &TopicMetadata) {
    let results = on_every_partition(ctx, topic, |there, tp| async move {
        if let Some(partition) = there.state.partitions.get(&tp.topic, tp.partition) {
            let table = there.state.shared.metadata.current();
            if let Some(topic) = table.get(&tp.topic) {
                partition
                    .set_config(there.state.shared.log_config_for(topic))
                    .await;
            }
        }
        Ok(())
    })
    .await;
    log_failures("apply configs", results);
}

/// Deletes the files of every partition of a removed topic.
pub async fn delete_partitions(ctx: &Rc<BrokerCtx>, topic: &TopicMetadata) {
    let results = on_every_partition(ctx, topic, |there, tp| async move {
        Ok(there.state.partitions.remove(&tp.topic, tp.partition).await?)
    })
    .await;
    log_failures("delete partition", results);
}

async fn on_every_partition<F, Fut>(
    ctx: &Rc<BrokerCtx>,
    topic: &TopicMetadata,
    work: F,
) -> Vec<(TopicPartition, Result<(), PartitionAccessError>)>
where
    F: Fn(Rc<BrokerCtx>, TopicPartition) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = Result<(), PartitionAccessError>> + 'static,
{
    let name: std::sync::Arc<str> = topic.name.as_str().into();
    let items = (0..topic.partition_count)
        .map(|partition| (TopicPartition::new(name.clone(), partition), ()))
        .collect();
    on_owning_shards(ctx, items, move |there, tp, ()| work(there, tp)).await
}

fn log_failures(action: &str, results: Vec<(TopicPartition, Result<(), PartitionAccessError>)>) {
    for (tp, result) in results {
        if let Err(error) = result {
            tracing::error!(topic = &*tp.topic, partition = tp.partition, %error, "{action} failed");
        }
    }
}
