//! ConsumerGroupHeartbeat (KIP-848): a member of a consumer group joins, says what it owns and
//! subscribes to, learns its epoch and assignment, or leaves. Runs on the group's coordinator
//! shard; the answer waits until the records of what changed are durable.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::BrokerCtx;
use crate::group::consumer::member::{LEAVE_EPOCH, STATIC_LEAVE_EPOCH};
use crate::group::consumer::subscription::BrokerTopics;
use crate::group::consumer::{records, HeartbeatArgs, HeartbeatOutcome};
use crate::group::{on_coordinator_in_turn, store};
use crate::reply::Reply;

/// Most topic names one member may subscribe to by name.
const SUBSCRIBED_NAMES_MAX: usize = 10_000;
/// Longest member id accepted, in bytes (clients send a UUID's 22 or 36 characters).
const MEMBER_ID_BYTES_MAX: usize = 1_024;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    request: ConsumerGroupHeartbeatRequest,
    version: i16,
    client: (String, String),
) -> Reply<ConsumerGroupHeartbeatResponse> {
    let group_id = request.group_id.to_string();
    let args = match heartbeat_args(request, version, client) {
        Ok(args) => args,
        Err((error, why)) => return Reply::Now(refused(error, Some(why))),
    };
    let id = group_id.clone();
    let answer = on_coordinator_in_turn(ctx, &group_id, move |there, partition, mut ordered| async move {
        let coordinator = &there.state.groups;
        let topics = BrokerTopics::of(&there.state.shared);
        let beat = coordinator.consumer_heartbeat(&id, args, &topics, coordinator.now_ms());
        let (outcome, records) = match beat {
            Ok(beat) => beat,
            Err(error) => {
                ordered.finish();
                return Err(error);
            }
        };
        let interval_ms = coordinator.consumer_settings.heartbeat_interval_ms;
        if !records.is_empty() {
            store::append_then_wait(&there, partition, &records, || ordered.finish()).await?;
        }
        Ok((outcome, interval_ms))
    })
    .await;
    answer.map(|answer| match answer.and_then(|a| a) {
        Ok((outcome, interval_ms)) => response(outcome, interval_ms),
        Err(error) => refused(error, None),
    })
}

/// The request as the group sees it; INVALID_REQUEST (with why) for what Kafka refuses.
fn heartbeat_args(
    request: ConsumerGroupHeartbeatRequest,
    version: i16,
    (client_id, client_host): (String, String),
) -> Result<HeartbeatArgs, (ResponseError, &'static str)> {
    let invalid = |why| Err((ResponseError::InvalidRequest, why));
    let epoch = request.member_epoch;
    let mut member_id = request.member_id.to_string();
    if request.group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if request.instance_id.as_ref().is_some_and(|i| i.is_empty()) {
        return invalid("InstanceId can't be empty.");
    }
    if member_id.len() > MEMBER_ID_BYTES_MAX {
        return invalid("MemberId is too long.");
    }
    if epoch < STATIC_LEAVE_EPOCH {
        return invalid("MemberEpoch is invalid.");
    }
    if member_id.is_empty() {
        // v0 members have their id made here; from v1 the client makes it (KIP-1082).
        if version >= 1 || epoch != 0 {
            return invalid("MemberId can't be empty.");
        }
        member_id = random_member_id();
    }
    if epoch == 0 {
        if request.rebalance_timeout_ms == -1 {
            return invalid("RebalanceTimeoutMs must be provided in first request.");
        }
        if request.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) {
            return invalid("TopicPartitions must be empty when (re-)joining.");
        }
        if request.subscribed_topic_names.is_none() && request.subscribed_topic_regex.is_none() {
            return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.");
        }
    }
    if request
        .subscribed_topic_names
        .as_ref()
        .is_some_and(|n| n.len() > SUBSCRIBED_NAMES_MAX)
    {
        return invalid("Too many SubscribedTopicNames.");
    }
    let owned = request.topic_partitions.map(|topics| {
        let mut owned = records::TopicPartitions::new();
        for t in topics {
            owned.entry(t.topic_id).or_default().extend(t.partitions);
        }
        owned.retain(|_, partitions| !partitions.is_empty());
        owned
    });
    Ok(HeartbeatArgs {
        member_id,
        epoch,
        instance_id: request.instance_id.map(|i| i.to_string()),
        rack_id: request.rack_id.map(|r| r.to_string()),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .map(|names| names.into_iter().map(|n| n.to_string()).collect()),
        subscribed_topic_regex: request.subscribed_topic_regex.map(|r| r.to_string()),
        server_assignor: request.server_assignor.map(|a| a.to_string()),
        owned,
        client_id,
        client_host,
    })
}

fn random_member_id() -> String {
    let mut bytes = [0u8; 16];
    // The id only needs to be unique; a clock-seeded one stands in if the OS has no entropy.
    if getrandom::fill(&mut bytes).is_err() {
        bytes = crate::clock::now_ms()
            .to_be_bytes()
            .repeat(2)
            .try_into()
            .unwrap_or_default();
    }
    uuid::Uuid::from_bytes(bytes).to_string()
}

fn response(outcome: HeartbeatOutcome, heartbeat_interval_ms: i32) -> ConsumerGroupHeartbeatResponse {
    let assignment = outcome.assignment.map(|partitions| {
        let topics = partitions.into_iter().map(|(topic_id, set)| {
            TopicPartitions::default()
                .with_topic_id(topic_id)
                .with_partitions(set.into_iter().collect())
        });
        Assignment::default().with_topic_partitions(topics.collect())
    });
    let leaving = outcome.epoch == LEAVE_EPOCH || outcome.epoch == STATIC_LEAVE_EPOCH;
    ConsumerGroupHeartbeatResponse::default()
        .with_member_id(Some(StrBytes::from_string(outcome.member_id)))
        .with_member_epoch(outcome.epoch)
        .with_heartbeat_interval_ms(if leaving { 0 } else { heartbeat_interval_ms })
        .with_assignment(assignment)
}

/// The answer to a refused heartbeat.
pub fn refused(error: ResponseError, why: Option<&str>) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(error.code())
        .with_error_message(why.map(|w| StrBytes::from_string(w.to_string())))
}
