//! DescribeProducers (API 61, KIP-664): the producers each named partition knows, with the
//! first offset of their open transaction, as this broker leads the partition. What
//! `laminar txn describe-producers` shows, and how a hanging transaction is found.

use std::rc::Rc;

use kafka_protocol::messages::describe_producers_response::{PartitionResponse, ProducerState};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use laminar_engine::partition::ProducerDescription;
use laminar_security::Operation;

use crate::authorization::Access;
use crate::broker::{on_owning_shards, BrokerCtx};
use crate::errors::partition_error_code;
use crate::handlers::partition_answers::{items_by_partition, push_partition};

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let items = items_by_partition(
        &request.topics,
        |t| (t.name.as_str(), t.partition_indexes.as_slice()),
        |p| (*p, ()),
    );
    // Kafka asks Read on the topic: the producers' ids and offsets are the topic's data.
    let items = access.refuse_topics(items, Operation::Read);
    let results = on_owning_shards(ctx, items, |there, tp, allowed| async move {
        allowed?;
        let partition = there.state.partition_to_read(&tp).await?;
        // A partition never written has no producer yet.
        Ok(partition.map(|p| p.producers()).unwrap_or_default())
    })
    .await;
    let mut response = DescribeProducersResponse::default();
    for (tp, result) in results {
        let answer = PartitionResponse::default().with_partition_index(tp.partition);
        let answer = match result {
            Ok(producers) => answer.with_active_producers(producers.iter().map(producer_state).collect()),
            Err(error) => answer.with_error_code(partition_error_code(&error)),
        };
        push_partition(&mut response.topics, &tp.topic, answer);
    }
    response
}

fn producer_state(producer: &ProducerDescription) -> ProducerState {
    ProducerState::default()
        .with_producer_id(ProducerId(producer.producer_id))
        .with_producer_epoch(i32::from(producer.producer_epoch))
        .with_last_sequence(producer.last_sequence)
        .with_last_timestamp(producer.last_timestamp_ms)
        .with_coordinator_epoch(producer.coordinator_epoch)
        .with_current_txn_start_offset(producer.current_txn_start_offset)
}
