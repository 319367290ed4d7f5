//! Heartbeat: keeps a member's session alive and tells it when to rejoin.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use crate::broker::BrokerCtx;
use crate::group::on_coordinator;

pub async fn handle(ctx: &Rc<BrokerCtx>, request: HeartbeatRequest) -> HeartbeatResponse {
    let group_id = request.group_id.to_string();
    if group_id.is_empty() {
        return response(Err(ResponseError::InvalidGroupId));
    }
    let id = group_id.clone();
    let beat = on_coordinator(ctx, &group_id, move |there, _| async move {
        let coordinator = &there.state.groups;
        let now = coordinator.now_ms();
        let member = (request.member_id.as_str(), request.generation_id);
        if let Some(beat) = coordinator.classic_heartbeat_consumer_group(&id, member, now) {
            return beat;
        }
        coordinator
            .with_group(&id, false, |group| {
                group.heartbeat(
                    &request.member_id,
                    request.group_instance_id.as_deref(),
                    request.generation_id,
                    now,
                )
            })
            .unwrap_or(Err(ResponseError::UnknownMemberId))
    })
    .await;
    response(beat.and_then(|r| r))
}

pub fn response(result: Result<(), ResponseError>) -> HeartbeatResponse {
    HeartbeatResponse::default().with_error_code(result.err().map_or(0, |e| e.code()))
}
