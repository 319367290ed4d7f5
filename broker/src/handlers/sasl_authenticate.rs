//! SaslAuthenticate (and the bare token frames a v0 SaslHandshake leads to): one step of the
//! connection's SASL exchange (`crate::authentication`). A failure is answered with
//! SASL_AUTHENTICATION_FAILED and a message that never carries a password (KIP-152; a v0
//! exchange has no way to say it and only closes), after
//! `connection.failed.authentication.delay.ms`; then the connection closes.

use std::rc::Rc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::StrBytes;
use laminar_security::jaas::PlainUsers;
use laminar_security::{Credentials, Mechanism, ScramCredential};

use crate::authentication::{Authentication, AuthenticationError, TokenOutcome};
use crate::broker::BrokerCtx;
use crate::handlers::RequestError;

/// Where a listener's authentications find users: PLAIN's from the listener's config, SCRAM's
/// from the broker's credential store.
struct BrokerCredentials<'a> {
    plain: &'a PlainUsers,
    scram: &'a dyn laminar_security::Credentials,
}

impl Credentials for BrokerCredentials<'_> {
    fn plain_password_matches(&self, user: &str, password: &str) -> bool {
        self.plain.plain_password_matches(user, password)
    }

    fn scram_credential(&self, user: &str, mechanism: Mechanism) -> Option<ScramCredential> {
        self.scram.scram_credential(user, mechanism)
    }
}

/// One SaslAuthenticate request: the answer, or (after a failure) the answer held back by the
/// failure delay; the connection closes after it (`Authentication::has_failed`).
pub fn handle(
    ctx: &Rc<BrokerCtx>,
    authentication: &Authentication,
    request: SaslAuthenticateRequest,
) -> Step {
    match take_token(ctx, authentication, &request.auth_bytes) {
        TokenOutcome::Challenge(challenge) => Step::Answer(response(challenge, 0)),
        TokenOutcome::Authenticated {
            final_token,
            lifetime,
            ..
        } => {
            let lifetime_ms = lifetime.map_or(0, |l| l.as_millis().min(i64::MAX as u128) as i64);
            Step::Answer(response(final_token, lifetime_ms))
        }
        TokenOutcome::Failed {
            message,
            bad_credentials,
        } => Step::Failed(
            SaslAuthenticateResponse::default()
                .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                .with_error_message(Some(StrBytes::from_string(message))),
            failure_delay(ctx, authentication, bad_credentials),
        ),
    }
}

/// What one SaslAuthenticate comes to.
pub enum Step {
    Answer(SaslAuthenticateResponse),
    /// Answered after the failure delay; then the connection closes.
    Failed(SaslAuthenticateResponse, Duration),
}

fn response(auth_bytes: Vec<u8>, session_lifetime_ms: i64) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_auth_bytes(Bytes::from(auth_bytes))
        .with_session_lifetime_ms(session_lifetime_ms)
}

/// A bare token after a v0 handshake: the answer is a bare frame too (a 4-byte length, then
/// the token); a failure only closes the connection, after the failure delay.
pub fn handle_raw(
    ctx: &Rc<BrokerCtx>,
    authentication: &Authentication,
    token: &[u8],
) -> Result<Bytes, Duration> {
    let answer = match take_token(ctx, authentication, token) {
        TokenOutcome::Challenge(challenge) => challenge,
        TokenOutcome::Authenticated { final_token, .. } => final_token,
        TokenOutcome::Failed { bad_credentials, .. } => {
            return Err(failure_delay(ctx, authentication, bad_credentials))
        }
    };
    let mut frame = BytesMut::with_capacity(4 + answer.len());
    // A token is bounded by the request frame that carried it, far below i32::MAX.
    frame.put_i32(answer.len() as i32);
    frame.put_slice(&answer);
    Ok(frame.freeze())
}

fn take_token(ctx: &Rc<BrokerCtx>, authentication: &Authentication, token: &[u8]) -> TokenOutcome {
    let shared = &ctx.state.shared;
    let config = &shared.config;
    let Some(sasl) = &config.listener_security[authentication.listener.0].sasl else {
        authentication.fail();
        return TokenOutcome::Failed {
            bad_credentials: false,
            message: "SASL is not enabled on this listener".to_string(),
        };
    };
    let session_max = u64::try_from(config.connections_max_reauth_ms)
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis);
    let outcome = crate::scram_users::with_scram_users(shared, |scram| {
        let credentials = BrokerCredentials {
            plain: &sasl.plain_users,
            scram,
        };
        authentication.take_token(token, &credentials, session_max)
    });
    note(ctx, authentication, &outcome);
    outcome
}

/// Counts and logs an authentication that ended (never a password: the outcome has none).
fn note(ctx: &Rc<BrokerCtx>, authentication: &Authentication, outcome: &TokenOutcome) {
    let peer = authentication.peer.as_str();
    match outcome {
        TokenOutcome::Challenge(_) => {}
        TokenOutcome::Authenticated { principal, .. } => {
            ctx.state.metrics.count_authentication(true);
            tracing::debug!(peer, %principal, "authenticated");
        }
        TokenOutcome::Failed { message, .. } => {
            ctx.state.metrics.count_authentication(false);
            tracing::warn!(peer, reason = %message, "SASL authentication failed");
        }
    }
}

/// How long this failure's answer is held back: `connection.failed.authentication.delay.ms`;
/// for wrong credentials doubled for each recent such failure from the same address
/// (`failed_logins.rs`), which slows a guesser and no one else.
fn failure_delay(ctx: &BrokerCtx, authentication: &Authentication, bad_credentials: bool) -> Duration {
    let failed_logins = &ctx.state.shared.failed_logins;
    match bad_credentials {
        true => failed_logins.delay_after_failure(&authentication.peer_host, std::time::Instant::now()),
        false => failed_logins.base_delay(),
    }
}

impl From<AuthenticationError> for RequestError {
    fn from(e: AuthenticationError) -> RequestError {
        RequestError::Authentication(e)
    }
}
