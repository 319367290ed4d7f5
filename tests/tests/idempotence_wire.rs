//! The idempotent producer against the real binary.
//!
//! Proves: InitProducerId hands out ids that are never reused across restarts (flexible and
//! non-flexible versions) and keeps a transactional id's producer id, bumping its epoch; a
//! resent, already acknowledged idempotent batch is answered with its original offset and not
//! stored twice, also after
//! kill -9 and after a clean restart; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER and an old
//! epoch INVALID_PRODUCER_EPOCH; librdkafka with `enable.idempotence=true` and 5 requests in
//! flight writes thousands of records exactly once, in order, across a kill -9 of the broker.

use anyhow::{bail, Result};
use bytes::Bytes;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{InitProducerIdRequest, MetadataRequest, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Record;
use laminar_tests::rdkafka_client::{create_topic, produce_all, producer, sample_records, unique_topic};
use laminar_tests::transactions::{self, producer_batch};
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::Broker;

const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;

/// A batch of `count` records `v<seq>` from producer `id`/`epoch` starting at sequence `seq`.
fn idempotent_batch(id: i64, epoch: i16, seq: i32, count: i32) -> Result<Bytes> {
    producer_batch((id, epoch), seq, count, false)
}

fn init_producer_id(
    conn: &mut WireConnection,
    version: i16,
    transactional_id: Option<&str>,
) -> Result<(i16, i64, i16)> {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.into()))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    let response = conn.request(&request, version)?;
    Ok((
        response.error_code,
        response.producer_id.0,
        response.producer_epoch,
    ))
}

fn create_by_metadata(conn: &mut WireConnection, topic: &str) -> Result<()> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(topic.to_string().into())))
        ]))
        .with_allow_auto_topic_creation(true);
    conn.request(&request, 8)?;
    Ok(())
}

/// Produces `batch` with acks=all; returns (error code, base offset).
fn send(conn: &mut WireConnection, topic: &str, batch: &Bytes) -> Result<(i16, i64)> {
    let answer = wire::produce(conn, topic, 0, batch.clone(), -1)?;
    Ok((answer.error_code, answer.base_offset))
}

/// Every record stored in partition 0, in offset order (fetching up to the high watermark).
fn stored_records(conn: &mut WireConnection, topic: &str) -> Result<Vec<Record>> {
    let mut stored = Vec::new();
    loop {
        let next = stored.last().map_or(0, |r: &Record| r.offset + 1);
        let data = wire::fetch(conn, topic, 0, next)?;
        let records = wire::decode_records(&data)?;
        if records.is_empty() || records.last().map(|r| r.offset + 1) >= Some(data.high_watermark) {
            stored.extend(records);
            return Ok(stored);
        }
        stored.extend(records);
    }
}

fn stored_values(conn: &mut WireConnection, topic: &str) -> Result<Vec<String>> {
    let text = |r: &Record| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
    Ok(stored_records(conn, topic)?.iter().map(text).collect())
}

fn expect(actual: (i16, i64), expected: (i16, i64), what: &str) -> Result<()> {
    if actual != expected {
        bail!("{what}: answered (error, base offset) {actual:?}, expected {expected:?}");
    }
    Ok(())
}

#[test]
fn init_producer_id_hands_out_fresh_ids_and_bumps_a_transactional_ids_epoch() -> Result<()> {
    let broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let (error, id, epoch) = init_producer_id(&mut conn, 4, None)?;
    assert_eq!((error, epoch), (0, 0));
    let (error, second_id, _) = init_producer_id(&mut conn, 1, None)?;
    assert_eq!(error, 0);
    assert_ne!(second_id, id, "every InitProducerId gets a fresh id");
    // A transactional id keeps its producer id; each InitProducerId bumps its epoch, which
    // fences the previous producer of that id.
    let (first_id, first_epoch) = transactions::init_producer(&mut conn, "txn-1", 60_000)?;
    let (again_id, again_epoch) = transactions::init_producer(&mut conn, "txn-1", 60_000)?;
    assert_eq!((again_id, again_epoch), (first_id, first_epoch + 1));
    assert!(
        ![id, second_id].contains(&first_id),
        "ids are never handed out twice"
    );
    Ok(())
}

/// `first` (3 records) and `second` (2) get offsets 0 and 3, and again when resent; a sequence
/// gap of producer `id` is refused; each record is stored once.
fn check_resent_batches_get_their_offsets(
    conn: &mut WireConnection,
    topic: &str,
    id: i64,
    (first, second): (&Bytes, &Bytes),
) -> Result<()> {
    expect(send(conn, topic, first)?, (0, 0), "first batch")?;
    expect(send(conn, topic, second)?, (0, 3), "second batch")?;
    expect(send(conn, topic, first)?, (0, 0), "retry of the first batch")?;
    expect(send(conn, topic, second)?, (0, 3), "retry of the second batch")?;
    let gap = send(conn, topic, &idempotent_batch(id, 0, 9, 1)?)?;
    assert_eq!(gap.0, OUT_OF_ORDER_SEQUENCE_NUMBER, "a sequence gap");
    let expected: Vec<String> = (0..5).map(|i| format!("v{i}")).collect();
    assert_eq!(stored_values(conn, topic)?, expected, "each record once");
    Ok(())
}

