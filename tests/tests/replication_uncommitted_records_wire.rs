//! Three real brokers in combined mode, replication factor 3, `min.insync.replicas=2`, driven
//! with raw Kafka requests: a record the in-sync replicas do not all have is not committed, and
//! no consumer ever sees it — the high watermark (Fetch's, ListOffsets latest) stays below it
//! while the followers are frozen (SIGSTOP) and the leader's log grows; after the leader dies
//! with such records, the new leader goes on without them and the old one, restarted,
//! truncates them: every replica ends byte-identical. A follower that stops fetching leaves
//! the ISR after `replica.lag.time.max.ms` and the high watermark moves on without it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::rdkafka_client::unique_topic;
use laminar_tests::wire::{decode_records, fetch, list_offset, produce, record_batch, WireConnection};
use laminar_tests::{wait_for, BrokerOptions, Cluster};

/// How long a dead broker keeps its leaderships (Kafka's default is 9 000 ms).
const SESSION_TIMEOUT_MS: u64 = 3000;
/// Beyond the session timeout: the controller's check, a new controller if the dead broker
/// was it (an election of 1–2 s), the commit, and the metadata reaching the brokers.
const LEADER_MOVE_BOUND: Duration = Duration::from_secs(20);
/// For followers to catch up and every replica's segments to be the same.
const CONVERGE_BOUND: Duration = Duration::from_secs(30);
const TIMESTAMP_MS: i64 = 1_700_000_000_000;
const PARTITION: i32 = 0;

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

fn options(lag_time_ms: u64) -> BrokerOptions {
    Cluster::node_options()
        .with_override("min.insync.replicas", "2")
        .with_override("replica.lag.time.max.ms", &lag_time_ms.to_string())
}

/// Creates `topic` (one partition, replication factor 3, min.insync.replicas=2) through node 1
/// and waits until every broker knows it with all three replicas in sync.
fn create_topic(cluster: &mut Cluster, topic: &str) -> Result<()> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(3)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("min.insync.replicas"))
                .with_value(Some(StrBytes::from_static_str("2")))])]);
    let code = cluster.connect(1)?.request(&request, 5)?.topics[0].error_code;
    ensure!(code == 0, "create {topic}: error {code}");
    for node in 1..=3 {
        wait_for(
            Duration::from_secs(10),
            "the topic everywhere, all in sync",
            || Ok(state(cluster, node, topic)?.isr == [1, 2, 3]),
        )?;
    }
    Ok(())
}

/// The partition as one broker's Metadata v9 tells.
#[derive(Debug, PartialEq)]
struct PartitionState {
    leader: i32,
    epoch: i32,
    isr: Vec<i32>,
}

fn state(cluster: &mut Cluster, node: i32, topic: &str) -> Result<PartitionState> {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name(topic)))
    ]));
    let response = cluster.connect(node)?.request(&request, 9)?;
    let partition = response
        .topics
        .first()
        .and_then(|t| t.partitions.iter().find(|p| p.partition_index == PARTITION))
        .context("the partition is not in the answer")?;
    let mut isr: Vec<i32> = partition.isr_nodes.iter().map(|b| b.0).collect();
    isr.sort_unstable();
    Ok(PartitionState {
        leader: partition.leader_id.0,
        epoch: partition.leader_epoch,
        isr,
    })
}

/// What a consumer (replica id -1) is shown by `conn`'s broker: ListOffsets latest, Fetch's
/// high watermark, and the values of every record a Fetch from offset 0 returns.
struct ConsumerView {
    latest: i64,
    high_watermark: i64,
    values: Vec<Bytes>,
}

