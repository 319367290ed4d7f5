//! TLS for Kafka's SSL and SASL_SSL listeners: the listener's `ssl.*` settings in Kafka's PEM
//! forms (`ssl.keystore.type=PEM`), turned into a rustls server configuration, and the
//! principal of a client that authenticated with a certificate.
//!
//! Only TLS 1.2 and 1.3 exist here (rustls implements nothing older), with the ring provider.
//! The broker owns the sockets: it wraps each accepted connection in a
//! `rustls::ServerConnection` built from [`TlsServerSettings::server_config`], and once the
//! handshake is done asks [`principal_of`] who the client is.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject, SectionKind};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};

use crate::distinguished_name::subject_dn;
use crate::principal::Principal;
use crate::principal_mapping::PrincipalMappingRules;
pub use crate::tls_error::TlsError;

/// `ssl.client.auth`: whether the listener asks TLS clients for a certificate, which then
/// names the client's principal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClientAuth {
    /// No certificate is asked for: every TLS client is `User:ANONYMOUS` (Kafka's default).
    None,
    /// A certificate is asked for and verified if sent; clients without one are anonymous.
    Requested,
    /// Clients without a certificate the trust store vouches for are refused.
    Required,
}

impl ClientAuth {
    /// Every value, for listing the accepted ones in configuration errors.
    pub const ALL: [ClientAuth; 3] = [Self::None, Self::Requested, Self::Required];

    /// Kafka's lower-case name, as written in `ssl.client.auth`.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Requested => "requested",
            Self::Required => "required",
        }
    }
}

impl fmt::Display for ClientAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ClientAuth {
    type Err = TlsError;

    /// Case-insensitive, as Kafka's `SslClientAuth.forConfig`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|client_auth| client_auth.name().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| TlsError::UnknownClientAuth(text_for_error(text)))
    }
}

/// A TLS version a listener may negotiate (`ssl.enabled.protocols`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TlsVersion {
    /// TLS 1.2 (RFC 5246), for clients on older Java runtimes.
    Tls12,
    /// TLS 1.3 (RFC 8446).
    Tls13,
}

impl TlsVersion {
    /// Every version, Kafka's default `ssl.enabled.protocols` (TLSv1.2,TLSv1.3).
    pub const ALL: [TlsVersion; 2] = [Self::Tls12, Self::Tls13];

    /// The name Java and Kafka use, as in `ssl.enabled.protocols`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tls12 => "TLSv1.2",
            Self::Tls13 => "TLSv1.3",
        }
    }

    fn rustls_version(self) -> &'static SupportedProtocolVersion {
        match self {
            Self::Tls12 => &rustls::version::TLS12,
            Self::Tls13 => &rustls::version::TLS13,
        }
    }
}

impl fmt::Display for TlsVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TlsVersion {
    type Err = TlsError;

    /// `TLSv1.2` or `TLSv1.3`, case-insensitive; older versions are refused as unknown.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|version| version.name().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| TlsError::UnknownTlsVersion(text_for_error(text)))
    }
}

/// Where a listener's certificate chain and private key come from, in Kafka's PEM forms:
/// one file holding the key and the chain (`ssl.keystore.location`), or both given inline
/// (`ssl.keystore.certificate.chain`, `ssl.keystore.key`). `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub enum KeyMaterial {
    /// A PEM file with the private key and the certificate chain, leaf first.
    File(PathBuf),
    /// The chain and the key as PEM text.
    Inline {
        /// PEM certificates, the listener's own first.
        certificate_chain: String,
        /// A PEM private key (PKCS#8, PKCS#1 RSA or SEC1 EC), unencrypted.
        key: String,
    },
}

impl fmt::Debug for KeyMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Inline {
                certificate_chain, ..
            } => f
                .debug_struct("Inline")
                .field("certificate_chain", certificate_chain)
                .field("key", &"<redacted>")
                .finish(),
        }
    }
}

/// The CA certificates client certificates are verified against: a PEM file
/// (`ssl.truststore.location`) or PEM text (`ssl.truststore.certificates`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrustMaterial {
    /// A PEM file of CA certificates.
    File(PathBuf),
    /// PEM text of CA certificates.
    Inline(String),
}

