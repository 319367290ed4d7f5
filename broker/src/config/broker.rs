//! [`BrokerConfig`]: `server.properties` plus `--override key=value`, validated against the
//! registry in [`super::broker_keys`], into typed fields.

use laminar_engine::io::WriteMode;
use laminar_model::NodeId;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::broker_keys::{find_broker_key, ignored_key_reason, BrokerDefault, BrokerKey, BROKER_KEYS};
use super::broker_settings::{BrokerConfig, ConsumerGroupSettings, TransactionSettings};
use super::dynamic::{self, DynamicLayers};
use super::properties::parse_properties;
use super::value::{
    parse_bool, parse_listeners, parse_paths, CleanupPolicy, CompressionType, FsyncSetting, Kind, Listener,
    LogFormat, TimestampType,
};
use super::write_behind::{
    self, ProfileRecommendation, SettingSource, WriteBehindChoice, WriteModeChoice, PROFILE_FILE_NAME,
};
use super::{ConfigEntry, ConfigError, ConfigSource, ConfigSynonym};
use crate::group::consumer::assignor::AssignorKind;

/// A config plus the warnings its loading produced (the caller logs them).
#[derive(Debug, Clone)]
pub struct LoadedBrokerConfig {
    pub config: BrokerConfig,
    pub warnings: Vec<ConfigWarning>,
}

/// A Kafka key Laminar knows and ignores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    pub key: String,
    pub value: String,
    pub reason: &'static str,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "config warning: {}={:?} is a Kafka setting Laminar ignores ({})",
            self.key, self.value, self.reason
        )
    }
}