fn consumer_view(conn: &mut WireConnection, topic: &str) -> Result<ConsumerView> {
    let (code, latest, _) = list_offset(conn, topic, PARTITION, -1)?;
    ensure!(code == 0, "ListOffsets latest: error {code}");
    let mut values = Vec::new();
    let mut high_watermark = -1;
    loop {
        let next = values.len() as i64;
        let data = fetch(conn, topic, PARTITION, next)?;
        ensure!(data.error_code == 0, "fetch at {next}: error {}", data.error_code);
        high_watermark = high_watermark.max(data.high_watermark);
        let records = decode_records(&data)?;
        let new: Vec<_> = records.into_iter().filter(|r| r.offset >= next).collect();
        if new.is_empty() {
            break;
        }
        for record in new {
            ensure!(
                record.offset == values.len() as i64,
                "offset gap at {}",
                record.offset
            );
            values.push(record.value.unwrap_or_default());
        }
    }
    Ok(ConsumerView {
        latest,
        high_watermark,
        values,
    })
}

/// Produces one batch of `values` with `acks` to `conn`'s broker; returns (error, base offset).
fn produce_values(conn: &mut WireConnection, topic: &str, values: &[&[u8]], acks: i16) -> Result<(i16, i64)> {
    let answer = produce(conn, topic, PARTITION, record_batch(values, TIMESTAMP_MS)?, acks)?;
    Ok((answer.error_code, answer.base_offset))
}

/// `{file name: bytes}` of the partition's `*.log` segments in one data dir.
fn segments(data_dir: &Path, topic: &str) -> Result<BTreeMap<String, Vec<u8>>> {
    let dir = data_dir.join(format!("{topic}-{PARTITION}"));
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "log") {
            let file = path
                .file_name()
                .context("a file name")?
                .to_string_lossy()
                .into_owned();
            out.insert(file, std::fs::read(&path)?);
        }
    }
    Ok(out)
}

/// Waits until the three replicas' segments are byte-identical; fails naming the sizes.
fn wait_replicas_identical(cluster: &mut Cluster, topic: &str) -> Result<Duration> {
    let mut last = String::new();
    let waited = wait_for(CONVERGE_BOUND, "every replica's segments identical", || {
        let views = (1..=3)
            .map(|node| segments(&cluster.node(node).data_dir(), topic))
            .collect::<Result<Vec<_>>>()?;
        last = views
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let sizes: Vec<String> = v.iter().map(|(f, b)| format!("{f}={}", b.len())).collect();
                format!("node {}: {}", i + 1, sizes.join(","))
            })
            .collect::<Vec<_>>()
            .join("; ");
        Ok(!views[0].is_empty() && views.iter().all(|v| *v == views[0]))
    });
    waited.with_context(|| format!("segments at the end: {last}"))
}

fn values_of(prefix: &str, count: usize) -> Vec<Vec<u8>> {
    (0..count).map(|i| format!("{prefix}-{i}").into_bytes()).collect()
}

fn as_slices(values: &[Vec<u8>]) -> Vec<&[u8]> {
    values.iter().map(Vec::as_slice).collect()
}

/// Produces `values` with acks=all to whoever leads, as `witness` tells, until one answer is
/// a success (retriable errors while the leadership and ISR settle); returns the leader.
fn produce_committed(cluster: &mut Cluster, witness: i32, topic: &str, values: &[Vec<u8>]) -> Result<i32> {
    let mut last = String::new();
    let mut leader = -1;
    let result = wait_for(LEADER_MOVE_BOUND, "an acks=all produce succeeds", || {
        leader = state(cluster, witness, topic)?.leader;
        if leader < 1 {
            return Ok(false);
        }
        let mut conn = cluster.connect(leader)?;
        let (code, _) = produce_values(&mut conn, topic, &as_slices(values), -1)?;
        last = format!("leader {leader} answered error {code}");
        Ok(code == 0)
    });
    result.with_context(|| last.clone())?;
    Ok(leader)
}

/// The values in `gone` appear nowhere in the partition's segments in `data_dir`.
fn assert_nothing_of(data_dir: &Path, topic: &str, gone: &[Vec<u8>]) -> Result<()> {
    let bytes: Vec<u8> = segments(data_dir, topic)?.into_values().flatten().collect();
    for value in gone {
        let found = bytes.windows(value.len()).any(|w| w == value.as_slice());
        ensure!(
            !found,
            "{:?} is still in {}",
            String::from_utf8_lossy(value),
            data_dir.display()
        );
    }
    Ok(())
}

