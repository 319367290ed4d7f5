//! Partition reassignment (AlterPartitionReassignments, ListPartitionReassignments) and
//! DescribeLogDirs against real broker processes: a four-node cluster in combined mode on
//! loopback, and a single node for DescribeLogDirs.
//!
//! A move completes once the new replica has caught up and its leader added it to the ISR
//! (AlterPartition); the listing and cancel tests use a move to a broker that is stopped, so
//! that it stays in progress.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, CreateTopicsRequest, DescribeLogDirsRequest,
    ListPartitionReassignmentsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::cli::{ok_on, rows_starting};
use laminar_tests::wire::{produce, record_batch, WireConnection};
use laminar_tests::{wait_for, Broker, BrokerOptions, Cluster};

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_string()))
}

/// Creates `topic` with one partition of three replicas placed by the controller (the
/// broker's CreateTopics refuses manual assignments in cluster mode); its replicas.
fn create_three(conn: &mut WireConnection, topic: &str) -> Result<Vec<i32>> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(3)]);
    let response = conn.request(&request, 5)?;
    let result = &response.topics[0];
    ensure!(
        result.error_code == 0,
        "create {topic}: {} {:?}",
        result.error_code,
        result.error_message
    );
    replicas(conn, topic)
}

/// `current` with its last replica swapped for the one of brokers 1–4 it lacks, and the one
/// swapped out.
fn moved_off_last(current: &[i32]) -> (Vec<i32>, i32, i32) {
    let spare = (1..=4).find(|b| !current.contains(b)).unwrap_or(4);
    let mut target = current.to_vec();
    let removed = target.pop().unwrap_or(0);
    target.push(spare);
    (target, spare, removed)
}

/// The error code of moving `topic`-`partition` to `replicas` (`None`: cancel).
fn reassign(conn: &mut WireConnection, topic: &str, partition: i32, replicas: Option<&[i32]>) -> Result<i16> {
    let replicas = replicas.map(|r| r.iter().map(|b| BrokerId(*b)).collect());
    let request =
        AlterPartitionReassignmentsRequest::default().with_topics(vec![ReassignableTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(partition)
                .with_replicas(replicas)])]);
    let response = conn.request(&request, 0)?;
    ensure!(response.error_code == 0, "whole request: {}", response.error_code);
    let code = response
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .map(|p| p.error_code);
    code.context("no partition in the answer")
}

/// (topic, partition, replicas, adding, removing) of every reassignment in progress.
type Listed = Vec<(String, i32, Vec<i32>, Vec<i32>, Vec<i32>)>;

fn listed(conn: &mut WireConnection) -> Result<Listed> {
    let response = conn.request(&ListPartitionReassignmentsRequest::default().with_topics(None), 0)?;
    ensure!(response.error_code == 0, "list: {}", response.error_code);
    let ids = |list: &[BrokerId]| list.iter().map(|b| b.0).collect::<Vec<_>>();
    let each = response.topics.iter().flat_map(|t| {
        t.partitions.iter().map(|p| {
            let r = (
                ids(&p.replicas),
                ids(&p.adding_replicas),
                ids(&p.removing_replicas),
            );
            (t.name.to_string(), p.partition_index, r.0, r.1, r.2)
        })
    });
    Ok(each.collect())
}

/// Partition 0's replicas as Metadata tells.
fn replicas(conn: &mut WireConnection, topic: &str) -> Result<Vec<i32>> {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name(topic)))
    ]));
    let response = conn.request(&request, 9)?;
    let partition = response.topics.first().and_then(|t| t.partitions.first());
    let partition = partition.context("no partition in the answer")?;
    Ok(partition.replica_nodes.iter().map(|b| b.0).collect())
}

