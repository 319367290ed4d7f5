//! The replication link's security for `bench replication --inter-broker-protocol`: a listener
//! of its own (`REPLICATION`) with TLS, and SASL PLAIN over it for SASL_SSL, so that the cost of
//! securing replication is measured against the same run over PLAINTEXT. The certificates (a
//! CA and a server certificate for 127.0.0.1 and localhost) are made by the run, in its
//! directory; no key of any value is involved.

use std::path::Path;

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair, SanType,
};

use crate::cli::InterBrokerProtocol;

/// The name of the replication link's listener.
pub const LISTENER: &str = "REPLICATION";
const USER: &str = "replicator";
const PASSWORD: &str = "bench-replicator-secret";

/// The overrides every broker gets for `protocol`, certificates written under `dir`; `None`
/// for PLAINTEXT (replication on the clients' listener).
pub fn overrides(protocol: InterBrokerProtocol, dir: &Path) -> anyhow::Result<Option<Vec<String>>> {
    if protocol == InterBrokerProtocol::Plaintext {
        return Ok(None);
    }
    let name = protocol.name();
    let (ca, keystore) = certificates(dir)?;
    let mut overrides = vec![
        format!("listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,{LISTENER}:{name}"),
        format!("inter.broker.listener.name={LISTENER}"),
        format!("ssl.keystore.location={}", keystore.display()),
        format!("ssl.truststore.location={}", ca.display()),
    ];
    if protocol == InterBrokerProtocol::SaslSsl {
        overrides.extend([
            "sasl.enabled.mechanisms=PLAIN".to_owned(),
            "sasl.mechanism.inter.broker.protocol=PLAIN".to_owned(),
            format!(
                "listener.name.{}.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \
                 required username=\"{USER}\" password=\"{PASSWORD}\" user_{USER}=\"{PASSWORD}\";",
                LISTENER.to_ascii_lowercase()
            ),
        ]);
    }
    Ok(Some(overrides))
}

/// Writes `ca.pem` and `replication.pem` (key, certificate, CA) under `dir`.
fn certificates(dir: &Path) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.distinguished_name = DistinguishedName::new();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "laminar bench CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let mut params = CertificateParams::new(vec!["localhost".to_owned()])?;
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, "laminar bench broker");
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &ca)?;
    let ca_path = dir.join("ca.pem");
    let keystore = dir.join("replication.pem");
    std::fs::write(&ca_path, ca.pem()).context("writing the CA")?;
    let chain = format!("{}{}{}", key.serialize_pem(), cert.pem(), ca.pem());
    std::fs::write(&keystore, chain).context("writing the key store")?;
    Ok((ca_path, keystore))
}
