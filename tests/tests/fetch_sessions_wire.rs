//! Incremental fetch sessions (KIP-227) against a real broker, at the byte level: a full fetch
//! at epoch 0 opens a session; fetches in it name only what changed and get back only the
//! partitions with new records or a new high watermark; a wrong epoch or an unknown session is
//! refused with Kafka's codes; the final epoch closes it.

use anyhow::Result;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::{Broker, BrokerOptions};

const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
const PARTITIONS: i32 = 6;

/// A consumer's fetch (v11) in `session`, naming `partitions` at their offsets and forgetting
/// `forgotten`, without waiting.
fn fetch_in(
    conn: &mut WireConnection,
    topic: &str,
    session: (i32, i32),
    partitions: &[(i32, i64)],
    forgotten: &[i32],
) -> Result<FetchResponse> {
    let name = TopicName(StrBytes::from_string(topic.to_string()));
    let named = partitions.iter().map(|&(partition, offset)| {
        FetchPartition::default()
            .with_partition(partition)
            .with_fetch_offset(offset)
            .with_partition_max_bytes(1 << 20)
    });
    let topics = match partitions.is_empty() {
        true => Vec::new(),
        false => vec![FetchTopic::default()
            .with_topic(name.clone())
            .with_partitions(named.collect())],
    };
    let forgotten_topics = match forgotten.is_empty() {
        true => Vec::new(),
        false => vec![ForgottenTopic::default()
            .with_topic(name)
            .with_partitions(forgotten.to_vec())],
    };
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(8 << 20)
        .with_session_id(session.0)
        .with_session_epoch(session.1)
        .with_topics(topics)
        .with_forgotten_topics_data(forgotten_topics);
    conn.request(&request, 11)
}

/// The partitions an answer carries, with each one's high watermark and record count.
fn carried(response: &FetchResponse) -> Result<Vec<(i32, i64, usize)>> {
    let mut out = Vec::new();
    for topic in &response.responses {
        for p in &topic.partitions {
            out.push((
                p.partition_index,
                p.high_watermark,
                wire::decode_records(p)?.len(),
            ));
        }
    }
    Ok(out)
}

fn produce_one(conn: &mut WireConnection, topic: &str, partition: i32) -> Result<()> {
    let answer = wire::produce(conn, topic, partition, wire::record_batch(&[b"x"], 1_000)?, -1)?;
    anyhow::ensure!(answer.error_code == 0, "produce: {}", answer.error_code);
    Ok(())
}

#[test]
fn a_session_answers_only_the_partitions_that_changed() -> Result<()> {
    let broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let topic = laminar_tests::rdkafka_client::unique_topic("fetch-sessions");
    wire::create_topic(&mut conn, &topic, PARTITIONS)?;
    for partition in 0..PARTITIONS {
        produce_one(&mut conn, &topic, partition)?;
    }
    let all: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, 0)).collect();

    let full = fetch_in(&mut conn, &topic, (0, 0), &all, &[])?;
    assert_eq!(full.error_code, 0);
    let id = full.session_id;
    assert!(id > 0, "a full fetch at epoch 0 opens a session");
    let expected: Vec<(i32, i64, usize)> = (0..PARTITIONS).map(|p| (p, 1, 1)).collect();
    assert_eq!(carried(&full)?, expected, "a full fetch answers every partition");

    // The client moves every position to 1 and names them; nothing new is there.
    let moved: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, 1)).collect();
    let quiet = fetch_in(&mut conn, &topic, (id, 1), &moved, &[])?;
    assert_eq!((quiet.error_code, quiet.session_id), (0, id));
    assert_eq!(carried(&quiet)?, Vec::new(), "nothing changed, nothing answered");

    produce_one(&mut conn, &topic, 4)?;
    let one = fetch_in(&mut conn, &topic, (id, 2), &[], &[])?;
    assert_eq!(
        carried(&one)?,
        vec![(4, 2, 1)],
        "only the partition written comes back"
    );

    // Partition 4 named at its new position, partition 0 forgotten: no change to tell.
    let after = fetch_in(&mut conn, &topic, (id, 3), &[(4, 2)], &[0])?;
    assert_eq!(carried(&after)?, Vec::new());
    produce_one(&mut conn, &topic, 0)?;
    produce_one(&mut conn, &topic, 5)?;
    let without_0 = fetch_in(&mut conn, &topic, (id, 4), &[], &[])?;
    assert_eq!(
        carried(&without_0)?,
        vec![(5, 2, 1)],
        "a forgotten partition is not read"
    );
    Ok(())
}

