//! One connection's SASL exchange on the server side: the broker hands each SaslAuthenticate
//! token to [`SaslServer::step`] and sends back the challenge, the final token, or the error's
//! [`SaslError::client_message`].
//!
//! Unknown SCRAM users are not refused at the first message, which would tell an attacker which
//! users exist: they get a server-first with a salt derived from the name and a per-process
//! secret (the same name always gets the same salt, as a real user's would), and fail at the
//! final message with the same error as a wrong password.

use std::sync::OnceLock;

use crate::credentials::Credentials;
use crate::plain;
use crate::principal::Principal;
use crate::protocol::Mechanism;
pub use crate::sasl_outcome::{SaslError, SaslErrorKind, SaslStep, SASL_TOKEN_LEN_MAX};
use crate::scram::{self, ClientFinal, ClientFirst, ScramCredential, ScramError, ScramHash};

/// Random bytes in a server nonce, base64-encoded (32 characters); RFC 5802 asks only that it
/// be unpredictable.
const SERVER_NONCE_RANDOM_LEN: usize = 24;

/// Where an exchange stands between tokens.
#[derive(Debug)]
enum State {
    Start,
    /// SCRAM after server-first: what client-final is checked against.
    AwaitingClientFinal(Box<ScramPending>),
    /// Succeeded or failed: no further tokens are taken.
    Over,
}

/// What SCRAM remembers between server-first and client-final.
#[derive(Debug)]
struct ScramPending {
    client_first: ClientFirst,
    server_first: String,
    full_nonce: String,
    /// A stand-in for unknown users, so the final step runs the same code and then fails.
    credential: ScramCredential,
    user_known: bool,
}

/// One connection's SASL exchange on the server side: the mechanism chosen in SaslHandshake
/// and the state between SaslAuthenticate tokens. After any error it refuses further tokens,
/// so a client cannot probe on after a failure.
#[derive(Debug)]
pub struct SaslServer {
    mechanism: Mechanism,
    state: State,
    /// Preset only by [`SaslServer::with_server_nonce`]; otherwise drawn at server-first.
    server_nonce: Option<String>,
}

impl SaslServer {
    /// An exchange for `mechanism`, awaiting the client's first token.
    pub fn new(mechanism: Mechanism) -> SaslServer {
        SaslServer {
            mechanism,
            state: State::Start,
            server_nonce: None,
        }
    }

    /// For tests and test vectors only: an exchange whose SCRAM server nonce is `server_nonce`
    /// rather than random. A predictable nonce lets a recorded exchange be replayed, so the
    /// broker must never use this. Refuses nonces RFC 5802 does not allow (empty, `,`,
    /// non-printable).
    pub fn with_server_nonce(mechanism: Mechanism, server_nonce: &str) -> Result<SaslServer, SaslError> {
        if !scram::is_valid_nonce(server_nonce) {
            return Err(SaslError::Internal(
                "a server nonce must be printable ASCII without ','",
            ));
        }
        Ok(SaslServer {
            mechanism,
            state: State::Start,
            server_nonce: Some(server_nonce.to_owned()),
        })
    }

    /// The mechanism this exchange runs.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// Whether the exchange is over (succeeded or failed), so further tokens will be refused.
    pub fn is_over(&self) -> bool {
        matches!(self.state, State::Over)
    }

    /// Takes the client's next token; answers with the next challenge, or the outcome. Any
    /// error ends the exchange.
    pub fn step(&mut self, token: &[u8], credentials: &dyn Credentials) -> Result<SaslStep, SaslError> {
        let state = std::mem::replace(&mut self.state, State::Over);
        if token.len() > SASL_TOKEN_LEN_MAX {
            return Err(SaslError::TokenTooLarge(token.len()));
        }
        match (state, self.mechanism) {
            (State::Start, Mechanism::Plain) => plain::authenticate(token, credentials),
            (State::Start, mechanism) => {
                let (pending, server_first) = self.scram_first(mechanism, token, credentials)?;
                self.state = State::AwaitingClientFinal(Box::new(pending));
                Ok(SaslStep::Challenge(server_first.into_bytes()))
            }
            (State::AwaitingClientFinal(pending), _) => scram_final(&pending, token),
            (State::Over, _) => Err(SaslError::ExchangeOver),
        }
    }

