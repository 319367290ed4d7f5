//! The KRaft keys (`process.roles`, `controller.quorum.voters`, `controller.listener.names`, the
//! `CONTROLLER` listener, broker session and heartbeat) built into [`ClusterSettings`], with the
//! cross-key checks Kafka makes at start. A child of `broker.rs` (it reads the same `Values`).

use std::collections::BTreeMap;

use super::super::value::{parse_listener_list, parse_quorum_voters, split_list};
use super::super::{ConfigError, Listener};
use super::Values;

/// What a node runs (`process.roles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessRoles {
    /// `broker,controller`: a broker and a voter of the quorum in one process.
    Combined,
    /// `broker`: a broker that follows the metadata log as an observer of the quorum (a Raft
    /// learner the leader replicates to at this node's controller listener); it never votes.
    Broker,
    /// `controller`: a voter of the quorum (or an observer waiting to be made one) that serves
    /// no Kafka clients, on its controller listener only.
    Controller,
}

impl ProcessRoles {
    /// Whether the node serves Kafka clients and holds replicas.
    pub fn runs_broker(self) -> bool {
        self != ProcessRoles::Controller
    }
}

/// The cluster settings of a node that is part of a quorum. Built once at start, shared
/// read-only across shards (inside [`super::BrokerConfig`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    pub roles: ProcessRoles,
    /// `controller.quorum.voters`: node id → `host:port` of its CONTROLLER listener.
    pub voters: BTreeMap<i32, String>,
    /// `controller.quorum.bootstrap.servers`: more `host:port`s where a node that is not a
    /// voter asks to follow the quorum.
    pub bootstrap_servers: Vec<String>,
    /// The listener the controller binds (named in `controller.listener.names`).
    pub controller_listener: Listener,
    pub session_timeout_ms: u64,
    pub heartbeat_interval_ms: u64,
    /// `auto.leader.rebalance.enable`.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds`, in ms.
    pub leader_imbalance_check_interval_ms: u64,
    /// `leader.imbalance.per.broker.percentage` (0–100).
    pub leader_imbalance_per_broker_percentage: u32,
    /// `laminar.stray.replicas.max.percent` (0–100).
    pub stray_replicas_max_percent: u32,
    pub replication: ReplicationSettings,
}

/// How followers fetch and leaders judge them (Kafka's `replica.*` keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationSettings {
    pub lag_time_max_ms: u64,
    pub fetch_max_bytes: i32,
    pub fetch_response_max_bytes: i32,
    pub fetch_wait_max_ms: i32,
    pub fetch_backoff_ms: u64,
    pub high_watermark_checkpoint_interval_ms: u64,
    /// `inter.broker.listener.name`: the endpoint followers fetch from.
    pub inter_broker_listener_name: String,
    /// `leader.replication.throttled.rate` and `follower.replication.throttled.rate`, bytes/s.
    pub leader_throttled_rate: i64,
    pub follower_throttled_rate: i64,
    /// `replica.selector.class` is Kafka's rack-aware selector: consumers may read from
    /// followers in their rack (KIP-392).
    pub rack_aware_replica_selector: bool,
}