#[test]
fn followers_truncate_after_a_leader_change_and_never_expose_a_record_that_was_not_committed() -> Result<()> {
    // Long lag time: while its followers are frozen the leader keeps them in the ISR.
    let mut cluster = Cluster::start(3, SESSION_TIMEOUT_MS, options(60_000))?;
    let topic = unique_topic("repl-truncate");
    create_topic(&mut cluster, &topic)?;
    let old = state(&mut cluster, 1, &topic)?;
    let mut conn = cluster.connect(old.leader)?;
    let committed = values_of("committed", 5);
    assert_eq!(
        produce_values(&mut conn, &topic, &as_slices(&committed), -1)?,
        (0, 0)
    );
    let followers: Vec<i32> = (1..=3).filter(|n| *n != old.leader).collect();
    for node in &followers {
        cluster.node(*node).pause()?;
    }
    // acks=1: the leader alone has these; its followers (still in its ISR) do not.
    let uncommitted = values_of("uncommitted", 3);
    for value in &uncommitted {
        let (code, offset) = produce_values(&mut conn, &topic, &[value.as_slice()], 1)?;
        assert_eq!(code, 0, "acks=1 to the leader with frozen followers");
        assert!(offset >= 5, "offset {offset}");
    }
    let view = consumer_view(&mut conn, &topic)?;
    assert_eq!(
        (view.latest, view.high_watermark),
        (5, 5),
        "the high watermark stays at what the ISR has"
    );
    assert_eq!(
        view.values, committed,
        "a consumer sees the committed records only"
    );
    drop(conn);
    cluster.node(old.leader).kill9()?;
    for node in &followers {
        cluster.node(*node).resume()?;
    }
    let witness = followers[0];
    let moved = wait_for(LEADER_MOVE_BOUND, "a new leader among the followers", || {
        let now = state(&mut cluster, witness, &topic)?;
        Ok(followers.contains(&now.leader) && now.epoch > old.epoch)
    })?;
    println!(
        "leader {} killed, followers resumed: new leader within {moved:?}",
        old.leader
    );
    let after = values_of("after", 4);
    let new_leader = produce_committed(&mut cluster, witness, &topic, &after)?;
    cluster.restart(old.leader)?;
    let rejoined = wait_for(CONVERGE_BOUND, "the old leader back in the ISR", || {
        Ok(state(&mut cluster, witness, &topic)?.isr == [1, 2, 3])
    })?;
    let identical = wait_replicas_identical(&mut cluster, &topic)?;
    println!(
        "old leader {} rejoined the ISR within {rejoined:?}, replicas identical {identical:?} later",
        old.leader
    );
    let mut conn = cluster.connect(new_leader)?;
    let view = consumer_view(&mut conn, &topic)?;
    let expected: Vec<Bytes> = committed
        .iter()
        .chain(&after)
        .map(|v| Bytes::from(v.clone()))
        .collect();
    assert_eq!(
        view.values, expected,
        "committed, then what the new leader took; nothing else"
    );
    assert_eq!((view.latest, view.high_watermark), (9, 9));
    assert_nothing_of(&cluster.node(old.leader).data_dir(), &topic, &uncommitted)
}