#[test]
fn moves_are_refused_with_kafkas_codes_listed_while_in_progress_and_cancelled() -> Result<()> {
    let mut cluster = Cluster::start(4, 3000, Cluster::node_options())?;
    let mut conn = cluster.connect(1)?;
    let original = create_three(&mut conn, "moving")?;
    let refusals = [
        ("nope", 0, Some(&[1, 2][..]), UNKNOWN_TOPIC_OR_PARTITION),
        ("moving", 7, Some(&[1, 2][..]), UNKNOWN_TOPIC_OR_PARTITION),
        ("moving", 0, Some(&[1, 9][..]), INVALID_REPLICA_ASSIGNMENT),
        ("moving", 0, Some(&[1, 1][..]), INVALID_REPLICA_ASSIGNMENT),
        ("moving", 0, Some(&[][..]), INVALID_REPLICA_ASSIGNMENT),
        ("moving", 0, None, NO_REASSIGNMENT_IN_PROGRESS),
    ];
    for (topic, partition, target, expected) in refusals {
        let code = reassign(&mut conn, topic, partition, target)?;
        assert_eq!(code, expected, "{topic}-{partition} to {target:?}");
    }
    assert!(listed(&mut conn)?.is_empty());
    // The spare broker is registered but stopped, so it cannot catch up: the move stays in
    // progress, the union of the replicas (target first) shown by every broker.
    let (target, spare, removed) = moved_off_last(&original);
    cluster.node(spare).kill9()?;
    let mut conn = cluster.connect(original[0])?;
    assert_eq!(reassign(&mut conn, "moving", 0, Some(&target))?, NONE);
    let mut union = target.clone();
    union.push(removed);
    let expected = vec![("moving".to_string(), 0, union.clone(), vec![spare], vec![removed])];
    assert_eq!(listed(&mut conn)?, expected);
    std::thread::sleep(Duration::from_millis(500));
    for node in (1..=4).filter(|n| *n != spare) {
        let mut other = cluster.connect(node)?;
        wait_for(Duration::from_secs(5), "every broker shows the move", || {
            Ok(listed(&mut other)? == expected && replicas(&mut other, "moving")? == union)
        })?;
    }
    assert_eq!(reassign(&mut conn, "moving", 0, None)?, NONE);
    assert!(listed(&mut conn)?.is_empty());
    assert_eq!(replicas(&mut conn, "moving")?, original);
    let alive: Vec<String> = original.iter().map(|n| cluster.node(*n).bootstrap()).collect();
    move_and_cancel_with_the_cli(&alive.join(","), &original)
}

/// The same move and cancel through `laminar topic move | reassignments`.
fn move_and_cancel_with_the_cli(b: &str, original: &[i32]) -> Result<()> {
    let (target, spare, removed) = moved_off_last(original);
    let mut union = target.clone();
    union.push(removed);
    let text = |ids: &[i32]| ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
    let args = [
        "topic",
        "move",
        "moving",
        "--partition",
        "0",
        "--replicas",
        &text(&target),
    ];
    let moved = ok_on(b, &args, "")?;
    assert!(
        moved.contains(&format!("moving-0: moving to [{}]", text(&target))),
        "{moved}"
    );
    let table = ok_on(b, &["topic", "reassignments", "moving"], "")?;
    let rows = rows_starting(&table, "moving");
    let row = [
        "moving".to_string(),
        "0".into(),
        format!("[{}]", text(&union)),
        format!("[{spare}]"),
        format!("[{removed}]"),
    ];
    assert_eq!(
        rows,
        vec![row.iter().map(String::as_str).collect::<Vec<_>>()],
        "{table}"
    );
    let cancelled = ok_on(
        b,
        &["topic", "move", "moving", "--partition", "0", "--cancel"],
        "",
    )?;
    assert!(
        cancelled.contains("moving-0: reassignment cancelled"),
        "{cancelled}"
    );
    let table = ok_on(b, &["topic", "reassignments"], "")?;
    assert!(rows_starting(&table, "moving").is_empty(), "{table}");
    let refused = laminar_tests::cli::run(
        &[
            "topic",
            "move",
            "moving",
            "--partition",
            "0",
            "--cancel",
            "--brokers",
            b,
        ],
        "",
    )?;
    assert!(!refused.success);
    assert!(refused.stderr.contains("reassignment"), "{}", refused.stderr);
    Ok(())
}

/// `(partition, size, lag)` of each replica, then the log dir's total and usable bytes.
type LogDirSizes = (Vec<(i32, i64, i64)>, i64, i64);

