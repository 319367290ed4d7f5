//! Why TLS settings cannot be used, or a client certificate names no principal: one error for
//! the settings (`tls`), the subject's DN (`distinguished_name`) and the mapping rules
//! (`principal_mapping`), in a module of its own so that they share it without depending on
//! each other.

use std::path::PathBuf;

/// Why TLS settings cannot be used, or a client certificate names no principal. Never
/// carries private key material: PEM errors are described, not quoted.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A keystore or truststore file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file, as configured.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The keystore or truststore holds no PEM certificate.
    #[error("no PEM certificate in {origin}")]
    NoCertificate {
        /// The setting (and file) that was read.
        origin: String,
    },
    /// The keystore holds no PEM private key.
    #[error("no PEM private key in {origin} (expected PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)")]
    NoPrivateKey {
        /// The setting (and file) that was read.
        origin: String,
    },
    /// The keystore holds more than one private key, so which one to use is unclear.
    #[error("{origin} holds {count} private keys; a keystore holds exactly one")]
    SeveralPrivateKeys {
        /// The setting (and file) that was read.
        origin: String,
        /// How many keys were found.
        count: usize,
    },
    /// The private key is encrypted: Kafka's `ssl.key.password` for PEM keys is not supported.
    #[error(
        "the private key in {origin} is encrypted, and encrypted PEM keys (ssl.key.password) \
         are not supported: store it unencrypted (PKCS#8 PRIVATE KEY) in a file only the broker can read"
    )]
    EncryptedKey {
        /// The setting (and file) that was read.
        origin: String,
    },
    /// The PEM text is malformed.
    #[error("malformed PEM in {origin}: {reason}")]
    BadPem {
        /// The setting (and file) that was read.
        origin: String,
        /// What is wrong, without quoting the text.
        reason: &'static str,
    },
    /// A trust store certificate is not a usable CA certificate.
    #[error("unusable certificate in {origin}: {reason}")]
    BadCertificate {
        /// The setting (and file) that was read.
        origin: String,
        /// Why rustls refused it.
        reason: String,
    },
    /// A client certificate's subject cannot be read.
    #[error("cannot read the certificate's subject: {0}")]
    BadSubject(String),
    /// Client certificates are asked for, but there is nothing to verify them against.
    #[error(
        "ssl.client.auth={0} needs a trust store (ssl.truststore.location or \
         ssl.truststore.certificates) to verify client certificates"
    )]
    TrustStoreNeeded(&'static str),
    /// A broker connecting to its peers over this listener has no CA to verify them with.
    #[error(
        "brokers connect to each other over this listener, so it needs a trust store \
         (ssl.truststore.location or ssl.truststore.certificates) to verify their certificates"
    )]
    PeerTrustStoreNeeded,
    /// `ssl.enabled.protocols` is empty.
    #[error("ssl.enabled.protocols is empty: enable TLSv1.2, TLSv1.3 or both")]
    NoProtocols,
    /// `ssl.client.auth` is not none, requested or required.
    #[error("unknown ssl.client.auth {0:?} (expected none, requested or required)")]
    UnknownClientAuth(String),
    /// An `ssl.enabled.protocols` entry is not TLSv1.2 or TLSv1.3.
    #[error(
        "unsupported TLS version {0:?} (expected TLSv1.2 or TLSv1.3; older versions are not implemented)"
    )]
    UnknownTlsVersion(String),
    /// rustls refused the configuration (e.g. the key does not match the certificate).
    #[error("TLS configuration refused: {0}")]
    Rustls(String),
    /// An `ssl.principal.mapping.rules` rule does not parse.
    #[error("invalid ssl.principal.mapping.rules rule `{rule}`: {reason}")]
    BadMappingRule {
        /// The rule as written.
        rule: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No `ssl.principal.mapping.rules` rule applies to a client's DN: it is refused.
    #[error("no ssl.principal.mapping.rules rule applies to the client's subject {distinguished_name:?}")]
    NoMatchingRule {
        /// The client certificate's subject, RFC 2253.
        distinguished_name: String,
    },
}