#[test]
fn the_high_watermark_consumers_see_never_passes_what_the_isr_has() -> Result<()> {
    let mut cluster = Cluster::start(3, SESSION_TIMEOUT_MS, options(60_000))?;
    let topic = unique_topic("repl-hw");
    create_topic(&mut cluster, &topic)?;
    let leader = state(&mut cluster, 1, &topic)?.leader;
    let mut conn = cluster.connect(leader)?;
    let committed = values_of("committed", 4);
    assert_eq!(
        produce_values(&mut conn, &topic, &as_slices(&committed), -1)?,
        (0, 0)
    );
    let followers: Vec<i32> = (1..=3).filter(|n| *n != leader).collect();
    for node in &followers {
        cluster.node(*node).pause()?;
    }
    // The leader's log grows; the high watermark stays where the frozen followers are.
    let mut log_end = 4;
    for round in 0..10 {
        let value = format!("acks1-{round}");
        let (code, offset) = produce_values(&mut conn, &topic, &[value.as_bytes()], 1)?;
        assert_eq!((code, offset), (0, log_end), "acks=1 append {round}");
        log_end += 1;
        let view = consumer_view(&mut conn, &topic)?;
        assert_eq!(
            (view.latest, view.high_watermark, view.values.len()),
            (4, 4, 4),
            "round {round}: log end {log_end}, but the ISR has 4 records"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for node in &followers {
        cluster.node(*node).resume()?;
    }
    let caught_up = wait_for(CONVERGE_BOUND, "the high watermark reaches the log end", || {
        let view = consumer_view(&mut conn, &topic)?;
        Ok(view.latest == log_end && view.high_watermark == log_end)
    })?;
    println!("followers resumed: high watermark {log_end} within {caught_up:?}");
    let view = consumer_view(&mut conn, &topic)?;
    assert_eq!(view.values.len() as i64, log_end);
    assert_eq!(&view.values[4][..], b"acks1-0");
    wait_replicas_identical(&mut cluster, &topic)?;
    Ok(())
}

#[test]
fn a_follower_that_stops_fetching_leaves_the_isr_after_the_lag_time_and_the_high_watermark_moves_on(
) -> Result<()> {
    // A long session: the frozen follower stays registered, so only the lag takes it out.
    const LAG_MS: u64 = 2000;
    let mut cluster = Cluster::start(3, 30_000, options(LAG_MS))?;
    let topic = unique_topic("repl-lag");
    create_topic(&mut cluster, &topic)?;
    let leader = state(&mut cluster, 1, &topic)?.leader;
    let followers: Vec<i32> = (1..=3).filter(|n| *n != leader).collect();
    let (frozen, fetching) = (followers[0], followers[1]);
    cluster.node(frozen).pause()?;
    let mut conn = cluster.connect(leader)?;
    let (code, offset) = produce_values(&mut conn, &topic, &[b"first"], 1)?;
    assert_eq!((code, offset), (0, 0));
    let view = consumer_view(&mut conn, &topic)?;
    assert_eq!(
        view.high_watermark, 0,
        "not committed while the frozen follower is in the ISR"
    );
    let shrunk = wait_for(
        Duration::from_millis(LAG_MS) + Duration::from_secs(10),
        "the frozen follower leaves the ISR",
        || {
            let now = state(&mut cluster, fetching, &topic)?;
            let mut expected = vec![leader, fetching];
            expected.sort_unstable();
            Ok(now.isr == expected)
        },
    )?;
    let moved = wait_for(Duration::from_secs(5), "the high watermark moves on", || {
        Ok(consumer_view(&mut conn, &topic)?.high_watermark == 1)
    })?;
    println!(
        "follower {frozen} frozen: out of the ISR within {shrunk:?}, high watermark moved {moved:?} later"
    );
    let (code, _) = produce_values(&mut conn, &topic, &[b"second"], -1)?;
    assert_eq!(code, 0, "acks=all with two in sync (min.insync.replicas=2)");
    cluster.node(frozen).resume()?;
    let back = wait_for(CONVERGE_BOUND, "the follower back in the ISR", || {
        Ok(state(&mut cluster, leader, &topic)?.isr == [1, 2, 3])
    })?;
    println!("follower {frozen} resumed: back in the ISR within {back:?}");
    wait_replicas_identical(&mut cluster, &topic)?;
    let view = consumer_view(&mut conn, &topic)?;
    if view.values != [Bytes::from_static(b"first"), Bytes::from_static(b"second")] {
        bail!("records read back: {:?}", view.values);
    }
    Ok(())
}
