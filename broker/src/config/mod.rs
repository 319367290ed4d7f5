//! Broker and topic configuration, in Kafka's names and with Kafka's defaults.
//!
//! - [`properties`]: the Java `.properties` reader for `server.properties`.
//! - [`broker`]: [`BrokerConfig`], loaded from the file plus `--override key=value` entries, from a
//!   table-driven registry of every broker key Laminar knows (name, default, doc, value kind).
//! - [`topic`]: [`TopicConfig`], Kafka's topic-level configs whose defaults come from the broker
//!   config, their validation, and the engine's `LogConfig` resolved from them.
//! - [`value`]: value kinds and the typed values keys parse into.
//!
//! Both registries can [`describe`](BrokerConfig::describe) every key with its value and where
//! the value came from, which is what the DescribeConfigs handler serialises.
//!
//! A loaded config is immutable and shared read-only across shards; dynamic broker configs
//! ([`dynamic`]) make a new one beside it.

pub mod broker;
mod broker_keys;
mod broker_settings;
pub mod connection_limits;
pub mod dynamic;
mod dynamic_layers;
pub mod engine;
pub mod properties;
pub mod topic;
mod topic_keys;
pub mod value;
pub mod write_behind;

pub use broker::cluster_keys::{ClusterSettings, ProcessRoles, ReplicationSettings};
pub use broker::{ConfigWarning, LoadedBrokerConfig};
pub use broker_settings::{AuthorizerSettings, BrokerConfig, ConsumerGroupSettings};
pub use connection_limits::ConnectionsPerIpLimits;
pub use topic::TopicConfig;
pub use value::{
    CleanupPolicy, CompressionType, ConfigType, FsyncSetting, Kind, Listener, LogFormat, TimestampType,
};
pub use write_behind::{ProfileRecommendation, SettingSource, WriteBehindChoice};

/// A configuration error. Every variant about a key names the key and the offending value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("config error: cannot read {path}: {reason}")]
    Io { path: String, reason: String },
    #[error("config error: line {line}: {reason}")]
    Syntax { line: usize, reason: String },
    #[error("config error: --override {entry:?}: expected key=value")]
    BadOverride { entry: String },
    #[error("config error: unknown {scope} config {key:?} (value {value:?})")]
    UnknownKey {
        scope: &'static str,
        key: String,
        value: String,
    },
    #[error("config error: {key}: expected {expected}, got {value:?}")]
    InvalidValue {
        key: String,
        value: String,
        expected: String,
    },
    #[error("config error: {key}: {reason} (got {value:?})")]
    Rejected {
        key: String,
        value: String,
        reason: String,
    },
    /// The iotune profile (`laminar.iotune.profile`) cannot be used.
    #[error("config error: iotune profile {path}: {reason}")]
    Profile { path: String, reason: String },
}

impl ConfigError {
    /// The key the error is about, if it is about one (the protocol layer reports it).
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::UnknownKey { key, .. }
            | ConfigError::InvalidValue { key, .. }
            | ConfigError::Rejected { key, .. } => Some(key),
            ConfigError::Io { .. }
            | ConfigError::Syntax { .. }
            | ConfigError::BadOverride { .. }
            | ConfigError::Profile { .. } => None,
        }
    }
}

/// Where a described value comes from; the discriminants are Kafka's `ConfigSource` codes
/// (DescribeConfigs v1+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// A per-topic override (`DYNAMIC_TOPIC_CONFIG`).
    DynamicTopic = 1,
    /// Set for this broker while it runs (`DYNAMIC_BROKER_CONFIG`).
    DynamicBroker = 2,
    /// Set for every broker while they run, `--entity-default` (`DYNAMIC_DEFAULT_BROKER_CONFIG`).
    DynamicDefaultBroker = 3,
    /// Set in `server.properties` or by `--override` (`STATIC_BROKER_CONFIG`).
    StaticBroker = 4,
    /// Nobody set it: the built-in default (`DEFAULT_CONFIG`).
    Default = 5,
}

impl ConfigSource {
    pub fn kafka_code(self) -> i8 {
        self as i8
    }
}

/// One place a value could come from, in precedence order (DescribeConfigs `synonyms`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSynonym {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
}

/// One row of DescribeConfigs: a config, its effective value and its provenance.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigEntry {
    pub name: String,
    /// `None` when the key is unset and has no default of its own (Kafka's null).
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub sensitive: bool,
    pub synonyms: Vec<ConfigSynonym>,
    pub config_type: ConfigType,
    pub doc: &'static str,
}
