//! Three real brokers in combined mode, replication factor 3, `min.insync.replicas=2`, driven
//! with raw Kafka requests: a record the in-sync replicas do not all have is not committed, and
//! no consumer ever sees it — the high watermark (Fetch's, ListOffsets latest) stays below it
//! while the followers are frozen (SIGSTOP) and the leader's log grows; after the leader dies
//! with such records, the new leader goes on without them and the old one, restarted,
//! truncates them: every replica ends byte-identical. A follower that stops fetching leaves
//! the ISR after `replica.lag.time.max.ms` (also when it is the active controller) and the high
//! watermark moves on without it.

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

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// How long a follower's fetch waits at its leader for data (`replica.fetch.wait.max.ms`).
const FETCH_WAIT_MS: u64 = 200;

fn options(lag_time_ms: u64) -> BrokerOptions {
    Cluster::node_options()
        .with_override("min.insync.replicas", "2")
        .with_override("replica.lag.time.max.ms", &lag_time_ms.to_string())
        .with_override("replica.fetch.wait.max.ms", &FETCH_WAIT_MS.to_string())
}

/// Freezes `nodes`, then waits until the fetches they had parked at their leader were
/// answered (empty, after `replica.fetch.wait.max.ms`) into their sockets: from then on
/// nothing the leader appends reaches them until they are resumed.
fn freeze(cluster: &mut Cluster, nodes: &[i32]) -> Result<()> {
    for node in nodes {
        cluster.node(*node).pause()?;
    }
    std::thread::sleep(Duration::from_millis(3 * FETCH_WAIT_MS));
    Ok(())
}

fn controller_id(cluster: &mut Cluster, node: i32) -> Result<i32> {
    let request = kafka_protocol::messages::DescribeClusterRequest::default();
    Ok(cluster.connect(node)?.request(&request, 0)?.controller_id.0)
}

/// Creates `topic` (replication factor 3, min.insync.replicas=2) through node 1 and waits until
/// every broker knows it with all three replicas in sync.
fn create_topic(cluster: &mut Cluster, topic: &str, partitions: i32) -> Result<()> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(3)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("min.insync.replicas"))
                .with_value(Some(StrBytes::from_static_str("2")))])]);
    let code = cluster.connect(1)?.request(&request, 5)?.topics[0].error_code;
    ensure!(code == 0, "create {topic}: error {code}");
    for (node, partition) in (1..=3).flat_map(|n| (0..partitions).map(move |p| (n, p))) {
        wait_for(
            Duration::from_secs(10),
            "the topic everywhere, all in sync",
            || Ok(state(cluster, node, topic, partition)?.isr == [1, 2, 3]),
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

fn state(cluster: &mut Cluster, node: i32, topic: &str, partition: i32) -> Result<PartitionState> {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name(topic)))
    ]));
    let response = cluster.connect(node)?.request(&request, 9)?;
    let partition = response
        .topics
        .first()
        .and_then(|t| t.partitions.iter().find(|p| p.partition_index == partition))
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

