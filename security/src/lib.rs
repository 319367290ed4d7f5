//! Who a client is and how it proves it: Kafka's principals and security protocols, and the
//! server side of SASL PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677).
//!
//! The crate knows nothing of Kafka's wire protocol: the broker's SaslHandshake and
//! SaslAuthenticate handlers pass the client's tokens to a [`sasl::SaslServer`] and send back
//! what it answers. Users come from a [`credentials::Credentials`] source: the broker's JAAS
//! PLAIN users ([`jaas::PlainUsers`]) or its SCRAM store ([`credentials::ScramCredentialStore`]).
//!
//! TLS listeners (SSL, SASL_SSL) get their rustls server configuration from
//! [`tls::TlsServerSettings`]; a client's certificate names its principal through
//! [`tls::principal_of`] and Kafka's `ssl.principal.mapping.rules`
//! ([`principal_mapping::PrincipalMappingRules`]).

#![forbid(unsafe_code)]

pub mod acl;
pub mod acl_store;
pub mod bearer_tokens;
pub mod credentials;
pub mod distinguished_name;
pub mod jaas;
mod line_file;
pub mod plain;
pub mod principal;
pub mod principal_mapping;
pub mod protocol;
pub mod quota;
pub mod quota_store;
pub mod sasl;
pub mod sasl_client;
pub mod sasl_outcome;
pub mod scram;
pub mod tls;
pub mod tls_error;

pub use acl::{
    AclBinding, AclFilter, AclSet, Action, Operation, PatternFilter, PatternType, Permission, ResourceType,
};
pub use acl_store::{AclStore, AclStoreError};
pub use credentials::{Credentials, ScramCredentialStore, StoreError};
pub use distinguished_name::subject_dn;
pub use jaas::{JaasError, JaasOptions, PlainUsers};
pub use principal::{Principal, PrincipalParseError};
pub use principal_mapping::PrincipalMappingRules;
pub use protocol::{Mechanism, NameParseError, SecurityProtocol};
pub use quota::{ClientQuotas, QuotaEntity, QuotaError, QuotaKey};
pub use quota_store::{QuotaStore, QuotaStoreError};
pub use sasl::{SaslError, SaslErrorKind, SaslServer, SaslStep, SASL_TOKEN_LEN_MAX};
pub use sasl_client::SaslClient;
pub use scram::{ScramCredential, ScramError};
pub use tls::{
    crypto_provider, principal_of, ClientAuth, KeyMaterial, TlsError, TlsServerSettings, TlsVersion,
    TrustMaterial,
};