    fn scram_first(
        &mut self,
        mechanism: Mechanism,
        token: &[u8],
        credentials: &dyn Credentials,
    ) -> Result<(ScramPending, String), SaslError> {
        let client_first = ClientFirst::parse(token)?;
        let (credential, user_known) = match credentials.scram_credential(&client_first.username, mechanism) {
            Some(credential) => {
                credential
                    .validate()
                    .map_err(|_| SaslError::Internal("stored SCRAM credential is invalid"))?;
                if credential.mechanism != mechanism {
                    return Err(SaslError::Internal(
                        "stored SCRAM credential is for another mechanism",
                    ));
                }
                (credential, true)
            }
            None => (unknown_user_credential(mechanism, &client_first.username)?, false),
        };
        let server_nonce = match self.server_nonce.take() {
            Some(nonce) => nonce,
            None => random_server_nonce()?,
        };
        let full_nonce = format!("{}{server_nonce}", client_first.client_nonce);
        let server_first = scram::server_first(&full_nonce, &credential);
        let pending = ScramPending {
            client_first,
            server_first: server_first.clone(),
            full_nonce,
            credential,
            user_known,
        };
        Ok((pending, server_first))
    }
}

/// Checks client-final against what server-first promised, then the proof.
fn scram_final(pending: &ScramPending, token: &[u8]) -> Result<SaslStep, SaslError> {
    let client_final = ClientFinal::parse(token)?;
    if client_final.channel_binding != pending.client_first.gs2_header.as_bytes() {
        return Err(SaslError::Malformed(
            "channel binding (c=) does not match the GS2 header",
        ));
    }
    if client_final.nonce != pending.full_nonce {
        return Err(SaslError::Malformed("nonce (r=) does not match server-first"));
    }
    let auth_message = format!(
        "{},{},{}",
        pending.client_first.bare, pending.server_first, client_final.without_proof
    );
    let credential = &pending.credential;
    let proof_valid = scram::verify_proof(credential, auth_message.as_bytes(), &client_final.proof)
        .map_err(internal_scram_error)?;
    if !(proof_valid && pending.user_known) {
        return Err(SaslError::InvalidCredentials(credential.mechanism));
    }
    Ok(SaslStep::Authenticated {
        principal: Principal::user(&pending.client_first.username),
        final_token: scram::server_final(credential, auth_message.as_bytes())
            .map_err(internal_scram_error)?,
    })
}

fn internal_scram_error(_: ScramError) -> SaslError {
    SaslError::Internal("SCRAM computation failed")
}

fn random_server_nonce() -> Result<String, SaslError> {
    let mut random = [0u8; SERVER_NONCE_RANDOM_LEN];
    getrandom::fill(&mut random).map_err(|_| SaslError::Internal("the system random source failed"))?;
    // Standard base64 uses only printable characters and never ',', as a nonce must.
    Ok(base64_encode(&random))
}

fn base64_encode(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// The secret that makes unknown users' fake salts unpredictable to clients, drawn once per
/// process so the same unknown name keeps getting the same salt.
fn fake_salt_secret() -> Result<&'static [u8; 32], SaslError> {
    static SECRET: OnceLock<[u8; 32]> = OnceLock::new();
    if let Some(secret) = SECRET.get() {
        return Ok(secret);
    }
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|_| SaslError::Internal("the system random source failed"))?;
    Ok(SECRET.get_or_init(|| secret))
}

/// A credential for a user that does not exist: a salt of the usual length derived from the
/// name, Kafka's minimum iterations, and keys no proof can match (a random stored key would do
/// as well; `user_known == false` fails the exchange regardless).
fn unknown_user_credential(mechanism: Mechanism, username: &str) -> Result<ScramCredential, SaslError> {
    let hash = ScramHash::of(mechanism).map_err(internal_scram_error)?;
    let secret = fake_salt_secret()?;
    let derived = hash.hmac(secret, format!("{mechanism}\0{username}").as_bytes());
    let salt = derived
        .get(..ScramCredential::SALT_LEN_GENERATED)
        .unwrap_or(&derived)
        .to_vec();
    let stored_key = hash.hmac(secret, format!("stored key\0{mechanism}\0{username}").as_bytes());
    Ok(ScramCredential {
        mechanism,
        salt,
        iterations: ScramCredential::ITERATIONS_MIN,
        server_key: stored_key.clone(),
        stored_key,
    })
}