#[test]
fn wrong_epochs_unknown_sessions_and_the_final_epoch_answer_as_kafka_does() -> Result<()> {
    let broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let topic = laminar_tests::rdkafka_client::unique_topic("fetch-sessions");
    wire::create_topic(&mut conn, &topic, 2)?;
    produce_one(&mut conn, &topic, 0)?;
    let id = fetch_in(&mut conn, &topic, (0, 0), &[(0, 0), (1, 0)], &[])?.session_id;
    assert!(id > 0);

    let skipped = fetch_in(&mut conn, &topic, (id, 2), &[], &[])?;
    assert_eq!(skipped.error_code, INVALID_FETCH_SESSION_EPOCH);
    assert_eq!(carried(&skipped)?, Vec::new());
    let unknown = if id == i32::MAX { 1 } else { id + 1 };
    let missing = fetch_in(&mut conn, &topic, (unknown, 1), &[], &[])?;
    assert_eq!(missing.error_code, FETCH_SESSION_ID_NOT_FOUND);
    assert_eq!(fetch_in(&mut conn, &topic, (id, 1), &[], &[])?.error_code, 0);

    // The final epoch closes the session and answers as a sessionless fetch does.
    let last = fetch_in(&mut conn, &topic, (id, -1), &[(0, 0)], &[])?;
    assert_eq!((last.error_code, last.session_id), (0, 0));
    assert_eq!(carried(&last)?, vec![(0, 1, 1)]);
    let closed = fetch_in(&mut conn, &topic, (id, 2), &[], &[])?;
    assert_eq!(closed.error_code, FETCH_SESSION_ID_NOT_FOUND);
    Ok(())
}

#[test]
fn a_broker_with_no_session_slots_answers_full_fetches_without_a_session() -> Result<()> {
    let options = BrokerOptions::default().with_override("max.incremental.fetch.session.cache.slots", "0");
    let broker = Broker::start(options)?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let topic = laminar_tests::rdkafka_client::unique_topic("fetch-sessions");
    wire::create_topic(&mut conn, &topic, 1)?;
    produce_one(&mut conn, &topic, 0)?;
    let full = fetch_in(&mut conn, &topic, (0, 0), &[(0, 0)], &[])?;
    assert_eq!((full.error_code, full.session_id), (0, 0));
    assert_eq!(carried(&full)?, vec![(0, 1, 1)]);
    Ok(())
}

#[test]
fn the_bench_consumer_reads_every_record_of_many_partitions_through_a_session() -> Result<()> {
    let broker = Broker::start_default()?;
    let topic = laminar_tests::rdkafka_client::unique_topic("fetch-sessions-bench");
    let brokers = broker.addr().to_string();
    let common = [
        "--topic",
        &topic,
        "--partitions",
        "40",
        "--num-records",
        "4000",
        "--no-limits",
    ];
    let produce = [&["bench", "produce", "--record-size", "100"][..], &common[..]].concat();
    laminar_tests::cli::ok_on(&brokers, &produce, "")?;
    // It stops at exactly 4 000 records and fails after 10 s without one: every record came.
    let consume = [
        &["bench", "consume", "--consumers", "2", "--fetch-session"][..],
        &common[..],
    ]
    .concat();
    laminar_tests::cli::ok_on(&brokers, &consume, "")?;
    let metrics = laminar_tests::http::get_ok(broker.http_addr(), "/metrics")?;
    let sessions = metrics
        .lines()
        .find_map(|line| line.strip_prefix("laminar_kafka_fetch_sessions "));
    assert_eq!(
        sessions,
        Some("2"),
        "each consumer's connection fetched in a session"
    );
    Ok(())
}
