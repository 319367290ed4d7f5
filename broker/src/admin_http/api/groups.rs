//! `/v1/groups`: consumer groups (classic, and KIP-848's) with their members, assignments,
//! committed offsets and lag, and offset resets with a preview, through the broker's ListGroups,
//! DescribeGroups, ConsumerGroupDescribe, OffsetFetch and OffsetCommit handlers.

use crate::authorization::Access;
use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{Assignment, DescribedGroup};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, DescribeGroupsRequest, GroupId, ListGroupsRequest, OffsetCommitRequest,
    OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde::Deserialize;
use serde_json::json;

use super::topics::{figures, Opening};
use super::{ok, ApiError, ApiResult, Query};
use crate::broker::{on_owning_shards, BrokerCtx, TopicPartition};
use crate::handlers::{consumer_group_describe, describe_groups, list_groups, offset_commit, offset_fetch};
use crate::metrics;

fn group_id(id: &str) -> GroupId {
    GroupId(StrBytes::from_string(id.to_string()))
}

/// `GET /v1/groups`: every group with its type ("classic" or "consumer"), its state and its
/// total lag over committed partitions.
pub async fn list(ctx: &Rc<BrokerCtx>, query: &Query) -> ApiResult {
    query.only(&[])?;
    let listed = list_groups::handle(ctx, &Access::unrestricted(), ListGroupsRequest::default(), 5).await;
    if listed.error_code != 0 {
        return Err(ApiError::kafka(listed.error_code, None));
    }
    let snapshot = metrics::gather(ctx, metrics::SnapshotDetail::Totals).await;
    let mut lag: BTreeMap<&str, (i64, usize)> = BTreeMap::new();
    for entry in &snapshot.group_lag {
        let total = lag.entry(entry.group.as_str()).or_default();
        total.0 += entry.lag;
        total.1 += 1;
    }
    let groups: Vec<serde_json::Value> = listed
        .groups
        .iter()
        .map(|g| {
            let (lag_sum, partitions) = lag.get(g.group_id.as_str()).copied().unwrap_or_default();
            json!({
                "group": g.group_id.as_str(),
                "type": g.group_type.as_str(),
                "state": g.group_state.as_str(),
                "protocol_type": g.protocol_type.as_str(),
                "lag": lag_sum,
                "partitions_committed": partitions,
            })
        })
        .collect();
    ok(&json!({ "groups": groups }))
}

/// `GET /v1/groups/{id}`: state, members with their assignments, and per committed partition
/// the committed offset, the high watermark and the lag. A consumer group of KIP-848's protocol
/// (which DescribeGroups answers GROUP_ID_NOT_FOUND) is described by [`describe_consumer`].
pub async fn describe(ctx: &Rc<BrokerCtx>, id: &str, query: &Query) -> ApiResult {
    query.only(&[])?;
    let request = DescribeGroupsRequest::default().with_groups(vec![group_id(id)]);
    let described = describe_groups::handle(ctx, &Access::unrestricted(), request, 5).await;
    let group = described
        .groups
        .first()
        .ok_or_else(|| ApiError::new(500, "DescribeGroups answered nothing"))?;
    if group.error_code == ResponseError::GroupIdNotFound.code() {
        return describe_consumer(ctx, id).await;
    }
    if group.error_code != 0 {
        return Err(ApiError::kafka(group.error_code, group.error_message.as_deref()));
    }
    let mut owner: BTreeMap<(String, i32), String> = BTreeMap::new();
    let members: Vec<serde_json::Value> = group
        .members
        .iter()
        .map(|m| {
            // A member of another protocol than "consumer" has no assignment we can read.
            let assigned = laminar_client::decode_assignment(&m.member_assignment).unwrap_or_default();
            for (topic, partitions) in &assigned {
                for partition in partitions {
                    owner.insert((topic.clone(), *partition), m.member_id.to_string());
                }
            }
            let assignment: Vec<serde_json::Value> = assigned
                .iter()
                .map(|(topic, partitions)| json!({ "topic": topic, "partitions": partitions }))
                .collect();
            json!({
                "member_id": m.member_id.as_str(),
                "client_id": m.client_id.as_str(),
                "client_host": m.client_host.as_str(),
                "assignment": assignment,
            })
        })
        .collect();
    let offsets = committed_with_lag(ctx, id, &owner).await?;
    // DescribeGroups answers an unknown group as Dead with nothing in it (as Kafka does).
    if group.group_state.as_str() == "Dead" && members.is_empty() && offsets.is_empty() {
        return Err(ApiError::new(404, format!("no group {id}")));
    }
    ok(&json!({
        "group": id,
        "type": "classic",
        "state": group.group_state.as_str(),
        "protocol_type": group.protocol_type.as_str(),
        "protocol": group.protocol_data.as_str(),
        "members": members,
        "offsets": offsets,
    }))
}

