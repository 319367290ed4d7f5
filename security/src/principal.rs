//! Principals: the identity a connection acts as once authenticated, named as Kafka names them
//! (`User:alice`), so ACLs and quotas written for Kafka name the same clients here.

use std::fmt;
use std::str::FromStr;

/// An authenticated (or anonymous) identity, `kind:name` as Kafka's `KafkaPrincipal`: ACLs and
/// quotas match on both parts, so they are kept apart rather than as one string.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    /// The principal type; Kafka's SASL and TLS authenticators only ever produce `User`.
    pub kind: String,
    /// The user name as authenticated (SASL username or TLS distinguished name).
    pub name: String,
}

impl Principal {
    /// Kafka's principal type for users, the only one its authenticators produce.
    pub const USER_KIND: &'static str = "User";
    /// The name Kafka gives connections that did not authenticate (PLAINTEXT, SSL without
    /// client certificates), so ACLs can grant or deny them as `User:ANONYMOUS`.
    pub const ANONYMOUS_NAME: &'static str = "ANONYMOUS";

    /// The principal `User:<name>`, what a successful SASL exchange yields.
    pub fn user(name: &str) -> Principal {
        Principal {
            kind: Self::USER_KIND.to_owned(),
            name: name.to_owned(),
        }
    }

    /// `User:ANONYMOUS`, the principal of connections on listeners without authentication.
    pub fn anonymous() -> Principal {
        Self::user(Self::ANONYMOUS_NAME)
    }

    /// Whether this is `User:ANONYMOUS`, which ACLs treat like any other principal but logs
    /// and metrics may want to tell apart.
    pub fn is_anonymous(&self) -> bool {
        self.kind == Self::USER_KIND && self.name == Self::ANONYMOUS_NAME
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}

/// Why a string is not a principal: `kind:name` needs a colon and a non-empty kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrincipalParseError {
    /// There is no `:` between kind and name.
    #[error("a principal is written kind:name (e.g. User:alice), but there is no ':'")]
    NoColon,
    /// The part before the first `:` is empty.
    #[error("a principal's kind (before ':') must not be empty")]
    EmptyKind,
}

impl FromStr for Principal {
    type Err = PrincipalParseError;

    /// Splits at the first `:` as Kafka does, so names may themselves contain colons.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (kind, name) = text.split_once(':').ok_or(PrincipalParseError::NoColon)?;
        if kind.is_empty() {
            return Err(PrincipalParseError::EmptyKind);
        }
        Ok(Principal {
            kind: kind.to_owned(),
            name: name.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_and_parses_as_kafka_does() {
        let alice = Principal::user("alice");
        assert_eq!(alice.to_string(), "User:alice");
        assert_eq!("User:alice".parse::<Principal>(), Ok(alice));
        assert_eq!(Principal::anonymous().to_string(), "User:ANONYMOUS");
        assert!(Principal::anonymous().is_anonymous());
        let with_colon: Principal = "User:CN=a:b".parse().expect("valid principal");
        assert_eq!(with_colon.name, "CN=a:b");
    }

    #[test]
    fn refuses_strings_without_kind() {
        assert_eq!("alice".parse::<Principal>(), Err(PrincipalParseError::NoColon));
        assert_eq!(":alice".parse::<Principal>(), Err(PrincipalParseError::EmptyKind));
    }
}
