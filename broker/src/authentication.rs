//! A connection's authentication: who its client is, and what it may send before it has
//! proved it (docs/ARCHITECTURE.md, "Security").
//!
//! On a PLAINTEXT listener every connection is `User:ANONYMOUS` from the start. On a SASL
//! listener a connection may send ApiVersions and SaslHandshake, then the mechanism's tokens
//! (in SaslAuthenticate after a v1 handshake, as bare length-prefixed frames after a v0 one),
//! and nothing else until it has authenticated; any other request closes it, as Kafka does. A
//! failed authentication is answered (KIP-152), after `connection.failed.authentication.delay.ms`,
//! and then the connection closes. With `connections.max.reauth.ms` set, a session expires:
//! the client re-authenticates with a new handshake (KIP-368) or is closed at its next request.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use laminar_security::{Mechanism, Principal, SaslServer, SecurityProtocol};
use std::sync::{Arc, LazyLock};

/// `User:ANONYMOUS`, every unauthenticated connection's principal, made once.
pub static ANONYMOUS: LazyLock<Arc<Principal>> = LazyLock::new(|| Arc::new(Principal::anonymous()));

use crate::config::BrokerConfig;
use crate::kafka_listener::ListenerId;

/// Why a request is refused before it reaches its handler: the connection closes.
#[derive(Debug, thiserror::Error)]
pub enum AuthenticationError {
    #[error("{api:?} before SASL authentication")]
    NotAuthenticated { api: ApiKey },
    #[error("{api:?} after the SASL session expired (connections.max.reauth.ms)")]
    SessionExpired { api: ApiKey },
    #[error("authentication failed")]
    Failed,
}

/// A connection's authentication. Owned by its connection; moves with it between shards.
pub struct Authentication {
    pub listener: ListenerId,
    /// The client's address, for the log lines of failed authentications.
    pub peer: String,
    /// The client's IP address as ACLs name hosts.
    pub peer_host: Arc<str>,
    state: RefCell<State>,
}

enum State {
    /// Nothing to prove (a PLAINTEXT listener).
    Open,
    /// A SASL listener, before SaslHandshake.
    AwaitingHandshake,
    /// A mechanism was chosen; its tokens come next.
    Exchanging(Box<Exchange>),
    Authenticated {
        principal: Arc<Principal>,
        expires: Option<Instant>,
    },
    /// Refused: the answer saying so is written, then the connection closes.
    Failed,
}

struct Exchange {
    server: SaslServer,
    /// After a v0 handshake tokens come as bare frames, not in SaslAuthenticate requests.
    raw_tokens: bool,
    /// Re-authentication: the principal must stay the one the session had.
    previous: Option<Principal>,
}

/// What one SASL token came to.
pub enum TokenOutcome {
    /// More to exchange: send this challenge.
    Challenge(Vec<u8>),
    /// Done: send this last token; the session lasts `lifetime` (`None`: forever).
    Authenticated {
        final_token: Vec<u8>,
        principal: Principal,
        lifetime: Option<Duration>,
    },
    /// Refused: answer with this message, then close. `bad_credentials`: an unknown user or a
    /// wrong password (what a guesser gets), rather than a token out of turn or malformed.
    Failed { message: String, bad_credentials: bool },
}

impl Authentication {
    /// A new connection's authentication on listener `listener` of `config`.
    pub fn for_listener(config: &BrokerConfig, listener: ListenerId, peer: String) -> Authentication {
        let state = match protocol_of(config, listener).uses_sasl() {
            true => State::AwaitingHandshake,
            false => State::Open,
        };
        let peer_host = match peer.parse::<std::net::SocketAddr>() {
            Ok(address) => address.ip().to_canonical().to_string(),
            Err(_) => peer.clone(),
        };
        Authentication {
            listener,
            peer,
            peer_host: peer_host.into(),
            state: RefCell::new(state),
        }
    }

    /// An SSL listener's connection: the client certificate named `principal` (ANONYMOUS
    /// without one), and that is all it proves.
    pub fn authenticated_by_certificate(&self, principal: Principal) {
        *self.state.borrow_mut() = State::Authenticated {
            principal: Arc::new(principal),
            expires: None,
        };
    }

