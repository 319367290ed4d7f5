//! SaslHandshake: Laminar has no authentication yet, so every mechanism is refused cleanly with
//! UNSUPPORTED_SASL_MECHANISM and an empty list of enabled mechanisms.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};

pub fn handle(request: SaslHandshakeRequest) -> SaslHandshakeResponse {
    tracing::debug!(mechanism = %request.mechanism.as_str(), "SASL requested but not enabled");
    SaslHandshakeResponse::default().with_error_code(ResponseError::UnsupportedSaslMechanism.code())
}
