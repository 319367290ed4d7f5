//! KIP-890 part 1 against a real single-node broker, in raw Kafka frames: a partition takes the
//! first transactional batch of a producer's transaction only once the transaction
//! coordinator says the producer added the partition (AddPartitionsToTxn); a batch that comes
//! after the transaction ended (a delayed retry) is refused, so no transaction the coordinator
//! does not know can hold the last stable offset back. AddPartitionsToTxn v4 (`verify_only`)
//! answers the same question for another broker.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, ProducerId, TopicName, TransactionalId};
use laminar_tests::rdkafka_client::unique_topic;
use laminar_tests::transactions::{
    self, add_partition, end, init_producer, producer_batch, str_bytes, SETTLE_WITHIN,
};
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::Broker;

const INVALID_TXN_STATE: i16 = 48;
const INVALID_RECORD: i16 = 87;
const NOT_ENOUGH_REPLICAS: i16 = 19;

/// One transactional record of producer `(id, epoch)` at `sequence`.
fn transactional_batch(producer: (i64, i16), sequence: i32) -> Result<Bytes> {
    producer_batch(producer, sequence, 1, true)
}

fn produce_code(
    conn: &mut WireConnection,
    topic: &str,
    batch: Bytes,
    transactional_id: Option<&str>,
) -> Result<i16> {
    Ok(transactions::produce(conn, transactional_id, (topic, 0), batch)?.error_code)
}

/// AddPartitionsToTxn v4 with `verify_only`: the code for `topic`'s partition 0.
fn verify_only(
    conn: &mut WireConnection,
    transactional_id: &str,
    (id, epoch): (i64, i16),
    topic: &str,
) -> Result<i16> {
    let transaction = AddPartitionsToTxnTransaction::default()
        .with_transactional_id(TransactionalId(str_bytes(transactional_id)))
        .with_producer_id(ProducerId(id))
        .with_producer_epoch(epoch)
        .with_verify_only(true)
        .with_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(str_bytes(topic)))
            .with_partitions(vec![0])]);
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![transaction]);
    let answer = conn.request(&request, 4)?;
    Ok(answer.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code)
}

#[test]
fn a_transactional_batch_is_taken_only_for_a_partition_its_producer_added() -> Result<()> {
    let broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let topic = unique_topic("txn-verify");
    wire::create_topic(&mut conn, &topic, 1)?;
    let id = unique_topic("txn-verify-id");
    let producer = init_producer(&mut conn, &id, 60_000)?;

    let first = transactional_batch(producer, 0)?;
    let without_id = produce_code(&mut conn, &topic, first.clone(), None)?;
    ensure!(without_id == INVALID_RECORD, "no transactional id: {without_id}");
    let not_added = produce_code(&mut conn, &topic, first.clone(), Some(&id))?;
    ensure!(not_added == INVALID_TXN_STATE, "partition not added: {not_added}");
    ensure!(verify_only(&mut conn, &id, producer, &topic)? == INVALID_TXN_STATE);

    ensure!(add_partition(&mut conn, &id, producer, (&topic, 0))? == 0);
    ensure!(verify_only(&mut conn, &id, producer, &topic)? == 0);
    ensure!(produce_code(&mut conn, &topic, first, Some(&id))? == 0);
    ensure!(produce_code(&mut conn, &topic, transactional_batch(producer, 1)?, Some(&id))? == 0);
    ensure!(end(&mut conn, &id, producer, true)? == 0);

    // A batch of the ended transaction arriving late opens nothing: retriable while the
    // coordinator still writes the markers (NOT_ENOUGH_REPLICAS, as Kafka), refused after.
    let late_batch = transactional_batch(producer, 2)?;
    let deadline = Instant::now() + SETTLE_WITHIN;
    let late = loop {
        let code = produce_code(&mut conn, &topic, late_batch.clone(), Some(&id))?;
        if code != NOT_ENOUGH_REPLICAS || Instant::now() > deadline {
            break code;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    ensure!(late == INVALID_TXN_STATE, "late batch: {late}");
    ensure!(verify_only(&mut conn, &id, producer, &topic)? == INVALID_TXN_STATE);
    Ok(())
}