/// `GET /v1/groups/{id}` of a consumer group of KIP-848's protocol: its epochs, assignor and
/// members (with their current and target assignments, from ConsumerGroupDescribe), and its
/// committed offsets with their lag and owner.
async fn describe_consumer(ctx: &Rc<BrokerCtx>, id: &str) -> ApiResult {
    let group = consumer_group(ctx, id).await?;
    let mut owner: BTreeMap<(String, i32), String> = BTreeMap::new();
    for m in &group.members {
        for t in &m.assignment.topic_partitions {
            for partition in &t.partitions {
                owner.insert((t.topic_name.to_string(), *partition), m.member_id.to_string());
            }
        }
    }
    let members: Vec<serde_json::Value> = group
        .members
        .iter()
        .map(|m| {
            json!({
                "member_id": m.member_id.as_str(),
                "instance_id": m.instance_id.as_deref(),
                "rack_id": m.rack_id.as_deref(),
                "member_epoch": m.member_epoch,
                "client_id": m.client_id.as_str(),
                "client_host": m.client_host.as_str(),
                "subscribed_topic_names": m.subscribed_topic_names.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
                "subscribed_topic_regex": m.subscribed_topic_regex.as_deref(),
                "assignment": assignment_json(&m.assignment),
                "target_assignment": assignment_json(&m.target_assignment),
            })
        })
        .collect();
    let offsets = committed_with_lag(ctx, id, &owner).await?;
    ok(&json!({
        "group": id,
        "type": "consumer",
        "state": group.group_state.as_str(),
        "protocol_type": "consumer",
        "protocol": group.assignor_name.as_str(),
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor": group.assignor_name.as_str(),
        "members": members,
        "offsets": offsets,
    }))
}

/// Consumer group `id` of KIP-848's protocol as ConsumerGroupDescribe describes it (404 when
/// there is none).
async fn consumer_group(ctx: &Rc<BrokerCtx>, id: &str) -> Result<DescribedGroup, ApiError> {
    let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![group_id(id)]);
    let described = consumer_group_describe::handle(ctx, &Access::unrestricted(), request).await;
    let group = described
        .groups
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::new(500, "ConsumerGroupDescribe answered nothing"))?;
    match group.error_code {
        0 => Ok(group),
        code if code == ResponseError::GroupIdNotFound.code() => {
            Err(ApiError::new(404, format!("no group {id}")))
        }
        code => Err(ApiError::kafka(code, group.error_message.as_deref())),
    }
}

/// A ConsumerGroupDescribe assignment as the API shows assignments: `[{topic, partitions}]`.
fn assignment_json(assignment: &Assignment) -> Vec<serde_json::Value> {
    assignment
        .topic_partitions
        .iter()
        .map(|t| json!({ "topic": t.topic_name.as_str(), "partitions": t.partitions }))
        .collect()
}

