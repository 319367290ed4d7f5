//! The broker configuration as the storage engine needs it.

use std::collections::BTreeMap;

use laminar_engine::partition::LogConfig;

use super::{BrokerConfig, TopicConfig};

/// A topic's log settings: its overrides over the broker defaults. Overrides were validated when
/// stored; should one no longer resolve (a key retired between versions), the broker defaults
/// apply and the operator hears about it.
pub fn log_config(overrides: &BTreeMap<String, String>, broker: &BrokerConfig) -> LogConfig {
    let topic = TopicConfig::resolve(overrides, broker).unwrap_or_else(|error| {
        tracing::warn!(%error, "stored topic config no longer resolves; using broker defaults");
        TopicConfig::resolve(&BTreeMap::new(), broker).expect("broker defaults always resolve")
    });
    topic.log_config()
}