impl BrokerConfig {
    /// Reads `path` (Java properties) and applies `overrides` (`key=value` each) on top.
    pub fn load(path: &Path, overrides: &[String]) -> Result<LoadedBrokerConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Self::from_properties(&text, overrides)
    }

    /// Parses properties text and applies `overrides` (`key=value` each) on top.
    pub fn from_properties(text: &str, overrides: &[String]) -> Result<LoadedBrokerConfig, ConfigError> {
        let mut entries: Vec<(String, String)> = parse_properties(text)?
            .into_iter()
            .map(|e| (e.key, e.value))
            .collect();
        for entry in overrides {
            let (key, value) = entry
                .split_once('=')
                .filter(|(key, _)| !key.trim().is_empty())
                .ok_or_else(|| ConfigError::BadOverride { entry: entry.clone() })?;
            entries.push((key.trim().to_string(), value.trim().to_string()));
        }
        Self::from_entries(entries)
    }

    /// Builds a config from `key, value` pairs; a later pair for the same key wins.
    pub fn from_entries(
        entries: impl IntoIterator<Item = (String, String)>,
    ) -> Result<LoadedBrokerConfig, ConfigError> {
        let merged: BTreeMap<String, String> = entries.into_iter().collect();
        let mut explicit = BTreeMap::new();
        let mut warnings = Vec::new();
        for (key, value) in merged {
            if let Some(registered) = find_broker_key(&key) {
                registered.kind.validate(&key, &value)?;
                explicit.insert(key, value);
            } else if listener_security::is_listener_key(&key) {
                explicit.insert(key, value); // validated with its listener, in `build`
            } else if let Some(reason) = ignored_key_reason(&key) {
                warnings.push(ConfigWarning { key, value, reason });
            } else {
                return Err(ConfigError::UnknownKey {
                    scope: "broker",
                    key,
                    value,
                });
            }
        }
        let config = build(explicit)?;
        Ok(LoadedBrokerConfig { config, warnings })
    }

    /// The effective text value of a registered broker key: set, else its default (derived
    /// defaults computed). `None` for a key with no value of its own.
    ///
    /// Panics on an unregistered name: callers pass names from the registries.
    pub fn value_of(&self, name: &str) -> Option<String> {
        let key = find_broker_key(name).unwrap_or_else(|| panic!("{name} is not a registered broker key"));
        let dynamic = (self.dynamic.broker.get(name)).or_else(|| self.dynamic.default.get(name));
        if let Some(value) = dynamic.or_else(|| self.explicit.get(name)) {
            return Some(value.clone());
        }
        self.default_of(key)
    }

    /// This config with `layers` of dynamic values over its static ones (which stay as loaded):
    /// the typed fields as if the dynamic values had been in the file. `layers` holds dynamic
    /// keys with valid values only ([`dynamic::retain_valid`]).
    pub fn with_dynamic(&self, layers: DynamicLayers) -> Result<BrokerConfig, ConfigError> {
        let mut merged = self.explicit.clone();
        merged.extend(layers.merged().map(|(k, v)| (k.clone(), v.clone())));
        let mut effective = build(merged)?;
        // What `build` does not derive from keys alone (the iotune profile) stays as it was.
        effective.write_behind = self.write_behind.clone();
        effective.write_mode = self.write_mode.clone();
        effective.explicit = self.explicit.clone();
        effective.dynamic = layers;
        Ok(effective)
    }

    /// The dynamic values this config holds.
    pub fn dynamic_layers(&self) -> &DynamicLayers {
        &self.dynamic
    }

    /// The iotune profile to read: `laminar.iotune.profile` if set, else `iotune.json` in the
    /// first log dir when that file exists, else none.
    pub fn iotune_profile_path(&self) -> Option<PathBuf> {
        if let Some(path) = &self.laminar_iotune_profile {
            return Some(path.clone());
        }
        let default = self.log_dirs.first()?.join(PROFILE_FILE_NAME);
        default.is_file().then_some(default)
    }

    /// Applies an iotune profile's recommendation to the write-behind keys and the write mode
    /// left unset.
    pub fn apply_iotune_profile(&mut self, profile: &ProfileRecommendation) -> Result<(), ConfigError> {
        self.write_behind = write_behind::choose(
            self.laminar_storage_write_batch_bytes,
            self.laminar_storage_io_depth,
            Some(profile),
        )?;
        if let (SettingSource::Default, Some(mode)) = (&self.write_mode.source, profile.write_mode) {
            self.write_mode = WriteModeChoice {
                mode,
                source: SettingSource::Profile(profile.path.clone()),
            };
        }
        Ok(())
    }

    /// Whether `name` was set by the file or an override.
    pub fn is_set(&self, name: &str) -> bool {
        self.explicit.contains_key(name)
    }

    fn default_of(&self, key: &BrokerKey) -> Option<String> {
        match key.default {
            BrokerDefault::Fixed(value) => Some(value.to_string()),
            BrokerDefault::Derived(compute) => Some(compute(self)),
            BrokerDefault::Unset => None,
        }
    }

    /// Every registered broker key with its value and source (its first synonym's: dynamic,
    /// static or default), for DescribeConfigs on the broker resource. Only dynamic keys
    /// (`dynamic::is_dynamic`) are writable.
    pub fn describe(&self) -> Vec<ConfigEntry> {
        BROKER_KEYS
            .iter()
            .map(|key| {
                let mut synonyms = self.broker_synonyms(key.name, key.fallbacks);
                let source = synonyms.first().map_or(ConfigSource::Default, |s| s.source);
                // As Kafka: a secret is listed, marked sensitive, and never shown.
                let sensitive = matches!(key.kind, Kind::Password);
                if sensitive {
                    synonyms.iter_mut().for_each(|s| s.value = None);
                }
                ConfigEntry {
                    name: key.name.to_string(),
                    value: self.value_of(key.name).filter(|_| !sensitive),
                    source,
                    read_only: !dynamic::is_dynamic(key.name),
                    sensitive,
                    synonyms,
                    config_type: key.kind.config_type(),
                    doc: key.doc,
                }
            })
            .collect()
    }

    /// The dynamic defaults every broker holds (DescribeConfigs of the broker resource named
    /// empty, Kafka's `--entity-default`): only those set, as Kafka lists them.
    pub fn describe_dynamic_defaults(&self) -> Vec<ConfigEntry> {
        let set = |entry: &ConfigEntry| self.dynamic.default.contains_key(&entry.name);
        let mut entries: Vec<ConfigEntry> = self.describe().into_iter().filter(set).collect();
        for entry in &mut entries {
            entry.value = self.dynamic.default.get(&entry.name).cloned();
            entry.source = ConfigSource::DynamicDefaultBroker;
            entry
                .synonyms
                .retain(|s| s.source == ConfigSource::DynamicDefaultBroker);
        }
        entries
    }

    /// Synonyms in precedence order: for each of `first` and `fallbacks`, where it was set
    /// (this broker's dynamic value, the dynamic default, the static config), then the default
    /// that applies when none is (Default).
    pub(crate) fn broker_synonyms(&self, first: &str, fallbacks: &[&str]) -> Vec<ConfigSynonym> {
        let chain = std::iter::once(first).chain(fallbacks.iter().copied());
        let layers = [
            (&self.dynamic.broker, ConfigSource::DynamicBroker),
            (&self.dynamic.default, ConfigSource::DynamicDefaultBroker),
            (&self.explicit, ConfigSource::StaticBroker),
        ];
        let mut synonyms: Vec<ConfigSynonym> = chain
            .clone()
            .flat_map(|name| {
                layers.iter().filter_map(move |(layer, source)| {
                    layer.get(name).map(|value| ConfigSynonym {
                        name: name.to_string(),
                        value: Some(value.clone()),
                        source: *source,
                    })
                })
            })
            .collect();
        let default = chain
            .clone()
            .find(|name| matches!(registered(name).default, BrokerDefault::Fixed(_)))
            .or_else(|| chain.clone().next());
        if let Some(name) = default {
            synonyms.push(ConfigSynonym {
                name: name.to_string(),
                value: self.default_of(registered(name)),
                source: ConfigSource::Default,
            });
        }
        synonyms
    }
}