/// Committed offsets of group `id` (OffsetFetch), each with the partition's high watermark,
/// the lag and the member that owns the partition.
async fn committed_with_lag(
    ctx: &Rc<BrokerCtx>,
    id: &str,
    owner: &BTreeMap<(String, i32), String>,
) -> Result<Vec<serde_json::Value>, ApiError> {
    let committed = committed(ctx, id, None).await?;
    let partitions = committed.keys().map(|(topic, partition)| TopicPartition {
        topic: topic.as_str().into(),
        partition: *partition,
    });
    let ends: BTreeMap<(String, i32), i64> = figures(ctx, partitions.collect(), Opening::OpenIfWritten)
        .await
        .into_iter()
        .filter_map(|(tp, f)| Some(((tp.topic.to_string(), tp.partition), f?.high_watermark)))
        .collect();
    Ok(committed
        .iter()
        .map(|(key, offset)| {
            let end = ends.get(key).copied();
            json!({
                "topic": key.0,
                "partition": key.1,
                "committed_offset": offset,
                "high_watermark": end,
                "lag": end.map(|end| (end - offset).max(0)),
                "member_id": owner.get(key),
            })
        })
        .collect())
}

/// The offsets group `id` committed (all of them, or those of `topic`'s `partitions`).
async fn committed(
    ctx: &Rc<BrokerCtx>,
    id: &str,
    wanted: Option<(&str, &[i32])>,
) -> Result<BTreeMap<(String, i32), i64>, ApiError> {
    let topics = wanted.map(|(topic, partitions)| {
        vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_indexes(partitions.to_vec())]
    });
    let request = OffsetFetchRequest::default()
        .with_group_id(group_id(id))
        .with_topics(topics);
    let fetched = offset_fetch::handle(ctx, &Access::unrestricted(), request, 7).await;
    if fetched.error_code != 0 {
        return Err(ApiError::kafka(fetched.error_code, None));
    }
    let mut offsets = BTreeMap::new();
    for topic in &fetched.topics {
        for p in topic.partitions.iter().filter(|p| p.committed_offset >= 0) {
            offsets.insert((topic.name.to_string(), p.partition_index), p.committed_offset);
        }
    }
    Ok(offsets)
}

/// `POST /v1/groups/{id}/reset-offsets`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    pub topic: String,
    /// Default: every partition of the topic.
    pub partitions: Option<Vec<i32>>,
    /// `earliest`, `latest`, `offset` (with `offset`) or `timestamp` (with `timestamp`, ms).
    pub to: String,
    pub offset: Option<i64>,
    pub timestamp: Option<i64>,
    /// `false` (the default): only the preview; `true`: commit the new offsets.
    #[serde(default)]
    pub execute: bool,
}

/// Where a reset moves each partition.
#[derive(Debug, Clone, Copy)]
enum Target {
    Earliest,
    Latest,
    Offset(i64),
    Timestamp(i64),
}

impl ResetRequest {
    fn target(&self) -> Result<Target, ApiError> {
        match (self.to.as_str(), self.offset, self.timestamp) {
            ("earliest", None, None) => Ok(Target::Earliest),
            ("latest", None, None) => Ok(Target::Latest),
            ("offset", Some(offset), None) if offset >= 0 => Ok(Target::Offset(offset)),
            ("timestamp", None, Some(ms)) if ms >= 0 => Ok(Target::Timestamp(ms)),
            _ => Err(ApiError::bad_request(
                "to: earliest | latest | offset (with offset >= 0) | timestamp (with timestamp >= 0, ms)",
            )),
        }
    }
}

