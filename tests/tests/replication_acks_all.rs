//! Three real brokers, replication factor 3: followers copy their leaders byte for byte, and
//! acks=all means every in-sync replica has the batch, with `min.insync.replicas=2` refusing
//! what too few replicas could hold (NOT_ENOUGH_REPLICAS); a follower that comes back below its
//! leader's log start starts again there.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use laminar_tests::http::{get_ok, MetricsPage};
use laminar_tests::rdkafka_client::unique_topic;
use laminar_tests::wire::{
    create_topic_replicated, fetch_code_at_leader_epoch, fetch_records, list_offset, partition_view, produce,
    produce_when_known, record_batch,
};
use laminar_tests::{wait_for, Cluster};

const SESSION_TIMEOUT_MS: u64 = 3000;
/// Short, so that a dead follower leaves the ISR within the test's patience.
const LAG_TIME_MAX_MS: &str = "2000";
const NOT_ENOUGH_REPLICAS: i16 = 19;
const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;
const REQUEST_TIMED_OUT: i16 = 7;

/// `nodes` brokers, each a voter of the quorum too (combined mode).
fn start_cluster(nodes: usize) -> Result<Cluster> {
    let options = Cluster::node_options()
        .with_override("replica.lag.time.max.ms", LAG_TIME_MAX_MS)
        .with_override("replica.high.watermark.checkpoint.interval.ms", "500")
        .with_override("min.insync.replicas", "2");
    Cluster::start(nodes, SESSION_TIMEOUT_MS, options)
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

fn create_topic(cluster: &mut Cluster, topic: &str, partitions: i32) -> Result<()> {
    let mut conn = cluster.connect(1)?;
    let mut code = -1;
    // Every node serves, but the quorum may not have seen every registration yet: until it
    // has, a replication factor above the live brokers is INVALID_REPLICATION_FACTOR.
    wait_for(Duration::from_secs(10), "the topic created", || {
        code = create_topic_replicated(&mut conn, topic, (partitions, 3), &[])?;
        Ok(code != 38)
    })?;
    anyhow::ensure!(code == 0, "create {topic}: error {code}");
    Ok(())
}

/// (leader, ISR) of `topic`'s `partition` as node `via` tells.
fn leader_and_isr(cluster: &mut Cluster, via: i32, topic: &str, partition: i32) -> Result<(i32, Vec<i32>)> {
    let view = partition_view(&mut cluster.connect(via)?, topic, partition)?;
    Ok((view.leader, view.isr))
}

/// The leader epoch of partition 0 of `topic` as node `via` tells.
fn leader_epoch(cluster: &mut Cluster, via: i32, topic: &str) -> Result<i32> {
    Ok(partition_view(&mut cluster.connect(via)?, topic, 0)?.leader_epoch)
}

/// The bytes of every segment file of `topic-partition` in a node's data dir, by name.
fn segments(data_dir: PathBuf, topic: &str, partition: i32) -> Result<Vec<(String, Vec<u8>)>> {
    let dir = data_dir.join(format!("{topic}-{partition}"));
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("{}", dir.display()))? {
        let entry = entry?;
        let file_name = entry.file_name().to_string_lossy().to_string();
        if file_name.ends_with(".log") {
            files.push((file_name, std::fs::read(entry.path())?));
        }
    }
    files.sort();
    Ok(files)
}

/// Produces `count` one-record batches with acks=all to the partition's leader (as node `via`
/// tells); every answer must be success. Returns the leader.
fn produce_acked(
    cluster: &mut Cluster,
    via: i32,
    (topic, partition): (&str, i32),
    count: usize,
) -> Result<i32> {
    let mut leader = -1;
    // CreateTopics answers at the commit; the brokers apply it a moment later.
    wait_for(Duration::from_secs(10), "a leader", || {
        leader = leader_and_isr(cluster, via, topic, partition)?.0;
        Ok(leader > 0)
    })?;
    let mut conn = cluster.connect(leader)?;
    for i in 0..count {
        let value = format!("{topic}-{partition}-{i}");
        let batch = record_batch(&[value.as_bytes()], 1_000)?;
        let answer = produce_when_known(&mut conn, (topic, partition), batch, -1, Duration::from_secs(10))?;
        anyhow::ensure!(
            answer.error_code == 0,
            "acks=all produce {i}: error {}",
            answer.error_code
        );
    }
    Ok(leader)
}