/// A listener's TLS settings, as Kafka's `ssl.*` listener configuration gives them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsServerSettings {
    /// The listener's certificate chain and private key.
    pub key_material: KeyMaterial,
    /// CAs for client certificates; needed when `client_auth` is not `None`.
    pub trust: Option<TrustMaterial>,
    /// `ssl.client.auth`.
    pub client_auth: ClientAuth,
    /// `ssl.enabled.protocols`: TLSv1.2 and/or TLSv1.3 (nothing older exists in rustls).
    pub protocols: Vec<TlsVersion>,
    /// `ssl.principal.mapping.rules`, naming clients by their certificate's subject.
    pub principal_mapping: PrincipalMappingRules,
}

impl TlsServerSettings {
    /// Kafka's defaults around the given key material: no client certificates, TLS 1.2 and
    /// 1.3, principals named by the DN.
    pub fn new(key_material: KeyMaterial) -> Self {
        TlsServerSettings {
            key_material,
            trust: None,
            client_auth: ClientAuth::None,
            protocols: TlsVersion::ALL.to_vec(),
            principal_mapping: PrincipalMappingRules::default_rules(),
        }
    }

    /// Reads the files and builds rustls' server configuration: the versions in `protocols`,
    /// the ring provider, client certificates verified against `trust` as `client_auth`
    /// says (a trust store is required unless it is `None`), no ALPN. Done once per
    /// listener at startup, so a broken file stops the broker rather than every handshake.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let provider = crypto_provider();
        let versions = self.rustls_versions()?;
        let (certificate_chain, key) = self.key_material.load()?;
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&versions)
            .map_err(rustls_error)?;
        let builder = match self.client_verifier(&provider)? {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            None => builder.with_no_client_auth(),
        };
        let config = builder
            .with_single_cert(certificate_chain, key)
            .map_err(rustls_error)?;
        Ok(Arc::new(config))
    }

    /// The same listener seen from a broker connecting to its peers on it (replication on the
    /// inter-broker listener, the quorum on the controller's), as Kafka's inter-broker clients
    /// use their listener's `ssl.*` settings: the trust store verifies the peer's certificate
    /// (for the address dialled), and the key material is presented as the client certificate
    /// when the listener asks its clients for one.
    pub fn peer_client_config(&self) -> Result<Arc<rustls::ClientConfig>, TlsError> {
        let provider = crypto_provider();
        let versions = self.rustls_versions()?;
        let trust = self.trust.as_ref().ok_or(TlsError::PeerTrustStoreNeeded)?;
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(rustls_error)?
            .with_root_certificates(trust.root_store()?);
        let config = match self.client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            ClientAuth::Requested | ClientAuth::Required => {
                let (certificate_chain, key) = self.key_material.load()?;
                builder
                    .with_client_auth_cert(certificate_chain, key)
                    .map_err(rustls_error)?
            }
        };
        Ok(Arc::new(config))
    }

    fn rustls_versions(&self) -> Result<Vec<&'static SupportedProtocolVersion>, TlsError> {
        let mut versions = self.protocols.clone();
        versions.sort_unstable();
        versions.dedup();
        if versions.is_empty() {
            return Err(TlsError::NoProtocols);
        }
        Ok(versions
            .into_iter()
            .rev()
            .map(TlsVersion::rustls_version)
            .collect())
    }

    fn client_verifier(
        &self,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Option<Arc<dyn ClientCertVerifier>>, TlsError> {
        if self.client_auth == ClientAuth::None {
            return Ok(None);
        }
        let trust = self
            .trust
            .as_ref()
            .ok_or(TlsError::TrustStoreNeeded(self.client_auth.name()))?;
        let roots = Arc::new(trust.root_store()?);
        let builder = WebPkiClientVerifier::builder_with_provider(roots, Arc::clone(provider));
        let builder = match self.client_auth {
            ClientAuth::Requested => builder.allow_unauthenticated(),
            ClientAuth::None | ClientAuth::Required => builder,
        };
        builder
            .build()
            .map(Some)
            .map_err(|error| TlsError::Rustls(error.to_string()))
    }
}

