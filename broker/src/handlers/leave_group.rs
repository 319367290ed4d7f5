//! LeaveGroup: members leave at once instead of waiting for their session to lapse (v3+ names
//! several members, by member id and/or group instance id).

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::BrokerCtx;
use crate::group::{on_coordinator, store};

/// A member leaving: member id (maybe empty) and group instance id.
type Leaver = (String, Option<String>);

pub async fn handle(ctx: &Rc<BrokerCtx>, request: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    let group_id = request.group_id.to_string();
    let leavers: Vec<Leaver> = if version >= 3 {
        request
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(request.member_id.to_string(), None)]
    };
    if group_id.is_empty() {
        return response(Err(ResponseError::InvalidGroupId), version);
    }
    let id = group_id.clone();
    let left = on_coordinator(ctx, &group_id, move |there, partition| async move {
        let coordinator = &there.state.groups;
        let now = coordinator.now_ms();
        if coordinator.is_consumer_group(&id) {
            return leave_consumer_group(&there, partition, &id, leavers).await;
        }
        let results: Vec<(Leaver, Option<ResponseError>)> = leavers
            .into_iter()
            .map(|leaver| {
                let result = coordinator
                    .with_group(&id, false, |group| {
                        group.leave(&leaver.0, leaver.1.as_deref(), now)
                    })
                    .unwrap_or(Err(ResponseError::UnknownMemberId));
                (leaver, result.err())
            })
            .collect();
        store::persist_group(&there, partition, &id).await;
        results
    })
    .await;
    response(left, version)
}

/// Classic members leaving a consumer group (one moving between protocols).
async fn leave_consumer_group(
    ctx: &Rc<BrokerCtx>,
    partition: i32,
    group_id: &str,
    leavers: Vec<Leaver>,
) -> Vec<(Leaver, Option<ResponseError>)> {
    let mut results = Vec::with_capacity(leavers.len());
    for leaver in leavers {
        let groups = &ctx.state.groups;
        let topics = ctx.state.shared.metadata.current();
        let left =
            groups.classic_leave_consumer_group(group_id, &leaver.0, (topics.as_ref(), groups.now_ms()));
        let result = match left.unwrap_or(Err(ResponseError::UnknownMemberId)) {
            Ok(records) => store::append(ctx, partition, &records).await,
            Err(error) => Err(error),
        };
        results.push((leaver, result.err()));
    }
    results
}

pub fn response(
    result: Result<Vec<(Leaver, Option<ResponseError>)>, ResponseError>,
    version: i16,
) -> LeaveGroupResponse {
    match result {
        Err(error) => LeaveGroupResponse::default().with_error_code(error.code()),
        Ok(members) if version < 3 => {
            let error = members.first().and_then(|(_, e)| *e);
            LeaveGroupResponse::default().with_error_code(error.map_or(0, |e| e.code()))
        }
        Ok(members) => LeaveGroupResponse::default().with_members(
            members
                .into_iter()
                .map(|((member_id, instance_id), error)| {
                    MemberResponse::default()
                        .with_member_id(StrBytes::from_string(member_id))
                        .with_group_instance_id(instance_id.map(StrBytes::from_string))
                        .with_error_code(error.map_or(0, |e| e.code()))
                })
                .collect(),
        ),
    }
}
