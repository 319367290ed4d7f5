//! CreatePartitions: grows a topic; the new partitions open on first use.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::BrokerCtx;
use crate::handlers::topic_admin::AdminError;

pub async fn handle(ctx: &Rc<BrokerCtx>, request: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let shared = &ctx.state.shared;
    let mut response = CreatePartitionsResponse::default();
    for topic in &request.topics {
        let name = topic.name.as_str();
        let outcome = match shared.metadata.current().get(name) {
            None => Err(AdminError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("no topic '{name}'"),
            )),
            Some(current) if topic.count <= current.partition_count => Err(AdminError::new(
                ResponseError::InvalidPartitions,
                format!(
                    "topic '{name}' has {} partitions; the new count must be larger",
                    current.partition_count
                ),
            )),
            Some(_) if request.validate_only => Ok(()),
            Some(_) => shared
                .metadata
                .add_partitions(name, topic.count)
                .map(|_| ())
                .map_err(AdminError::from),
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
