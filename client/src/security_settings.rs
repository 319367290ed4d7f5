//! A client's security settings in Kafka's client names, from wherever they come: the
//! benchmark's flags, or a `--command-config` properties file as Kafka's tools take it
//! (`security.protocol`, `ssl.ca.location` or a PEM `ssl.truststore.location`,
//! `sasl.mechanism`, and `sasl.username` / `sasl.password` or a `sasl.jaas.config` login
//! module's `username` and `password`). One place turns them into a [`Security`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use laminar_security::{JaasOptions, Mechanism, SecurityProtocol};

use crate::transport::{SaslLogin, Security};

/// Why settings cannot make a [`Security`]: a missing or invalid setting, named.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SecuritySettingsError(String);

/// What a client's connections need, before its CA file is read.
#[derive(Debug, Clone, Default)]
pub struct SecuritySettings {
    /// `None` is PLAINTEXT.
    pub protocol: Option<SecurityProtocol>,
    /// PEM file of the CA certificates trusted on SSL and SASL_SSL.
    pub ssl_ca_location: Option<PathBuf>,
    pub sasl_mechanism: Option<Mechanism>,
    pub sasl_username: Option<String>,
    pub sasl_password: Option<String>,
}

/// The keys read from a properties file; any other is refused, so a misspelt one is not
/// silently ignored.
const KNOWN_KEYS: &[&str] = &[
    "security.protocol",
    "ssl.ca.location",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.endpoint.identification.algorithm",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
    "client.id",
];

impl SecuritySettings {
    /// The settings of a Kafka client properties file's entries.
    pub fn from_properties(
        entries: &BTreeMap<String, String>,
    ) -> Result<SecuritySettings, SecuritySettingsError> {
        let invalid = |key: &str, why: &dyn std::fmt::Display| SecuritySettingsError(format!("{key}: {why}"));
        if let Some(key) = entries.keys().find(|k| !KNOWN_KEYS.contains(&k.as_str())) {
            return Err(SecuritySettingsError(format!(
                "{key} is not a client security setting (known: {})",
                KNOWN_KEYS.join(", ")
            )));
        }
        let get = |key: &str| entries.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        if get("ssl.truststore.type").is_some_and(|t| !t.eq_ignore_ascii_case("PEM")) {
            return Err(invalid("ssl.truststore.type", &"only PEM files are read"));
        }
        let protocol = get("security.protocol")
            .map(|p| p.parse().map_err(|e| invalid("security.protocol", &e)))
            .transpose()?;
        let sasl_mechanism = get("sasl.mechanism")
            .map(|m| m.parse().map_err(|e| invalid("sasl.mechanism", &e)))
            .transpose()?;
        let jaas = get("sasl.jaas.config")
            .map(|c| JaasOptions::parse(c).map_err(|e| invalid("sasl.jaas.config", &e)))
            .transpose()?;
        let from_jaas =
            |pick: fn(&JaasOptions) -> Option<&str>| jaas.as_ref().and_then(pick).map(str::to_owned);
        Ok(SecuritySettings {
            protocol,
            ssl_ca_location: get("ssl.ca.location")
                .or_else(|| get("ssl.truststore.location"))
                .map(PathBuf::from),
            sasl_mechanism,
            sasl_username: get("sasl.username")
                .map(str::to_owned)
                .or_else(|| from_jaas(JaasOptions::username)),
            sasl_password: get("sasl.password")
                .map(str::to_owned)
                .or_else(|| from_jaas(JaasOptions::password)),
        })
    }

    /// The [`Security`] these settings ask for: TLS trusting the CA file on SSL and SASL_SSL,
    /// a SASL login (SCRAM-SHA-512 unless a mechanism is named) on the SASL protocols.
    pub fn security(&self) -> Result<Security, SecuritySettingsError> {
        let protocol = self.protocol.unwrap_or(SecurityProtocol::Plaintext);
        let mut security = Security::default();
        if protocol.uses_tls() {
            let ca = self.ssl_ca_location.as_deref().ok_or_else(|| {
                SecuritySettingsError(format!("{protocol} needs ssl.ca.location (a PEM file of CAs)"))
            })?;
            let tls = Security::tls_trusting(ca).map_err(|e| SecuritySettingsError(e.to_string()))?;
            security.tls = Some(tls);
        }
        if protocol.uses_sasl() {
            let (Some(user), Some(password)) = (&self.sasl_username, &self.sasl_password) else {
                return Err(SecuritySettingsError(format!(
                    "{protocol} needs a SASL username and password"
                )));
            };
            security.sasl = Some(SaslLogin {
                mechanism: self.sasl_mechanism.unwrap_or(Mechanism::ScramSha512),
                user: user.clone(),
                password: password.clone(),
            });
        }
        Ok(security)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_java_style_file_and_a_librdkafka_style_file_give_the_same_login() {
        let java = entries(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-256"),
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cret";"#,
            ),
        ]);
        let librdkafka = entries(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-256"),
            ("sasl.username", "alice"),
            ("sasl.password", "s3cret"),
        ]);
        for file in [java, librdkafka] {
            let security = SecuritySettings::from_properties(&file)
                .unwrap()
                .security()
                .unwrap();
            let login = security.sasl.expect("a SASL login");
            assert_eq!(
                (login.mechanism, &*login.user, &*login.password),
                (Mechanism::ScramSha256, "alice", "s3cret")
            );
            assert!(security.tls.is_none());
        }
    }

    #[test]
    fn missing_and_unknown_settings_are_named() {
        let no_ca = entries(&[("security.protocol", "SSL")]);
        let error = SecuritySettings::from_properties(&no_ca)
            .unwrap()
            .security()
            .unwrap_err();
        assert!(error.to_string().contains("ssl.ca.location"), "{error}");
        let no_password = entries(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.username", "alice"),
        ]);
        let error = SecuritySettings::from_properties(&no_password)
            .unwrap()
            .security()
            .unwrap_err();
        assert!(error.to_string().contains("password"), "{error}");
        let typo = entries(&[("sasl.usename", "alice")]);
        let error = SecuritySettings::from_properties(&typo).unwrap_err();
        assert!(error.to_string().contains("sasl.usename"), "{error}");
        let jks = entries(&[("ssl.truststore.type", "JKS")]);
        assert!(SecuritySettings::from_properties(&jks).is_err());
        assert!(SecuritySettings::from_properties(&entries(&[]))
            .unwrap()
            .security()
            .unwrap()
            .sasl
            .is_none());
    }
}
