//! The transactions' admin APIs against a real single-node broker: a transaction committed and
//! one aborted through the coordinator, then one left open. DescribeTransactions and
//! ListTransactions (with each filter) show it Ongoing with its partition, DescribeProducers
//! the offset it began at, and `laminar txn list | describe | describe-producers` the same;
//! `laminar txn abort` ends it on the partition with an ABORT marker, so the partition's last
//! stable offset passes it. `/metrics` counts the transactions committed, aborted and open.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_producers_response::ProducerState;
use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, BrokerId, DescribeProducersRequest, DescribeTransactionsRequest,
    ListOffsetsRequest, ListTransactionsRequest, ProducerId, TopicName, TransactionalId,
};
use laminar_tests::cli::{fails, ok_on, rows_starting};
use laminar_tests::http::{get_ok, MetricsPage};
use laminar_tests::rdkafka_client::unique_topic;
use laminar_tests::transactions::{self, str_bytes, until_settled, SETTLE_WITHIN};
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::Broker;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
/// Records the open transaction writes.
const OPEN_RECORDS: i64 = 3;

/// InitProducerId for `transactional_id`, with a timeout the test never reaches.
fn init_producer(conn: &mut WireConnection, transactional_id: &str) -> Result<(i64, i16)> {
    transactions::init_producer(conn, transactional_id, 600_000)
}

/// Begins a transaction of `transactional_id` on `(topic, partition)` and writes
/// [`OPEN_RECORDS`] records there from `sequence`; returns their first offset.
fn write_in_transaction(
    conn: &mut WireConnection,
    transactional_id: &str,
    producer: (i64, i16),
    (topic, partition): (&str, i32),
    sequence: i32,
) -> Result<i64> {
    let code = transactions::add_partition(conn, transactional_id, producer, (topic, partition))?;
    anyhow::ensure!(code == 0, "AddPartitionsToTxn answered {code}");
    let batch = transactions::producer_batch(producer, sequence, OPEN_RECORDS as i32, true)?;
    let written = transactions::produce(conn, Some(transactional_id), (topic, partition), batch)?;
    anyhow::ensure!(written.error_code == 0, "Produce answered {}", written.error_code);
    Ok(written.base_offset)
}

/// Ends the transaction of `transactional_id` through its coordinator.
fn end(conn: &mut WireConnection, transactional_id: &str, producer: (i64, i16), commit: bool) -> Result<()> {
    let code = transactions::end(conn, transactional_id, producer, commit)?;
    anyhow::ensure!(code == 0, "EndTxn answered {code}");
    Ok(())
}

fn describe_transactions(conn: &mut WireConnection, ids: &[&str]) -> Result<Vec<TransactionState>> {
    let request = DescribeTransactionsRequest::default()
        .with_transactional_ids(ids.iter().map(|id| TransactionalId(str_bytes(id))).collect());
    Ok(conn.request(&request, 0)?.transaction_states)
}

/// A listed transaction: `(id, producer id, state)`.
type Listed = (String, i64, String);

/// ListTransactions v1: the transactions sorted, and the unknown state filters.
fn list_transactions(
    conn: &mut WireConnection,
    request: &ListTransactionsRequest,
) -> Result<(Vec<Listed>, Vec<String>)> {
    let response = conn.request(request, 1)?;
    anyhow::ensure!(
        response.error_code == 0,
        "ListTransactions answered {}",
        response.error_code
    );
    let mut listed: Vec<Listed> = response
        .transaction_states
        .iter()
        .map(|t| {
            (
                t.transactional_id.to_string(),
                t.producer_id.0,
                t.transaction_state.to_string(),
            )
        })
        .collect();
    listed.sort();
    let unknown = response
        .unknown_state_filters
        .iter()
        .map(|s| s.to_string())
        .collect();
    Ok((listed, unknown))
}

/// DescribeProducers of one partition: (error code, producers).
fn describe_producers(
    conn: &mut WireConnection,
    (topic, partition): (&str, i32),
) -> Result<(i16, Vec<ProducerState>)> {
    let request = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(TopicName(str_bytes(topic)))
        .with_partition_indexes(vec![partition])]);
    let response = conn.request(&request, 0)?;
    let answered = response.topics.first().and_then(|t| t.partitions.first());
    let answered = answered.context("DescribeProducers named no partition")?;
    Ok((answered.error_code, answered.active_producers.clone()))
}

/// The last stable offset: ListOffsets latest, read_committed.
fn last_stable_offset(conn: &mut WireConnection, (topic, partition): (&str, i32)) -> Result<i64> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(1)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(str_bytes(topic)))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(-1)])]);
    let response = conn.request(&request, 5)?;
    let answer = response.topics.first().and_then(|t| t.partitions.first());
    let answer = answer.context("empty ListOffsets answer")?;
    anyhow::ensure!(
        answer.error_code == 0,
        "ListOffsets answered {}",
        answer.error_code
    );
    Ok(answer.offset)
}