impl Default for BrokerConfig {
    /// Every key at its default.
    fn default() -> Self {
        build(BTreeMap::new()).expect("the built-in broker defaults are valid")
    }
}

fn registered(name: &str) -> &'static BrokerKey {
    find_broker_key(name).unwrap_or_else(|| panic!("{name} is not a registered broker key"))
}

/// Reads validated text values: explicit, else the fixed default.
struct Values<'a> {
    explicit: &'a BTreeMap<String, String>,
}

impl Values<'_> {
    fn set(&self, name: &str) -> Option<&str> {
        self.explicit.get(name).map(String::as_str)
    }

    fn text(&self, name: &str) -> &str {
        self.set(name).unwrap_or_else(|| match registered(name).default {
            BrokerDefault::Fixed(value) => value,
            _ => panic!("{name} has no fixed default; resolve it explicitly"),
        })
    }

    fn int(&self, name: &str) -> Result<i64, ConfigError> {
        registered(name).kind.parse_int(name, self.text(name))
    }

    fn set_int(&self, name: &str) -> Result<Option<i64>, ConfigError> {
        self.set(name)
            .map(|value| registered(name).kind.parse_int(name, value))
            .transpose()
    }

    fn parsed<T>(&self, name: &str, parse: fn(&str) -> Option<T>) -> Result<T, ConfigError> {
        let text = self.text(name);
        parse(text).ok_or_else(|| registered(name).kind.invalid(name, text))
    }
}

/// Narrows a validated integer; the registry's range guarantees it fits.
fn narrow<T: TryFrom<i64>>(name: &str, value: i64) -> T {
    T::try_from(value).unwrap_or_else(|_| panic!("{name}={value} passed validation but does not fit"))
}

impl Values<'_> {
    /// Key `name`'s integer, narrowed to `T` (which its registered range fits).
    fn narrowed<T: TryFrom<i64>>(&self, name: &str) -> Result<T, ConfigError> {
        Ok(narrow(name, self.int(name)?))
    }
}

fn consumer_group_settings(v: &Values<'_>) -> Result<ConsumerGroupSettings, ConfigError> {
    let assignors = v.text("group.consumer.assignors").split(',').map(str::trim);
    Ok(ConsumerGroupSettings {
        heartbeat_interval_ms: v.narrowed("group.consumer.heartbeat.interval.ms")?,
        session_timeout_ms: v.narrowed("group.consumer.session.timeout.ms")?,
        members_max: v.narrowed("group.consumer.max.size")?,
        // The key's kind admits only known names.
        assignors: assignors.filter_map(AssignorKind::from_name).collect(),
        groups_max: v.narrowed("laminar.group.consumer.groups.max")?,
        regexes_max: v.narrowed("laminar.group.consumer.regexes.max")?,
    })
}

fn transaction_settings(v: &Values<'_>) -> Result<TransactionSettings, ConfigError> {
    Ok(TransactionSettings {
        state_log_num_partitions: v.narrowed("transaction.state.log.num.partitions")?,
        state_log_replication_factor: v.narrowed("transaction.state.log.replication.factor")?,
        state_log_min_isr: v.narrowed("transaction.state.log.min.isr")?,
        max_timeout_ms: v.narrowed("transaction.max.timeout.ms")?,
        id_expiration_ms: v.narrowed("transactional.id.expiration.ms")?,
    })
}

