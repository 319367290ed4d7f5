//! SASL PLAIN (RFC 4616) on the server side: one token, `[authzid] NUL authcid NUL passwd`,
//! checked against the configured users. The password crosses the wire as is, so PLAIN belongs
//! on SASL_SSL listeners.

use crate::credentials::Credentials;
use crate::principal::Principal;
use crate::protocol::Mechanism;
use crate::sasl_outcome::{SaslError, SaslStep};

/// Checks a PLAIN token; the token's size was bounded by the caller
/// ([`crate::sasl_outcome::SASL_TOKEN_LEN_MAX`]).
pub(crate) fn authenticate(token: &[u8], credentials: &dyn Credentials) -> Result<SaslStep, SaslError> {
    let (authzid, username, password) = parse(token)?;
    // Kafka refuses to let one user act as another through PLAIN's authzid.
    if !authzid.is_empty() && authzid != username {
        return Err(SaslError::Unsupported(
            "an authorization id different from the username is not supported",
        ));
    }
    if !credentials.plain_password_matches(username, password) {
        return Err(SaslError::InvalidCredentials(Mechanism::Plain));
    }
    Ok(SaslStep::Authenticated {
        principal: Principal::user(username),
        final_token: Vec::new(),
    })
}

/// Splits the token into its three UTF-8 fields; none may contain NUL (RFC 4616), so exactly
/// two separators are allowed.
fn parse(token: &[u8]) -> Result<(&str, &str, &str), SaslError> {
    let text = std::str::from_utf8(token).map_err(|_| SaslError::Malformed("PLAIN token is not UTF-8"))?;
    let mut fields = text.split('\0');
    let (Some(authzid), Some(username), Some(password), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(SaslError::Malformed(
            "PLAIN token must be authzid NUL username NUL password",
        ));
    };
    if username.is_empty() {
        return Err(SaslError::Malformed("username not specified"));
    }
    if password.is_empty() {
        return Err(SaslError::Malformed("password not specified"));
    }
    Ok((authzid, username, password))
}
