//! The names Kafka configurations use for how a listener secures connections
//! (`listener.security.protocol.map`) and which SASL mechanism a client picks
//! (`sasl.enabled.mechanisms`, SaslHandshake), parsed and printed as Kafka spells them.

use std::fmt;
use std::str::FromStr;

/// Kafka's security protocols: whether a listener wraps connections in TLS, and whether
/// clients must authenticate with SASL before any other request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SecurityProtocol {
    /// No TLS, no authentication: every client is `User:ANONYMOUS`.
    Plaintext,
    /// TLS; the principal comes from the client certificate, if any.
    Ssl,
    /// SASL authentication over an unencrypted connection.
    SaslPlaintext,
    /// SASL authentication inside TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Every protocol, for listing the accepted values in configuration errors.
    pub const ALL: [SecurityProtocol; 4] = [Self::Plaintext, Self::Ssl, Self::SaslPlaintext, Self::SaslSsl];

    /// Kafka's upper-case name, as written in `listener.security.protocol.map`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether clients must complete a SASL exchange before other requests are served.
    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }

    /// Whether connections are wrapped in TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a name is not a known security protocol or SASL mechanism.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameParseError {
    /// Not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL.
    #[error("unknown security protocol {0:?} (expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)")]
    SecurityProtocol(String),
    /// Not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.
    #[error("unsupported SASL mechanism {0:?} (supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")]
    Mechanism(String),
}

/// Names longer than this are cut in errors: they come from configuration or clients, and an
/// error message should not grow with its input.
const NAME_IN_ERROR_LEN_MAX: usize = 64;

fn name_for_error(text: &str) -> String {
    text.chars().take(NAME_IN_ERROR_LEN_MAX).collect()
}

impl FromStr for SecurityProtocol {
    type Err = NameParseError;

    /// Case-insensitive, as Kafka's `SecurityProtocol.forName`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|protocol| protocol.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| NameParseError::SecurityProtocol(name_for_error(text)))
    }
}

/// The SASL mechanisms the broker implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mechanism {
    /// RFC 4616: the password itself is sent, so only safe inside TLS.
    Plain,
    /// RFC 5802 / RFC 7677 with SHA-256: the password never crosses the wire.
    ScramSha256,
    /// RFC 5802 with SHA-512.
    ScramSha512,
}

impl Mechanism {
    /// Every mechanism, in the order the broker advertises them in SaslHandshake.
    pub const ALL: [Mechanism; 3] = [Self::Plain, Self::ScramSha256, Self::ScramSha512];
    /// The SCRAM mechanisms, the ones AlterUserScramCredentials manages.
    pub const SCRAM: [Mechanism; 2] = [Self::ScramSha256, Self::ScramSha512];

    /// The IANA name, as in SaslHandshake and `sasl.enabled.mechanisms`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// Whether this is a SCRAM mechanism (stored credentials, challenge-response).
    pub fn is_scram(self) -> bool {
        matches!(self, Self::ScramSha256 | Self::ScramSha512)
    }

    /// The mechanism for the number Kafka's Describe/AlterUserScramCredentials use
    /// (1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512); `None` for any other number, PLAIN included.
    pub fn from_kafka_type(kafka_type: i8) -> Option<Mechanism> {
        match kafka_type {
            1 => Some(Self::ScramSha256),
            2 => Some(Self::ScramSha512),
            _ => None,
        }
    }

    /// The number Kafka's SCRAM admin APIs use for this mechanism; 0 (Kafka's UNKNOWN) for
    /// PLAIN, which those APIs do not manage.
    pub fn kafka_type(self) -> i8 {
        match self {
            Self::Plain => 0,
            Self::ScramSha256 => 1,
            Self::ScramSha512 => 2,
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mechanism {
    type Err = NameParseError;

    /// Exact match: SASL mechanism names are case-sensitive in Kafka's handshake.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|mechanism| mechanism.name() == text)
            .ok_or_else(|| NameParseError::Mechanism(name_for_error(text)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn security_protocols_parse_case_insensitively() {
        for protocol in SecurityProtocol::ALL {
            assert_eq!(protocol.name().parse(), Ok(protocol));
            assert_eq!(protocol.name().to_lowercase().parse(), Ok(protocol));
            assert_eq!(protocol.to_string(), protocol.name());
        }
        assert!("TLS".parse::<SecurityProtocol>().is_err());
        assert!(SecurityProtocol::SaslSsl.uses_sasl() && SecurityProtocol::SaslSsl.uses_tls());
        assert!(!SecurityProtocol::Plaintext.uses_sasl() && !SecurityProtocol::Plaintext.uses_tls());
        assert!(SecurityProtocol::SaslPlaintext.uses_sasl() && !SecurityProtocol::SaslPlaintext.uses_tls());
        assert!(!SecurityProtocol::Ssl.uses_sasl() && SecurityProtocol::Ssl.uses_tls());
    }

    #[test]
    fn mechanisms_parse_exactly_and_map_to_kafka_types() {
        for mechanism in Mechanism::ALL {
            assert_eq!(mechanism.name().parse(), Ok(mechanism));
            assert_eq!(mechanism.to_string(), mechanism.name());
        }
        assert!("scram-sha-256".parse::<Mechanism>().is_err());
        assert!("GSSAPI".parse::<Mechanism>().is_err());
        for mechanism in Mechanism::SCRAM {
            assert!(mechanism.is_scram());
            assert_eq!(
                Mechanism::from_kafka_type(mechanism.kafka_type()),
                Some(mechanism)
            );
        }
        assert!(!Mechanism::Plain.is_scram());
        assert_eq!(Mechanism::from_kafka_type(0), None);
        assert_eq!(Mechanism::from_kafka_type(3), None);
    }
}
