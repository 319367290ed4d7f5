//! CreatePartitions: grows a topic; the new partitions open on first use.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::{BrokerCtx, BrokerShared};
use crate::handlers::topic_admin::{AdminError, PartitionBudget};

pub async fn handle(ctx: &Rc<BrokerCtx>, request: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let shared = &ctx.state.shared;
    let mut response = CreatePartitionsResponse::default();
    let mut budget = PartitionBudget::new(shared.config.laminar_request_partitions_max);
    for topic in &request.topics {
        let outcome = grow(shared, topic, request.validate_only, &mut budget);
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
