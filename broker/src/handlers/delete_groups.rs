//! DeleteGroups: removes empty groups and their committed offsets (tombstones in
//! `__consumer_offsets`); a group with members gets NON_EMPTY_GROUP.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::group::records::{GroupRecord, OffsetKey};
use crate::group::state::GroupState;
use crate::group::{on_coordinator, store};
use laminar_security::Operation;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(request.groups_names.len());
    for group_id in request.groups_names {
        if !access.allows_group(Operation::Delete, &group_id) {
            let refused = ResponseError::GroupAuthorizationFailed.code();
            results.push(
                DeletableGroupResult::default()
                    .with_group_id(group_id)
                    .with_error_code(refused),
            );
            continue;
        }
        let id = group_id.to_string();
        let home = id.clone();
        let deleted = on_coordinator(ctx, &home, move |there, partition| async move {
            delete(&there, partition, &id).await
        })
        .await
        .and_then(|r| r);
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group_id)
                .with_error_code(deleted.err().map_or(0, |e| e.code())),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}

async fn delete(ctx: &Rc<BrokerCtx>, partition: i32, group_id: &str) -> Result<(), ResponseError> {
    let coordinator = &ctx.state.groups;
    // Dead while the tombstones are written, so that nobody joins meanwhile.
    coordinator
        .with_group(group_id, false, |group| match group.state {
            GroupState::Empty => {
                group.mark_dead();
                Ok(())
            }
            GroupState::Dead => Err(ResponseError::GroupIdNotFound),
            _ => Err(ResponseError::NonEmptyGroup),
        })
        .unwrap_or(Err(ResponseError::GroupIdNotFound))?;
    let mut tombstones: Vec<GroupRecord> = coordinator
        .committed(group_id)
        .into_keys()
        .map(|(topic, p)| {
            let key = OffsetKey {
                group: group_id.to_string(),
                topic,
                partition: p,
            };
            GroupRecord::Offset(key, None)
        })
        .collect();
    tombstones.push(GroupRecord::Group(group_id.to_string(), None));
    if let Err(error) = store::append_and_apply(ctx, partition, tombstones, || {}).await {
        coordinator.with_group(group_id, false, |group| group.state = GroupState::Empty);
        return Err(error);
    }
    Ok(())
}
