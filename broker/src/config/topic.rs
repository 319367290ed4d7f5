//! [`TopicConfig`]: Kafka's topic-level configs, each defaulting to a broker key, and the
//! engine's `LogConfig` resolved from them.

use std::collections::BTreeMap;

use laminar_engine::partition::{LogConfig, TimestampType as EngineTimestampType};

use super::broker_settings::BrokerConfig;
use super::topic_keys::{find_topic_key, TopicKey, TOPIC_KEYS};
use super::value::{parse_bool, CleanupPolicy, CompressionType, TimestampType};
use super::{ConfigEntry, ConfigError, ConfigSource, ConfigSynonym};

/// The effective configuration of one topic: its overrides over the broker's defaults.
/// Immutable once resolved; shared read-only across shards (a change resolves a new one).
#[derive(Debug, Clone, PartialEq)]
pub struct TopicConfig {
    pub cleanup_policy: CleanupPolicy,
    pub compression_type: CompressionType,
    pub delete_retention_ms: i64,
    pub file_delete_delay_ms: i64,
    pub flush_messages: i64,
    pub flush_ms: i64,
    pub follower_replication_throttled_replicas: String,
    pub index_interval_bytes: u32,
    pub leader_replication_throttled_replicas: String,
    pub local_retention_bytes: i64,
    pub local_retention_ms: i64,
    pub max_compaction_lag_ms: i64,
    pub max_message_bytes: u32,
    pub message_downconversion_enable: bool,
    pub message_timestamp_after_max_ms: i64,
    pub message_timestamp_before_max_ms: i64,
    pub message_timestamp_difference_max_ms: i64,
    pub message_timestamp_type: TimestampType,
    pub min_cleanable_dirty_ratio: f64,
    pub min_compaction_lag_ms: i64,
    pub min_insync_replicas: i32,
    pub preallocate: bool,
    /// -1 means no size limit.
    pub retention_bytes: i64,
    /// -1 means forever.
    pub retention_ms: i64,
    pub segment_bytes: u32,
    pub segment_index_bytes: u32,
    pub segment_jitter_ms: i64,
    pub segment_ms: i64,
    pub unclean_leader_election_enable: bool,
}

/// Checks one topic config override (CreateTopics / AlterConfigs); the error names the key.
pub fn validate_topic_override(name: &str, value: &str) -> Result<(), ConfigError> {
    let key = find_topic_key(name).ok_or_else(|| ConfigError::UnknownKey {
        scope: "topic",
        key: name.to_string(),
        value: value.to_string(),
    })?;
    key.kind.validate(name, value)
}

impl TopicConfig {
    /// Resolves `overrides` (validated here) over the broker's defaults.
    pub fn resolve(
        overrides: &BTreeMap<String, String>,
        broker: &BrokerConfig,
    ) -> Result<TopicConfig, ConfigError> {
        for (name, value) in overrides {
            validate_topic_override(name, value)?;
        }
        let v = TopicValues { overrides, broker };
        let config = TopicConfig {
            cleanup_policy: v.parsed("cleanup.policy", CleanupPolicy::parse)?,
            compression_type: v.parsed("compression.type", CompressionType::parse)?,
            delete_retention_ms: v.int("delete.retention.ms")?,
            file_delete_delay_ms: v.int("file.delete.delay.ms")?,
            flush_messages: v.int("flush.messages")?,
            flush_ms: v.int("flush.ms")?,
            follower_replication_throttled_replicas: v
                .text(registered("follower.replication.throttled.replicas")),
            index_interval_bytes: v.narrow("index.interval.bytes")?,
            leader_replication_throttled_replicas: v
                .text(registered("leader.replication.throttled.replicas")),
            local_retention_bytes: v.int("local.retention.bytes")?,
            local_retention_ms: v.int("local.retention.ms")?,
            max_compaction_lag_ms: v.int("max.compaction.lag.ms")?,
            max_message_bytes: v.narrow("max.message.bytes")?,
            message_downconversion_enable: v.parsed("message.downconversion.enable", parse_bool)?,
            message_timestamp_after_max_ms: v.int("message.timestamp.after.max.ms")?,
            message_timestamp_before_max_ms: v.int("message.timestamp.before.max.ms")?,
            message_timestamp_difference_max_ms: v.int("message.timestamp.difference.max.ms")?,
            message_timestamp_type: v.parsed("message.timestamp.type", TimestampType::parse)?,
            min_cleanable_dirty_ratio: v.parsed("min.cleanable.dirty.ratio", |s| s.trim().parse().ok())?,
            min_compaction_lag_ms: v.int("min.compaction.lag.ms")?,
            min_insync_replicas: v.narrow("min.insync.replicas")?,
            preallocate: v.parsed("preallocate", parse_bool)?,
            retention_bytes: v.int("retention.bytes")?,
            retention_ms: v.int("retention.ms")?,
            segment_bytes: v.narrow("segment.bytes")?,
            segment_index_bytes: v.narrow("segment.index.bytes")?,
            segment_jitter_ms: v.int("segment.jitter.ms")?,
            segment_ms: v.int("segment.ms")?,
            unclean_leader_election_enable: v.parsed("unclean.leader.election.enable", parse_bool)?,
        };
        if config.min_compaction_lag_ms > config.max_compaction_lag_ms {
            return Err(ConfigError::Rejected {
                key: "min.compaction.lag.ms".to_string(),
                value: config.min_compaction_lag_ms.to_string(),
                reason: format!(
                    "must not exceed max.compaction.lag.ms ({})",
                    config.max_compaction_lag_ms
                ),
            });
        }
        Ok(config)
    }

