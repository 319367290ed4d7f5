//! Changing existing topics: CreatePartitions (grow the partition count) and
//! IncrementalAlterConfigs (set or delete topic config overrides, or dynamic broker configs).

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::{ApiKey, CreatePartitionsRequest, IncrementalAlterConfigsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::connection::Connection;
use crate::error::{check_code, ClientError};

/// One change to a topic's config overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    /// Override `key` with `value` (IncrementalAlterConfigs SET).
    Set(String, String),
    /// Drop the override of `key`, back to the broker default (DELETE).
    Delete(String),
}

const TOPIC_RESOURCE: i8 = 2;
/// A broker's dynamic configs: named by its id, or empty for every broker's default.
pub const BROKER_RESOURCE: i8 = 4;
const OPERATION_SET: i8 = 0;
const OPERATION_DELETE: i8 = 1;

impl Connection {
    /// Grows `topic` to `partition_count` partitions.
    pub fn create_partitions(
        &mut self,
        topic: &str,
        partition_count: i32,
        timeout_ms: i32,
    ) -> Result<(), ClientError> {
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(timeout_ms)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_count(partition_count)]);
        let response = self.request(&request)?;
        let result = response
            .results
            .first()
            .ok_or_else(|| ClientError::MissingInResponse {
                api: ApiKey::CreatePartitions,
                what: topic.to_owned(),
            })?;
        check_code(
            ApiKey::CreatePartitions,
            result.error_code,
            result.error_message.as_deref(),
            || format!(" {topic}"),
        )
    }

    /// Applies `changes` to `topic`'s config overrides; the rest stay as they are.
    pub fn alter_topic_configs(&mut self, topic: &str, changes: &[ConfigChange]) -> Result<(), ClientError> {
        self.alter_configs(TOPIC_RESOURCE, topic, changes)
    }

    /// Applies `changes` to the configs of a resource (`resource_type`: 2 topic, 4 broker); the
    /// rest stay as they are.
    pub fn alter_configs(
        &mut self,
        resource_type: i8,
        resource_name: &str,
        changes: &[ConfigChange],
    ) -> Result<(), ClientError> {
        let configs = changes
            .iter()
            .map(|change| match change {
                ConfigChange::Set(key, value) => AlterableConfig::default()
                    .with_name(StrBytes::from_string(key.clone()))
                    .with_config_operation(OPERATION_SET)
                    .with_value(Some(StrBytes::from_string(value.clone()))),
                ConfigChange::Delete(key) => AlterableConfig::default()
                    .with_name(StrBytes::from_string(key.clone()))
                    .with_config_operation(OPERATION_DELETE),
            })
            .collect();
        let request =
            IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(StrBytes::from_string(resource_name.to_owned()))
                .with_configs(configs)]);
        let response = self.request(&request)?;
        let result = response
            .responses
            .first()
            .ok_or_else(|| ClientError::MissingInResponse {
                api: ApiKey::IncrementalAlterConfigs,
                what: resource_name.to_owned(),
            })?;
        check_code(
            ApiKey::IncrementalAlterConfigs,
            result.error_code,
            result.error_message.as_deref(),
            || format!(" {resource_name}"),
        )
    }
}