const AUTHENTICATION_DELAY_MAX_MS: &str = "laminar.connection.failed.authentication.delay.max.ms";

fn build(explicit: BTreeMap<String, String>) -> Result<BrokerConfig, ConfigError> {
    let v = Values { explicit: &explicit };
    let node_id = node_id(&v)?;
    let (listeners, advertised_listeners, cluster) = listeners_and_quorum(&v, node_id)?;
    let (listener_security, peer_links) = security_and_links(&v, &listeners, cluster.as_ref())?;
    let write_behind_keys = write_behind_keys(&v)?;
    Ok(BrokerConfig {
        node_id: NodeId::new(narrow("node.id", node_id)),
        log_dirs: log_dirs(&v)?,
        listener_connection_creation_rates: listener_connection_creation_rates(&v, &listeners)?,
        listeners,
        advertised_listeners,
        listener_security,
        peer_links,
        cluster,
        broker_rack: v.set("broker.rack").map(|r| r.trim().to_string()),
        unclean_leader_election_enable: v.parsed("unclean.leader.election.enable", parse_bool)?,
        num_partitions: narrow("num.partitions", v.int("num.partitions")?),
        default_replication_factor: v.narrowed("default.replication.factor")?,
        min_insync_replicas: narrow("min.insync.replicas", v.int("min.insync.replicas")?),
        auto_create_topics_enable: v.parsed("auto.create.topics.enable", parse_bool)?,
        delete_topic_enable: v.parsed("delete.topic.enable", parse_bool)?,
        message_max_bytes: narrow("message.max.bytes", v.int("message.max.bytes")?),
        socket_request_max_bytes: narrow("socket.request.max.bytes", v.int("socket.request.max.bytes")?),
        fetch_max_bytes: narrow("fetch.max.bytes", v.int("fetch.max.bytes")?),
        max_incremental_fetch_session_cache_slots: v.narrowed("max.incremental.fetch.session.cache.slots")?,
        queued_max_request_bytes: queued_max_request_bytes(&v)?,
        max_connections: u64::try_from(v.int("max.connections")?).unwrap_or(0),
        connections_per_ip: connections_per_ip(&v)?,
        max_connection_creation_rate: v.narrowed("max.connection.creation.rate")?,
        quota_windows: quota_windows(&v)?,
        authorizer: authorizer(&v)?,
        connections_max_idle_ms: v.int("connections.max.idle.ms")?,
        connections_max_reauth_ms: v.int("connections.max.reauth.ms")?,
        connection_failed_authentication_delay_ms: v.int("connection.failed.authentication.delay.ms")?,
        connection_failed_authentication_delay_max_ms: v.int(AUTHENTICATION_DELAY_MAX_MS)?,
        laminar_request_receive_timeout_ms: v.int("laminar.request.receive.timeout.ms")?,
        compression_type: v.parsed("compression.type", CompressionType::parse)?,
        log_segment_bytes: narrow("log.segment.bytes", v.int("log.segment.bytes")?),
        log_roll_ms: roll_ms(&v)?,
        log_retention_ms: retention_ms(&v)?,
        log_retention_bytes: v.int("log.retention.bytes")?,
        log_retention_check_interval_ms: v.int("log.retention.check.interval.ms")?,
        producer_id_expiration_ms: v.int("producer.id.expiration.ms")?,
        log_index_interval_bytes: narrow("log.index.interval.bytes", v.int("log.index.interval.bytes")?),
        log_message_timestamp_type: v.parsed("log.message.timestamp.type", TimestampType::parse)?,
        log_cleanup_policy: v.parsed("log.cleanup.policy", CleanupPolicy::parse)?,
        log_flush_interval_messages: v.int("log.flush.interval.messages")?,
        log_flush_interval_ms: v.int("log.flush.interval.ms")?,
        offsets_topic_num_partitions: v.narrowed("offsets.topic.num.partitions")?,
        transactions: transaction_settings(&v)?,
        group_initial_rebalance_delay_ms: v.narrowed("group.initial.rebalance.delay.ms")?,
        consumer_groups: consumer_group_settings(&v)?,
        max_broker_partitions: narrow("max.broker.partitions", v.int("max.broker.partitions")?),
        laminar_request_partitions_max: v.narrowed("laminar.request.partitions.max")?,
        laminar_cores: laminar_cores(&v)?,
        laminar_fsync: v.parsed("laminar.fsync", FsyncSetting::parse)?,
        laminar_http_listen: v.parsed("laminar.http.listen", |s| s.trim().parse().ok())?,
        admin_http: admin_http::admin_http_security(&v)?,
        laminar_log_format: v.parsed("laminar.log.format", LogFormat::parse)?,
        laminar_storage_write_batch_bytes: write_behind_keys.write_batch_bytes,
        laminar_storage_io_depth: write_behind_keys.io_depth,
        laminar_storage_mapped_appends: v.parsed("laminar.storage.mapped_appends", parse_bool)?,
        laminar_storage_prewrite: v.parsed("laminar.storage.prewrite", parse_bool)?,
        write_mode: write_mode(&v)?,
        laminar_cache_bytes: laminar_cache_bytes(&v)?,
        laminar_iotune_profile: write_behind_keys.profile,
        write_behind: write_behind_keys.choice,
        explicit,
        dynamic: DynamicLayers::default(),
    })
}

