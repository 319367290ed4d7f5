//! The broker configuration as the storage engine needs it.

use std::collections::BTreeMap;

use laminar_engine::partition::{LogConfig, TimestampType as EngineTimestampType};

use super::{BrokerConfig, ResolvedLogSettings, TimestampType};

/// A topic's log settings: its overrides over the broker defaults. Overrides were validated when
/// stored; should one no longer resolve (a key retired between versions), the broker defaults
/// apply and the operator hears about it.
pub fn log_config(overrides: &BTreeMap<String, String>, broker: &BrokerConfig) -> LogConfig {
    let settings = ResolvedLogSettings::for_topic(overrides, broker).unwrap_or_else(|error| {
        tracing::warn!(%error, "stored topic config no longer resolves; using broker defaults");
        ResolvedLogSettings::for_topic(&BTreeMap::new(), broker).expect("broker defaults always resolve")
    });
    LogConfig {
        segment_bytes: settings.segment_bytes,
        segment_ms: settings.segment_ms,
        retention_ms: settings.retention_ms,
        retention_bytes: settings.retention_bytes,
        index_interval_bytes: settings.index_interval_bytes,
        max_message_bytes: settings.max_message_bytes,
        timestamp_type: match settings.timestamp_type {
            TimestampType::CreateTime => EngineTimestampType::CreateTime,
            TimestampType::LogAppendTime => EngineTimestampType::LogAppendTime,
        },
        cleanup_policy_compact: settings.cleanup_policy_compact,
        cleanup_policy_delete: settings.cleanup_policy_delete,
        delete_retention_ms: settings.delete_retention_ms,
        min_compaction_lag_ms: settings.min_compaction_lag_ms,
    }
}
