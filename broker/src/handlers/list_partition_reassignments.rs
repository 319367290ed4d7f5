//! ListPartitionReassignments (API 46, v0): the reassignments in progress — all of them (null
//! topics) or those of the named partitions; a partition without one, or unknown, is left out
//! as in Kafka. Answered from this broker's view of the quorum's metadata (applied a moment
//! after the quorum commits). Cluster mode only, like AlterPartitionReassignments.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use laminar_controller::api::TopicPartition;
use laminar_controller::decide::reassignment::{list_reassignments, OngoingReassignment};

use crate::broker::BrokerCtx;
use crate::handlers::broker_ids;

pub fn handle(
    ctx: &Rc<BrokerCtx>,
    request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let shared = &ctx.state.shared;
    let Some(link) = &shared.cluster else {
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code());
    };
    let wanted = request.topics.as_ref().map(|topics| {
        let each = topics.iter().flat_map(|t| {
            t.partition_indexes
                .iter()
                .map(|p| TopicPartition::new(t.name.as_str(), *p))
        });
        each.collect::<Vec<_>>()
    });
    let image = link.image();
    let ongoing = list_reassignments(&image.metadata, wanted.as_deref());
    ListPartitionReassignmentsResponse::default().with_topics(by_topic(ongoing))
}

/// The reassignments grouped by topic (they come sorted by topic name).
fn by_topic(ongoing: Vec<OngoingReassignment>) -> Vec<OngoingTopicReassignment> {
    let mut topics: Vec<OngoingTopicReassignment> = Vec::new();
    for r in ongoing {
        let partition = OngoingPartitionReassignment::default()
            .with_partition_index(r.partition)
            .with_replicas(broker_ids(&r.replicas))
            .with_adding_replicas(broker_ids(&r.adding_replicas))
            .with_removing_replicas(broker_ids(&r.removing_replicas));
        match topics.last_mut() {
            Some(last) if last.name.as_str() == r.topic => last.partitions.push(partition),
            _ => topics.push(
                OngoingTopicReassignment::default()
                    .with_name(TopicName(StrBytes::from_string(r.topic)))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    topics
}
