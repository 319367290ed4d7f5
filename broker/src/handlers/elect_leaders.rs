//! ElectLeaders (API 43, v0–2): a preferred (0) or unclean (1) leader election of the named
//! partitions, or of every partition when the list is null, decided by the controller quorum
//! (`decide::elect_leaders`). Cluster mode only: a single node has no other replica to
//! elect, so it does not advertise the API (a request is refused like any unknown API).
//!
//! Per-partition error codes are Kafka's: ELECTION_NOT_NEEDED (84) when the wanted leader
//! already leads, PREFERRED_LEADER_NOT_AVAILABLE (80), ELIGIBLE_LEADERS_NOT_AVAILABLE (83),
//! UNKNOWN_TOPIC_OR_PARTITION (3). As in Kafka, a null list answers only the partitions whose
//! election was needed. The answer waits, a bounded while, until this broker's view shows the
//! new leaders. Runs on the shard that read the request.

use std::collections::BTreeSet;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_controller::api::{ElectionType, TopicPartition};
use laminar_controller::{Refusal, NO_LEADER};

use crate::broker::BrokerCtx;
use crate::quorum::admin::{error_fields, wait_for_view, with_retries};

pub async fn handle(ctx: &Rc<BrokerCtx>, request: ElectLeadersRequest, version: i16) -> ElectLeadersResponse {
    let shared = &ctx.state.shared;
    let Some(link) = &shared.cluster else {
        return whole_request_error(ResponseError::InvalidRequest);
    };
    // v0 has no election type: it is always a preferred election.
    let election_type = match (version, request.election_type) {
        (0, _) | (_, 0) => ElectionType::Preferred,
        (_, 1) => ElectionType::Unclean,
        _ => return whole_request_error(ResponseError::InvalidRequest),
    };
    let wanted = match wanted_partitions(&request, shared.config.laminar_request_partitions_max) {
        Ok(wanted) => wanted,
        Err(error) => return whole_request_error(error),
    };
    let every_partition = wanted.is_none();
    let results = match with_retries(|| link.handle.elect_leaders(election_type, wanted.clone())).await {
        Ok(results) => results,
        Err(refusal) => return whole_request_error(refusal.response_error()),
    };
    let elected: Vec<&laminar_controller::api::PartitionResult> =
        results.iter().filter(|r| r.result.is_ok()).collect();
    wait_for_view(link, |image| {
        elected.iter().all(|r| {
            image
                .metadata
                .partition_by_name(&r.topic, r.partition)
                .is_some_and(|p| match election_type {
                    ElectionType::Preferred => p.replicas.first() == Some(&p.leader),
                    ElectionType::Unclean => p.leader != NO_LEADER,
                })
        })
    })
    .await;
    answer(results, every_partition)
}

/// The partitions named (each once), or `None` for every partition. More than
/// `laminar.request.partitions.max` is refused: one election is one quorum entry.
fn wanted_partitions(
    request: &ElectLeadersRequest,
    max: i32,
) -> Result<Option<Vec<TopicPartition>>, ResponseError> {
    let Some(topics) = &request.topic_partitions else {
        return Ok(None);
    };
    let count: usize = topics.iter().map(|t| t.partitions.len()).sum();
    if count > usize::try_from(max).unwrap_or(0) {
        return Err(ResponseError::InvalidRequest);
    }
    let mut seen = BTreeSet::new();
    let mut wanted = Vec::with_capacity(count);
    for topic in topics {
        for partition in &topic.partitions {
            if seen.insert((topic.topic.as_str(), *partition)) {
                wanted.push(TopicPartition {
                    topic: topic.topic.as_str().into(),
                    partition: *partition,
                });
            }
        }
    }
    Ok(Some(wanted))
}

/// The controller's results grouped by topic, in the order it gave them.
fn answer(
    results: Vec<laminar_controller::api::PartitionResult>,
    every_partition: bool,
) -> ElectLeadersResponse {
    let mut topics: Vec<ReplicaElectionResult> = Vec::new();
    let shown = results
        .into_iter()
        .filter(|r| !(every_partition && r.result == Err(Refusal::ElectionNotNeeded)));
    for r in shown {
        let (error_code, error_message) = error_fields(&r.result);
        let partition = PartitionResult::default()
            .with_partition_id(r.partition)
            .with_error_code(error_code)
            .with_error_message(error_message);
        match topics.last_mut() {
            Some(last) if last.topic.as_str() == r.topic => last.partition_result.push(partition),
            _ => topics.push(
                ReplicaElectionResult::default()
                    .with_topic(TopicName(StrBytes::from_string(r.topic)))
                    .with_partition_result(vec![partition]),
            ),
        }
    }
    ElectLeadersResponse::default().with_replica_election_results(topics)
}

/// A refusal of the whole request: the top-level error code (v1+; v0 clients see an empty
/// result list).
fn whole_request_error(error: ResponseError) -> ElectLeadersResponse {
    ElectLeadersResponse::default().with_error_code(error.code())
}
