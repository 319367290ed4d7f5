//! CreatePartitions: grows a topic; the new partitions open on first use. In cluster mode the
//! controller quorum grows it (and places the new replicas).

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::authorization::Access;
use crate::broker::{BrokerCtx, BrokerShared};
use crate::handlers::topic_admin::{AdminError, PartitionBudget};
use crate::quorum::admin::{wait_for_view, with_retries};
use crate::quorum::ClusterLink;
use laminar_security::Operation;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let shared = &ctx.state.shared;
    let mut response = CreatePartitionsResponse::default();
    let mut budget = PartitionBudget::new(shared.config.laminar_request_partitions_max);
    for topic in &request.topics {
        let outcome = match &shared.cluster {
            // Kafka's check: Alter on the topic.
            _ if !access.allows_topic(Operation::Alter, &topic.name) => Err(AdminError::new(
                ResponseError::TopicAuthorizationFailed,
                "Alter on the topic is needed",
            )),
            Some(link) if !request.validate_only => cluster_grow(shared, link, topic, &mut budget).await,
            _ => grow(shared, topic, request.validate_only, &mut budget),
        };
        let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
        response.results.push(match outcome {
            Ok(()) => result,
            Err(e) => result
                .with_error_code(e.code)
                .with_error_message(Some(StrBytes::from_string(e.message))),
        });
    }
    response
}

/// Grows one topic to the requested count (or only checks that it could, for `validate_only`).
fn grow(
    shared: &BrokerShared,
    topic: &CreatePartitionsTopic,
    validate_only: bool,
    budget: &mut PartitionBudget,
) -> Result<(), AdminError> {
    let name = topic.name.as_str();
    let current = shared.metadata.current().get(name).map(|t| t.partition_count);
    let Some(current) = current else {
        return Err(AdminError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("no topic '{name}'"),
        ));
    };
    if topic.count <= current {
        return Err(AdminError::new(
            ResponseError::InvalidPartitions,
            format!("topic '{name}' has {current} partitions; the new count must be larger"),
        ));
    }
    let added = i64::from(topic.count) - i64::from(current);
    budget.check(added)?;
    if validate_only {
        shared.metadata.check_room(added)?;
    } else {
        shared.metadata.add_partitions(name, topic.count)?;
        tracing::info!(topic = name, partitions = topic.count, "added partitions");
    }
    budget.spend(added);
    Ok(())
}

/// Cluster mode: checks like [`grow`] against this broker's view, then asks the quorum.
async fn cluster_grow(
    shared: &BrokerShared,
    link: &ClusterLink,
    topic: &CreatePartitionsTopic,
    budget: &mut PartitionBudget,
) -> Result<(), AdminError> {
    let name = topic.name.as_str();
    let current = shared
        .metadata
        .current()
        .get(name)
        .map_or(0, |t| t.partition_count);
    budget.check(i64::from(topic.count) - i64::from(current))?;
    let grown = with_retries(|| {
        link.handle
            .create_partitions(vec![(name.to_string(), topic.count)])
    })
    .await?;
    if let Some(Err(refusal)) = grown.into_iter().next().map(|r| r.result) {
        return Err(refusal.into());
    }
    let count = usize::try_from(topic.count).unwrap_or(usize::MAX);
    wait_for_view(link, |image| {
        image
            .metadata
            .topic_by_name(name)
            .is_some_and(|t| t.partitions.len() >= count)
    })
    .await;
    tracing::info!(topic = name, partitions = topic.count, "added partitions");
    budget.spend(i64::from(topic.count) - i64::from(current));
    Ok(())
}
