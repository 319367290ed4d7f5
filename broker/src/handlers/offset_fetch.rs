//! OffsetFetch: a group's committed offsets, from its coordinator shard (v8+ asks for several
//! groups at once). Null topics means every partition the group committed.

use std::collections::BTreeSet;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::group::coordinator::GroupOffsets;
use crate::group::on_coordinator;
use crate::group::records::OffsetValue;
use crate::handlers::partition_answers::push_partition;
use laminar_security::Operation;

/// Topics and partitions asked for; None means all.
type Wanted = Option<Vec<(String, Vec<i32>)>>;
/// Per topic, per partition: the committed offset if any.
type Found = Vec<(String, Vec<(i32, Option<OffsetValue>)>)>;
/// (topic, partition) with an offset an open transaction wrote, when stable offsets are asked.
type Unstable = BTreeSet<(String, i32)>;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    if version < 8 {
        let wanted = wanted(request.topics.as_deref(), |t| (&t.name, &t.partition_indexes));
        let group_id = request.group_id.as_str();
        let found = committed_selection(ctx, group_id, wanted, request.require_stable).await;
        let (found, unstable) = split_unstable(found);
        let mut response = single_group_response(found, version);
        let asked_all = request.topics.is_none();
        let topics = &mut response.topics;
        mark_unstable(
            &unstable,
            topics,
            |t| (&t.name, &mut t.partitions),
            |p| p.partition_index,
            |p| {
                p.error_code = ResponseError::UnstableOffsetCommit.code();
                p.committed_offset = -1;
            },
        );
        guard_topics(
            access,
            asked_all,
            topics,
            |t| (&t.name, &mut t.partitions),
            |p| {
                p.error_code = refused_topic();
                p.committed_offset = -1;
            },
        );
        return response;
    }
    let mut groups = Vec::with_capacity(request.groups.len());
    for group in &request.groups {
        if !access.allows_group(Operation::Describe, &group.group_id) {
            let refused = Err(ResponseError::GroupAuthorizationFailed);
            groups.push(group_response(group.group_id.clone(), refused));
            continue;
        }
        let wanted = wanted(group.topics.as_deref(), |t| (&t.name, &t.partition_indexes));
        let group_id = group.group_id.as_str();
        let found = committed_selection(ctx, group_id, wanted, request.require_stable).await;
        let (found, unstable) = split_unstable(found);
        let mut answer = group_response(group.group_id.clone(), found);
        let topics = &mut answer.topics;
        mark_unstable(
            &unstable,
            topics,
            |t| (&t.name, &mut t.partitions),
            |p| p.partition_index,
            |p| {
                p.error_code = ResponseError::UnstableOffsetCommit.code();
                p.committed_offset = -1;
            },
        );
        guard_topics(
            access,
            group.topics.is_none(),
            topics,
            |t| (&t.name, &mut t.partitions),
            |p| {
                p.error_code = refused_topic();
                p.committed_offset = -1;
            },
        );
        groups.push(answer);
    }
    OffsetFetchResponse::default().with_groups(groups)
}

/// The answer found and, apart, the partitions to answer as unstable.
fn split_unstable(
    found: Result<(Found, Unstable), ResponseError>,
) -> (Result<Found, ResponseError>, Unstable) {
    match found {
        Ok((found, unstable)) => (Ok(found), unstable),
        Err(error) => (Err(error), Unstable::new()),
    }
}

/// OffsetFetch v7+ asking for stable offsets: a partition with an offset an open transaction
/// wrote is answered UNSTABLE_OFFSET_COMMIT without an offset (`refuse`), and the consumer
/// asks again (Kafka answers so per partition).
fn mark_unstable<Topic, Partition>(
    unstable: &Unstable,
    topics: &mut [Topic],
    parts: impl Fn(&mut Topic) -> (&TopicName, &mut Vec<Partition>),
    index: impl Fn(&Partition) -> i32,
    refuse: impl Fn(&mut Partition),
) {
    if unstable.is_empty() {
        return;
    }
    for topic in topics {
        let (name, partitions) = parts(topic);
        let name = name.to_string();
        for partition in partitions.iter_mut() {
            if unstable.contains(&(name.clone(), index(partition))) {
                refuse(partition);
            }
        }
    }
}

fn refused_topic() -> i16 {
    ResponseError::TopicAuthorizationFailed.code()
}

