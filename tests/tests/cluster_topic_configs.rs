//! Topic configs in a cluster live in the metadata log: AlterConfigs and IncrementalAlterConfigs
//! asked of any broker go through the controller, and every replica applies them. A shorter
//! `retention.ms` deletes old segments on every replica; a lower `min.insync.replicas` lets the
//! leader take acks=all again with a replica down. Three real broker processes.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::{DescribeConfigsRequest, IncrementalAlterConfigsRequest};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::wire::{
    create_topic_replicated, partition_view, produce_when_known, record_batch, WireConnection,
};
use laminar_tests::{cli, wait_for, Cluster};

const SESSION_TIMEOUT_MS: u64 = 3000;
const RESOURCE_TOPIC: i8 = 2;
const OP_SET: i8 = 0;
const OP_APPEND: i8 = 2;
const NOT_ENOUGH_REPLICAS: i16 = 19;
/// How long a change may take to hold everywhere before the test fails; the figure printed is
/// what it took.
const APPLIED_WITHIN: Duration = Duration::from_secs(15);

fn start_cluster() -> Result<Cluster> {
    let options = Cluster::node_options()
        .with_override("log.retention.check.interval.ms", "300")
        .with_override("replica.lag.time.max.ms", "2000");
    Cluster::start(3, SESSION_TIMEOUT_MS, options)
}

/// Creates `topic` (one partition on all three nodes, `configs`) and waits for its leader.
fn create(cluster: &mut Cluster, topic: &str, configs: &[(&str, &str)]) -> Result<i32> {
    let mut conn = cluster.connect(1)?;
    let mut code = -1;
    wait_for(Duration::from_secs(10), "the topic created", || {
        code = create_topic_replicated(&mut conn, topic, (1, 3), configs)?;
        Ok(code != 38) // until every broker registered: INVALID_REPLICATION_FACTOR
    })?;
    ensure!(code == 0, "create {topic}: error {code}");
    let mut leader = -1;
    wait_for(Duration::from_secs(10), "a leader", || {
        leader = partition_view(&mut conn, topic, 0)?.leader;
        Ok(leader > 0)
    })?;
    Ok(leader)
}

/// IncrementalAlterConfigs of one key of `topic` with `operation`; the answer's error code.
fn alter_config(
    conn: &mut WireConnection,
    topic: &str,
    (key, operation): (&str, i8),
    value: &str,
) -> Result<i16> {
    let config = AlterableConfig::default()
        .with_name(StrBytes::from_string(key.to_string()))
        .with_config_operation(operation)
        .with_value(Some(StrBytes::from_string(value.to_string())));
    let resource = AlterConfigsResource::default()
        .with_resource_type(RESOURCE_TOPIC)
        .with_resource_name(StrBytes::from_string(topic.to_string()))
        .with_configs(vec![config]);
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![resource]);
    let response = conn.request(&request, 1)?;
    Ok(response
        .responses
        .first()
        .context("no resource answered")?
        .error_code)
}

/// `key` of `topic` as DescribeConfigs answers it.
fn described(conn: &mut WireConnection, topic: &str, key: &str) -> Result<Option<String>> {
    let resource = DescribeConfigsResource::default()
        .with_resource_type(RESOURCE_TOPIC)
        .with_resource_name(StrBytes::from_string(topic.to_string()))
        .with_configuration_keys(Some(vec![StrBytes::from_string(key.to_string())]));
    let response = conn.request(
        &DescribeConfigsRequest::default().with_resources(vec![resource]),
        1,
    )?;
    let result = response.results.first().context("no resource answered")?;
    ensure!(
        result.error_code == 0,
        "DescribeConfigs: error {}",
        result.error_code
    );
    Ok(result
        .configs
        .first()
        .and_then(|c| c.value.as_ref().map(|v| v.to_string())))
}

fn segment_count(data_dir: &Path, topic: &str) -> Result<usize> {
    let dir = data_dir.join(format!("{topic}-0"));
    let entries = std::fs::read_dir(&dir).with_context(|| format!("{}", dir.display()))?;
    let mut count = 0;
    for entry in entries {
        count += usize::from(entry?.file_name().to_string_lossy().ends_with(".log"));
    }
    Ok(count)
}

/// Waits until every node's DescribeConfigs shows `key=value` for `topic`; the time it took.
fn wait_described_everywhere(
    cluster: &mut Cluster,
    topic: &str,
    (key, value): (&str, &str),
) -> Result<Duration> {
    let start = Instant::now();
    for node in 1..=3 {
        let mut conn = cluster.connect(node)?;
        wait_for(APPLIED_WITHIN, "the change described", || {
            Ok(described(&mut conn, topic, key)?.as_deref() == Some(value))
        })?;
    }
    Ok(start.elapsed())
}