fn consumer_view(conn: &mut WireConnection, topic: &str, partition: i32) -> Result<ConsumerView> {
    let (code, latest, _) = list_offset(conn, topic, partition, -1)?;
    ensure!(code == 0, "ListOffsets latest: error {code}");
    let mut values = Vec::new();
    let mut high_watermark = -1;
    loop {
        let next = values.len() as i64;
        let data = fetch(conn, topic, partition, next)?;
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
fn produce_values(
    conn: &mut WireConnection,
    (topic, partition): (&str, i32),
    values: &[&[u8]],
    acks: i16,
) -> Result<(i16, i64)> {
    let answer = produce(conn, topic, partition, record_batch(values, TIMESTAMP_MS)?, acks)?;
    Ok((answer.error_code, answer.base_offset))
}

/// `{file name: bytes}` of the partition's `*.log` segments in one data dir.
fn segments(data_dir: &Path, topic: &str, partition: i32) -> Result<BTreeMap<String, Vec<u8>>> {
    let dir = data_dir.join(format!("{topic}-{partition}"));
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
fn wait_replicas_identical(cluster: &mut Cluster, topic: &str, partition: i32) -> Result<Duration> {
    let mut last = String::new();
    let waited = wait_for(CONVERGE_BOUND, "every replica's segments identical", || {
        let views = (1..=3)
            .map(|node| segments(&cluster.node(node).data_dir(), topic, partition))
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
        leader = state(cluster, witness, topic, 0)?.leader;
        if leader < 1 {
            return Ok(false);
        }
        let mut conn = cluster.connect(leader)?;
        let (code, _) = produce_values(&mut conn, (topic, 0), &as_slices(values), -1)?;
        last = format!("leader {leader} answered error {code}");
        Ok(code == 0)
    });
    result.with_context(|| last.clone())?;
    Ok(leader)
}

/// The values in `gone` appear nowhere in the partition's segments in `data_dir`.
fn assert_nothing_of(data_dir: &Path, topic: &str, gone: &[Vec<u8>]) -> Result<()> {
    let bytes: Vec<u8> = segments(data_dir, topic, 0)?.into_values().flatten().collect();
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
    create_topic(&mut cluster, &topic, 1)?;
    let old = state(&mut cluster, 1, &topic, 0)?;
    let mut conn = cluster.connect(old.leader)?;
    let committed = values_of("committed", 5);
    assert_eq!(
        produce_values(&mut conn, (&topic, 0), &as_slices(&committed), -1)?,
        (0, 0)
    );
    let followers: Vec<i32> = (1..=3).filter(|n| *n != old.leader).collect();
    freeze(&mut cluster, &followers)?;
    // acks=1: the leader alone has these; its followers (still in its ISR) do not.
    let uncommitted = values_of("uncommitted", 3);
    for value in &uncommitted {
        let (code, offset) = produce_values(&mut conn, (&topic, 0), &[value.as_slice()], 1)?;
        assert_eq!(code, 0, "acks=1 to the leader with frozen followers");
        assert!(offset >= 5, "offset {offset}");
    }
    let view = consumer_view(&mut conn, &topic, 0)?;
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
        let now = state(&mut cluster, witness, &topic, 0)?;
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
        Ok(state(&mut cluster, witness, &topic, 0)?.isr == [1, 2, 3])
    })?;
    let identical = wait_replicas_identical(&mut cluster, &topic, 0)?;
    println!(
        "old leader {} rejoined the ISR within {rejoined:?}, replicas identical {identical:?} later",
        old.leader
    );
    let mut conn = cluster.connect(new_leader)?;
    let view = consumer_view(&mut conn, &topic, 0)?;
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
    // A long session and lag time: the frozen followers stay registered and in the ISR (a
    // fenced leader would hand over to a follower without the acks=1 records, legitimately).
    let mut cluster = Cluster::start(3, 30_000, options(60_000))?;
    let topic = unique_topic("repl-hw");
    create_topic(&mut cluster, &topic, 1)?;
    let leader = state(&mut cluster, 1, &topic, 0)?.leader;
    let mut conn = cluster.connect(leader)?;
    let committed = values_of("committed", 4);
    assert_eq!(
        produce_values(&mut conn, (&topic, 0), &as_slices(&committed), -1)?,
        (0, 0)
    );
    let followers: Vec<i32> = (1..=3).filter(|n| *n != leader).collect();
    freeze(&mut cluster, &followers)?;
    // The leader's log grows; the high watermark stays where the frozen followers are.
    let mut log_end = 4;
    for round in 0..10 {
        let value = format!("acks1-{round}");
        let (code, offset) = produce_values(&mut conn, (&topic, 0), &[value.as_bytes()], 1)?;
        assert_eq!((code, offset), (0, log_end), "acks=1 append {round}");
        log_end += 1;
        let view = consumer_view(&mut conn, &topic, 0)?;
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
        let view = consumer_view(&mut conn, &topic, 0)?;
        Ok(view.latest == log_end && view.high_watermark == log_end)
    })?;
    println!("followers resumed: high watermark {log_end} within {caught_up:?}");
    let view = consumer_view(&mut conn, &topic, 0)?;
    assert_eq!(view.values.len() as i64, log_end);
    assert_eq!(&view.values[4][..], b"acks1-0");
    wait_replicas_identical(&mut cluster, &topic, 0)?;
    Ok(())
}

