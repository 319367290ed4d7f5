//! How each client listener secures its connections: its security protocol
//! (`listener.security.protocol.map`), and for SASL listeners the mechanisms it enables
//! (`sasl.enabled.mechanisms`, or `listener.name.<name>.sasl.enabled.mechanisms`) and PLAIN's
//! users (`listener.name.<name>.plain.sasl.jaas.config`, Kafka's `PlainLoginModule` with
//! `user_<name>="<password>"` options). A child of `broker.rs` (it reads the same `Values`).
//!
//! TLS listeners (SSL, SASL_SSL) take Kafka's `ssl.*` keys (PEM only), each of which
//! `listener.name.<name>.ssl.*` may set for one listener. PLAIN on a SASL_PLAINTEXT listener
//! sends passwords in clear, so it needs `laminar.sasl.plain.plaintext.enable=true`
//! (docs/ARCHITECTURE.md, "Security").

use std::collections::BTreeMap;

use std::path::PathBuf;

use laminar_security::jaas::{JaasOptions, PlainUsers};
use laminar_security::tls::{ClientAuth, KeyMaterial, TlsServerSettings, TlsVersion, TrustMaterial};
use laminar_security::{Mechanism, PrincipalMappingRules, SecurityProtocol};

use super::super::broker_keys::find_broker_key;
use super::super::{ConfigError, Listener};
use super::{parse_bool, Values};

/// The prefix of Kafka's per-listener keys: `listener.name.<lower-case name>.<key>`.
pub const LISTENER_KEY_PREFIX: &str = "listener.name.";

/// Per-listener keys Laminar reads after the listener prefix (the JAAS key also carries the
/// mechanism: `plain.sasl.jaas.config`).
const PER_LISTENER_KEYS: &[&str] = &[
    "sasl.enabled.mechanisms",
    "plain.sasl.jaas.config",
    "scram-sha-256.sasl.jaas.config",
    "scram-sha-512.sasl.jaas.config",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.principal.mapping.rules",
    "max.connection.creation.rate",
];

/// How one client listener secures its connections. Built once at start, shared read-only.
#[derive(Debug, Clone, PartialEq)]
pub struct ListenerSecurity {
    /// The listener's name, as in `listeners`.
    pub name: String,
    pub protocol: SecurityProtocol,
    /// SASL listeners only: the mechanisms clients may pick, and PLAIN's users.
    pub sasl: Option<SaslSettings>,
    /// SSL and SASL_SSL listeners only: the key, certificates and trust store.
    pub tls: Option<TlsServerSettings>,
}

/// A SASL listener's mechanisms and PLAIN users. SCRAM users are not configuration: they live
/// in the broker's credential store (AlterUserScramCredentials).
#[derive(Debug, Clone, PartialEq)]
pub struct SaslSettings {
    pub mechanisms: Vec<Mechanism>,
    pub plain_users: PlainUsers,
}

/// Whether `key` is a per-listener key Laminar reads (`listener.name.<name>.<key>`).
pub fn is_listener_key(key: &str) -> bool {
    key.strip_prefix(LISTENER_KEY_PREFIX)
        .and_then(|rest| rest.split_once('.'))
        .is_some_and(|(name, key)| !name.is_empty() && PER_LISTENER_KEYS.contains(&key))
}

