//! UnregisterBroker (API 64, v0): removes a broker's registration through the controller
//! (`decide::brokers::unregister_broker`). Cluster mode only; needs Alter on the cluster. A
//! broker that still holds replicas is refused (INVALID_REQUEST, saying how many): move them
//! to other brokers first. A broker still running registers again at its next heartbeat, as
//! in Kafka. The answer waits, a bounded while, until this broker's view no longer lists it.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{UnregisterBrokerRequest, UnregisterBrokerResponse};
use kafka_protocol::protocol::StrBytes;
use laminar_model::NodeId;

use crate::broker::BrokerCtx;
use crate::quorum::admin::{wait_for_view, with_retries};

pub async fn handle(ctx: &BrokerCtx, request: UnregisterBrokerRequest) -> UnregisterBrokerResponse {
    let Some(link) = &ctx.state.shared.cluster else {
        return refused(
            ResponseError::InvalidRequest,
            "a single node has no brokers to unregister".into(),
        );
    };
    let broker_id = NodeId::new(request.broker_id.0);
    match with_retries(|| link.handle.unregister_broker(broker_id)).await {
        Ok(()) => {
            wait_for_view(link, |image| !image.metadata.brokers.contains_key(&broker_id)).await;
            tracing::info!(broker_id = broker_id.get(), "unregistered broker");
            UnregisterBrokerResponse::default()
        }
        Err(refusal) => refused(refusal.response_error(), refusal.to_string()),
    }
}

fn refused(error: ResponseError, message: String) -> UnregisterBrokerResponse {
    UnregisterBrokerResponse::default()
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}
