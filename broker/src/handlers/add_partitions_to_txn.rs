//! AddPartitionsToTxn (v0-3): a transactional producer names the partitions it is about to
//! write in its transaction, before it writes them. Refused partitions get their error, the
//! others OPERATION_NOT_ATTEMPTED, and none is added (as in Kafka). Versions 4+ (brokers
//! verifying a transaction, KIP-890) are not served.

use std::collections::BTreeSet;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use laminar_security::Operation;

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::transactions::records::TxnPartitions;
use crate::transactions::requests;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let topics = &request.v3_and_below_topics;
    let mut refusals: Vec<(usize, ResponseError)> = Vec::new();
    let table = ctx.state.shared.metadata.current();
    for (at, topic) in topics.iter().enumerate() {
        let name = topic.name.0.as_str();
        let count = table.get(name).map(|t| t.partition_count);
        if !access.allows_topic(Operation::Write, name) {
            refusals.push((at, ResponseError::TopicAuthorizationFailed));
        } else if count.is_none_or(|n| topic.partitions.iter().any(|p| !(0..n).contains(p))) {
            refusals.push((at, ResponseError::UnknownTopicOrPartition));
        }
    }
    let outcome = if refusals.is_empty() {
        let partitions: TxnPartitions = topics
            .iter()
            .map(|t| {
                (
                    t.name.0.to_string(),
                    t.partitions.iter().copied().collect::<BTreeSet<_>>(),
                )
            })
            .collect();
        let id = request.v3_and_below_transactional_id.0.to_string();
        let producer = (
            request.v3_and_below_producer_id.0,
            request.v3_and_below_producer_epoch,
        );
        requests::add_partitions(ctx, id, producer, partitions).await
    } else {
        Ok(())
    };
    let code_of = |at: usize| match (&outcome, refusals.iter().find(|(i, _)| *i == at)) {
        (_, Some((_, error))) => error.code(),
        (_, None) if !refusals.is_empty() => ResponseError::OperationNotAttempted.code(),
        (Err(error), None) => error.code(),
        (Ok(()), None) => 0,
    };
    let results = topics
        .iter()
        .enumerate()
        .map(|(at, topic)| {
            let partitions = topic.partitions.iter().map(|p| {
                AddPartitionsToTxnPartitionResult::default()
                    .with_partition_index(*p)
                    .with_partition_error_code(code_of(at))
            });
            AddPartitionsToTxnTopicResult::default()
                .with_name(topic.name.clone())
                .with_results_by_partition(partitions.collect())
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
}