/// The security of every client listener, in the order of `listeners`, and in a cluster the
/// controller listener's.
pub(super) fn for_listeners(
    v: &Values<'_>,
    listeners: &[Listener],
    cluster: Option<&super::cluster_keys::ClusterSettings>,
) -> Result<(Vec<ListenerSecurity>, Option<ListenerSecurity>), ConfigError> {
    let map = protocol_map(v)?;
    let security = listeners
        .iter()
        .map(|listener| {
            let protocol = protocol_of(&map, &listener.name)?;
            security_of(v, listener, protocol)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let Some(cluster) = cluster else {
        return Ok((security, None));
    };
    // The controller's listener is PLAINTEXT unless the map says otherwise.
    let controller = &cluster.controller_listener;
    let protocol = map
        .get(&controller.name)
        .copied()
        .unwrap_or(SecurityProtocol::Plaintext);
    let controller = security_of(v, controller, protocol)?;
    Ok((security, Some(controller)))
}

fn security_of(
    v: &Values<'_>,
    listener: &Listener,
    protocol: SecurityProtocol,
) -> Result<ListenerSecurity, ConfigError> {
    let plain_on_plaintext = v.parsed("laminar.sasl.plain.plaintext.enable", parse_bool)?;
    let sasl = match protocol.uses_sasl() {
        true => Some(sasl_settings(v, &listener.name, protocol, plain_on_plaintext)?),
        false => None,
    };
    let tls = match protocol.uses_tls() {
        true => Some(tls_settings(v, &listener.name)?),
        false => None,
    };
    Ok(ListenerSecurity {
        name: listener.name.clone(),
        protocol,
        sasl,
        tls,
    })
}

/// `listener.security.protocol.map`: listener name → protocol.
fn protocol_map(v: &Values<'_>) -> Result<BTreeMap<String, SecurityProtocol>, ConfigError> {
    let key = "listener.security.protocol.map";
    let text = v.text(key);
    let mut map = BTreeMap::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let parsed = entry
            .split_once(':')
            .and_then(|(name, protocol)| Some((name.trim(), protocol.trim().parse().ok()?)));
        let Some((name, protocol)) = parsed else {
            return Err(rejected(key, text, format!("{entry} is not NAME:PROTOCOL")));
        };
        if map.insert(name.to_ascii_uppercase(), protocol).is_some() {
            return Err(rejected(key, text, format!("{name} appears twice")));
        }
    }
    Ok(map)
}

/// A listener's protocol: as mapped, else its name when that is a protocol's (Kafka's rule).
fn protocol_of(
    map: &BTreeMap<String, SecurityProtocol>,
    name: &str,
) -> Result<SecurityProtocol, ConfigError> {
    let protocol = match map.get(name) {
        Some(protocol) => *protocol,
        None => name.parse().map_err(|_| {
            rejected(
                "listener.security.protocol.map",
                name,
                format!("listener {name} has no security protocol: map it, as {name}:SASL_PLAINTEXT"),
            )
        })?,
    };
    Ok(protocol)
}

fn sasl_settings(
    v: &Values<'_>,
    listener: &str,
    protocol: SecurityProtocol,
    plain_on_plaintext: bool,
) -> Result<SaslSettings, ConfigError> {
    let mechanisms_key = listener_key(listener, "sasl.enabled.mechanisms");
    let (key, text) = match v.explicit.get(&mechanisms_key) {
        Some(text) => (mechanisms_key.as_str(), text.as_str()),
        None => ("sasl.enabled.mechanisms", v.text("sasl.enabled.mechanisms")),
    };
    let mechanisms = parse_mechanisms(key, text)?;
    let plain_users = match mechanisms.contains(&Mechanism::Plain) {
        true => plain_users(v, listener)?,
        false => PlainUsers::default(),
    };
    if mechanisms.contains(&Mechanism::Plain) && !protocol.uses_tls() && !plain_on_plaintext {
        return Err(rejected(
            key,
            text,
            format!(
                "PLAIN on {listener} ({protocol}) would send passwords in clear; set \
                 laminar.sasl.plain.plaintext.enable=true to allow it"
            ),
        ));
    }
    Ok(SaslSettings {
        mechanisms,
        plain_users,
    })
}

fn parse_mechanisms(key: &str, text: &str) -> Result<Vec<Mechanism>, ConfigError> {
    let mut mechanisms = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let mechanism: Mechanism = name.parse().map_err(|_| {
            rejected(
                key,
                text,
                format!("{name} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"),
            )
        })?;
        if !mechanisms.contains(&mechanism) {
            mechanisms.push(mechanism);
        }
    }
    if mechanisms.is_empty() {
        return Err(rejected(key, text, "a SASL listener needs a mechanism"));
    }
    Ok(mechanisms)
}

