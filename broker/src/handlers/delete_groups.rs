//! DeleteGroups: removes empty groups and their committed offsets (tombstones in
//! `__consumer_offsets`); a group with members gets NON_EMPTY_GROUP.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::group::consumer::records::ConsumerGroupRecord;
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
    if coordinator.is_consumer_group(group_id) {
        return delete_consumer_group(ctx, partition, group_id).await;
    }
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
    let mut tombstones = offset_tombstones(ctx, group_id);
    tombstones.push(GroupRecord::Group(group_id.to_string(), None));
    if let Err(error) = store::append_and_apply(ctx, partition, tombstones, || {}).await {
        coordinator.with_group(group_id, false, |group| group.state = GroupState::Empty);
        return Err(error);
    }
    Ok(())
}

/// Deletes an empty consumer group: its offsets and its records (Kafka's tombstones for the
/// group epoch, target assignment and partition metadata records).
async fn delete_consumer_group(
    ctx: &Rc<BrokerCtx>,
    partition: i32,
    group_id: &str,
) -> Result<(), ResponseError> {
    let empty = ctx
        .state
        .groups
        .with_consumer_group(group_id, |group| group.is_empty());
    match empty {
        None => return Err(ResponseError::GroupIdNotFound),
        Some(false) => return Err(ResponseError::NonEmptyGroup),
        Some(true) => {}
    }
    let group = group_id.to_string();
    let mut tombstones = offset_tombstones(ctx, group_id);
    tombstones.extend(
        [
            ConsumerGroupRecord::TargetAssignmentMetadata {
                group: group.clone(),
                assignment_epoch: None,
            },
            ConsumerGroupRecord::PartitionMetadata {
                group: group.clone(),
                present: false,
            },
            ConsumerGroupRecord::Metadata { group, epoch: None },
        ]
        .map(GroupRecord::Consumer),
    );
    store::append_and_apply(ctx, partition, tombstones, || {}).await
}

/// Tombstones for every offset the group has committed.
fn offset_tombstones(ctx: &Rc<BrokerCtx>, group_id: &str) -> Vec<GroupRecord> {
    ctx.state
        .groups
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
        .collect()
}