/// (partition, size) of `topic`'s replicas in the broker's first log dir, and the dir's
/// total and usable bytes.
fn log_dir_sizes(conn: &mut WireConnection, topic: &str, version: i16) -> Result<LogDirSizes> {
    let wanted = DescribableLogDirTopic::default()
        .with_topic(name(topic))
        .with_partitions(vec![0, 1, 2, 9]);
    let absent = DescribableLogDirTopic::default()
        .with_topic(name("absent"))
        .with_partitions(vec![0]);
    let request = DescribeLogDirsRequest::default().with_topics(Some(vec![wanted, absent]));
    let response = conn.request(&request, version)?;
    let dir = response.results.first().context("no log dir")?;
    ensure!(dir.error_code == 0, "log dir error {}", dir.error_code);
    ensure!(
        dir.topics.iter().all(|t| t.name.as_str() == topic),
        "only the topic asked for"
    );
    let each = dir.topics.iter().flat_map(|t| t.partitions.iter());
    let sizes = each
        .map(|p| (p.partition_index, p.partition_size, p.offset_lag))
        .collect();
    Ok((sizes, dir.total_bytes, dir.usable_bytes))
}

#[test]
fn describe_log_dirs_lists_local_replicas_with_their_sizes_open_or_not() -> Result<()> {
    let mut broker = Broker::start(BrokerOptions::default())?;
    let mut conn = WireConnection::connect(broker.addr())?;
    laminar_tests::wire::create_topic(&mut conn, "sized", 3)?;
    let batch = record_batch(&[b"one", b"two", b"three"], 1)?;
    assert_eq!(produce(&mut conn, "sized", 0, batch, -1)?.error_code, 0);
    // Partition 0 was written; 1 and 2 never were, so they have no directory and are absent.
    let (open, total, usable) = log_dir_sizes(&mut conn, "sized", 4)?;
    assert_eq!(open.len(), 1, "{open:?}");
    let (partition, size, lag) = open[0];
    assert!(partition == 0 && size > 0 && lag == 0, "{open:?}");
    assert!(total > 0 && usable > 0 && usable <= total, "{total} {usable}");
    // v1 has no byte counts; the replicas are the same.
    let (v1, total, _) = log_dir_sizes(&mut conn, "sized", 1)?;
    assert_eq!((v1, total), (open.clone(), -1));
    // After a restart the partition is not open: its size comes from its segment files.
    broker.restart()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let (closed, _, _) = log_dir_sizes(&mut conn, "sized", 4)?;
    assert_eq!(closed, open);
    let described = ok_on(
        &broker.bootstrap(),
        &["topic", "describe", "sized", "--log-dirs"],
        "",
    )?;
    let replicas = described.split_once("\nREPLICAS\n").map_or("", |(_, rest)| rest);
    let row = rows_starting(replicas, "0");
    assert_eq!(
        row,
        vec![vec!["0", "1", &size.to_string()[..], "0"]],
        "{described}"
    );
    Ok(())
}