/// PLAIN's users on `listener`, from its JAAS config (required once PLAIN is enabled there).
fn plain_users(v: &Values<'_>, listener: &str) -> Result<PlainUsers, ConfigError> {
    let key = listener_key(listener, "plain.sasl.jaas.config");
    let Some(text) = v.explicit.get(&key) else {
        return Err(ConfigError::Rejected {
            key: key.clone(),
            value: String::new(),
            reason: format!("PLAIN is enabled on {listener}, so its users must be set here"),
        });
    };
    let options = JaasOptions::parse(text).map_err(|e| ConfigError::Rejected {
        key: key.clone(),
        // The text holds passwords: never echoed.
        value: "(hidden)".to_string(),
        reason: e.to_string(),
    })?;
    Ok(options.plain_users())
}

/// A TLS listener's settings: its own `listener.name.<name>.ssl.*` keys, else the broker's.
fn tls_settings(v: &Values<'_>, listener: &str) -> Result<TlsServerSettings, ConfigError> {
    let key_material = key_material(v, listener)?;
    let trust = match (
        setting(v, listener, "ssl.truststore.location")?,
        setting(v, listener, "ssl.truststore.certificates")?,
    ) {
        (Some((_, path)), _) => Some(TrustMaterial::File(PathBuf::from(path.trim()))),
        (None, Some((_, pem))) => Some(TrustMaterial::Inline(pem.to_string())),
        (None, None) => None,
    };
    let (key, text) = setting_or_default(v, listener, "ssl.client.auth")?;
    let client_auth: ClientAuth = text
        .parse()
        .map_err(|_| rejected(&key, text, "none, requested or required"))?;
    if client_auth != ClientAuth::None && trust.is_none() {
        return Err(rejected(
            &key,
            text,
            "client certificates need ssl.truststore.location",
        ));
    }
    let (key, text) = setting_or_default(v, listener, "ssl.enabled.protocols")?;
    let protocols = text
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<TlsVersion>()
                .map_err(|_| rejected(&key, text, "TLSv1.2 or TLSv1.3"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (key, text) = setting_or_default(v, listener, "ssl.principal.mapping.rules")?;
    let principal_mapping =
        PrincipalMappingRules::parse(text).map_err(|e| rejected(&key, text, e.to_string()))?;
    Ok(TlsServerSettings {
        key_material,
        trust,
        client_auth,
        protocols,
        principal_mapping,
    })
}

/// The listener's private key and certificate chain: a PEM file, or both inline.
fn key_material(v: &Values<'_>, listener: &str) -> Result<KeyMaterial, ConfigError> {
    if let Some((key, _)) = setting(v, listener, "ssl.key.password")? {
        return Err(rejected(
            &key,
            "(hidden)",
            "encrypted private keys are not supported: decrypt it",
        ));
    }
    let location = setting(v, listener, "ssl.keystore.location")?;
    let chain = setting(v, listener, "ssl.keystore.certificate.chain")?;
    let inline_key = setting(v, listener, "ssl.keystore.key")?;
    match (location, chain, inline_key) {
        (Some((_, path)), None, None) => Ok(KeyMaterial::File(PathBuf::from(path.trim()))),
        (None, Some((_, chain)), Some((_, key))) => Ok(KeyMaterial::Inline {
            certificate_chain: chain.to_string(),
            key: key.to_string(),
        }),
        _ => Err(rejected(
            &listener_key(listener, "ssl.keystore.location"),
            "",
            format!(
                "TLS listener {listener} needs ssl.keystore.location, or                  ssl.keystore.certificate.chain with ssl.keystore.key"
            ),
        )),
    }
}

/// `key` for `listener`: its `listener.name.<name>.` form if set, else the broker-wide one;
/// validated as the registry says. Returns the key that applied, for error messages.
fn setting<'v>(
    v: &'v Values<'_>,
    listener: &str,
    key: &str,
) -> Result<Option<(String, &'v str)>, ConfigError> {
    let prefixed = listener_key(listener, key);
    let found = match v.explicit.get(&prefixed) {
        Some(value) => Some((prefixed, value.as_str())),
        None => v.set(key).map(|value| (key.to_string(), value)),
    };
    if let (Some((name, value)), Some(registered)) = (&found, find_broker_key(key)) {
        registered.kind.validate(name, value)?;
    }
    Ok(found)
}

/// As [`setting`], falling back to the key's default.
fn setting_or_default<'v>(
    v: &'v Values<'_>,
    listener: &str,
    key: &str,
) -> Result<(String, &'v str), ConfigError> {
    Ok(setting(v, listener, key)?.unwrap_or_else(|| (key.to_string(), v.text(key))))
}