    /// The part of the config the storage engine acts on.
    pub fn log_config(&self) -> LogConfig {
        LogConfig {
            segment_bytes: u64::from(self.segment_bytes),
            segment_ms: self.segment_ms,
            retention_ms: self.retention_ms,
            retention_bytes: self.retention_bytes,
            index_interval_bytes: self.index_interval_bytes,
            max_message_bytes: self.max_message_bytes,
            timestamp_type: match self.message_timestamp_type {
                TimestampType::CreateTime => EngineTimestampType::CreateTime,
                TimestampType::LogAppendTime => EngineTimestampType::LogAppendTime,
            },
            cleanup_policy_compact: self.cleanup_policy.compact,
            cleanup_policy_delete: self.cleanup_policy.delete,
            delete_retention_ms: self.delete_retention_ms,
            min_compaction_lag_ms: self.min_compaction_lag_ms,
        }
    }

    /// Every topic config with its effective value and source (DynamicTopic for an override,
    /// StaticBroker when a broker key it defaults to was set, else Default). Override keys that
    /// are not topic configs are not listed (they were rejected when stored).
    pub fn describe(overrides: &BTreeMap<String, String>, broker: &BrokerConfig) -> Vec<ConfigEntry> {
        let v = TopicValues { overrides, broker };
        TOPIC_KEYS
            .iter()
            .map(|key| {
                let mut synonyms: Vec<ConfigSynonym> = overrides
                    .get(key.name)
                    .map(|value| ConfigSynonym {
                        name: key.name.to_string(),
                        value: Some(value.clone()),
                        source: ConfigSource::DynamicTopic,
                    })
                    .into_iter()
                    .collect();
                if let Some((first, rest)) = key.broker_keys.split_first() {
                    synonyms.extend(broker.broker_synonyms(first, rest));
                }
                let source = synonyms.first().map_or(ConfigSource::Default, |s| s.source);
                ConfigEntry {
                    name: key.name.to_string(),
                    value: Some(v.text(key)),
                    source,
                    read_only: false,
                    sensitive: false,
                    synonyms,
                    config_type: key.kind.config_type(),
                    doc: key.doc,
                }
            })
            .collect()
    }
}

fn registered(name: &str) -> &'static TopicKey {
    find_topic_key(name).unwrap_or_else(|| panic!("{name} is not a registered topic config"))
}

/// Reads a topic config's text: the override, else the broker's effective value, else the
/// registry constant.
struct TopicValues<'a> {
    overrides: &'a BTreeMap<String, String>,
    broker: &'a BrokerConfig,
}

impl TopicValues<'_> {
    fn text(&self, key: &TopicKey) -> String {
        if let Some(value) = self.overrides.get(key.name) {
            return value.clone();
        }
        key.broker_keys
            .first()
            .map(|broker_key| {
                self.broker
                    .value_of(broker_key)
                    .unwrap_or_else(|| panic!("{broker_key} always has a value"))
            })
            .unwrap_or_else(|| key.default.to_string())
    }

    fn int(&self, name: &str) -> Result<i64, ConfigError> {
        let key = registered(name);
        key.kind.parse_int(name, &self.text(key))
    }

    fn narrow<T: TryFrom<i64>>(&self, name: &str) -> Result<T, ConfigError> {
        let key = registered(name);
        let text = self.text(key);
        let value = key.kind.parse_int(name, &text)?;
        T::try_from(value).map_err(|_| key.kind.invalid(name, &text))
    }

    fn parsed<T>(&self, name: &str, parse: fn(&str) -> Option<T>) -> Result<T, ConfigError> {
        let key = registered(name);
        let text = self.text(key);
        parse(&text).ok_or_else(|| key.kind.invalid(name, &text))
    }
}

#[cfg(test)]
#[path = "topic_tests.rs"]
mod tests;
