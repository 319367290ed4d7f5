//! OffsetDelete: removes committed offsets of a group (tombstones), refusing partitions of topics
//! the group's members are subscribed to.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_delete_response::OffsetDeleteResponsePartition;
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::group::records::{GroupRecord, OffsetKey};
use crate::group::{on_coordinator, store};
use crate::handlers::partition_answers::push_partition;
use laminar_security::Operation;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group_id = request.group_id.to_string();
    let wanted: Vec<(String, i32)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.partition_index))
        })
        .collect();
    // Kafka's check on each topic: Read (the group's Delete was checked before).
    let readable: Vec<bool> = wanted
        .iter()
        .map(|(t, _)| access.allows_topic(Operation::Read, t))
        .collect();
    let id = group_id.clone();
    let asked = wanted.clone();
    let deleted = on_coordinator(ctx, &group_id, move |there, partition| async move {
        let coordinator = &there.state.groups;
        let subscribed = coordinator
            .with_group(&id, false, |group| group.subscribed_topics().unwrap_or_default())
            .ok_or(ResponseError::GroupIdNotFound)?;
        let mut errors = Vec::with_capacity(asked.len());
        let mut tombstones = Vec::new();
        for ((topic, index), readable) in asked.into_iter().zip(readable) {
            if !readable {
                errors.push(Some(ResponseError::TopicAuthorizationFailed));
                continue;
            }
            if subscribed.contains(&topic) {
                errors.push(Some(ResponseError::GroupSubscribedToTopic));
                continue;
            }
            let key = OffsetKey {
                group: id.clone(),
                topic,
                partition: index,
            };
            tombstones.push(GroupRecord::Offset(key, None));
            errors.push(None);
        }
        if !tombstones.is_empty() {
            store::append_and_apply(&there, partition, tombstones, || {}).await?;
        }
        Ok(errors)
    })
    .await
    .and_then(|r| r);
    let errors = match deleted {
        Ok(errors) => errors,
        Err(error) => return OffsetDeleteResponse::default().with_error_code(error.code()),
    };
    let mut response = OffsetDeleteResponse::default();
    for ((topic, index), error) in wanted.into_iter().zip(errors) {
        let partition = OffsetDeleteResponsePartition::default()
            .with_partition_index(index)
            .with_error_code(error.map_or(0, |e| e.code()));
        push_partition(&mut response.topics, &topic, partition);
    }
    response
}
