//! The SASL login a connection makes after ApiVersions on a SASL listener: SaslHandshake v1
//! naming the mechanism, then SaslAuthenticate round trips carrying the mechanism's tokens
//! (`laminar_security::SaslClient` builds and checks them). A refusal is the broker's error
//! (SASL_AUTHENTICATION_FAILED and its message); a server that cannot prove it knows the SCRAM
//! credential is refused by the client.

use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use laminar_security::SaslClient;

use crate::connection::Connection;
use crate::error::{check_code, ClientError};
use crate::transport::SaslLogin;

/// Round trips a login may take: PLAIN needs one, SCRAM two.
const ROUND_TRIPS_MAX: usize = 4;

impl Connection {
    /// Authenticates this connection as `login` says.
    pub(crate) fn authenticate(&mut self, login: &SaslLogin) -> Result<(), ClientError> {
        authenticate(self, login)
    }
}

fn authenticate(connection: &mut Connection, login: &SaslLogin) -> Result<(), ClientError> {
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(login.mechanism.to_string()));
    let answer = connection.request(&handshake)?;
    check_code(ApiKey::SaslHandshake, answer.error_code, None, String::new)?;
    let mut client = SaslClient::new(login.mechanism, &login.user, &login.password);
    let mut token = client.first_token().map_err(refused)?;
    for _ in 0..ROUND_TRIPS_MAX {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(bytes::Bytes::from(token));
        let answer = connection.request(&request)?;
        let message = answer.error_message.as_ref().map(|m| m.to_string());
        check_code(
            ApiKey::SaslAuthenticate,
            answer.error_code,
            message.as_deref(),
            String::new,
        )?;
        match client.step(&answer.auth_bytes).map_err(refused)? {
            Some(next) => token = next,
            None => return Ok(()),
        }
    }
    Err(refused(laminar_security::SaslError::Malformed(
        "too many SASL round trips",
    )))
}

/// The client's own refusal of what the server sent (its proof, its parameters).
fn refused(error: laminar_security::SaslError) -> ClientError {
    ClientError::Io(std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!("SASL: {error}"),
    ))
}