/// The rustls crypto provider every TLS configuration here uses (ring), shared so that
/// clients built elsewhere (tests, inter-broker links) negotiate the same suites.
///
/// rustls 0.23.48 deprecates ring's provider for lacking post-quantum key exchange; its
/// replacement, aws-lc-rs, needs cmake to build, which the supported build hosts lack.
#[allow(deprecated)]
pub fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The principal of a TLS client once its handshake is done: `User:<name>`, the name being
/// its certificate's subject DN (RFC 2253, as Java's `X500Principal.getName()` writes it)
/// mapped by `rules`; `User:ANONYMOUS` when it sent no certificate. An error when no rule
/// applies to its DN, which Kafka treats as a failed authentication.
pub fn principal_of(
    peer_certificates: Option<&[CertificateDer<'_>]>,
    rules: &PrincipalMappingRules,
) -> Result<Principal, TlsError> {
    let Some(end_entity) = peer_certificates.and_then(<[CertificateDer<'_>]>::first) else {
        return Ok(Principal::anonymous());
    };
    let distinguished_name = subject_dn(end_entity.as_ref())?;
    match rules.apply(&distinguished_name) {
        Some(name) => Ok(Principal::user(&name)),
        None => Err(TlsError::NoMatchingRule { distinguished_name }),
    }
}

/// Values longer than this are cut in errors: they come from configuration, and an error
/// message should not grow with its input.
const TEXT_IN_ERROR_LEN_MAX: usize = 64;

fn text_for_error(text: &str) -> String {
    text.chars().take(TEXT_IN_ERROR_LEN_MAX).collect()
}

fn rustls_error(error: rustls::Error) -> TlsError {
    TlsError::Rustls(error.to_string())
}

impl KeyMaterial {
    fn load(&self) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
        match self {
            Self::File(path) => {
                let origin = format!("ssl.keystore.location {}", path.display());
                let sections = PemSections::read(&read_file(path)?, &origin)?;
                Ok((sections.certificate_chain(&origin)?, sections.only_key(&origin)?))
            }
            Self::Inline {
                certificate_chain,
                key,
            } => {
                let chain_origin = "ssl.keystore.certificate.chain";
                let chain = PemSections::read(certificate_chain.as_bytes(), chain_origin)?;
                let key_origin = "ssl.keystore.key";
                let key = PemSections::read(key.as_bytes(), key_origin)?;
                Ok((chain.certificate_chain(chain_origin)?, key.only_key(key_origin)?))
            }
        }
    }
}

impl TrustMaterial {
    fn root_store(&self) -> Result<RootCertStore, TlsError> {
        let (pem, origin) = match self {
            Self::File(path) => (
                Cow::Owned(read_file(path)?),
                format!("ssl.truststore.location {}", path.display()),
            ),
            Self::Inline(text) => (
                Cow::Borrowed(text.as_bytes()),
                "ssl.truststore.certificates".to_owned(),
            ),
        };
        let certificates = PemSections::read(&pem, &origin)?.certificate_chain(&origin)?;
        let mut store = RootCertStore::empty();
        for certificate in certificates {
            store.add(certificate).map_err(|error| TlsError::BadCertificate {
                origin: origin.clone(),
                reason: error.to_string(),
            })?;
        }
        Ok(store)
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Io {
        path: path.to_owned(),
        source,
    })
}

/// The certificates and keys of a PEM text; other sections (public keys, CRLs) are ignored.
struct PemSections {
    certificates: Vec<CertificateDer<'static>>,
    keys: Vec<PrivateKeyDer<'static>>,
}

/// Markers of encrypted keys: PKCS#8 `ENCRYPTED PRIVATE KEY`, and OpenSSL's legacy
/// `Proc-Type: 4,ENCRYPTED` header inside an RSA or EC key.
const ENCRYPTED_KEY_MARKERS: [&[u8]; 2] = [
    b"-----BEGIN ENCRYPTED PRIVATE KEY-----",
    b"Proc-Type: 4,ENCRYPTED",
];

impl PemSections {
    fn read(pem: &[u8], origin: &str) -> Result<Self, TlsError> {
        let is_encrypted = ENCRYPTED_KEY_MARKERS
            .iter()
            .any(|marker| pem.windows(marker.len()).any(|window| window == *marker));
        if is_encrypted {
            return Err(TlsError::EncryptedKey {
                origin: origin.to_owned(),
            });
        }
        let mut sections = PemSections {
            certificates: Vec::new(),
            keys: Vec::new(),
        };
        for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(pem) {
            let (kind, der) = section.map_err(|error| TlsError::BadPem {
                origin: origin.to_owned(),
                reason: pem_error_reason(&error),
            })?;
            match kind {
                SectionKind::Certificate => sections.certificates.push(CertificateDer::from(der)),
                SectionKind::PrivateKey => sections.keys.push(PrivateKeyDer::Pkcs8(der.into())),
                SectionKind::RsaPrivateKey => sections.keys.push(PrivateKeyDer::Pkcs1(der.into())),
                SectionKind::EcPrivateKey => sections.keys.push(PrivateKeyDer::Sec1(der.into())),
                _ => {}
            }
        }
        Ok(sections)
    }

    fn certificate_chain(&self, origin: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        if self.certificates.is_empty() {
            return Err(TlsError::NoCertificate {
                origin: origin.to_owned(),
            });
        }
        Ok(self.certificates.clone())
    }

    fn only_key(&self, origin: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
        match self.keys.as_slice() {
            [] => Err(TlsError::NoPrivateKey {
                origin: origin.to_owned(),
            }),
            [key] => Ok(key.clone_key()),
            several => Err(TlsError::SeveralPrivateKeys {
                origin: origin.to_owned(),
                count: several.len(),
            }),
        }
    }
}

/// What is wrong with PEM text, in words that never quote it (it may hold a key).
fn pem_error_reason(error: &pem::Error) -> &'static str {
    match error {
        pem::Error::MissingSectionEnd { .. } => "a section has no END line",
        pem::Error::IllegalSectionStart { .. } => "a BEGIN line is malformed",
        pem::Error::Base64Decode(_) => "a section is not valid base64",
        pem::Error::SectionTooLarge => "a section is too large",
        _ => "unreadable PEM",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_auth_and_versions_parse_as_kafka_writes_them() {
        assert_eq!("none".parse::<ClientAuth>().ok(), Some(ClientAuth::None));
        assert_eq!(
            "Requested".parse::<ClientAuth>().ok(),
            Some(ClientAuth::Requested)
        );
        assert_eq!("REQUIRED".parse::<ClientAuth>().ok(), Some(ClientAuth::Required));
        assert!(matches!(
            "always".parse::<ClientAuth>(),
            Err(TlsError::UnknownClientAuth(_))
        ));
        assert_eq!("TLSv1.2".parse::<TlsVersion>().ok(), Some(TlsVersion::Tls12));
        assert_eq!("tlsv1.3".parse::<TlsVersion>().ok(), Some(TlsVersion::Tls13));
        for old in ["TLSv1", "TLSv1.1", "SSLv3"] {
            assert!(matches!(
                old.parse::<TlsVersion>(),
                Err(TlsError::UnknownTlsVersion(_))
            ));
        }
        assert_eq!(TlsVersion::Tls13.to_string(), "TLSv1.3");
        assert_eq!(ClientAuth::Required.to_string(), "required");
    }

    #[test]
    fn debug_of_inline_key_material_redacts_the_key() {
        let material = KeyMaterial::Inline {
            certificate_chain: "-----BEGIN CERTIFICATE-----".to_owned(),
            key: "-----BEGIN PRIVATE KEY-----\nSECRETSECRET\n-----END PRIVATE KEY-----".to_owned(),
        };
        let printed = format!("{material:?}");
        assert!(
            !printed.contains("SECRETSECRET") && !printed.contains("PRIVATE KEY"),
            "{printed}"
        );
        assert!(printed.contains("<redacted>") && printed.contains("BEGIN CERTIFICATE"));
        let settings = TlsServerSettings::new(material);
        assert!(!format!("{settings:?}").contains("SECRETSECRET"));
    }

    #[test]
    fn empty_protocol_list_is_refused() {
        let mut settings = TlsServerSettings::new(KeyMaterial::File(PathBuf::from("/nonexistent")));
        settings.protocols.clear();
        assert!(matches!(settings.server_config(), Err(TlsError::NoProtocols)));
    }

    #[test]
    fn pem_errors_do_not_quote_the_text() {
        let pem = b"-----BEGIN PRIVATE KEY-----\nSECRET!!\n-----END PRIVATE KEY-----\n";
        let error = PemSections::read(pem, "ssl.keystore.key")
            .err()
            .map(|error| error.to_string());
        let message = error.unwrap_or_default();
        assert!(
            message.contains("base64") && !message.contains("SECRET"),
            "{message}"
        );
    }
}
