//! FindCoordinator: a single node coordinates every group and transaction itself (v4+ answers a
//! batch of keys).

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::BrokerCtx;
use crate::handlers::metadata::advertised;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

pub fn handle(ctx: &Rc<BrokerCtx>, request: FindCoordinatorRequest, version: i16) -> FindCoordinatorResponse {
    let shared = &ctx.state.shared;
    let (host, port) = advertised(shared);
    response(&request, version, shared.node_id(), &host, port)
}

pub fn response(
    request: &FindCoordinatorRequest,
    version: i16,
    node_id: i32,
    host: &str,
    port: i32,
) -> FindCoordinatorResponse {
    let error = match request.key_type {
        KEY_TYPE_GROUP | KEY_TYPE_TRANSACTION => None,
        _ => Some(ResponseError::InvalidRequest),
    };
    let (node_id, host, port) = match error {
        None => (node_id, host, port),
        Some(_) => (-1, "", -1),
    };
    let message = error.map(|_| StrBytes::from_static_str("unknown coordinator key type"));
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(BrokerId(node_id))
                    .with_host(StrBytes::from_string(host.to_string()))
                    .with_port(port)
                    .with_error_code(error.map_or(0, |e| e.code()))
                    .with_error_message(message.clone())
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let response = FindCoordinatorResponse::default()
        .with_error_code(error.map_or(0, |e| e.code()))
        .with_node_id(BrokerId(node_id))
        .with_host(StrBytes::from_string(host.to_string()))
        .with_port(port);
    if version >= 1 {
        response.with_error_message(message)
    } else {
        response
    }
}
