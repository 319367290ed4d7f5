//! The broker's settings as the broker acts on them: one typed field per key it uses. Loading
//! and validation are in `broker.rs`; the registry of keys, defaults and docs in
//! `broker_keys.rs`.

use crate::group::consumer::assignor::AssignorKind;
use laminar_model::NodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use super::value::{CleanupPolicy, CompressionType, FsyncSetting, Listener, LogFormat, TimestampType};
use super::write_behind::WriteBehindChoice;
use super::ConnectionsPerIpLimits;

/// The broker's static configuration. Built once at start, then shared read-only across shards.
///
/// Fields are the keys the broker itself acts on; every other registered key (those that only
/// serve as topic defaults) is reachable through [`BrokerConfig::value_of`].
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerConfig {
    pub node_id: NodeId,
    pub log_dirs: Vec<PathBuf>,
    pub listeners: Vec<Listener>,
    pub advertised_listeners: Vec<Listener>,
    /// How each of `listeners` secures its connections, in the same order.
    pub listener_security: Vec<super::broker::listener_security::ListenerSecurity>,
    /// In a cluster, how brokers reach each other (replication, the quorum).
    pub peer_links: Option<super::broker::peer_links::PeerLinks>,
    /// The KRaft settings (`process.roles` and the quorum); `None`: the single-node mode.
    pub cluster: Option<super::broker::cluster_keys::ClusterSettings>,
    /// `broker.rack`, when set.
    pub broker_rack: Option<String>,
    /// The cluster default of `unclean.leader.election.enable`.
    pub unclean_leader_election_enable: bool,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub min_insync_replicas: i32,
    pub auto_create_topics_enable: bool,
    pub delete_topic_enable: bool,
    pub message_max_bytes: u32,
    pub socket_request_max_bytes: u32,
    pub fetch_max_bytes: u32,
    /// `max.incremental.fetch.session.cache.slots`.
    pub max_incremental_fetch_session_cache_slots: u32,
    /// `queued.max.request.bytes`; `usize::MAX` for -1 (no bound).
    pub queued_max_request_bytes: usize,
    /// `max.connections` (before the open-file limit bounds it).
    pub max_connections: u64,
    /// `max.connections.per.ip` and its per-address exceptions.
    pub connections_per_ip: ConnectionsPerIpLimits,
    /// `max.connection.creation.rate`, and each listener's own (in the order of `listeners`;
    /// `i32::MAX` when unset).
    pub max_connection_creation_rate: u32,
    pub listener_connection_creation_rates: Vec<u32>,
    /// `quota.window.num` and `quota.window.size.seconds`: how client quotas are measured.
    pub quota_windows: crate::client_quotas::Windows,
    /// `authorizer.class.name` and its settings; `None`: ACLs off.
    pub authorizer: Option<AuthorizerSettings>,
    pub connections_max_idle_ms: i64,
    /// `connections.max.reauth.ms` (KIP-368): 0, SASL sessions never expire.
    pub connections_max_reauth_ms: i64,
    /// `connection.failed.authentication.delay.ms`: how long a failed authentication's answer
    /// (and the close after it) is held back.
    pub connection_failed_authentication_delay_ms: i64,
    /// `laminar.connection.failed.authentication.delay.max.ms`: the most a repeatedly failing
    /// address's delay grows to.
    pub connection_failed_authentication_delay_max_ms: i64,
    pub laminar_request_receive_timeout_ms: i64,
    pub compression_type: CompressionType,
    pub log_segment_bytes: u32,
    pub log_roll_ms: i64,
    /// -1 means forever.
    pub log_retention_ms: i64,
    /// -1 means no size limit.
    pub log_retention_bytes: i64,
    pub log_retention_check_interval_ms: i64,
    pub producer_id_expiration_ms: i64,
    pub log_index_interval_bytes: u32,
    pub log_message_timestamp_type: TimestampType,
    pub log_cleanup_policy: CleanupPolicy,
    pub log_flush_interval_messages: i64,
    pub log_flush_interval_ms: i64,
    pub offsets_topic_num_partitions: i32,
    /// The transaction coordinator's settings (`transaction.*`, `transactional.id.*`).
    pub transactions: TransactionSettings,
    /// `max.broker.partitions`: the most partitions the topic table may hold.
    pub max_broker_partitions: i32,
    /// `laminar.request.partitions.max`: the most partitions one admin request may add.
    pub laminar_request_partitions_max: i32,
    pub group_initial_rebalance_delay_ms: i32,
    /// Consumer groups of KIP-848's protocol (`group.consumer.*`).
    pub consumer_groups: ConsumerGroupSettings,
    pub laminar_cores: usize,
    pub laminar_fsync: FsyncSetting,
    pub laminar_http_listen: SocketAddr,
    /// The HTTP endpoint's HTTPS and who may call it.
    pub admin_http: super::broker::admin_http::AdminHttpSecurity,
    /// `laminar.log.format`: text or JSON lines on stderr.
    pub laminar_log_format: LogFormat,
    /// `laminar.storage.write_batch_bytes`, when set.
    pub laminar_storage_write_batch_bytes: Option<u64>,
    /// `laminar.storage.io_depth`, when set.
    pub laminar_storage_io_depth: Option<u32>,
    /// `laminar.storage.mapped_appends`: small appends through a mapping of the file's end.
    pub laminar_storage_mapped_appends: bool,
    /// `laminar.storage.prewrite`: the blocks ahead of a segment's appends are written before
    /// the appends reach them.
    pub laminar_storage_prewrite: bool,
    /// `laminar.storage.write_mode`: segment writes through the page cache or O_DIRECT; set,
    /// else as the iotune profile recommends once applied, else buffered.
    pub write_mode: super::write_behind::WriteModeChoice,
    /// `laminar.cache.bytes`: recent writes kept for reads in O_DIRECT mode, for the broker.
    pub laminar_cache_bytes: u64,
    /// `laminar.iotune.profile`, when set (see [`BrokerConfig::iotune_profile_path`]).
    pub laminar_iotune_profile: Option<PathBuf>,
    /// Write-behind as the keys and, once applied, the iotune profile say.
    pub write_behind: WriteBehindChoice,
    /// The registered keys set by the file or by overrides (validated), for `describe` and for
    /// telling a static value from a default.
    pub(super) explicit: BTreeMap<String, String>,
    /// Dynamic values over the static ones (`dynamic.rs`); empty as loaded.
    pub(super) dynamic: super::dynamic_layers::DynamicLayers,
}

