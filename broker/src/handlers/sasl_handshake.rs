//! SaslHandshake: a SASL listener's client picks a mechanism. v0 means the tokens follow as
//! bare frames, v1 that they come in SaslAuthenticate requests (`crate::authentication`). On a
//! listener without SASL, and anywhere a handshake may not come, the answer is
//! ILLEGAL_SASL_STATE; a mechanism the listener does not enable gets
//! UNSUPPORTED_SASL_MECHANISM with the list it does. Either closes the connection once
//! answered, as Kafka does.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;
use laminar_security::Mechanism;

use crate::authentication::Authentication;
use crate::config::BrokerConfig;

pub fn handle(
    config: &BrokerConfig,
    authentication: &Authentication,
    request: SaslHandshakeRequest,
    version: i16,
) -> SaslHandshakeResponse {
    let Some(sasl) = &config.listener_security[authentication.listener.0].sasl else {
        authentication.fail();
        return SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code());
    };
    let enabled = sasl
        .mechanisms
        .iter()
        .map(|m| StrBytes::from_string(m.to_string()))
        .collect();
    let response = SaslHandshakeResponse::default().with_mechanisms(enabled);
    let requested: Option<Mechanism> = request.mechanism.parse().ok();
    let Some(mechanism) = requested.filter(|m| sasl.mechanisms.contains(m)) else {
        tracing::debug!(mechanism = %request.mechanism.as_str(), "SASL mechanism not enabled");
        authentication.fail();
        return response.with_error_code(ResponseError::UnsupportedSaslMechanism.code());
    };
    match authentication.start(mechanism, version == 0) {
        Ok(()) => response,
        Err(_) => response.with_error_code(ResponseError::IllegalSaslState.code()),
    }
}
