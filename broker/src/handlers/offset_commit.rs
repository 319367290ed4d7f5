//! OffsetCommit: checks the member and generation on the group's coordinator shard and appends
//! the offsets to `__consumer_offsets` in the connection's turn, then answers once they are
//! committed (durable, replicated in a cluster) while the connection handles its next
//! requests: a consumer that commits after each message has its commits share fdatasyncs.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponsePartition;
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::clock::now_ms;
use crate::group::records::{GroupRecord, OffsetKey, OffsetValue};
use crate::group::{on_coordinator_in_turn, store};
use crate::handlers::partition_answers::push_partition;
use crate::reply::Reply;
use laminar_security::Operation;

/// Kafka's `offset.metadata.max.bytes` default.
const METADATA_BYTES_MAX: usize = 4096;

/// One partition of the request: (topic, partition, offset, leader epoch, metadata).
type Commit = (String, i32, i64, i32, String);

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: OffsetCommitRequest,
) -> Reply<OffsetCommitResponse> {
    let commits = commits_of(&request);
    // Kafka's check on each topic: Read (the group's was made before).
    let readable: Vec<bool> = commits
        .iter()
        .map(|c| access.allows_topic(Operation::Read, &c.0))
        .collect();
    let group_id = request.group_id.to_string();
    let member_id = request.member_id.to_string();
    let instance_id = request.group_instance_id.as_ref().map(|s| s.to_string());
    let generation_id = request.generation_id_or_member_epoch;
    let id = group_id.clone();
    let keys: Vec<(String, i32)> = commits.iter().map(|c| (c.0.clone(), c.1)).collect();
    let asked: Vec<(i32, i64)> = commits.iter().map(|c| (c.1, c.2)).collect();
    let slots = keys.clone();
    let done = on_coordinator_in_turn(ctx, &group_id, move |there, partition, mut ordered| async move {
        let coordinator = &there.state.groups;
        let topics = there.state.shared.metadata.current();
        let consumer_check =
            coordinator.check_consumer_commit(&id, (&member_id, generation_id), &slots, topics.as_ref());
        match consumer_check {
            Some(checked) => checked?,
            None => coordinator.check_commit(&id, &member_id, instance_id.as_deref(), generation_id)?,
        }
        let now = now_ms();
        let mut results = Vec::with_capacity(commits.len());
        let mut records = Vec::new();
        for ((topic, index, offset, leader_epoch, metadata), readable) in commits.into_iter().zip(readable) {
            let known = topics
                .get(&topic)
                .is_some_and(|t| (0..t.partition_count).contains(&index));
            let error = if !readable {
                Some(ResponseError::TopicAuthorizationFailed)
            } else if !known {
                Some(ResponseError::UnknownTopicOrPartition)
            } else if metadata.len() > METADATA_BYTES_MAX {
                Some(ResponseError::OffsetMetadataTooLarge)
            } else {
                let key = OffsetKey {
                    group: id.clone(),
                    topic: topic.clone(),
                    partition: index,
                };
                let value = OffsetValue {
                    offset,
                    leader_epoch,
                    metadata,
                    commit_timestamp_ms: now,
                };
                records.push(GroupRecord::Offset(key, Some(value)));
                None
            };
            results.push(error);
        }
        if !records.is_empty() {
            let appended = || ordered.finish();
            if let Err(error) = store::append_and_apply(&there, partition, records, appended).await {
                return Ok(results.into_iter().map(|e| Some(e.unwrap_or(error))).collect());
            }
        }
        Ok(results)
    })
    .await;
    done.map(move |done| {
        let results = done.and_then(|r| r);
        // Which coordinator acknowledged what, for the fault tests' forensics (LAMINAR_LOG).
        tracing::debug!(group_id, ?asked, ?results, "OffsetCommit answered");
        response(keys, results)
    })
}

fn commits_of(request: &OffsetCommitRequest) -> Vec<Commit> {
    request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                let metadata = p.committed_metadata.as_ref().map(|m| m.to_string());
                (
                    t.name.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    metadata.unwrap_or_default(),
                )
            })
        })
        .collect()
}

pub fn response(
    keys: Vec<(String, i32)>,
    results: Result<Vec<Option<ResponseError>>, ResponseError>,
) -> OffsetCommitResponse {
    let errors: Vec<Option<ResponseError>> = match results {
        Ok(errors) => errors,
        Err(error) => vec![Some(error); keys.len()],
    };
    let mut response = OffsetCommitResponse::default();
    for ((topic, index), error) in keys.into_iter().zip(errors) {
        let partition = OffsetCommitResponsePartition::default()
            .with_partition_index(index)
            .with_error_code(error.map_or(0, |e| e.code()));
        push_partition(&mut response.topics, &topic, partition);
    }
    response
}
