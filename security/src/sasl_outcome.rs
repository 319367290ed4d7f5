//! What one step of a SASL exchange comes to, on either side: the server's next message, or why
//! the exchange failed. Its own module, so that the mechanisms (`plain`, `scram`) and the
//! exchanges built on them (`sasl`, `sasl_client`) share it without depending on each other.

use crate::principal::Principal;
use crate::protocol::Mechanism;

/// The largest client token accepted, in bytes. Real PLAIN and SCRAM tokens are well under
/// 1 KiB; the bound keeps a client from making the broker buffer and parse large tokens.
pub const SASL_TOKEN_LEN_MAX: usize = 4096;

/// What the server answers to one client token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SaslStep {
    /// The exchange goes on: send these bytes back and wait for the client's next token.
    Challenge(Vec<u8>),
    /// The client is authenticated as `principal`; send `final_token` (empty for PLAIN,
    /// server-final `v=...` for SCRAM) as the last SaslAuthenticate response.
    Authenticated {
        /// Who the connection now acts as.
        principal: Principal,
        /// The server's last message to the client.
        final_token: Vec<u8>,
    },
}

/// How a [`SaslError`] came about, so the broker can count and log failures by cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SaslErrorKind {
    /// Unknown user or wrong password (the two are indistinguishable on purpose).
    BadCredentials,
    /// The token does not follow the mechanism's grammar, or came out of turn.
    Malformed,
    /// A well-formed request for something Laminar does not do (channel binding, delegation
    /// tokens, acting as another user).
    Unsupported,
    /// The server could not complete the exchange (random source, invalid stored credential).
    Internal,
}

/// Why an exchange failed. No variant carries client-supplied text, so neither `Display` nor
/// [`SaslError::client_message`] can repeat a password.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    /// Unknown user or wrong password.
    #[error("invalid credentials for SASL mechanism {0}")]
    InvalidCredentials(Mechanism),
    /// The token breaks the mechanism's grammar; the reason is a fixed text.
    #[error("malformed SASL token: {0}")]
    Malformed(&'static str),
    /// The token is larger than [`SASL_TOKEN_LEN_MAX`].
    #[error("SASL token of {0} bytes exceeds the maximum of {SASL_TOKEN_LEN_MAX}")]
    TokenTooLarge(usize),
    /// A token arrived after the exchange had succeeded or failed.
    #[error("the SASL exchange is already over")]
    ExchangeOver,
    /// The client asked for a feature Laminar does not implement.
    #[error("unsupported SASL request: {0}")]
    Unsupported(&'static str),
    /// The server failed, not the client.
    #[error("SASL server error: {0}")]
    Internal(&'static str),
}

impl SaslError {
    /// The cause, for metrics and logs.
    pub fn kind(&self) -> SaslErrorKind {
        match self {
            Self::InvalidCredentials(_) => SaslErrorKind::BadCredentials,
            Self::Malformed(_) | Self::TokenTooLarge(_) | Self::ExchangeOver => SaslErrorKind::Malformed,
            Self::Unsupported(_) => SaslErrorKind::Unsupported,
            Self::Internal(_) => SaslErrorKind::Internal,
        }
    }

    /// Whether the client gave a wrong password or an unknown user.
    pub fn is_bad_credentials(&self) -> bool {
        self.kind() == SaslErrorKind::BadCredentials
    }

    /// What the broker sends in SaslAuthenticate's `error_message`: Kafka's texts for bad
    /// credentials, so clients and their operators see what they would from Kafka; a short
    /// fixed reason otherwise.
    pub fn client_message(&self) -> String {
        match self {
            Self::InvalidCredentials(Mechanism::Plain) => {
                "Authentication failed: Invalid username or password".to_owned()
            }
            Self::InvalidCredentials(mechanism) => format!(
                "Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
            ),
            Self::Internal(_) => "Authentication failed: internal server error".to_owned(),
            other => format!("Authentication failed: {other}"),
        }
    }
}