/// `listener.name.<name>.<key>` for a listener (Kafka writes the name in lower case).
pub(super) fn listener_key(listener: &str, key: &str) -> String {
    format!("{LISTENER_KEY_PREFIX}{}.{key}", listener.to_ascii_lowercase())
}

pub(super) fn rejected(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Rejected {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use laminar_security::tls::{ClientAuth, KeyMaterial, TlsVersion};
    use laminar_security::{Mechanism, SecurityProtocol};

    use crate::config::{BrokerConfig, ConfigError};

    const JAAS: &str =
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";"#;

    fn load(overrides: &[&str]) -> Result<BrokerConfig, ConfigError> {
        let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        BrokerConfig::from_properties("", &overrides).map(|loaded| loaded.config)
    }

    #[test]
    fn the_default_listener_is_plaintext_without_sasl() {
        let config = load(&[]).unwrap();
        assert_eq!(config.listener_security.len(), 1);
        assert_eq!(config.listener_security[0].protocol, SecurityProtocol::Plaintext);
        assert!(config.listener_security[0].sasl.is_none());
    }

    #[test]
    fn a_sasl_listener_offers_scram_by_default() {
        let config = load(&["listeners=PLAINTEXT://:9092,SASL_PLAINTEXT://:9094"]).unwrap();
        let sasl = config.listener_security[1].sasl.as_ref().unwrap();
        assert_eq!(
            config.listener_security[1].protocol,
            SecurityProtocol::SaslPlaintext
        );
        assert_eq!(sasl.mechanisms, [Mechanism::ScramSha256, Mechanism::ScramSha512]);
        assert!(sasl.plain_users.is_empty());
    }

    #[test]
    fn a_listener_named_freely_takes_its_protocol_from_the_map() {
        let config = load(&[
            "listeners=CLIENTS://:9094",
            "listener.security.protocol.map=CLIENTS:SASL_PLAINTEXT",
            "listener.name.clients.sasl.enabled.mechanisms=SCRAM-SHA-512",
        ])
        .unwrap();
        let sasl = config.listener_security[0].sasl.as_ref().unwrap();
        assert_eq!(sasl.mechanisms, [Mechanism::ScramSha512]);
        let unmapped = load(&["listeners=CLIENTS://:9094"]).unwrap_err().to_string();
        assert!(
            unmapped.contains("CLIENTS has no security protocol"),
            "{unmapped}"
        );
    }

    #[test]
    fn plain_on_sasl_plaintext_needs_the_explicit_setting_and_its_users() {
        let listeners = "listeners=PLAINTEXT://:9092,SASL_PLAINTEXT://:9094";
        let mechanisms = "sasl.enabled.mechanisms=PLAIN";
        let jaas = format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}");
        let refused = load(&[listeners, mechanisms, &jaas]).unwrap_err().to_string();
        assert!(
            refused.contains("laminar.sasl.plain.plaintext.enable"),
            "{refused}"
        );
        let allowed = "laminar.sasl.plain.plaintext.enable=true";
        let no_users = load(&[listeners, mechanisms, allowed]).unwrap_err().to_string();
        assert!(no_users.contains("plain.sasl.jaas.config"), "{no_users}");
        let config = load(&[listeners, mechanisms, allowed, &jaas]).unwrap();
        let users = &config.listener_security[1].sasl.as_ref().unwrap().plain_users;
        assert!(users.contains("alice"));
    }

    #[test]
    fn a_malformed_jaas_config_is_refused_without_echoing_it() {
        let error = load(&[
            "listeners=SASL_PLAINTEXT://:9094",
            "sasl.enabled.mechanisms=PLAIN",
            "laminar.sasl.plain.plaintext.enable=true",
            r#"listener.name.sasl_plaintext.plain.sasl.jaas.config=PlainLoginModule required user_alice="hunter2"#,
        ])
        .unwrap_err()
        .to_string();
        assert!(!error.contains("hunter2"), "{error}");
    }

    #[test]
    fn a_tls_listener_takes_its_own_ssl_keys_over_the_brokers() {
        let config = load(&[
            "listeners=SSL://:9093,SASL_SSL://:9094",
            "ssl.keystore.location=/etc/laminar/broker.pem",
            "ssl.truststore.location=/etc/laminar/ca.pem",
            "listener.name.ssl.ssl.client.auth=required",
            "listener.name.sasl_ssl.ssl.keystore.location=/etc/laminar/sasl.pem",
        ])
        .unwrap();
        let (ssl, sasl_ssl) = (&config.listener_security[0], &config.listener_security[1]);
        let tls = ssl.tls.as_ref().unwrap();
        assert_eq!(
            tls.key_material,
            KeyMaterial::File("/etc/laminar/broker.pem".into())
        );
        assert_eq!(tls.client_auth, ClientAuth::Required);
        assert_eq!(tls.protocols, [TlsVersion::Tls12, TlsVersion::Tls13]);
        let tls = sasl_ssl.tls.as_ref().unwrap();
        assert_eq!(
            tls.key_material,
            KeyMaterial::File("/etc/laminar/sasl.pem".into())
        );
        assert_eq!(tls.client_auth, ClientAuth::None);
        assert!(sasl_ssl.sasl.is_some() && ssl.sasl.is_none());
    }

    #[test]
    fn tls_keys_that_cannot_work_are_refused() {
        let listeners = "listeners=SSL://:9093";
        for (overrides, expected) in [
            (
                vec!["ssl.keystore.location=/k.pem", "ssl.client.auth=required"],
                "ssl.truststore.location",
            ),
            (
                vec!["ssl.keystore.location=/k.pem", "ssl.key.password=secret"],
                "encrypted private keys",
            ),
            (
                vec!["ssl.keystore.certificate.chain=PEM"],
                "needs ssl.keystore.location",
            ),
            (
                vec!["ssl.keystore.location=/k.pem", "ssl.keystore.type=JKS"],
                "ssl.keystore.type",
            ),
            (
                vec!["ssl.keystore.location=/k.pem", "ssl.enabled.protocols=TLSv1.1"],
                "ssl.enabled.protocols",
            ),
        ] {
            let mut all = vec![listeners];
            all.extend(overrides.iter().copied());
            let error = load(&all).unwrap_err().to_string();
            assert!(error.contains(expected), "{overrides:?}: {error}");
            assert!(!error.contains("secret"), "{error}");
        }
    }

    #[test]
    fn describe_configs_marks_an_inline_key_sensitive_and_never_shows_it() {
        let config = load(&["ssl.keystore.key=-----BEGIN PRIVATE KEY-----xyz"]).unwrap();
        let entry = config
            .describe()
            .into_iter()
            .find(|e| e.name == "ssl.keystore.key")
            .unwrap();
        assert!(entry.sensitive);
        assert_eq!(entry.value, None);
        assert!(entry.synonyms.iter().all(|s| s.value.is_none()));
    }

    #[test]
    fn tls_listeners_and_unknown_mechanisms_are_refused() {
        for (overrides, expected) in [
            (&["listeners=SSL://:9093"][..], "needs ssl.keystore.location"),
            (
                &[
                    "listeners=SASL_PLAINTEXT://:9094",
                    "sasl.enabled.mechanisms=GSSAPI",
                ][..],
                "GSSAPI is not supported",
            ),
        ] {
            let error = load(overrides).unwrap_err().to_string();
            assert!(error.contains(expected), "{overrides:?}: {error}");
        }
    }

    /// A node of a three-voter cluster whose brokers replicate over REPLICATION and run the
    /// quorum over CONTROLLER, both SASL_PLAINTEXT with PLAIN.
    const SASL_LINKS: [&str; 9] = [
        "process.roles=broker,controller",
        "controller.quorum.voters=1@127.0.0.1:9093",
        "listeners=PLAINTEXT://:9092,REPLICATION://:9094,CONTROLLER://:9093",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,REPLICATION:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "inter.broker.listener.name=REPLICATION",
        "sasl.enabled.mechanisms=PLAIN",
        "laminar.sasl.plain.plaintext.enable=true",
        r#"listener.name.replication.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="b-secret" user_broker="b-secret";"#,
        r#"listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="voter" password="v-secret" user_voter="v-secret";"#,
    ];

    #[test]
    fn brokers_log_in_to_each_others_listeners_with_the_listeners_own_jaas_login() {
        let mechanisms = [
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            "sasl.mechanism.controller.protocol=PLAIN",
        ];
        let config = load(&[&SASL_LINKS[..], &mechanisms[..]].concat()).unwrap();
        let links = config.peer_links.expect("a cluster node has links");
        let replication = links
            .replication
            .clone()
            .expect("a broker's link")
            .login
            .expect("a SASL login");
        assert_eq!(
            (replication.mechanism, &*replication.user, &*replication.password),
            (Mechanism::Plain, "broker", "b-secret")
        );
        assert_eq!(
            links
                .replication
                .as_ref()
                .expect("a broker's link")
                .listener
                .protocol,
            SecurityProtocol::SaslPlaintext
        );
        let controller = links.controller.login.expect("a SASL login");
        assert_eq!((&*controller.user, &*controller.password), ("voter", "v-secret"));
        assert!(links
            .controller
            .listener
            .sasl
            .unwrap()
            .plain_users
            .contains("voter"));
        // SCRAM between brokers: its users come from the metadata log.
        let scram = [
            "listener.name.replication.sasl.enabled.mechanisms=SCRAM-SHA-512",
            r#"listener.name.replication.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="s-secret";"#,
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
            "sasl.mechanism.controller.protocol=PLAIN",
        ];
        let config = load(&[&SASL_LINKS[..], &scram[..]].concat()).unwrap();
        let login = config.peer_links.unwrap().replication.unwrap().login.unwrap();
        assert_eq!(
            (login.mechanism, &*login.password),
            (Mechanism::ScramSha512, "s-secret")
        );
        // A plaintext cluster's links log in with nothing.
        let plain = load(&[
            "process.roles=broker,controller",
            "controller.quorum.voters=1@127.0.0.1:9093",
            "listeners=PLAINTEXT://:9092,CONTROLLER://:9093",
        ])
        .unwrap();
        let links = plain.peer_links.unwrap();
        assert!(links.replication.unwrap().login.is_none() && links.controller.login.is_none());
        assert_eq!(links.controller.listener.protocol, SecurityProtocol::Plaintext);
    }

    #[test]
    fn a_sasl_link_without_its_mechanism_or_login_or_voters_with_scram_are_refused_by_name() {
        let both = "sasl.mechanism.controller.protocol=PLAIN";
        let cases: [(Vec<&str>, &str); 4] = [
            (vec![both], "sasl.mechanism.inter.broker.protocol"),
            (
                vec![
                    "sasl.mechanism.inter.broker.protocol=PLAIN",
                    "sasl.mechanism.controller.protocol=SCRAM-SHA-512",
                ],
                "voters log in to each other with PLAIN",
            ),
            (
                vec!["sasl.mechanism.inter.broker.protocol=PLAIN"],
                "sasl.mechanism.controller.protocol",
            ),
            (
                vec![
                    both,
                    "sasl.mechanism.inter.broker.protocol=PLAIN",
                    "security.inter.broker.protocol=SASL_PLAINTEXT",
                ],
                "not both",
            ),
        ];
        for (extra, expected) in cases {
            let error = load(&[&SASL_LINKS[..], &extra[..]].concat())
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{extra:?}: {error}");
            assert!(!error.contains("secret"), "{error}");
        }
        let mut no_login = SASL_LINKS.to_vec();
        no_login[7] = r#"listener.name.replication.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_broker="b-secret";"#;
        let error = load(
            &[
                &no_login[..],
                &["sasl.mechanism.inter.broker.protocol=PLAIN", both][..],
            ]
            .concat(),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("username"), "{error}");
        assert!(!error.contains("secret"), "{error}");
    }
}