/// `laminar.storage.write_mode` when set, else the default (until an iotune profile decides).
fn write_mode(v: &Values<'_>) -> Result<WriteModeChoice, ConfigError> {
    const KEY: &str = "laminar.storage.write_mode";
    let Some(text) = v.set(KEY) else {
        return Ok(WriteModeChoice::default());
    };
    let mode = WriteMode::parse(text).ok_or_else(|| registered(KEY).kind.invalid(KEY, text))?;
    Ok(WriteModeChoice {
        mode,
        source: SettingSource::Config,
    })
}

/// `laminar.cache.bytes`, by default an eighth of the machine's memory.
fn laminar_cache_bytes(v: &Values<'_>) -> Result<u64, ConfigError> {
    Ok(match v.set_int("laminar.cache.bytes")? {
        Some(bytes) => narrow("laminar.cache.bytes", bytes),
        None => laminar_sys::memory::physical_memory_bytes() / 8,
    })
}

/// `laminar.cores`, by default every available core.
fn laminar_cores(v: &Values<'_>) -> Result<usize, ConfigError> {
    Ok(match v.set_int("laminar.cores")? {
        Some(cores) => narrow("laminar.cores", cores),
        None => std::thread::available_parallelism().map_or(1, usize::from),
    })
}

/// `node.id`, or its older name `broker.id`; if both are set they must agree.
fn node_id(v: &Values<'_>) -> Result<i64, ConfigError> {
    match (v.set_int("node.id")?, v.set_int("broker.id")?) {
        (Some(node), Some(broker)) if node != broker => Err(ConfigError::Rejected {
            key: "broker.id".to_string(),
            value: broker.to_string(),
            reason: format!("must equal node.id, which is {node}"),
        }),
        (Some(id), _) | (None, Some(id)) => Ok(id),
        (None, None) => v.int("node.id"),
    }
}

/// `log.dirs`, else `log.dir`.
fn log_dirs(v: &Values<'_>) -> Result<Vec<PathBuf>, ConfigError> {
    match v.set("log.dirs") {
        Some(dirs) => parse_paths("log.dirs", dirs),
        None => parse_paths("log.dir", v.text("log.dir")),
    }
}

/// The client listeners, their advertised addresses, and the quorum settings (which take the
/// controller's listener out of `listeners`).
type ListenersAndQuorum = (
    Vec<Listener>,
    Vec<Listener>,
    Option<cluster_keys::ClusterSettings>,
);

fn listeners_and_quorum(v: &Values<'_>, node_id: i64) -> Result<ListenersAndQuorum, ConfigError> {
    let (listeners, controller_listener) = cluster_keys::split_listeners(v)?;
    let advertised_listeners = advertised_listeners(v, &listeners)?;
    let cluster = cluster_keys::cluster_settings(v, node_id, controller_listener)?;
    // A controller-only node serves no clients; every other node serves some.
    let runs_broker = cluster.as_ref().is_none_or(|c| c.roles.runs_broker());
    match (runs_broker, listeners.is_empty()) {
        (true, true) => Err(cluster_keys::rejected(
            "listeners",
            v.text("listeners"),
            "no listener for clients",
        )),
        (false, false) => Err(cluster_keys::rejected(
            "listeners",
            v.text("listeners"),
            "a controller-only node (process.roles=controller) has its controller listener only",
        )),
        _ => Ok((listeners, advertised_listeners, cluster)),
    }
}