#[test]
fn followers_hold_the_leaders_bytes_and_consumers_read_what_every_replica_has() -> Result<()> {
    let mut cluster = start_cluster(3)?;
    let topic = unique_topic("replicated");
    create_topic(&mut cluster, &topic, 2)?;
    for partition in 0..2 {
        let leader = produce_acked(&mut cluster, 1, (&topic, partition), 50)?;
        // acks=all answered: the high watermark already covers all 50 on the leader.
        let mut conn = cluster.connect(leader)?;
        let (code, latest, _) = list_offset(&mut conn, &topic, partition, -1)?;
        assert_eq!(
            (code, latest),
            (0, 50),
            "ListOffsets latest is the high watermark"
        );
        let records = fetch_records(&mut conn, &topic, partition, 0, 50)?;
        assert_eq!(records.len(), 50);
        for (i, record) in records.iter().enumerate() {
            let want = format!("{topic}-{partition}-{i}");
            assert_eq!(record.value.as_deref(), Some(want.as_bytes()), "record {i}");
        }
        assert_consumer_epochs_checked(
            &mut conn,
            &topic,
            partition,
            leader_epoch(&mut cluster, leader, &topic)?,
        )?;
        let leader_bytes = segments(cluster.node(leader).data_dir(), &topic, partition)?;
        assert!(!leader_bytes.is_empty());
        for node in (1..=3).filter(|n| *n != leader) {
            let data_dir = cluster.node(node).data_dir();
            wait_for(
                Duration::from_secs(10),
                "a follower's segments equal the leader's",
                || Ok(segments(data_dir.clone(), &topic, partition)? == leader_bytes),
            )?;
        }
        // Every replica's high watermark reaches its shard's replication-offset-checkpoint.
        for node in 1..=3 {
            let file = cluster
                .node(node)
                .data_dir()
                .join("replication-offset-checkpoint.shard-0");
            let line = format!("{topic} {partition} 50\n");
            wait_for(Duration::from_secs(10), "the high watermark checkpointed", || {
                Ok(std::fs::read_to_string(&file)?.contains(&line))
            })?;
        }
    }
    Ok(())
}

#[test]
fn acks_all_goes_on_with_one_of_three_replicas_down_and_is_refused_with_two_down() -> Result<()> {
    // Five nodes, so that the quorum (which commits ISR changes) outlives two dead replicas.
    let mut cluster = start_cluster(5)?;
    let topic = unique_topic("min-isr");
    create_topic(&mut cluster, &topic, 1)?;
    let leader = produce_acked(&mut cluster, 1, (&topic, 0), 10)?;
    let (_, replicas) = leader_and_isr(&mut cluster, leader, &topic, 0)?;
    let followers: Vec<i32> = replicas.into_iter().filter(|n| *n != leader).collect();
    assert_eq!(followers.len(), 2);
    cluster.node(followers[0]).kill9()?;
    // The dead follower holds the high watermark back until it leaves the ISR.
    produce_acked(&mut cluster, leader, (&topic, 0), 10)?;
    let (_, isr) = leader_and_isr(&mut cluster, leader, &topic, 0)?;
    assert!(
        !isr.contains(&followers[0]),
        "the dead follower left the ISR: {isr:?}"
    );
    let http = cluster.node(leader).http_addr();
    let page = MetricsPage::parse(&get_ok(http, "/metrics")?)?;
    assert_eq!(page.value("laminar_kafka_under_replicated_partitions"), Some(1.0));
    assert!(page.value("laminar_partitions_led").is_some_and(|led| led >= 1.0));
    cluster.node(followers[1]).kill9()?;
    let mut conn = cluster.connect(leader)?;
    let mut codes = Vec::new();
    wait_for(
        Duration::from_secs(20),
        "NOT_ENOUGH_REPLICAS once the ISR is the leader alone",
        || {
            let answer = produce(&mut conn, &topic, 0, record_batch(&[b"unguarded"], 1_000)?, -1)?;
            codes.push(answer.error_code);
            Ok(answer.error_code == NOT_ENOUGH_REPLICAS)
        },
    )
    .with_context(|| format!("codes answered: {codes:?}"))?;
    // On the way there: refusals and waits, never a success with one replica.
    let allowed = [
        NOT_ENOUGH_REPLICAS,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        REQUEST_TIMED_OUT,
    ];
    assert!(codes.iter().all(|c| allowed.contains(c)), "{codes:?}");
    for follower in &followers {
        cluster.restart(*follower)?;
    }
    wait_for(Duration::from_secs(20), "every replica back in the ISR", || {
        Ok(leader_and_isr(&mut cluster, leader, &topic, 0)?.1.len() == 3)
    })?;
    assert_eq!(
        leader_and_isr(&mut cluster, leader, &topic, 0)?.0,
        leader,
        "the leader stayed"
    );
    produce_acked(&mut cluster, leader, (&topic, 0), 5)?;
    let mut conn = cluster.connect(leader)?;
    let records = fetch_records(&mut conn, &topic, 0, 0, 20)?;
    for (i, record) in records.iter().take(20).enumerate() {
        let want = format!("{topic}-0-{}", i % 10);
        assert_eq!(
            record.value.as_deref(),
            Some(want.as_bytes()),
            "acknowledged record {i}"
        );
    }
    Ok(())
}

