//! KIP-890 part 1 against a real single-node broker, in raw Kafka frames: a partition takes the
//! first transactional batch of a producer's transaction only once the transaction
//! coordinator says the producer added the partition (AddPartitionsToTxn); a batch that comes
//! after the transaction ended (a delayed retry) is refused, so no transaction the coordinator
//! does not know can hold the last stable offset back. AddPartitionsToTxn v4 (`verify_only`)
//! answers the same question for another broker.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use laminar_tests::rdkafka_client::unique_topic;
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::Broker;

const INVALID_TXN_STATE: i16 = 48;
const INVALID_RECORD: i16 = 87;
const RETRIABLE: [i16; 3] = [14, 16, 51]; // load in progress, not coordinator, concurrent
const SETTLE_WITHIN: Duration = Duration::from_secs(15);

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// One transactional batch of one record of producer `(id, epoch)` at `sequence`.
fn transactional_batch((id, epoch): (i64, i16), sequence: i32) -> Result<Bytes> {
    let record = Record {
        transactional: true,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: id,
        producer_epoch: epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(Bytes::from(format!("v{sequence}"))),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &[record], &options)?;
    Ok(buf.freeze())
}

/// Asks `ask` again while it answers a retriable code; its last code otherwise.
fn settled(mut ask: impl FnMut() -> Result<i16>) -> Result<i16> {
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        let code = ask()?;
        if !RETRIABLE.contains(&code) || Instant::now() > deadline {
            return Ok(code);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn produce_code(
    conn: &mut WireConnection,
    topic: &str,
    batch: Bytes,
    transactional_id: Option<&str>,
) -> Result<i16> {
    let request = wire::produce_request((topic, 0), batch, -1)
        .with_transactional_id(transactional_id.map(|id| TransactionalId(str_bytes(id))));
    let response = conn.request(&request, 8)?;
    Ok(response.responses[0].partition_responses[0].error_code)
}

fn init_producer(conn: &mut WireConnection, transactional_id: &str) -> Result<(i64, i16)> {
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(str_bytes(transactional_id))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let mut producer = (-1, -1);
    let code = settled(|| {
        let answer = conn.request(&init, 4)?;
        producer = (answer.producer_id.0, answer.producer_epoch);
        Ok(answer.error_code)
    })?;
    ensure!(code == 0, "InitProducerId answered {code}");
    Ok(producer)
}

fn add_partition(
    conn: &mut WireConnection,
    transactional_id: &str,
    (id, epoch): (i64, i16),
    topic: &str,
) -> Result<i16> {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(str_bytes(transactional_id)))
        .with_v3_and_below_producer_id(ProducerId(id))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(str_bytes(topic)))
            .with_partitions(vec![0])]);
    settled(|| {
        let answer = conn.request(&request, 3)?;
        Ok(answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)
    })
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
    let producer = init_producer(&mut conn, &id)?;

    let first = transactional_batch(producer, 0)?;
    let without_id = produce_code(&mut conn, &topic, first.clone(), None)?;
    ensure!(without_id == INVALID_RECORD, "no transactional id: {without_id}");
    let not_added = produce_code(&mut conn, &topic, first.clone(), Some(&id))?;
    ensure!(not_added == INVALID_TXN_STATE, "partition not added: {not_added}");
    ensure!(verify_only(&mut conn, &id, producer, &topic)? == INVALID_TXN_STATE);

    ensure!(add_partition(&mut conn, &id, producer, &topic)? == 0);
    ensure!(verify_only(&mut conn, &id, producer, &topic)? == 0);
    ensure!(produce_code(&mut conn, &topic, first, Some(&id))? == 0);
    ensure!(produce_code(&mut conn, &topic, transactional_batch(producer, 1)?, Some(&id))? == 0);
    let end = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(str_bytes(&id)))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(true);
    ensure!(settled(|| Ok(conn.request(&end, 3)?.error_code))? == 0);

    // A batch of the ended transaction arriving late opens nothing.
    let late = produce_code(&mut conn, &topic, transactional_batch(producer, 2)?, Some(&id))?;
    ensure!(late == INVALID_TXN_STATE, "late batch: {late}");
    ensure!(verify_only(&mut conn, &id, producer, &topic)? == INVALID_TXN_STATE);
    Ok(())
}