/// `advertised.listeners` (by default the client listeners, wildcards made local).
fn advertised_listeners(v: &Values<'_>, listeners: &[Listener]) -> Result<Vec<Listener>, ConfigError> {
    Ok(match v.set("advertised.listeners") {
        Some(text) => advertised_matching(text, listeners)?,
        None => listeners.iter().map(advertise_default).collect(),
    })
}

/// `log.roll.ms`, else `log.roll.hours`.
fn roll_ms(v: &Values<'_>) -> Result<i64, ConfigError> {
    match v.set_int("log.roll.ms")? {
        Some(ms) => Ok(ms),
        None => hours_to_ms("log.roll.hours", v.int("log.roll.hours")?),
    }
}

/// The write-behind keys as set, and the choice they make before any iotune profile applies.
struct WriteBehindKeys {
    write_batch_bytes: Option<u64>,
    io_depth: Option<u32>,
    profile: Option<PathBuf>,
    choice: WriteBehindChoice,
}

fn write_behind_keys(v: &Values<'_>) -> Result<WriteBehindKeys, ConfigError> {
    let write_batch_bytes = v
        .set_int(write_behind::WRITE_BATCH_BYTES_KEY)?
        .map(|n| narrow(write_behind::WRITE_BATCH_BYTES_KEY, n));
    let io_depth = v
        .set_int(write_behind::IO_DEPTH_KEY)?
        .map(|n| narrow(write_behind::IO_DEPTH_KEY, n));
    Ok(WriteBehindKeys {
        write_batch_bytes,
        io_depth,
        profile: v.set(write_behind::PROFILE_KEY).map(|p| PathBuf::from(p.trim())),
        choice: write_behind::choose(write_batch_bytes, io_depth, None)?,
    })
}

/// Kafka's precedence: `log.retention.ms`, else `.minutes`, else `.hours`; negative = forever.
fn retention_ms(v: &Values<'_>) -> Result<i64, ConfigError> {
    if let Some(ms) = v.set_int("log.retention.ms")? {
        return Ok(ms);
    }
    if let Some(minutes) = v.set_int("log.retention.minutes")? {
        return Ok(if minutes < 0 { -1 } else { minutes * 60_000 });
    }
    let hours = v.int("log.retention.hours")?;
    if hours < 0 {
        return Ok(-1);
    }
    hours_to_ms("log.retention.hours", hours)
}

fn hours_to_ms(name: &str, hours: i64) -> Result<i64, ConfigError> {
    // The registry bounds hours to i32, so this cannot overflow; checked all the same.
    hours.checked_mul(3_600_000).ok_or_else(|| ConfigError::Rejected {
        key: name.to_string(),
        value: hours.to_string(),
        reason: "too large once converted to milliseconds".to_string(),
    })
}

/// `queued.max.request.bytes`, which must leave room for the largest frame (as Kafka requires).
fn queued_max_request_bytes(v: &Values<'_>) -> Result<usize, ConfigError> {
    let queued = v.int("queued.max.request.bytes")?;
    let frame_max = v.int("socket.request.max.bytes")?;
    if queued == -1 {
        return Ok(usize::MAX);
    }
    if queued < frame_max {
        return Err(ConfigError::Rejected {
            key: "queued.max.request.bytes".to_string(),
            value: queued.to_string(),
            reason: format!("must be -1 or at least socket.request.max.bytes ({frame_max})"),
        });
    }
    Ok(usize::try_from(queued).unwrap_or(usize::MAX))
}

/// Advertised listeners must name listeners that exist.
fn advertised_matching(text: &str, listeners: &[Listener]) -> Result<Vec<Listener>, ConfigError> {
    let advertised = parse_listeners("advertised.listeners", text, true)?;
    if let Some(stray) = advertised
        .iter()
        .find(|a| !listeners.iter().any(|l| l.name == a.name))
    {
        return Err(ConfigError::Rejected {
            key: "advertised.listeners".to_string(),
            value: text.to_string(),
            reason: format!("listener {} is not in listeners", stray.name),
        });
    }
    Ok(advertised)
}

