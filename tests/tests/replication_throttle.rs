//! `follower.replication.throttled.rate` / `leader.replication.throttled.rate` hold back the
//! replicas a topic lists in `follower.replication.throttled.replicas` /
//! `leader.replication.throttled.replicas`, and only those: three real brokers, two topics
//! written alike, one throttled. (A comparison, not a timing goal: the unthrottled copy is
//! complete while the throttled one is still short, and then it completes too.)

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use laminar_tests::rdkafka_client::unique_topic;
use laminar_tests::wire::{create_topic_replicated, partition_view, produce_when_known, record_batch};
use laminar_tests::{wait_for, Cluster};

/// 128 KiB/s for the whole broker: a megabyte takes about 8 s to copy (a leader's throttle
/// covers both its followers: 4 MiB, about 32 s).
const RATE: &str = "131072";
/// Two fetches' worth: a fetch the throttle allows may take up to `replica.fetch.max.bytes`
/// (1 MiB) past the budget, as Kafka's may, so with one megabyte a small fetch during the
/// writes and one full fetch after them could copy it all before the unthrottled topic was
/// done. With two, the throttled copy waits at least once on a megabyte of debt.
const WRITTEN_BYTES: usize = 2 << 20;

/// `throttled_replicas_key`: the topic config listing its replicas as throttled (`*`), if any.
fn create_topic(
    cluster: &mut Cluster,
    topic: &str,
    throttled_replicas_key: Option<&'static str>,
) -> Result<()> {
    let configs: Vec<(&str, &str)> = throttled_replicas_key.map(|key| (key, "*")).into_iter().collect();
    let code = create_topic_replicated(&mut cluster.connect(1)?, topic, (1, 3), &configs)?;
    anyhow::ensure!(code == 0, "create {topic}: error {code}");
    Ok(())
}

fn leader_of(cluster: &mut Cluster, topic: &str) -> Result<i32> {
    let mut leader = -1;
    wait_for(Duration::from_secs(10), "a leader", || {
        leader = partition_view(&mut cluster.connect(1)?, topic, 0)?.leader;
        Ok(leader > 0)
    })?;
    Ok(leader)
}

/// Bytes in the segment files of `topic`-0 under a node's data dir.
fn replica_bytes(data_dir: &Path, topic: &str) -> u64 {
    let dir = data_dir.join(format!("{topic}-0"));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// Writes `WRITTEN_BYTES` with acks=1 (the leader's append answers) to `topic`.
fn write(cluster: &mut Cluster, topic: &str) -> Result<i32> {
    let leader = leader_of(cluster, topic)?;
    let mut conn = cluster.connect(leader)?;
    let value = vec![b'x'; 16 << 10];
    for _ in 0..WRITTEN_BYTES / value.len() {
        let batch = record_batch(&[&value], 1_000)?;
        let answer = produce_when_known(&mut conn, (topic, 0), batch, 1, Duration::from_secs(10))?;
        anyhow::ensure!(answer.error_code == 0, "produce: error {}", answer.error_code);
    }
    Ok(leader)
}

#[test]
fn throttled_followers_copy_slower_than_unthrottled_ones_and_still_catch_up() -> Result<()> {
    one_side_throttled(
        "follower.replication.throttled.rate",
        "follower.replication.throttled.replicas",
    )
}

#[test]
fn a_throttled_leader_sends_slower_to_followers_and_they_still_catch_up() -> Result<()> {
    one_side_throttled(
        "leader.replication.throttled.rate",
        "leader.replication.throttled.replicas",
    )
}

fn one_side_throttled(rate_key: &str, replicas_key: &'static str) -> Result<()> {
    let options = Cluster::node_options().with_override(rate_key, RATE);
    let mut cluster = Cluster::start(3, 3000, options)?;
    let (slow, free) = (unique_topic("throttled"), unique_topic("unthrottled"));
    create_topic(&mut cluster, &slow, Some(replicas_key))?;
    create_topic(&mut cluster, &free, None)?;
    let slow_leader = write(&mut cluster, &slow)?;
    let free_leader = write(&mut cluster, &free)?;
    let dirs: Vec<_> = (1..=3).map(|n| cluster.node(n).data_dir()).collect();
    let dir_of = |node: i32| &dirs[usize::try_from(node - 1).unwrap_or(0)];
    let free_total = replica_bytes(dir_of(free_leader), &free);
    let slow_total = replica_bytes(dir_of(slow_leader), &slow);
    assert!(free_total >= WRITTEN_BYTES as u64 && slow_total >= WRITTEN_BYTES as u64);
    wait_for(
        Duration::from_secs(20),
        "the unthrottled followers complete",
        || Ok((1..=3).all(|n| replica_bytes(dir_of(n), &free) == free_total)),
    )?;
    let slow_copied: Vec<u64> = (1..=3)
        .filter(|n| *n != slow_leader)
        .map(|n| replica_bytes(dir_of(n), &slow))
        .collect();
    assert!(
        slow_copied.iter().all(|b| *b < slow_total),
        "throttled followers hold {slow_copied:?} of {slow_total} bytes while the unthrottled ones are complete"
    );
    wait_for(
        Duration::from_secs(60),
        "the throttled followers complete",
        || Ok((1..=3).all(|n| replica_bytes(dir_of(n), &slow) == slow_total)),
    )?;
    Ok(())
}
