//! AlterPartitionReassignments (API 45, v0–1): moves partitions to new replicas, or cancels a
//! move (null replicas), decided by the controller quorum (`laminar_controller::decide::reassignment`,
//! KRaft's rules). Cluster mode only, like ElectLeaders: a single node has nowhere to move a
//! partition, so it does not advertise the API.
//!
//! Per-partition error codes are Kafka's: UNKNOWN_TOPIC_OR_PARTITION (3),
//! INVALID_REPLICA_ASSIGNMENT (39: empty, a broker twice, an unregistered broker),
//! INVALID_REPLICATION_FACTOR (38: v1's `allow_replication_factor_change` false and the count
//! changes), NO_REASSIGNMENT_IN_PROGRESS (85: a cancel with none), INVALID_REQUEST (42: a
//! partition named twice). The answer comes once the quorum applied the change and, a bounded
//! while, this broker's view shows it. Runs on the shard that read the request.

use laminar_model::NodeId;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use laminar_controller::api::{PartitionReassignment, ReassignmentResult, ReplicationFactorChange};
use laminar_controller::{MetadataImage, Refusal};

use crate::broker::BrokerCtx;
use crate::quorum::admin::{error_fields, wait_for_view, with_retries};

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let shared = &ctx.state.shared;
    // v0 has no flag and Kafka's default is true: a v0 request may change the count.
    let allow_rf_change = request.allow_replication_factor_change;
    let Some(link) = &shared.cluster else {
        return whole_request_error(ResponseError::InvalidRequest, None, allow_rf_change);
    };
    let wanted = match wanted_partitions(&request, shared.config.laminar_request_partitions_max) {
        Ok(wanted) => wanted,
        Err(error) => return whole_request_error(error, None, allow_rf_change),
    };
    let rf_change = if allow_rf_change {
        ReplicationFactorChange::Allowed
    } else {
        ReplicationFactorChange::Refused
    };
    let call = || {
        link.handle
            .alter_partition_reassignments(wanted.clone(), rf_change)
    };
    let results = match with_retries(call).await {
        Ok(results) => results,
        Err(refusal) => {
            return whole_request_error(refusal.response_error(), Some(&refusal), allow_rf_change)
        }
    };
    let done: Vec<(&ReassignmentResult, &PartitionReassignment)> = results
        .iter()
        .zip(&wanted)
        .filter(|(r, _)| r.result.is_ok())
        .collect();
    wait_for_view(link, |image| done.iter().all(|(_, w)| shows(image, w))).await;
    answer(results, allow_rf_change)
}

/// Whether `image` shows the reassignment (or cancel) `w` as the quorum applied it.
fn shows(image: &MetadataImage, w: &PartitionReassignment) -> bool {
    let Some(p) = image.metadata.partition_by_name(&w.topic, w.partition) else {
        return true;
    };
    match &w.replicas {
        None => !p.is_reassigning(),
        Some(target) => p.target_replicas() == *target,
    }
}

/// Every partition named, in request order. More than `laminar.request.partitions.max` is
/// refused: one request is one quorum entry.
fn wanted_partitions(
    request: &AlterPartitionReassignmentsRequest,
    max: i32,
) -> Result<Vec<PartitionReassignment>, ResponseError> {
    let count: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
    if count > usize::try_from(max).unwrap_or(0) {
        return Err(ResponseError::InvalidRequest);
    }
    let mut wanted = Vec::with_capacity(count);
    for topic in &request.topics {
        for partition in &topic.partitions {
            let replicas = partition
                .replicas
                .as_ref()
                .map(|list| list.iter().map(|b| NodeId::new(b.0)).collect());
            wanted.push(PartitionReassignment {
                topic: topic.name.to_string(),
                partition: partition.partition_index,
                replicas,
            });
        }
    }
    Ok(wanted)
}

/// The controller's results grouped by topic, in the order it gave them.
fn answer(results: Vec<ReassignmentResult>, allow_rf_change: bool) -> AlterPartitionReassignmentsResponse {
    let mut topics: Vec<ReassignableTopicResponse> = Vec::new();
    for r in results {
        let (error_code, error_message) = error_fields(&r.result);
        let partition = ReassignablePartitionResponse::default()
            .with_partition_index(r.partition)
            .with_error_code(error_code)
            .with_error_message(error_message);
        match topics.last_mut() {
            Some(last) if last.name.as_str() == r.topic => last.partitions.push(partition),
            _ => topics.push(
                ReassignableTopicResponse::default()
                    .with_name(TopicName(StrBytes::from_string(r.topic)))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(allow_rf_change)
        .with_responses(topics)
}

/// A refusal of the whole request; the message is the quorum's reason when it refused, else
/// the error's name.
fn whole_request_error(
    error: ResponseError,
    refusal: Option<&Refusal>,
    allow_rf_change: bool,
) -> AlterPartitionReassignmentsResponse {
    let message = refusal.map_or_else(|| error.to_string(), Refusal::to_string);
    AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(allow_rf_change)
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}