/// The class names `authorizer.class.name` accepts: Laminar's, and Kafka's two, which Kafka
/// configs carry over with.
const AUTHORIZER_CLASS_NAMES: [&str; 3] = [
    "laminar",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
];

/// `authorizer.class.name` with `super.users` and `allow.everyone.if.no.acl.found`.
/// A cluster's ACLs belong in its metadata log, which does not hold them yet: refused there.
fn authorizer(v: &Values) -> Result<Option<super::AuthorizerSettings>, ConfigError> {
    let Some(class) = v
        .set("authorizer.class.name")
        .map(str::trim)
        .filter(|c| !c.is_empty())
    else {
        return Ok(None);
    };
    if !AUTHORIZER_CLASS_NAMES.contains(&class) {
        return Err(ConfigError::Rejected {
            key: "authorizer.class.name".into(),
            value: class.into(),
            reason: format!("expected one of {}", AUTHORIZER_CLASS_NAMES.join(", ")),
        });
    }
    let super_users = v.set("super.users").unwrap_or_default();
    let super_users = super_users
        .split(';')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(|u| {
            u.parse().map_err(|e| ConfigError::Rejected {
                key: "super.users".into(),
                value: u.into(),
                reason: format!("{e}"),
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Some(super::AuthorizerSettings {
        super_users,
        allow_everyone_if_no_acl_found: v.parsed("allow.everyone.if.no.acl.found", parse_bool)?,
    }))
}

/// `max.connections.per.ip` with its overrides.
/// Each client listener's security and, in a cluster, the links brokers make to each other.
fn security_and_links(
    v: &Values,
    listeners: &[Listener],
    cluster: Option<&cluster_keys::ClusterSettings>,
) -> Result<
    (
        Vec<listener_security::ListenerSecurity>,
        Option<peer_links::PeerLinks>,
    ),
    ConfigError,
> {
    let (security, controller) = listener_security::for_listeners(v, listeners, cluster)?;
    let links = match (cluster, controller) {
        (Some(cluster), Some(controller)) => Some(peer_links::peer_links(v, cluster, &security, controller)?),
        _ => None,
    };
    Ok((security, links))
}

/// `quota.window.num` windows of `quota.window.size.seconds`.
fn quota_windows(v: &Values) -> Result<crate::client_quotas::Windows, ConfigError> {
    Ok(crate::client_quotas::Windows {
        count: v.narrowed::<u32>("quota.window.num")? as usize,
        size: std::time::Duration::from_secs(v.narrowed::<u32>("quota.window.size.seconds")?.into()),
    })
}

/// Each listener's `listener.name.<name>.max.connection.creation.rate`, unlimited when unset.
fn listener_connection_creation_rates(v: &Values, listeners: &[Listener]) -> Result<Vec<u32>, ConfigError> {
    listeners
        .iter()
        .map(|listener| {
            let key = format!(
                "{}{}.max.connection.creation.rate",
                listener_security::LISTENER_KEY_PREFIX,
                listener.name.to_ascii_lowercase()
            );
            match v.explicit.get(&key) {
                None => Ok(i32::MAX as u32),
                Some(text) => text
                    .trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|rate| *rate <= i32::MAX as u32)
                    .ok_or_else(|| ConfigError::Rejected {
                        key: key.clone(),
                        value: text.clone(),
                        reason: "an int from 0".to_string(),
                    }),
            }
        })
        .collect()
}

fn connections_per_ip(v: &Values) -> Result<super::ConnectionsPerIpLimits, ConfigError> {
    super::connection_limits::parse(
        v.narrowed("max.connections.per.ip")?,
        v.set("max.connections.per.ip.overrides").unwrap_or_default(),
    )
}

/// The default advertised address of a listener: itself, with a wildcard host replaced by
/// 127.0.0.1 (see the `advertised.listeners` doc in the registry).
fn advertise_default(listener: &Listener) -> Listener {
    let mut advertised = listener.clone();
    if advertised.is_wildcard_host() {
        advertised.host = "127.0.0.1".to_string();
    }
    advertised
}

#[path = "admin_http.rs"]
pub mod admin_http;

#[path = "cluster_keys.rs"]
pub mod cluster_keys;

#[path = "listener_security.rs"]
pub mod listener_security;

#[path = "peer_links.rs"]
pub mod peer_links;

#[cfg(test)]
#[path = "broker_tests.rs"]
mod tests;