/// A move off one of the three replicas to the fourth broker under an acks=all produce load
/// completes once broker 4 has caught up, the broker moved off deletes its replica, and every
/// acknowledged record is readable afterwards.
#[test]
fn a_move_under_acks_all_load_completes_and_loses_nothing() -> Result<()> {
    use rdkafka::consumer::Consumer;
    use rdkafka::producer::FutureRecord;
    use rdkafka::util::Timeout;

    let mut cluster = Cluster::start(4, 3000, Cluster::node_options())?;
    let mut conn = cluster.connect(1)?;
    let original = create_three(&mut conn, "load")?;
    let (target, _, removed) = moved_off_last(&original);
    let b = cluster.bootstrap();
    let producer = laminar_tests::rdkafka_client::producer(&b, &[("acks", "all")])?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        std::thread::spawn(move || -> Result<Vec<String>> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let mut acknowledged = Vec::new();
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let value = format!("record-{n}");
                let record = FutureRecord::<(), _>::to("load").partition(0).payload(&value);
                if runtime
                    .block_on(producer.send(record, Timeout::After(Duration::from_secs(10))))
                    .is_ok()
                {
                    acknowledged.push(value);
                }
                n += 1;
            }
            Ok(acknowledged)
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(reassign(&mut conn, "load", 0, Some(&target))?, NONE);
    wait_for(Duration::from_secs(60), "the move to complete", || {
        Ok(replicas(&mut conn, "load")? == target)
    })?;
    assert!(listed(&mut conn)?.is_empty());
    let moved_off = cluster.node(removed).data_dir().join("load-0");
    wait_for(Duration::from_secs(10), "the removed replica deleted", || {
        Ok(!moved_off.exists())
    })?;
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let acknowledged = load
        .join()
        .map_err(|_| anyhow::anyhow!("load thread panicked"))??;
    ensure!(!acknowledged.is_empty(), "nothing was acknowledged");
    let consumer = laminar_tests::rdkafka_client::assigned_consumer(&b, &[])?;
    let mut assignment = rdkafka::TopicPartitionList::new();
    assignment.add_partition_offset("load", 0, rdkafka::Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let consumed = laminar_tests::rdkafka_client::poll_records(&consumer, acknowledged.len())?;
    let values: std::collections::BTreeSet<String> = consumed
        .iter()
        .map(|r| String::from_utf8_lossy(r.record.value.as_deref().unwrap_or_default()).into_owned())
        .collect();
    let lost: Vec<&String> = acknowledged.iter().filter(|v| !values.contains(*v)).collect();
    assert!(lost.is_empty(), "{} acknowledged records lost", lost.len());
    Ok(())
}

/// A replica moved off a broker while that broker was down is a stray replica at its next
/// start: the metadata it catches up to no longer places the partition on it, so the deletion
/// that follows a move it sees never runs; start-up sets the directory aside
/// (docs/decisions/0020, "Stray replicas") once allowed to: it is every partition directory of
/// the broker, past the share a start sets aside unasked. The move itself completes with the broker down
/// once the lag time has passed since its last fetch: its leader no longer proposes it back
/// into the ISR (the controller refused such proposals with INELIGIBLE_REPLICA, and the move
/// never completed).
#[test]
fn a_replica_moved_off_a_broker_while_it_was_down_is_set_aside_at_its_next_start() -> Result<()> {
    let base = Cluster::node_options().with_override("replica.lag.time.max.ms", "2000");
    let mut cluster = Cluster::start(4, 3000, base)?;
    let mut conn = cluster.connect(1)?;
    let original = create_three(&mut conn, "moved")?;
    let (target, _, removed) = moved_off_last(&original);
    let written = produce(
        &mut cluster.connect(original[0])?,
        "moved",
        0,
        record_batch(&[b"r"], 1)?,
        -1,
    )?;
    ensure!(written.error_code == NONE, "produce: {}", written.error_code);
    let removed_dir = cluster.node(removed).data_dir();
    wait_for(
        Duration::from_secs(20),
        "the replica to move holding its directory",
        || Ok(removed_dir.join("moved-0").is_dir()),
    )?;

    cluster.node(removed).terminate()?;
    let mut conn = cluster.connect(target[0])?;
    assert_eq!(reassign(&mut conn, "moved", 0, Some(&target))?, NONE);
    wait_for(Duration::from_secs(30), "the move to complete", || {
        Ok(replicas(&mut conn, "moved")? == target)
    })?;
    ensure!(
        removed_dir.join("moved-0").is_dir(),
        "the broker was down: its replica is still there"
    );

    // Its only partition directory is stray: more than laminar.stray.replicas.max.percent (50)
    // of them, so the start stops, naming the key, and sets nothing aside.
    let refused = cluster
        .restart(removed)
        .expect_err("a sweep of every directory is refused");
    ensure!(
        format!("{refused:#}").contains("laminar.stray.replicas.max.percent"),
        "the refusal names the key: {refused:#}"
    );
    ensure!(removed_dir.join("moved-0").is_dir(), "nothing set aside");
    let options = cluster.node(removed).options_mut();
    options
        .overrides
        .push(("laminar.stray.replicas.max.percent".into(), "100".into()));
    cluster.restart(removed)?;
    ensure!(
        !removed_dir.join("moved-0").exists(),
        "the stray replica is no longer under its name"
    );
    let set_aside = std::fs::read_dir(&removed_dir)?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("moved-0.") && name.ends_with("-stray"))
        .count();
    ensure!(set_aside == 1, "one directory set aside, found {set_aside}");
    Ok(())
}