/// The ACL authorizer's settings (`authorizer.class.name` set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizerSettings {
    /// `super.users`.
    pub super_users: Vec<laminar_security::Principal>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_everyone_if_no_acl_found: bool,
}

/// How consumer groups of KIP-848's protocol run (`group.consumer.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupSettings {
    /// `group.consumer.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// `group.consumer.max.size`: members per group.
    pub members_max: usize,
    /// `group.consumer.assignors`: the first is the default.
    pub assignors: Vec<AssignorKind>,
    /// `laminar.group.consumer.groups.max`: groups per broker.
    pub groups_max: usize,
    /// `laminar.group.consumer.regexes.max`: distinct regular expressions per group.
    pub regexes_max: usize,
}

impl Default for ConsumerGroupSettings {
    /// The keys' defaults.
    fn default() -> Self {
        ConsumerGroupSettings {
            heartbeat_interval_ms: 5_000,
            session_timeout_ms: 45_000,
            members_max: 1_000,
            assignors: vec![AssignorKind::Uniform, AssignorKind::Range],
            groups_max: 10_000,
            regexes_max: 100,
        }
    }
}

/// Kafka's transaction coordinator settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionSettings {
    /// `transaction.state.log.num.partitions`.
    pub state_log_num_partitions: i32,
    /// `transaction.state.log.replication.factor`.
    pub state_log_replication_factor: i32,
    /// `transaction.state.log.min.isr`.
    pub state_log_min_isr: i32,
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`.
    pub id_expiration_ms: i32,
}