    /// Refuses a request this connection may not send now.
    pub fn admit(&self, api: ApiKey) -> Result<(), AuthenticationError> {
        let sasl = matches!(api, ApiKey::SaslHandshake | ApiKey::SaslAuthenticate);
        match &*self.state.borrow() {
            State::Open => Ok(()),
            State::Authenticated { expires, .. } => match expires {
                Some(at) if Instant::now() >= *at && api != ApiKey::SaslHandshake => {
                    Err(AuthenticationError::SessionExpired { api })
                }
                _ => Ok(()),
            },
            State::AwaitingHandshake if api == ApiKey::ApiVersions || sasl => Ok(()),
            State::Exchanging(exchange) if !exchange.raw_tokens && api == ApiKey::SaslAuthenticate => Ok(()),
            State::Failed => Err(AuthenticationError::Failed),
            _ => Err(AuthenticationError::NotAuthenticated { api }),
        }
    }

    /// Whether the next frame is a bare SASL token (after a v0 handshake).
    pub fn expects_raw_token(&self) -> bool {
        matches!(&*self.state.borrow(), State::Exchanging(e) if e.raw_tokens)
    }

    /// Whether the connection failed to authenticate and closes once its answers are written.
    pub fn has_failed(&self) -> bool {
        matches!(&*self.state.borrow(), State::Failed)
    }

    /// The authenticated principal (`User:ANONYMOUS` on a PLAINTEXT listener); `None` before
    /// authentication.
    pub fn principal(&self) -> Option<Arc<Principal>> {
        match &*self.state.borrow() {
            State::Open => Some(ANONYMOUS.clone()),
            State::Authenticated { principal, .. } => Some(principal.clone()),
            _ => None,
        }
    }

    /// SaslHandshake: starts an exchange with `mechanism` if `enabled` offers it and the
    /// connection is where a handshake may come. `Err` leaves the connection failed.
    pub fn start(&self, mechanism: Mechanism, raw_tokens: bool) -> Result<(), HandshakeRefused> {
        let mut state = self.state.borrow_mut();
        let previous = match &*state {
            State::AwaitingHandshake => None,
            // KIP-368 re-authentication comes as a v1 handshake.
            State::Authenticated { principal, .. } if !raw_tokens => Some(Principal::clone(principal)),
            _ => {
                *state = State::Failed;
                return Err(HandshakeRefused::IllegalState);
            }
        };
        *state = State::Exchanging(Box::new(Exchange {
            server: SaslServer::new(mechanism),
            raw_tokens,
            previous,
        }));
        Ok(())
    }

    /// Marks the connection failed (an unsupported mechanism, say).
    pub fn fail(&self) {
        *self.state.borrow_mut() = State::Failed;
    }

    /// Takes the client's next token (SaslAuthenticate, or a bare frame after a v0 handshake).
    pub fn take_token(
        &self,
        token: &[u8],
        credentials: &dyn laminar_security::Credentials,
        session_max: Option<Duration>,
    ) -> TokenOutcome {
        let mut state = self.state.borrow_mut();
        let State::Exchanging(exchange) = &mut *state else {
            *state = State::Failed;
            return TokenOutcome::Failed {
                message: "Unexpected SASL token: no handshake chose a mechanism".to_string(),
                bad_credentials: false,
            };
        };
        let outcome = match exchange.server.step(token, credentials) {
            Ok(laminar_security::SaslStep::Challenge(challenge)) => {
                return TokenOutcome::Challenge(challenge)
            }
            Ok(laminar_security::SaslStep::Authenticated {
                principal,
                final_token,
            }) => match &exchange.previous {
                Some(previous) if *previous != principal => TokenOutcome::Failed {
                    message: format!("Cannot change principals during re-authentication from {previous}"),
                    bad_credentials: false,
                },
                _ => TokenOutcome::Authenticated {
                    final_token,
                    principal,
                    lifetime: session_max,
                },
            },
            Err(e) => TokenOutcome::Failed {
                message: e.client_message(),
                bad_credentials: e.is_bad_credentials(),
            },
        };
        *state = match &outcome {
            TokenOutcome::Authenticated {
                principal, lifetime, ..
            } => State::Authenticated {
                principal: Arc::new(principal.clone()),
                expires: lifetime.map(|l| Instant::now() + l),
            },
            _ => State::Failed,
        };
        outcome
    }
}

/// Why a handshake was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum HandshakeRefused {
    /// Not where a handshake may come (mid-exchange, or a second v0 handshake).
    IllegalState,
}

/// The security protocol of `listener`. Listener ids index `listeners`, and
/// `listener_security` has one entry per listener.
pub fn protocol_of(config: &BrokerConfig, listener: ListenerId) -> SecurityProtocol {
    config.listener_security[listener.0].protocol
}