/// Waits until `/metrics` shows `series` at `expected`.
fn metric_reaches(broker: &Broker, series: &str, expected: f64) -> Result<()> {
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        let page = MetricsPage::parse(&get_ok(broker.http_addr(), "/metrics")?)?;
        let value = page.value(series);
        if value == Some(expected) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{series} is {value:?}, not {expected}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_admin_apis_are_advertised() -> Result<()> {
    let broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let versions = conn.request(&ApiVersionsRequest::default(), 3)?;
    let advertised = |api: ApiKey| {
        let found = versions.api_keys.iter().find(|k| k.api_key == api as i16);
        found.map(|k| (k.min_version, k.max_version))
    };
    assert_eq!(advertised(ApiKey::DescribeProducers), Some((0, 0)));
    assert_eq!(advertised(ApiKey::DescribeTransactions), Some((0, 0)));
    assert_eq!(advertised(ApiKey::ListTransactions), Some((0, 1)));
    Ok(())
}

/// The ids, topic and producers the main test shares between its steps.
struct Scene {
    topic: String,
    done_id: String,
    open_id: String,
    done_producer: (i64, i16),
    open_producer: (i64, i16),
    open_start: i64,
}

/// A transaction committed then one aborted under `done_id` on partition 0, and one left open
/// under `open_id` on partition 1.
fn scene(conn: &mut WireConnection) -> Result<Scene> {
    let topic = unique_topic("txn-admin");
    wire::create_topic(conn, &topic, 2)?;
    let done_id = unique_topic("txn-admin-done");
    let open_id = unique_topic("txn-admin-open");
    let done_producer = init_producer(conn, &done_id)?;
    write_in_transaction(conn, &done_id, done_producer, (&topic, 0), 0)?;
    end(conn, &done_id, done_producer, true)?;
    write_in_transaction(conn, &done_id, done_producer, (&topic, 0), OPEN_RECORDS as i32)?;
    end(conn, &done_id, done_producer, false)?;
    let open_producer = init_producer(conn, &open_id)?;
    let open_start = write_in_transaction(conn, &open_id, open_producer, (&topic, 1), 0)?;
    Ok(Scene {
        topic,
        done_id,
        open_id,
        done_producer,
        open_producer,
        open_start,
    })
}

#[test]
fn an_open_transaction_is_described_listed_and_aborted_by_the_cli() -> Result<()> {
    let broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let scene = scene(&mut conn)?;
    check_described(&mut conn, &scene)?;
    check_listed(&mut conn, &scene)?;
    check_producers(&mut conn, &scene)?;
    metric_reaches(&broker, "laminar_transactions_committed_total", 1.0)?;
    metric_reaches(&broker, "laminar_transactions_aborted_total", 1.0)?;
    metric_reaches(&broker, "laminar_transactions_ongoing", 1.0)?;
    metric_reaches(
        &broker,
        "laminar_transactions_last_stable_offset_lag",
        OPEN_RECORDS as f64,
    )?;
    check_cli_shows_it(&broker.bootstrap(), &scene)?;
    abort_with_the_cli(&broker, &mut conn, &scene)
}

fn check_described(conn: &mut WireConnection, scene: &Scene) -> Result<()> {
    let states = describe_transactions(conn, &[&scene.open_id, &scene.done_id])?;
    let [open, done] = &states[..] else {
        bail!("DescribeTransactions answered {} ids", states.len());
    };
    assert_eq!((open.error_code, open.transaction_state.as_str()), (0, "Ongoing"));
    assert_eq!(open.transactional_id.as_str(), scene.open_id);
    assert_eq!((open.producer_id.0, open.producer_epoch), scene.open_producer);
    assert_eq!(open.transaction_timeout_ms, 600_000);
    assert!(open.transaction_start_time_ms > 0);
    let topics: Vec<(&str, &[i32])> = open
        .topics
        .iter()
        .map(|t| (t.topic.as_str(), t.partitions.as_slice()))
        .collect();
    assert_eq!(topics, vec![(scene.topic.as_str(), &[1][..])]);
    assert_eq!(
        (done.error_code, done.transaction_state.as_str()),
        (0, "CompleteAbort")
    );
    assert!(done.topics.is_empty(), "a complete transaction has no partitions");
    // Its `__transaction_state` partition may load first (COORDINATOR_LOAD_IN_PROGRESS).
    let (nobody, ()) = until_settled(|| {
        let states = describe_transactions(conn, &["txn-admin-nobody"])?;
        Ok((states.first().map_or(-1, |s| s.error_code), ()))
    })?;
    assert_eq!(nobody, TRANSACTIONAL_ID_NOT_FOUND);
    Ok(())
}

fn check_listed(conn: &mut WireConnection, scene: &Scene) -> Result<()> {
    let open = (
        scene.open_id.clone(),
        scene.open_producer.0,
        "Ongoing".to_string(),
    );
    let done = (
        scene.done_id.clone(),
        scene.done_producer.0,
        "CompleteAbort".to_string(),
    );
    let every = list_transactions(conn, &ListTransactionsRequest::default())?;
    assert!(every.0.contains(&open) && every.0.contains(&done), "{every:?}");
    let states = vec![str_bytes("Ongoing"), str_bytes("Sleeping")];
    let ongoing = ListTransactionsRequest::default().with_state_filters(states);
    let ongoing = list_transactions(conn, &ongoing)?;
    assert!(
        ongoing.0.contains(&open) && !ongoing.0.contains(&done),
        "{ongoing:?}"
    );
    assert_eq!(ongoing.1, vec!["Sleeping".to_string()]);
    let by_producer =
        ListTransactionsRequest::default().with_producer_id_filters(vec![ProducerId(scene.done_producer.0)]);
    assert_eq!(list_transactions(conn, &by_producer)?.0, vec![done]);
    let an_hour = ListTransactionsRequest::default().with_duration_filter(3_600_000);
    let long_running = list_transactions(conn, &an_hour)?.0;
    assert!(!long_running.contains(&open), "begun just now: {long_running:?}");
    let just_now = ListTransactionsRequest::default().with_duration_filter(0);
    std::thread::sleep(Duration::from_millis(5));
    assert!(list_transactions(conn, &just_now)?.0.contains(&open));
    Ok(())
}

fn check_producers(conn: &mut WireConnection, scene: &Scene) -> Result<()> {
    let (code, producers) = describe_producers(conn, (&scene.topic, 1))?;
    assert_eq!(code, 0);
    let [producer] = &producers[..] else {
        bail!("{} producers on partition 1", producers.len());
    };
    assert_eq!(producer.producer_id.0, scene.open_producer.0);
    assert_eq!(producer.producer_epoch, i32::from(scene.open_producer.1));
    assert_eq!(producer.current_txn_start_offset, scene.open_start);
    assert_eq!(producer.last_sequence, OPEN_RECORDS as i32 - 1);
    let (code, settled) = describe_producers(conn, (&scene.topic, 0))?;
    assert_eq!(code, 0);
    assert!(
        settled.iter().all(|p| p.current_txn_start_offset == -1),
        "{settled:?}"
    );
    assert_eq!(
        describe_producers(conn, (&scene.topic, 7))?.0,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(last_stable_offset(conn, (&scene.topic, 1))?, scene.open_start);
    Ok(())
}

fn check_cli_shows_it(brokers: &str, scene: &Scene) -> Result<()> {
    let listed = ok_on(brokers, &["txn", "list", "--state", "Ongoing"], "")?;
    let rows = rows_starting(&listed, &scene.open_id);
    let producer = scene.open_producer.0.to_string();
    assert_eq!(
        rows,
        vec![vec![scene.open_id.as_str(), "1", &producer, "Ongoing"]],
        "{listed}"
    );
    assert!(rows_starting(&listed, &scene.done_id).is_empty(), "{listed}");
    let described = ok_on(brokers, &["txn", "describe", &scene.open_id], "")?;
    assert!(described.contains("Ongoing"), "{described}");
    assert!(described.contains(&format!("{}-1", scene.topic)), "{described}");
    let partition = ["--topic", &scene.topic, "--partition", "1"];
    let mut args = vec!["txn", "describe-producers"];
    args.extend(partition);
    let producers = ok_on(brokers, &args, "")?;
    let rows = rows_starting(&producers, &producer);
    assert_eq!(rows.len(), 1, "{producers}");
    assert_eq!(
        rows[0].last(),
        Some(&scene.open_start.to_string().as_str()),
        "{producers}"
    );
    Ok(())
}

fn abort_with_the_cli(broker: &Broker, conn: &mut WireConnection, scene: &Scene) -> Result<()> {
    let (id, epoch) = (
        scene.open_producer.0.to_string(),
        scene.open_producer.1.to_string(),
    );
    let bootstrap = broker.bootstrap();
    let topic = scene.topic.as_str();
    let abort = [
        "txn",
        "abort",
        "--topic",
        topic,
        "--partition",
        "1",
        "--producer-id",
        &id,
        "--producer-epoch",
        &epoch,
        "--coordinator-epoch",
        "0",
        "--bootstrap-server",
        &bootstrap,
    ];
    let aborted = laminar_tests::cli::ok(&abort, "")?;
    assert!(aborted.contains("aborted"), "{aborted}");
    let (_, producers) = describe_producers(conn, (topic, 1))?;
    assert!(
        producers.iter().all(|p| p.current_txn_start_offset == -1),
        "{producers:?}"
    );
    // The records and the marker are behind the last stable offset now.
    assert_eq!(
        last_stable_offset(conn, (topic, 1))?,
        scene.open_start + OPEN_RECORDS + 1
    );
    metric_reaches(broker, "laminar_transactions_last_stable_offset_lag", 0.0)?;
    let start = scene.open_start.to_string();
    let again = [
        "txn",
        "abort",
        "--topic",
        topic,
        "--partition",
        "1",
        "--start-offset",
        &start,
        "--brokers",
        &bootstrap,
    ];
    let refused = fails(&again)?;
    assert!(refused.contains("no transaction open"), "{refused}");
    Ok(())
}