/// Kafka's check on each topic of the answer, Describe: asked for all topics, those the
/// principal may not describe are left out; named, their partitions are refused.
fn guard_topics<Topic, Partition>(
    access: &Access,
    asked_all: bool,
    topics: &mut Vec<Topic>,
    parts: impl Fn(&mut Topic) -> (&TopicName, &mut Vec<Partition>),
    refuse: impl Fn(&mut Partition),
) {
    if !access.is_enforced() {
        return;
    }
    topics.retain_mut(|topic| {
        let (name, partitions) = parts(topic);
        if access.allows_topic(Operation::Describe, name) {
            return true;
        }
        partitions.iter_mut().for_each(&refuse);
        !asked_all
    });
}

/// The topics and partitions a request names, from either version's topic type; None means all.
fn wanted<Topic>(topics: Option<&[Topic]>, topic: impl Fn(&Topic) -> (&TopicName, &Vec<i32>)) -> Wanted {
    topics.map(|topics| {
        topics
            .iter()
            .map(|t| {
                let (name, partitions) = topic(t);
                (name.to_string(), partitions.clone())
            })
            .collect()
    })
}

async fn committed_selection(
    ctx: &Rc<BrokerCtx>,
    group_id: &str,
    wanted: Wanted,
    require_stable: bool,
) -> Result<(Found, Unstable), ResponseError> {
    let found = committed(ctx, group_id, require_stable)
        .await
        .map(|(c, unstable)| (select(&c, wanted), unstable));
    // Which coordinator answered what, for the fault tests' forensics (LAMINAR_LOG).
    tracing::debug!(group_id, answer = ?found.as_ref().map(|(f, u)| (offsets_found(f), u)), "OffsetFetch answered");
    found
}

/// (topic, partition, offset) of every committed offset found.
fn offsets_found(found: &Found) -> Vec<(&str, i32, i64)> {
    found
        .iter()
        .flat_map(|(topic, partitions)| {
            partitions
                .iter()
                .filter_map(move |(index, value)| value.as_ref().map(|v| (topic.as_str(), *index, v.offset)))
        })
        .collect()
}

/// The group's committed offsets and, if `require_stable`, its partitions with pending ones.
async fn committed(
    ctx: &Rc<BrokerCtx>,
    group_id: &str,
    require_stable: bool,
) -> Result<(GroupOffsets, Unstable), ResponseError> {
    let id = group_id.to_string();
    on_coordinator(ctx, group_id, move |there, _| async move {
        let groups = &there.state.groups;
        let unstable = match require_stable {
            true => groups.pending_txn_slots(&id),
            false => Unstable::new(),
        };
        (groups.committed(&id), unstable)
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
                push_partition(&mut found, topic, (*partition, Some(value.clone())));
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
    let topics = answer_topics(
        found,
        |index, (offset, epoch, metadata)| {
            let partition = OffsetFetchResponsePartition::default()
                .with_partition_index(index)
                .with_committed_offset(offset)
                .with_metadata(Some(metadata));
            if version >= 5 {
                partition.with_committed_leader_epoch(epoch)
            } else {
                partition
            }
        },
        |name, partitions| {
            OffsetFetchResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions)
        },
    );
    OffsetFetchResponse::default().with_topics(topics)
}

pub fn group_response(group_id: GroupId, found: Result<Found, ResponseError>) -> OffsetFetchResponseGroup {
    let group = OffsetFetchResponseGroup::default().with_group_id(group_id);
    let found = match found {
        Ok(found) => found,
        Err(error) => return group.with_error_code(error.code()),
    };
    let topics = answer_topics(
        found,
        |index, (offset, epoch, metadata)| {
            OffsetFetchResponsePartitions::default()
                .with_partition_index(index)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(epoch)
                .with_metadata(Some(metadata))
        },
        |name, partitions| {
            OffsetFetchResponseTopics::default()
                .with_name(name)
                .with_partitions(partitions)
        },
    );
    group.with_topics(topics)
}

/// Builds the answer's topics from what was found, for either response layout: `partition` gets
/// a partition's index and (offset, leader epoch, metadata), `topic` a topic's name and partitions.
fn answer_topics<Topic, Partition>(
    found: Found,
    partition: impl Fn(i32, (i64, i32, StrBytes)) -> Partition,
    topic: impl Fn(TopicName, Vec<Partition>) -> Topic,
) -> Vec<Topic> {
    found
        .into_iter()
        .map(|(name, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(index, value)| partition(index, offset_and_metadata(value)))
                .collect();
            topic(TopicName(StrBytes::from_string(name)), partitions)
        })
        .collect()
}
