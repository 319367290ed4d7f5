//! The state every shard shares: the broker's configuration, its metadata, and the services
//! that are one per broker (fetch sessions, descriptor budgets, the cluster link). Read by every
//! shard, so apart from what one shard owns.

use laminar_model::NodeId;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use laminar_engine::io::WriteBehind;
use laminar_engine::metadata::{MetadataStore, ProducerIdAllocator, TopicMetadata};
use laminar_engine::partition::LogConfig;
use laminar_engine::shard::partitions::PartitionSpec;

use crate::config::BrokerConfig;

use super::shutdown::ShutdownSignal;

/// State every shard shares. Shared read-only across shards (the topic table has its own
/// single-writer discipline).
pub struct BrokerShared {
    /// The config as loaded at start (`server.properties`, `--override`).
    pub config: BrokerConfig,
    /// `config` with the dynamic broker configs over it: what topic defaults and throttles
    /// follow.
    pub effective_config: crate::dynamic_configs::EffectiveConfig,
    /// The exclusive lock on every log dir, held for the broker's lifetime.
    pub log_dir_locks: Vec<crate::log_dir_lock::LogDirLock>,
    /// Why write-behind, though configured, does not run (its io_uring could not be created).
    pub write_behind_unavailable: Option<String>,
    pub metadata: MetadataStore,
    pub producer_ids: ProducerIdAllocator,
    pub log_dir: PathBuf,
    pub cluster_id: String,
    pub shutdown: ShutdownSignal,
    /// Memory for requests on their way in (`queued.max.request.bytes`).
    pub request_memory: Arc<crate::request_memory::RequestMemory>,
    /// Client connections' share of descriptors (`max.connections`).
    pub connection_slots: Arc<crate::connection_slots::ConnectionSlots>,
    /// The ACLs (`authorizer.class.name`); `None`: every principal may do everything.
    pub authorizer: Option<crate::authorization::Authorizer>,
    /// Client quotas and every client's rates against them.
    pub client_quotas: crate::client_quotas::ClientQuotaManager,
    /// Connections open per client address (`max.connections.per.ip`).
    pub connections_per_ip: Arc<crate::connections_per_ip::ConnectionsPerIp>,
    /// `max.connection.creation.rate`, broker-wide and per listener.
    pub connection_rate: crate::connection_rate::ConnectionRate,
    /// Failed SASL logins per address: their answers are held back longer each time.
    pub failed_logins: crate::failed_logins::FailedLogins,
    /// Partition files' share of descriptors, shared by the shards' file caches.
    pub storage_descriptors: Arc<laminar_engine::io::DescriptorBudget>,
    /// Opened once every shard has bound its listeners; shards accept only after it.
    pub start_gate: ShutdownSignal,
    /// Cluster mode's link to the controller quorum; `None` in the single-node mode.
    pub cluster: Option<Arc<crate::quorum::ClusterLink>>,
    /// Incremental fetch sessions (KIP-227), whichever shard a fetch arrives on.
    pub fetch_sessions: crate::fetch_sessions::FetchSessions,
    /// SCRAM users (AlterUserScramCredentials), in the first log dir. Read once per
    /// authentication, written by the admin API: a lock, off the data path.
    pub scram_credentials: std::sync::RwLock<laminar_security::credentials::ScramCredentialStore>,
    /// Each client listener's TLS (`None` for a listener without), by `ListenerId`.
    pub listener_tls: Vec<Option<crate::tls::ListenerTls>>,
}

impl BrokerShared {
    /// Listener `id`'s TLS, if it has any.
    pub fn listener_tls(&self, id: crate::kafka_listener::ListenerId) -> Option<&crate::tls::ListenerTls> {
        self.listener_tls.get(id.0).and_then(Option::as_ref)
    }

    /// The log settings of one topic: its overrides over the broker's defaults.
    pub fn log_config_for(&self, topic: &TopicMetadata) -> LogConfig {
        self.effective_config
            .read(|config| crate::config::engine::log_config(&topic.configs, config))
    }

    /// What a partition of `topic` opens with: its log settings and its id (a directory left by
    /// a deleted topic of that name is not opened as this one's).
    pub(super) fn partition_spec(&self, topic: &TopicMetadata) -> PartitionSpec {
        PartitionSpec {
            config: self.log_config_for(topic),
            topic_id: Some(topic.id),
        }
    }

    /// [`partition_spec`](Self::partition_spec) of the topic named `topic`; the broker's
    /// defaults and no id if it is gone (an open that races the topic's deletion).
    pub(super) fn partition_spec_named(&self, topic: &str) -> PartitionSpec {
        self.metadata.with_current(|table| match table.get(topic) {
            Some(topic) => self.partition_spec(topic),
            None => (self.effective_config)
                .read(|config| crate::config::engine::log_config(&BTreeMap::new(), config))
                .into(),
        })
    }

    /// `min.insync.replicas` of `topic`: its override, else the broker's (dynamic or static).
    pub fn min_insync_replicas(&self, topic: &str) -> i32 {
        let table = self.metadata.current();
        table
            .get(topic)
            .and_then(|t| t.configs.get("min.insync.replicas"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| self.effective_config.read(|config| config.min_insync_replicas))
    }

    /// Whether `topic`'s `key` (`leader.replication.throttled.replicas` or
    /// `follower.replication.throttled.replicas`) lists `partition` on this broker.
    pub fn replica_throttled(&self, key: &str, topic: &str, partition: i32) -> bool {
        let table = self.metadata.current();
        let listed = table.get(topic).and_then(|t| t.configs.get(key));
        listed.is_some_and(|value| {
            crate::replication::throttle::lists_replica(value, partition, self.node_id())
        })
    }

    pub fn node_id(&self) -> NodeId {
        self.config.node_id
    }

    /// The write-behind settings the shards run with (off when unavailable).
    pub fn write_behind(&self) -> WriteBehind {
        match self.write_behind_unavailable {
            None => self.config.write_behind.settings,
            Some(_) => WriteBehind::disabled(),
        }
    }

    /// For the startup line and `/v1/status`: the settings and their sources, or why not.
    pub fn write_behind_summary(&self) -> String {
        match &self.write_behind_unavailable {
            None => self.config.write_behind.to_string(),
            Some(reason) => format!("unavailable ({reason}); configured {}", self.config.write_behind),
        }
    }
}