/// Producer `id` writes at epoch 0 (offset 5), then at epoch 1 (offset 6); its epoch 0 is
/// fenced from then on.
fn check_a_new_epoch_fences_the_old(conn: &mut WireConnection, topic: &str, id: i64) -> Result<()> {
    let epoch_0 = idempotent_batch(id, 0, 0, 1)?;
    expect(send(conn, topic, &epoch_0)?, (0, 5), "epoch 0")?;
    let epoch_1 = idempotent_batch(id, 1, 0, 1)?;
    expect(send(conn, topic, &epoch_1)?, (0, 6), "epoch 1")?;
    let fenced = send(conn, topic, &idempotent_batch(id, 0, 1, 1)?)?;
    assert_eq!(fenced.0, INVALID_PRODUCER_EPOCH);
    Ok(())
}

#[test]
fn resent_batches_get_their_original_offsets_across_restarts() -> Result<()> {
    let mut broker = Broker::start_default()?;
    let topic = unique_topic("idem-wire");
    let mut conn = WireConnection::connect(broker.addr())?;
    create_by_metadata(&mut conn, &topic)?;
    let (_, id, _) = init_producer_id(&mut conn, 4, None)?;
    let (_, second_id, _) = init_producer_id(&mut conn, 1, None)?;
    let first = idempotent_batch(id, 0, 0, 3)?;
    let second = idempotent_batch(id, 0, 3, 2)?;
    check_resent_batches_get_their_offsets(&mut conn, &topic, id, (&first, &second))?;
    // Another producer moves to epoch 1.
    check_a_new_epoch_fences_the_old(&mut conn, &topic, second_id)?;

    drop(conn);
    broker.kill9()?;
    broker.restart()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    expect(send(&mut conn, &topic, &second)?, (0, 3), "retry after kill -9")?;
    expect(
        send(&mut conn, &topic, &first)?,
        (0, 0),
        "older retry after kill -9",
    )?;
    let fenced = send(&mut conn, &topic, &idempotent_batch(second_id, 0, 1, 1)?)?;
    assert_eq!(fenced.0, INVALID_PRODUCER_EPOCH, "fencing survives kill -9");
    let third = idempotent_batch(id, 0, 5, 1)?;
    expect(send(&mut conn, &topic, &third)?, (0, 7), "the sequence continues")?;
    let (_, after_crash_id, _) = init_producer_id(&mut conn, 4, None)?;
    assert!(after_crash_id > second_id, "ids are never reused after kill -9");

    drop(conn);
    let status = broker.terminate()?;
    assert!(status.success(), "clean shutdown: {status}");
    broker.restart()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    expect(
        send(&mut conn, &topic, &third)?,
        (0, 7),
        "retry after a clean restart",
    )?;
    expect(
        send(&mut conn, &topic, &second)?,
        (0, 3),
        "older retry after a clean restart",
    )?;
    let (_, after_restart_id, _) = init_producer_id(&mut conn, 4, None)?;
    assert!(
        after_restart_id > after_crash_id,
        "ids are never reused after a restart"
    );
    let mut expected: Vec<String> = (0..5).map(|i| format!("v{i}")).collect();
    expected.extend(["v0", "v0", "v5"].map(String::from));
    assert_eq!(
        stored_values(&mut conn, &topic)?,
        expected,
        "nothing stored twice"
    );
    Ok(())
}

#[tokio::test]
async fn librdkafka_idempotent_producer_writes_exactly_once_across_kill9() -> Result<()> {
    let mut broker = Broker::start_default()?;
    let topic = unique_topic("idem-rdkafka");
    create_topic(&broker.bootstrap(), &topic, 1, &[]).await?;
    let settings = [
        ("enable.idempotence", "true"),
        ("max.in.flight.requests.per.connection", "5"),
        ("batch.num.messages", "40"),
        ("linger.ms", "1"),
        ("message.timeout.ms", "60000"),
    ];
    let idempotent = producer(&broker.bootstrap(), &settings)?;
    let records = sample_records(6000);
    let acked = produce_all(&idempotent, &topic, 0, &records[..3000]).await?;
    assert_eq!(acked, (0..3000).collect::<Vec<i64>>());
    broker.kill9()?;
    broker.restart()?;
    let acked = produce_all(&idempotent, &topic, 0, &records[3000..]).await?;
    assert_eq!(
        acked,
        (3000..6000).collect::<Vec<i64>>(),
        "the same producer continues"
    );
    // Read back over the raw protocol: this librdkafka refuses assign() without a group.id.
    let mut conn = WireConnection::connect(broker.addr())?;
    let stored = stored_records(&mut conn, &topic)?;
    let offsets: Vec<i64> = stored.iter().map(|r| r.offset).collect();
    assert_eq!(
        offsets,
        (0..6000).collect::<Vec<i64>>(),
        "each record once, no duplicates"
    );
    assert!(
        stored.iter().all(|r| r.producer_id >= 0),
        "librdkafka produced idempotently"
    );
    for (i, (sent, got)) in records.iter().zip(&stored).enumerate() {
        assert_eq!(sent.value.as_deref(), got.value.as_deref(), "record {i} in order");
    }
    Ok(())
}