#[test]
fn a_shorter_retention_altered_through_one_broker_deletes_old_segments_on_every_replica() -> Result<()> {
    let mut cluster = start_cluster()?;
    let topic = "aged";
    let configs = [("retention.ms", "-1"), ("segment.bytes", "1024")];
    let leader = create(&mut cluster, topic, &configs)?;
    let mut conn = cluster.connect(leader)?;
    let value = [b'v'; 300];
    for _ in 0..20 {
        // Timestamps of 1970: old for any retention but an infinite one.
        let batch = record_batch(&[&value[..]], 1_000)?;
        let answer = produce_when_known(&mut conn, (topic, 0), batch, -1, Duration::from_secs(10))?;
        ensure!(
            answer.error_code == 0,
            "acks=all produce: error {}",
            answer.error_code
        );
    }
    for node in 1..=3 {
        let count = segment_count(&cluster.node(node).data_dir(), topic)?;
        ensure!(count > 3, "node {node} holds {count} segments before the change");
    }
    // Through another broker than the leader, with the CLI.
    let other = if leader == 1 { 2 } else { 1 };
    let bootstrap = cluster.node(other).bootstrap();
    let args = [
        "topic",
        "alter-config",
        topic,
        "--set",
        "retention.ms=60000",
        "--brokers",
        &bootstrap,
    ];
    let altered = cli::run(&args, "")?;
    ensure!(altered.success, "alter-config: {}", altered.stderr);
    let started = Instant::now();
    let described_after = wait_described_everywhere(&mut cluster, topic, ("retention.ms", "60000"))?;
    for node in 1..=3 {
        let dir = cluster.node(node).data_dir();
        wait_for(APPLIED_WITHIN, "old segments deleted", || {
            Ok(segment_count(&dir, topic)? == 1)
        })?;
    }
    println!(
        "retention.ms altered: described by every broker after {} ms, old segments gone on every replica after {} ms",
        described_after.as_millis(),
        started.elapsed().as_millis()
    );
    Ok(())
}

#[test]
fn a_lower_min_insync_replicas_lets_the_leader_take_acks_all_with_a_replica_down() -> Result<()> {
    let mut cluster = start_cluster()?;
    let topic = "guarded";
    let leader = create(&mut cluster, topic, &[("min.insync.replicas", "3")])?;
    let follower = (1..=3).find(|n| *n != leader).context("a follower")?;
    cluster.node(follower).kill9()?;
    let mut conn = cluster.connect(leader)?;
    let batch = record_batch(&[b"one".as_slice()], 1_000)?;
    let mut code = 0;
    wait_for(
        APPLIED_WITHIN,
        "acks=all refused with two in-sync replicas",
        || {
            code = produce_when_known(&mut conn, (topic, 0), batch.clone(), -1, Duration::from_secs(10))?
                .error_code;
            Ok(code == NOT_ENOUGH_REPLICAS)
        },
    )?;
    let via = (1..=3)
        .find(|n| *n != leader && *n != follower)
        .context("a third node")?;
    let started = Instant::now();
    let code = alter_config(
        &mut cluster.connect(via)?,
        topic,
        ("min.insync.replicas", OP_SET),
        "2",
    )?;
    ensure!(code == 0, "IncrementalAlterConfigs: error {code}");
    let answered = started.elapsed();
    // The answer waited for the answering broker's view; the leader applies the change from
    // its own, a moment later at most.
    wait_for(APPLIED_WITHIN, "the leader taking acks=all", || {
        let code =
            produce_when_known(&mut conn, (topic, 0), batch.clone(), -1, Duration::from_secs(10))?.error_code;
        ensure!(
            code == 0 || code == NOT_ENOUGH_REPLICAS,
            "acks=all after the change: error {code}"
        );
        Ok(code == 0)
    })?;
    println!(
        "min.insync.replicas lowered: answered after {} ms, the leader took acks=all after {} ms",
        answered.as_millis(),
        started.elapsed().as_millis()
    );
    Ok(())
}

/// Two clients append to one list config of one topic at once through different brokers, twenty
/// items each: every item is held at the end (a change computed from overrides another one
/// replaced is computed again, not written over it).
#[test]
fn appends_to_one_topic_through_different_brokers_at_once_all_hold() -> Result<()> {
    const KEY: &str = "leader.replication.throttled.replicas";
    const ROUNDS: i32 = 20;
    let mut cluster = start_cluster()?;
    let topic = "contended";
    create(&mut cluster, topic, &[])?;
    let mut writers = Vec::new();
    for node in [1, 2] {
        let mut conn = cluster.connect(node)?;
        writers.push(std::thread::spawn(move || -> Result<()> {
            for round in 0..ROUNDS {
                let item = format!("{round}:{node}");
                let code = alter_config(&mut conn, topic, (KEY, OP_APPEND), &item)?;
                ensure!(code == 0, "append {item}: error {code}");
            }
            Ok(())
        }));
    }
    for writer in writers {
        writer
            .join()
            .map_err(|_| anyhow::anyhow!("a writer panicked"))??;
    }
    let mut expected: Vec<String> = (0..ROUNDS)
        .flat_map(|r| [format!("{r}:1"), format!("{r}:2")])
        .collect();
    expected.sort_unstable();
    // Node 3 answered none of the changes: it shows them once it has applied the last.
    let mut conn = cluster.connect(3)?;
    let mut held = String::new();
    let all_held = wait_for(APPLIED_WITHIN, "every item held", || {
        held = described(&mut conn, topic, KEY)?.unwrap_or_default();
        let mut items: Vec<&str> = held.split(',').collect();
        items.sort_unstable();
        Ok(items == expected)
    });
    all_held.with_context(|| format!("held: {held}"))?;
    Ok(())
}
