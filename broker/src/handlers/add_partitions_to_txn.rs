//! AddPartitionsToTxn: a transactional producer names the partitions it is about to write in
//! its transaction, before it writes them (v0-3). Refused partitions get their error, the
//! others OPERATION_NOT_ATTEMPTED, and none is added (as in Kafka). From v4 only brokers send
//! it, for several transactions at once, to verify (`verify_only`) that a producer added a
//! partition before they take its first transactional batch there (KIP-890 part 1).

use std::collections::BTreeSet;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use laminar_security::Operation;

use crate::authorization::Access;
use crate::broker::{BrokerCtx, TopicPartition};
use crate::transactions::records::TxnPartitions;
use crate::transactions::requests;
use crate::transactions::verification;

/// The first version that batches transactions and may only verify (brokers only).
const BATCHED_VERSION: i16 = 4;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    if version >= BATCHED_VERSION {
        return handle_batched(ctx, request).await;
    }
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

/// v4+: each transaction verified (`verify_only`) or added, one answer per partition.
async fn handle_batched(
    ctx: &Rc<BrokerCtx>,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let mut results = Vec::with_capacity(request.transactions.len());
    for transaction in request.transactions {
        let id = transaction.transactional_id.0.to_string();
        let producer = (transaction.producer_id.0, transaction.producer_epoch);
        let mut topic_results = Vec::with_capacity(transaction.topics.len());
        let known = all_known(ctx, &transaction.topics);
        let added = match (transaction.verify_only, known) {
            (true, _) => None,
            (false, false) => Some(Err(ResponseError::UnknownTopicOrPartition)),
            (false, true) => {
                let partitions: TxnPartitions = transaction
                    .topics
                    .iter()
                    .map(|t| {
                        (
                            t.name.0.to_string(),
                            t.partitions.iter().copied().collect::<BTreeSet<_>>(),
                        )
                    })
                    .collect();
                Some(requests::add_partitions(ctx, id.clone(), producer, partitions).await)
            }
        };
        for topic in &transaction.topics {
            let mut partitions = Vec::with_capacity(topic.partitions.len());
            for &partition in &topic.partitions {
                let outcome = match &added {
                    Some(outcome) => *outcome,
                    None => {
                        let tp = TopicPartition {
                            topic: topic.name.0.as_str().into(),
                            partition,
                        };
                        verification::verify_here(ctx, &id, producer, &tp).await
                    }
                };
                partitions.push(
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(partition)
                        .with_partition_error_code(outcome.err().map_or(0, |e| e.code())),
                );
            }
            topic_results.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_results_by_partition(partitions),
            );
        }
        results.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(transaction.transactional_id)
                .with_topic_results(topic_results),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

/// Whether every partition `topics` name exists (they become the partitions markers go to).
fn all_known(ctx: &BrokerCtx, topics: &[AddPartitionsToTxnTopic]) -> bool {
    let table = ctx.state.shared.metadata.current();
    topics.iter().all(|topic| {
        let count = table.get(topic.name.0.as_str()).map_or(0, |t| t.partition_count);
        topic.partitions.iter().all(|p| (0..count).contains(p))
    })
}