pub(super) fn rejected(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Rejected {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// `listeners` split into the client listeners and the controller's, if any.
pub(super) fn split_listeners(v: &Values<'_>) -> Result<(Vec<Listener>, Option<Listener>), ConfigError> {
    let text = v.text("listeners");
    let names: Vec<String> = split_list(v.text("controller.listener.names"))
        .iter()
        .map(|n| n.to_ascii_uppercase())
        .collect();
    let all = parse_listener_list("listeners", text, false)?;
    let (controller, clients): (Vec<Listener>, Vec<Listener>) =
        all.into_iter().partition(|l| names.contains(&l.name));
    if controller.len() > 1 {
        return Err(rejected("listeners", text, "more than one controller listener"));
    }
    Ok((clients, controller.into_iter().next()))
}

/// The cluster settings, or `None` for the single-node mode (no `process.roles`, no voters).
pub(super) fn cluster_settings(
    v: &Values<'_>,
    node_id: i64,
    controller_listener: Option<Listener>,
) -> Result<Option<ClusterSettings>, ConfigError> {
    let voters_text = v.text("controller.quorum.voters");
    let voters = parse_quorum_voters("controller.quorum.voters", voters_text)?;
    let Some(roles_text) = v.set("process.roles") else {
        if !voters.is_empty() {
            return Err(rejected(
                "controller.quorum.voters",
                voters_text,
                "needs process.roles=broker,controller",
            ));
        }
        if let Some(listener) = controller_listener {
            return Err(rejected(
                "listeners",
                v.text("listeners"),
                format!(
                    "{} is a controller listener, but process.roles is unset",
                    listener.name
                ),
            ));
        }
        return Ok(None);
    };
    let roles = process_roles(roles_text)?;
    let bootstrap_servers = bootstrap_servers(v)?;
    if voters.is_empty() && bootstrap_servers.is_empty() {
        return Err(rejected(
            "controller.quorum.voters",
            voters_text,
            "process.roles is set: list the quorum's voters as id@host:port, or where to find \
             it in controller.quorum.bootstrap.servers",
        ));
    }
    let voter = check_voter_or_not(roles, node_id, (&voters, voters_text))?;
    let controller_listener = node_controller_listener(v, voter, controller_listener)?;
    let (session_timeout_ms, heartbeat_interval_ms) = session_settings(v)?;
    let (enable, check_ms, percentage) = rebalance_settings(v)?;
    Ok(Some(ClusterSettings {
        replication: replication_settings(v)?,
        roles,
        voters,
        bootstrap_servers,
        controller_listener,
        session_timeout_ms,
        heartbeat_interval_ms,
        auto_leader_rebalance_enable: enable,
        leader_imbalance_check_interval_ms: check_ms,
        leader_imbalance_per_broker_percentage: percentage,
        stray_replicas_max_percent: percent(v, "laminar.stray.replicas.max.percent")?,
    }))
}

/// `controller.quorum.bootstrap.servers` as `host:port`s.
fn bootstrap_servers(v: &Values<'_>) -> Result<Vec<String>, ConfigError> {
    let key = "controller.quorum.bootstrap.servers";
    let Some(text) = v.set(key) else {
        return Ok(Vec::new());
    };
    let servers: Vec<String> = split_list(text).into_iter().map(String::from).collect();
    let valid = |server: &String| {
        let parts = server.rsplit_once(':');
        parts.is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0))
    };
    match servers.iter().find(|server| !valid(server)) {
        Some(bad) => Err(rejected(key, text, format!("{bad} is not host:port"))),
        None => Ok(servers),
    }
}

/// A broker-only node must not be among the voters. A combined node outside them starts as an
/// observer and becomes a voter when it is added (AddRaftVoter, KIP-853). Returns whether the
/// node is a voter of the static set.
fn check_voter_or_not(
    roles: ProcessRoles,
    node_id: i64,
    (voters, voters_text): (&BTreeMap<i32, String>, &str),
) -> Result<bool, ConfigError> {
    let in_quorum = i32::try_from(node_id).is_ok_and(|id| voters.contains_key(&id));
    if roles == ProcessRoles::Broker && in_quorum {
        let reason = format!("node.id {node_id} is a broker-only node: a voter's id cannot be its");
        return Err(rejected("controller.quorum.voters", voters_text, reason));
    }
    Ok(in_quorum)
}

/// The node's controller listener. An observer (a node outside the static voters: broker-only,
/// or a controller not yet added) binds one too: the voters replicate the metadata log to it
/// there (decision 0042), so its host must be one they can reach.
fn node_controller_listener(
    v: &Values<'_>,
    voter: bool,
    controller_listener: Option<Listener>,
) -> Result<Listener, ConfigError> {
    let Some(controller_listener) = controller_listener else {
        return Err(rejected(
            "listeners",
            v.text("listeners"),
            format!(
                "a cluster node needs a listener named in controller.listener.names ({}), \
                 e.g. CONTROLLER://host:9093",
                v.text("controller.listener.names")
            ),
        ));
    };
    let host = &controller_listener.host;
    let unspecified = host.is_empty()
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_unspecified());
    if !voter && unspecified {
        return Err(rejected(
            "listeners",
            v.text("listeners"),
            "an observer's controller listener (a node outside controller.quorum.voters) needs \
             the host the voters reach it at",
        ));
    }
    Ok(controller_listener)
}

/// `broker.session.timeout.ms` and `broker.heartbeat.interval.ms`, the interval below the
/// timeout.
fn session_settings(v: &Values<'_>) -> Result<(u64, u64), ConfigError> {
    let session_timeout_ms = positive_ms(v, "broker.session.timeout.ms")?;
    let heartbeat_interval_ms = positive_ms(v, "broker.heartbeat.interval.ms")?;
    if heartbeat_interval_ms >= session_timeout_ms {
        return Err(rejected(
            "broker.heartbeat.interval.ms",
            &heartbeat_interval_ms.to_string(),
            format!("must be below broker.session.timeout.ms ({session_timeout_ms})"),
        ));
    }
    Ok((session_timeout_ms, heartbeat_interval_ms))
}