/// `POST /v1/groups/{id}/reset-offsets`: the new offset of each partition (clamped to the
/// partition's log), next to the committed one; with `"execute": true` they are committed
/// (OffsetCommit as an admin client sends it, which the coordinator refuses while the group has
/// members).
pub async fn reset_offsets(ctx: &Rc<BrokerCtx>, id: &str, reset: ResetRequest) -> ApiResult {
    let target = reset.target()?;
    let table = ctx.state.shared.metadata.current();
    let topic = table
        .get(&reset.topic)
        .ok_or_else(|| ApiError::new(404, format!("unknown topic {}", reset.topic)))?;
    let partitions: Vec<i32> = match &reset.partitions {
        Some(list) if list.iter().any(|p| !(0..topic.partition_count).contains(p)) => {
            return Err(ApiError::bad_request(format!(
                "partitions: {} has partitions 0..{}",
                reset.topic, topic.partition_count
            )))
        }
        Some(list) => list.clone(),
        None => (0..topic.partition_count).collect(),
    };
    let new_offsets = target_offsets(ctx, &reset.topic, &partitions, target).await?;
    let current = committed(ctx, id, Some((&reset.topic, &partitions))).await?;
    let rows: Vec<serde_json::Value> = new_offsets
        .iter()
        .map(|(partition, new)| {
            json!({
                "partition": partition,
                "current_offset": current.get(&(reset.topic.clone(), *partition)),
                "new_offset": new,
            })
        })
        .collect();
    if reset.execute {
        refuse_while_members(ctx, id).await?;
        commit(ctx, id, &reset.topic, &new_offsets).await?;
    }
    ok(&json!({
        "group": id,
        "topic": reset.topic,
        "executed": reset.execute,
        "partitions": rows,
    }))
}

/// Each partition's offset for `target`, on its owning shard, within its log.
async fn target_offsets(
    ctx: &Rc<BrokerCtx>,
    topic: &str,
    partitions: &[i32],
    target: Target,
) -> Result<Vec<(i32, i64)>, ApiError> {
    let items = partitions
        .iter()
        .map(|p| {
            let tp = TopicPartition {
                topic: topic.into(),
                partition: *p,
            };
            (tp, ())
        })
        .collect();
    let answers = on_owning_shards(ctx, items, move |there, tp, ()| async move {
        let Some(partition) = there.state.partition_to_read(&tp).await? else {
            return Ok(0);
        };
        let (start, end) = (
            partition.log_start_offset().get(),
            partition.high_watermark().get(),
        );
        Ok(match target {
            Target::Earliest => start,
            Target::Latest => end,
            Target::Offset(offset) => offset.clamp(start, end),
            Target::Timestamp(ms) => match partition.offset_for_timestamp(ms).await? {
                Some((offset, _)) => offset.get().clamp(start, end),
                None => end,
            },
        })
    })
    .await;
    answers
        .into_iter()
        .map(|(tp, answer)| {
            let offset =
                answer.map_err(|e| ApiError::new(503, format!("partition {}: {e}", tp.partition)))?;
            Ok((tp.partition, offset))
        })
        .collect()
}

/// A 409 while group `id` has members: their next commit would undo the reset.
async fn refuse_while_members(ctx: &Rc<BrokerCtx>, id: &str) -> Result<(), ApiError> {
    let request = DescribeGroupsRequest::default().with_groups(vec![group_id(id)]);
    let described = describe_groups::handle(ctx, &Access::unrestricted(), request, 5).await;
    let (members, state) = match described.groups.first() {
        Some(group) if group.error_code == ResponseError::GroupIdNotFound.code() => {
            match consumer_group(ctx, id).await {
                Ok(group) => (group.members.len(), group.group_state.to_string()),
                Err(_) => (0, String::new()),
            }
        }
        Some(group) => (group.members.len(), group.group_state.to_string()),
        None => (0, String::new()),
    };
    if members == 0 {
        return Ok(());
    }
    Err(ApiError::new(
        409,
        format!(
            "group {id} has {members} member(s) ({state}): stop its consumers before resetting its offsets"
        ),
    ))
}

async fn commit(ctx: &Rc<BrokerCtx>, id: &str, topic: &str, offsets: &[(i32, i64)]) -> Result<(), ApiError> {
    let partitions = offsets
        .iter()
        .map(|(partition, offset)| {
            OffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(*offset)
        })
        .collect();
    let request = OffsetCommitRequest::default()
        .with_group_id(group_id(id))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::default())
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(partitions)]);
    let answer = offset_commit::handle(ctx, &Access::unrestricted(), request)
        .await
        .ready()
        .await;
    let failed = answer
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.error_code != 0);
    match failed {
        Some(p) => Err(ApiError::kafka(
            p.error_code,
            Some("the group must have no members to reset its offsets"),
        )),
        None => Ok(()),
    }
}