/// Freezes follower `frozen` of `partition` (led by `leader`): a record appended then is not
/// committed while `frozen` is in the ISR; the leader drops it from the ISR after the lag time
/// (as the leader's own Metadata tells), the high watermark moves on, acks=all works with the
/// two left; resumed, it catches up and rejoins the ISR.
fn freeze_until_out_of_the_isr(
    cluster: &mut Cluster,
    (topic, partition): (&str, i32),
    leader: i32,
    frozen: i32,
    lag: Duration,
) -> Result<()> {
    let fetching = (1..=3)
        .find(|n| *n != leader && *n != frozen)
        .context("a third node")?;
    freeze(cluster, &[frozen])?;
    let mut conn = cluster.connect(leader)?;
    let value = format!("while-{frozen}-frozen");
    let (code, offset) = produce_values(&mut conn, (topic, partition), &[value.as_bytes()], 1)?;
    ensure!(code == 0, "acks=1 with {frozen} frozen: error {code}");
    let view = consumer_view(&mut conn, topic, partition)?;
    ensure!(
        view.high_watermark == offset,
        "high watermark {} with {frozen} frozen in the ISR, the record at {offset}",
        view.high_watermark
    );
    let mut expected = vec![leader, fetching];
    expected.sort_unstable();
    let what = format!("frozen follower {frozen} out of the ISR of {topic}-{partition} (leader {leader})");
    let shrunk = wait_for(lag + Duration::from_secs(10), &what, || {
        Ok(state(cluster, leader, topic, partition)?.isr == expected)
    })?;
    let moved = wait_for(Duration::from_secs(5), "the high watermark moves on", || {
        Ok(consumer_view(&mut conn, topic, partition)?.high_watermark == offset + 1)
    })?;
    println!(
        "follower {frozen} frozen: out of the ISR within {shrunk:?}, high watermark moved {moved:?} later"
    );
    let (code, _) = produce_values(&mut conn, (topic, partition), &[b"two-in-sync"], -1)?;
    ensure!(
        code == 0,
        "acks=all with two in sync (min.insync.replicas=2): error {code}"
    );
    cluster.node(frozen).resume()?;
    let back = wait_for(CONVERGE_BOUND, "the follower back in the ISR", || {
        Ok(state(cluster, leader, topic, partition)?.isr == [1, 2, 3])
    })?;
    println!("follower {frozen} resumed: back in the ISR within {back:?}");
    Ok(())
}

/// The lag-time setting of the tests that freeze one follower.
const LAG: Duration = Duration::from_millis(2000);

/// A cluster with a long session (a frozen follower stays registered, so only its lag takes
/// it out of the ISR) and a 3-partition topic; returns it with a partition the active
/// controller follows: (topic, partition, its leader, the controller, the third node).
fn lag_cluster(prefix: &str) -> Result<(Cluster, String, i32, i32, i32, i32)> {
    let mut cluster = Cluster::start(3, 30_000, options(LAG.as_millis() as u64))?;
    let topic = unique_topic(prefix);
    create_topic(&mut cluster, &topic, 3)?;
    let controller = controller_id(&mut cluster, 1)?;
    let mut led_elsewhere = None;
    for partition in 0..3 {
        let leader = state(&mut cluster, 1, &topic, partition)?.leader;
        if leader != controller {
            led_elsewhere = Some((partition, leader));
        }
    }
    let (partition, leader) = led_elsewhere.context("a partition the controller does not lead")?;
    let other = (1..=3)
        .find(|n| *n != leader && *n != controller)
        .context("a third node")?;
    Ok((cluster, topic, partition, leader, controller, other))
}

/// Every replica of the partition the same, holding what `freeze_until_out_of_the_isr`
/// wrote while `frozen` (in order) were frozen.
fn assert_written_while_frozen(
    cluster: &mut Cluster,
    (topic, partition): (&str, i32),
    leader: i32,
    frozen: &[i32],
) -> Result<()> {
    wait_replicas_identical(cluster, topic, partition)?;
    let mut conn = cluster.connect(leader)?;
    let values = consumer_view(&mut conn, topic, partition)?.values;
    let text: Vec<String> = values
        .iter()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    let expected: Vec<String> = frozen
        .iter()
        .flat_map(|n| [format!("while-{n}-frozen"), "two-in-sync".into()])
        .collect();
    if text != expected {
        bail!("records read back: {text:?}, expected {expected:?}");
    }
    Ok(())
}

#[test]
fn a_follower_that_stops_fetching_leaves_the_isr_after_the_lag_time_and_the_high_watermark_moves_on(
) -> Result<()> {
    let (mut cluster, topic, partition, leader, _controller, other) = lag_cluster("repl-lag")?;
    freeze_until_out_of_the_isr(&mut cluster, (&topic, partition), leader, other, LAG)?;
    assert_written_while_frozen(&mut cluster, (&topic, partition), leader, &[other])
}

/// The frozen follower is the active controller: the ISR change goes to the controller the
/// other two elect meanwhile, within the lag time and an election — not after the 30 s a
/// request to the frozen one may wait.
#[test]
fn a_frozen_active_controller_leaves_the_isr_of_a_partition_it_follows_after_the_lag_time() -> Result<()> {
    let (mut cluster, topic, partition, leader, controller, _other) = lag_cluster("repl-lag-ctl")?;
    freeze_until_out_of_the_isr(&mut cluster, (&topic, partition), leader, controller, LAG)?;
    assert_written_while_frozen(&mut cluster, (&topic, partition), leader, &[controller])
}