/// `auto.leader.rebalance.enable`, `leader.imbalance.check.interval.seconds` (in ms) and
/// `leader.imbalance.per.broker.percentage`.
fn rebalance_settings(v: &Values<'_>) -> Result<(bool, u64, u32), ConfigError> {
    let enable = v.parsed("auto.leader.rebalance.enable", super::super::value::parse_bool)?;
    let check_seconds = positive_ms(v, "leader.imbalance.check.interval.seconds")?;
    let percentage = percent(v, "leader.imbalance.per.broker.percentage")?;
    Ok((enable, check_seconds.saturating_mul(1000), percentage))
}

/// A percentage key (the registry bounds it to 0..=100).
fn percent(v: &Values<'_>, name: &str) -> Result<u32, ConfigError> {
    Ok(u32::try_from(v.int(name)?).unwrap_or(100))
}

fn replication_settings(v: &Values<'_>) -> Result<ReplicationSettings, ConfigError> {
    let int32 = |name: &str| -> Result<i32, ConfigError> {
        let value = v.int(name)?;
        i32::try_from(value).map_err(|_| rejected(name, &value.to_string(), "out of range"))
    };
    let settings = ReplicationSettings {
        lag_time_max_ms: positive_ms(v, "replica.lag.time.max.ms")?,
        fetch_max_bytes: int32("replica.fetch.max.bytes")?,
        fetch_response_max_bytes: int32("replica.fetch.response.max.bytes")?,
        fetch_wait_max_ms: int32("replica.fetch.wait.max.ms")?,
        fetch_backoff_ms: positive_ms(v, "replica.fetch.backoff.ms")?,
        high_watermark_checkpoint_interval_ms: positive_ms(
            v,
            "replica.high.watermark.checkpoint.interval.ms",
        )?,
        inter_broker_listener_name: inter_broker_listener_name(v)?,
        leader_throttled_rate: v.int("leader.replication.throttled.rate")?,
        follower_throttled_rate: v.int("follower.replication.throttled.rate")?,
        rack_aware_replica_selector: v.set("replica.selector.class").is_some(),
    };
    // Kafka's check: a follower waiting at its leader longer than the lag allows would leave
    // the ISR while idle.
    if i64::from(settings.fetch_wait_max_ms) >= settings.lag_time_max_ms as i64 {
        return Err(rejected(
            "replica.fetch.wait.max.ms",
            &settings.fetch_wait_max_ms.to_string(),
            format!(
                "must be below replica.lag.time.max.ms ({})",
                settings.lag_time_max_ms
            ),
        ));
    }
    Ok(settings)
}

/// `inter.broker.listener.name`, or the listener named after `security.inter.broker.protocol`
/// (Kafka takes one or the other, never both).
fn inter_broker_listener_name(v: &Values<'_>) -> Result<String, ConfigError> {
    let by_name = v.explicit.get("inter.broker.listener.name");
    match (by_name, v.set("security.inter.broker.protocol")) {
        (Some(_), Some(protocol)) => Err(rejected(
            "security.inter.broker.protocol",
            protocol,
            "set either it or inter.broker.listener.name, not both",
        )),
        (None, Some(protocol)) => Ok(protocol.trim().to_ascii_uppercase()),
        _ => Ok(v.text("inter.broker.listener.name").trim().to_ascii_uppercase()),
    }
}

/// A positive integer key (ms or seconds, as its name says).
fn positive_ms(v: &Values<'_>, name: &str) -> Result<u64, ConfigError> {
    let ms = v.int(name)?;
    u64::try_from(ms).map_err(|_| rejected(name, &ms.to_string(), "must be positive"))
}

/// `broker,controller`, `broker` or `controller`, in any order and case.
fn process_roles(text: &str) -> Result<ProcessRoles, ConfigError> {
    let roles: Vec<String> = split_list(text).iter().map(|r| r.to_ascii_lowercase()).collect();
    let broker = roles.iter().any(|r| r == "broker");
    let controller = roles.iter().any(|r| r == "controller");
    let unknown = roles.iter().find(|r| *r != "broker" && *r != "controller");
    match (broker, controller, unknown) {
        (_, _, Some(role)) => Err(rejected("process.roles", text, format!("unknown role {role}"))),
        (true, true, None) => Ok(ProcessRoles::Combined),
        (true, false, None) => Ok(ProcessRoles::Broker),
        (false, true, None) => Ok(ProcessRoles::Controller),
        (false, false, None) => Err(rejected("process.roles", text, "name broker, controller or both")),
    }
}
