//! SyncGroup: the leader hands in the assignment; every member waits for it and gets its share.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::BrokerCtx;
use crate::group::member::SyncOutcome;
use crate::group::{on_coordinator_in_turn, store};
use crate::reply::Reply;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    request: SyncGroupRequest,
    version: i16,
) -> Reply<SyncGroupResponse> {
    let group_id = request.group_id.to_string();
    if group_id.is_empty() {
        return Reply::Now(response(
            SyncOutcome::failed(ResponseError::InvalidGroupId),
            version,
        ));
    }
    let id = group_id.clone();
    let synced = on_coordinator_in_turn(ctx, &group_id, move |there, partition, mut ordered| async move {
        let coordinator = &there.state.groups;
        let now = coordinator.now_ms();
        let topics = there.state.shared.metadata.current();
        let member = (request.member_id.as_str(), request.generation_id);
        if let Some(synced) = coordinator.classic_sync_consumer_group(&id, member, topics.as_ref()) {
            ordered.finish();
            return match synced {
                Ok(assignment) => SyncOutcome {
                    error: None,
                    protocol_type: request.protocol_type.map(|p| p.to_string()),
                    protocol_name: request.protocol_name.map(|p| p.to_string()),
                    assignment,
                },
                Err(error) => SyncOutcome::failed(error),
            };
        }
        let assignments = request
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.clone()))
            .collect();
        let protocol = (
            request.protocol_type.as_ref().map(|s| s.as_str()),
            request.protocol_name.as_ref().map(|s| s.as_str()),
        );
        let waiting = coordinator.with_group(&id, false, |group| {
            group.sync(
                &request.member_id,
                request.group_instance_id.as_deref(),
                request.generation_id,
                protocol,
                assignments,
                now,
            )
        });
        ordered.finish();
        store::persist_group(&there, partition, &id).await;
        match waiting {
            None => SyncOutcome::failed(ResponseError::UnknownMemberId),
            Some(waiting) => waiting
                .await
                .unwrap_or_else(|_| SyncOutcome::failed(ResponseError::RebalanceInProgress)),
        }
    })
    .await;
    synced.map(move |synced| response(synced.unwrap_or_else(SyncOutcome::failed), version))
}

pub fn response(outcome: SyncOutcome, version: i16) -> SyncGroupResponse {
    let response = SyncGroupResponse::default()
        .with_error_code(outcome.error.map_or(0, |e| e.code()))
        .with_assignment(outcome.assignment);
    if version >= 5 {
        response
            .with_protocol_type(outcome.protocol_type.map(StrBytes::from_string))
            .with_protocol_name(outcome.protocol_name.map(StrBytes::from_string))
    } else {
        response
    }
}
