//! How brokers reach each other: followers fetch over `inter.broker.listener.name` (or the
//! listener `security.inter.broker.protocol` names), and the voters of the quorum talk over the
//! controller's listener. Each such link dials a listener of a peer with that listener's own
//! security, as Kafka's inter-broker clients do: its TLS settings (the trust store verifies
//! the peer; the key store is the client certificate when the listener asks for one), and for
//! SASL the mechanism `sasl.mechanism.inter.broker.protocol` (or
//! `sasl.mechanism.controller.protocol`) names, logging in with the `username` and `password`
//! of the listener's `listener.name.<name>.<mechanism>.sasl.jaas.config`.
//! A child of `broker.rs` (it reads the same `Values`).

use laminar_client::SaslLogin;
use laminar_security::{JaasOptions, Mechanism, SecurityProtocol};

use super::super::ConfigError;
use super::cluster_keys::{ClusterSettings, ProcessRoles};
use super::listener_security::{listener_key, ListenerSecurity};
use super::Values;

const CONTROLLER_MECHANISM_KEY: &str = "sasl.mechanism.controller.protocol";

/// The broker-to-broker links of a node in a cluster. Built once at start, shared read-only.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerLinks {
    /// Followers to their leaders (the inter-broker listener); `None` on a controller-only node,
    /// which holds no replicas.
    pub replication: Option<PeerLink>,
    /// Voters to each other, and brokers to the active controller (the controller listener).
    pub controller: PeerLink,
}

/// One listener as both ends of a link see it: how it accepts peers, and how this broker logs
/// in to a peer's.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerLink {
    pub listener: ListenerSecurity,
    /// SASL listeners only: this broker's login.
    pub login: Option<SaslLogin>,
}

/// The links of a node of `cluster`. `client_listeners` holds the inter-broker listener;
/// `controller` is the controller listener's security.
pub(super) fn peer_links(
    v: &Values<'_>,
    cluster: &ClusterSettings,
    client_listeners: &[ListenerSecurity],
    controller: ListenerSecurity,
) -> Result<PeerLinks, ConfigError> {
    let replication = match cluster.roles {
        ProcessRoles::Controller => None,
        ProcessRoles::Combined | ProcessRoles::Broker => {
            let name = &cluster.replication.inter_broker_listener_name;
            let Some(inter_broker) = client_listeners.iter().find(|l| &l.name == name) else {
                return Err(rejected(
                    "inter.broker.listener.name",
                    name,
                    "no such listener in listeners",
                ));
            };
            Some(peer_link(
                v,
                inter_broker.clone(),
                "sasl.mechanism.inter.broker.protocol",
            )?)
        }
    };
    Ok(PeerLinks {
        replication,
        controller: peer_link(v, controller, CONTROLLER_MECHANISM_KEY)?,
    })
}

fn peer_link(
    v: &Values<'_>,
    listener: ListenerSecurity,
    mechanism_key: &str,
) -> Result<PeerLink, ConfigError> {
    let login = match &listener.sasl {
        None => None,
        Some(sasl) => {
            let mechanism = link_mechanism(v, &listener, &sasl.mechanisms, mechanism_key)?;
            Some(login(v, &listener.name, mechanism)?)
        }
    };
    Ok(PeerLink { listener, login })
}

/// The mechanism brokers log in with on a SASL listener: named explicitly (Kafka's default,
/// GSSAPI, does not exist here), and one the listener enables.
fn link_mechanism(
    v: &Values<'_>,
    listener: &ListenerSecurity,
    enabled: &[Mechanism],
    key: &str,
) -> Result<Mechanism, ConfigError> {
    let Some(text) = v.set(key) else {
        return Err(rejected(
            key,
            "",
            format!(
                "brokers connect to each other over {} ({}): name the SASL mechanism they log in with",
                listener.name, listener.protocol
            ),
        ));
    };
    let mechanism: Mechanism = text
        .trim()
        .parse()
        .map_err(|_| rejected(key, text, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"))?;
    // SCRAM users live in the metadata log, which the quorum's transport must carry before
    // any of it is read (KRaft's controllers have no SCRAM either): PLAIN, from the
    // listener's JAAS config, is the same on every node from the start.
    if mechanism != Mechanism::Plain && key == CONTROLLER_MECHANISM_KEY {
        return Err(rejected(
            key,
            text,
            "voters log in to each other with PLAIN (inside TLS on SASL_SSL): SCRAM users live \
             in the metadata log the quorum carries, so they cannot admit it",
        ));
    }
    if !enabled.contains(&mechanism) {
        return Err(rejected(
            key,
            text,
            format!("{} does not enable {mechanism}", listener.name),
        ));
    }
    Ok(mechanism)
}

/// The `username` and `password` of `listener.name.<listener>.<mechanism>.sasl.jaas.config`.
fn login(v: &Values<'_>, listener: &str, mechanism: Mechanism) -> Result<SaslLogin, ConfigError> {
    let key = listener_key(
        listener,
        &format!("{}.sasl.jaas.config", mechanism.name().to_ascii_lowercase()),
    );
    // The text holds passwords: never echoed.
    let hidden = |reason: String| rejected(&key, "(hidden)", reason);
    let Some(text) = v.explicit.get(&key) else {
        return Err(rejected(
            &key,
            "",
            format!("brokers log in to {listener} with {mechanism}: set their username and password here"),
        ));
    };
    let options = JaasOptions::parse(text).map_err(|e| hidden(e.to_string()))?;
    match (options.username(), options.password()) {
        (Some(user), Some(password)) => Ok(SaslLogin {
            mechanism,
            user: user.to_string(),
            password: password.to_string(),
        }),
        _ => Err(hidden(
            "needs username=\"...\" and password=\"...\" for the broker's own login".to_string(),
        )),
    }
}

/// The link as the startup log names it: `REPLICATION (SASL_SSL, PLAIN)`.
pub fn describe(link: &PeerLink) -> String {
    match (&link.login, link.listener.protocol) {
        (Some(login), protocol) => format!("{} ({protocol}, {})", link.listener.name, login.mechanism),
        (None, SecurityProtocol::Plaintext) => format!("{} (PLAINTEXT)", link.listener.name),
        (None, protocol) => format!("{} ({protocol})", link.listener.name),
    }
}

fn rejected(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Rejected {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}
