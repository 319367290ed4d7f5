//! OffsetFetch: a group's committed offsets, from its coordinator shard (v8+ asks for several
//! groups at once). Null topics means every partition the group committed.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::broker::BrokerCtx;
use crate::group::coordinator::GroupOffsets;
use crate::group::on_coordinator;
use crate::group::records::OffsetValue;

/// Topics and partitions asked for; None means all.
type Wanted = Option<Vec<(String, Vec<i32>)>>;
/// Per topic, per partition: the committed offset if any.
type Found = Vec<(String, Vec<(i32, Option<OffsetValue>)>)>;

pub async fn handle(ctx: &Rc<BrokerCtx>, request: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    if version < 8 {
        let wanted = request.topics.as_ref().map(|topics| {
            topics
                .iter()
                .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                .collect()
        });
        let found = committed(ctx, request.group_id.as_str())
            .await
            .map(|c| select(&c, wanted));
        return single_group_response(found, version);
    }
    let mut groups = Vec::with_capacity(request.groups.len());
    for group in &request.groups {
        let wanted = group.topics.as_ref().map(|topics| {
            topics
                .iter()
                .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                .collect()
        });
        let found = committed(ctx, group.group_id.as_str())
            .await
            .map(|c| select(&c, wanted));
        groups.push(group_response(group.group_id.clone(), found));
    }
    OffsetFetchResponse::default().with_groups(groups)
}

async fn committed(ctx: &Rc<BrokerCtx>, group_id: &str) -> Result<GroupOffsets, ResponseError> {
    let id = group_id.to_string();
    on_coordinator(ctx, group_id, move |there, _| async move {
        there.state.groups.committed(&id)
    })
    .await
}

/// The wanted partitions with their commits (all committed partitions when `wanted` is None).
pub fn select(committed: &GroupOffsets, wanted: Wanted) -> Found {
    match wanted {
        Some(topics) => topics
            .into_iter()
            .map(|(topic, partitions)| {
                let found = partitions
                    .into_iter()
                    .map(|p| (p, committed.get(&(topic.clone(), p)).cloned()))
                    .collect();
                (topic, found)
            })
            .collect(),
        None => {
            let mut found: Found = Vec::new();
            for ((topic, partition), value) in committed {
                let entry = (*partition, Some(value.clone()));
                match found.last_mut() {
                    Some((last, partitions)) if last == topic => partitions.push(entry),
                    _ => found.push((topic.clone(), vec![entry])),
                }
            }
            found
        }
    }
}

fn offset_and_metadata(value: Option<OffsetValue>) -> (i64, i32, StrBytes) {
    match value {
        Some(v) => (v.offset, v.leader_epoch, StrBytes::from_string(v.metadata)),
        None => (-1, -1, StrBytes::default()),
    }
}

pub fn single_group_response(found: Result<Found, ResponseError>, version: i16) -> OffsetFetchResponse {
    let found = match found {
        Ok(found) => found,
        // v1 has no group-level error code; later versions put it there.
        Err(error) if version >= 2 => return OffsetFetchResponse::default().with_error_code(error.code()),
        Err(_) => Vec::new(),
    };
    let topics = found
        .into_iter()
        .map(|(topic, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(index, value)| {
                    let (offset, epoch, metadata) = offset_and_metadata(value);
                    let partition = OffsetFetchResponsePartition::default()
                        .with_partition_index(index)
                        .with_committed_offset(offset)
                        .with_metadata(Some(metadata));
                    if version >= 5 {
                        partition.with_committed_leader_epoch(epoch)
                    } else {
                        partition
                    }
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic)))
                .with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}

pub fn group_response(group_id: GroupId, found: Result<Found, ResponseError>) -> OffsetFetchResponseGroup {
    let group = OffsetFetchResponseGroup::default().with_group_id(group_id);
    let found = match found {
        Ok(found) => found,
        Err(error) => return group.with_error_code(error.code()),
    };
    let topics = found
        .into_iter()
        .map(|(topic, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(index, value)| {
                    let (offset, epoch, metadata) = offset_and_metadata(value);
                    OffsetFetchResponsePartitions::default()
                        .with_partition_index(index)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(epoch)
                        .with_metadata(Some(metadata))
                })
                .collect();
            OffsetFetchResponseTopics::default()
                .with_name(TopicName(StrBytes::from_string(topic)))
                .with_partitions(partitions)
        })
        .collect();
    group.with_topics(topics)
}