/// DeleteRecords on `leader` up to `offset`; returns the new low watermark.
fn delete_records(cluster: &mut Cluster, leader: i32, topic: &str, offset: i64) -> Result<i64> {
    use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
    let mut conn = cluster.connect(leader)?;
    let request = kafka_protocol::messages::DeleteRecordsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(offset)])]);
    let answer = conn.request(&request, 1)?;
    let partition = answer
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .context("no partition")?;
    anyhow::ensure!(
        partition.error_code == 0,
        "DeleteRecords: error {}",
        partition.error_code
    );
    Ok(partition.low_watermark)
}

#[test]
fn a_follower_back_below_its_leaders_log_start_starts_again_there() -> Result<()> {
    let mut cluster = start_cluster(3)?;
    let topic = unique_topic("behind-start");
    create_topic(&mut cluster, &topic, 1)?;
    let leader = produce_acked(&mut cluster, 1, (&topic, 0), 5)?;
    let follower = (1..=3).find(|n| *n != leader).context("a follower")?;
    cluster.node(follower).kill9()?;
    produce_acked(&mut cluster, leader, (&topic, 0), 20)?;
    assert_eq!(delete_records(&mut cluster, leader, &topic, 20)?, 20);
    cluster.restart(follower)?;
    wait_for(Duration::from_secs(20), "the follower back in the ISR", || {
        Ok(leader_and_isr(&mut cluster, leader, &topic, 0)?
            .1
            .contains(&follower))
    })?;
    let dir = cluster.node(follower).data_dir().join(format!("{topic}-0"));
    let mut names: Vec<String> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().to_string()))
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![format!("{:020}.log", 20)],
        "it starts at the leader's log start"
    );
    Ok(())
}

/// KIP-320: a consumer's fetch naming an older leader epoch gets FENCED_LEADER_EPOCH, a newer
/// one UNKNOWN_LEADER_EPOCH, the current one (or -1) the records.
fn assert_consumer_epochs_checked(
    conn: &mut laminar_tests::wire::WireConnection,
    topic: &str,
    partition: i32,
    epoch: i32,
) -> Result<()> {
    let mut cases = vec![(epoch + 1, 75), (epoch, 0), (-1, 0)];
    if epoch > 0 {
        cases.push((epoch - 1, 74));
    }
    for (known, expected) in cases {
        let code = fetch_code_at_leader_epoch(conn, topic, partition, known)?;
        assert_eq!(
            code, expected,
            "a fetch naming leader epoch {known} (the leader's is {epoch})"
        );
    }
    Ok(())
}
