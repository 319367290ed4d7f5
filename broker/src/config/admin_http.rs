//! How the admin HTTP endpoint (`laminar.http.listen`) secures itself: HTTPS from
//! `laminar.http.ssl.*`, and who may call it: bearer tokens (`laminar.http.authentication.tokens.file`)
//! and client-certificate principals, each with the admin or the read-only role. On a loopback
//! address both are optional; on any other address both are required, so the endpoint is never
//! open to a network by accident (docs/ARCHITECTURE.md, "Security"). A child of `broker.rs`.

use std::net::SocketAddr;
use std::path::PathBuf;

use laminar_security::bearer_tokens::BearerTokens;
use laminar_security::tls::{ClientAuth, KeyMaterial, TlsServerSettings, TlsVersion, TrustMaterial};
use laminar_security::{Principal, PrincipalMappingRules};

use super::super::ConfigError;
use super::listener_security::rejected;
use super::{parse_bool, Values};

/// The admin endpoint's security, built once at start.
#[derive(Debug, Clone, PartialEq)]
pub struct AdminHttpSecurity {
    /// HTTPS, when a key store is set.
    pub tls: Option<TlsServerSettings>,
    /// Bearer tokens, read at start (their digests only).
    pub tokens: BearerTokens,
    /// Certificate principals with the admin role, and with the read-only one.
    pub admin_principals: Vec<Principal>,
    pub read_only_principals: Vec<Principal>,
    /// `/metrics` and `/v1/status/ready` open to every client.
    pub monitoring_open: bool,
}

impl AdminHttpSecurity {
    /// Whether a request must say who it is (a token or a certificate).
    pub fn authenticates(&self) -> bool {
        !self.tokens.is_empty() || !self.admin_principals.is_empty() || !self.read_only_principals.is_empty()
    }
}

pub(super) fn admin_http_security(v: &Values<'_>) -> Result<AdminHttpSecurity, ConfigError> {
    let listen: SocketAddr = v.parsed("laminar.http.listen", |s| s.trim().parse().ok())?;
    let tokens = match v.set("laminar.http.authentication.tokens.file") {
        Some(path) => {
            BearerTokens::load(std::path::Path::new(path.trim())).map_err(|e| ConfigError::Rejected {
                key: "laminar.http.authentication.tokens.file".into(),
                value: path.to_string(),
                reason: e.to_string(),
            })?
        }
        None => BearerTokens::default(),
    };
    let security = AdminHttpSecurity {
        tls: tls(v)?,
        tokens,
        admin_principals: principals(v, "laminar.http.authentication.admin.principals")?,
        read_only_principals: principals(v, "laminar.http.authentication.read.only.principals")?,
        monitoring_open: v.parsed("laminar.http.monitoring.open", parse_bool)?,
    };
    if !listen.ip().is_loopback() && (security.tls.is_none() || !security.authenticates()) {
        return Err(rejected(
            "laminar.http.listen",
            &listen.to_string(),
            "off a loopback address the HTTP endpoint needs HTTPS \
             (laminar.http.ssl.keystore.location) and authentication \
             (laminar.http.authentication.tokens.file or certificate principals)",
        ));
    }
    Ok(security)
}

fn tls(v: &Values<'_>) -> Result<Option<TlsServerSettings>, ConfigError> {
    let Some(keystore) = v.set("laminar.http.ssl.keystore.location") else {
        return Ok(None);
    };
    let trust = v
        .set("laminar.http.ssl.truststore.location")
        .map(|path| TrustMaterial::File(PathBuf::from(path.trim())));
    let client_auth_key = "laminar.http.ssl.client.auth";
    let client_auth: ClientAuth = v.text(client_auth_key).parse().map_err(|_| {
        rejected(
            client_auth_key,
            v.text(client_auth_key),
            "none, requested or required",
        )
    })?;
    if client_auth != ClientAuth::None && trust.is_none() {
        return Err(rejected(
            client_auth_key,
            v.text(client_auth_key),
            "client certificates need laminar.http.ssl.truststore.location",
        ));
    }
    Ok(Some(TlsServerSettings {
        key_material: KeyMaterial::File(PathBuf::from(keystore.trim())),
        trust,
        client_auth,
        protocols: vec![TlsVersion::Tls12, TlsVersion::Tls13],
        principal_mapping: PrincipalMappingRules::default(),
    }))
}

fn principals(v: &Values<'_>, key: &str) -> Result<Vec<Principal>, ConfigError> {
    let Some(text) = v.set(key) else {
        return Ok(Vec::new());
    };
    // A DN holds commas: principals are split where a new `kind:` starts.
    split_principals(text)
        .into_iter()
        .map(|p| p.parse().map_err(|e| rejected(key, text, format!("{p:?}: {e}"))))
        .collect()
}

/// `User:CN=a,O=x, User:CN=b` → `["User:CN=a,O=x", "User:CN=b"]`: a comma starts a new
/// principal only where `User:` follows it.
fn split_principals(text: &str) -> Vec<&str> {
    let mut starts = vec![0];
    for (at, _) in text.match_indices(',') {
        if text[at + 1..].trim_start().starts_with("User:") {
            starts.push(at + 1);
        }
    }
    starts.push(text.len() + 1);
    starts
        .windows(2)
        .map(|w| text[w[0]..w[1] - 1].trim())
        .filter(|p| !p.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::split_principals;

    #[test]
    fn principals_split_where_a_new_one_starts() {
        assert_eq!(
            split_principals("User:CN=a,O=x, User:CN=b"),
            vec!["User:CN=a,O=x", "User:CN=b"]
        );
        assert_eq!(split_principals("User:ops"), vec!["User:ops"]);
    }
}
