//! Carrying a plan out: the throttles (if asked), one AlterPartitionReassignments for every
//! move, progress until the cluster lists none of them, preferred-leader elections for the
//! moved partitions, and the throttles removed. As Kafka's reassignment tool, a throttle is a
//! rate per broker on every broker that takes part, and the topic-level lists of the replicas it
//! applies to: the current replicas on the leader side, the new ones on the follower side.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use laminar_client::{ConfigChange, Connection, Reassignment, BROKER_RESOURCE};

use super::plan::Move;
use crate::cli::progress::Progress;
use crate::cli::ADMIN_TIMEOUT_MS;

const RATE_KEYS: [&str; 2] = [
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
];
const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";
/// How often progress is asked for.
const POLL_EVERY: Duration = Duration::from_millis(500);
/// ConfigResource type of a topic.
const TOPIC_RESOURCE: i8 = 2;

pub fn run(connection: &mut Connection, moves: &[Move], throttle: Option<u64>) -> anyhow::Result<()> {
    let ongoing = connection.list_partition_reassignments(None, ADMIN_TIMEOUT_MS)?;
    if !ongoing.is_empty() {
        bail!(
            "{} partitions are moving already: wait for them, or `laminar cluster rebalance --cancel`",
            ongoing.len()
        );
    }
    if let Some(rate) = throttle {
        set_throttles(connection, moves, rate)?;
    }
    let wanted: Vec<Reassignment> = moves
        .iter()
        .map(|m| Reassignment {
            topic: m.topic.clone(),
            partition: m.partition,
            replicas: Some(m.to.clone()),
        })
        .collect();
    let outcomes = connection.alter_partition_reassignments(&wanted, ADMIN_TIMEOUT_MS)?;
    let refused: Vec<String> = outcomes
        .iter()
        .filter_map(|(topic, partition, outcome)| {
            outcome
                .as_ref()
                .err()
                .map(|e| format!("{topic}-{partition}: {e}"))
        })
        .collect();
    if !refused.is_empty() {
        eprintln!("refused: {}", refused.join("; "));
    }
    let started = Instant::now();
    wait_for_moves(connection, moves)?;
    println!("moves done in {:.1} s", started.elapsed().as_secs_f64());
    elect_preferred(connection, moves)?;
    if throttle.is_some() {
        remove_throttles(connection, &brokers_of(moves), &topics_of(moves))?;
    }
    Ok(())
}

/// Waits until the cluster lists none of `moves` as in progress, drawing the progress.
fn wait_for_moves(connection: &mut Connection, moves: &[Move]) -> anyhow::Result<()> {
    let mine: BTreeSet<(String, i32)> = moves.iter().map(|m| (m.topic.clone(), m.partition)).collect();
    let mut progress = Progress::new("partitions moved", mine.len());
    let mut done = 0;
    loop {
        let ongoing = connection.list_partition_reassignments(None, ADMIN_TIMEOUT_MS)?;
        let left = ongoing
            .iter()
            .filter(|r| mine.contains(&(r.topic.clone(), r.partition)))
            .count();
        progress.advance(mine.len() - left - done);
        done = mine.len() - left;
        if left == 0 {
            return Ok(());
        }
        std::thread::sleep(POLL_EVERY);
    }
}

fn elect_preferred(connection: &mut Connection, moves: &[Move]) -> anyhow::Result<()> {
    let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for m in moves {
        by_topic.entry(m.topic.clone()).or_default().push(m.partition);
    }
    let wanted: Vec<(String, Vec<i32>)> = by_topic.into_iter().collect();
    let failed = connection.elect_preferred_leaders(&wanted, ADMIN_TIMEOUT_MS)?;
    for (topic, partition, code) in failed {
        eprintln!("{topic}-{partition}: the preferred replica does not lead yet (error {code})");
    }
    Ok(())
}

fn brokers_of(moves: &[Move]) -> BTreeSet<i32> {
    moves
        .iter()
        .flat_map(|m| m.from.iter().chain(&m.to))
        .copied()
        .collect()
}

fn topics_of(moves: &[Move]) -> BTreeSet<String> {
    moves.iter().map(|m| m.topic.clone()).collect()
}

/// The rates on every broker taking part, and each moving topic's throttled replica lists.
fn set_throttles(connection: &mut Connection, moves: &[Move], rate: u64) -> anyhow::Result<()> {
    for broker in brokers_of(moves) {
        let changes: Vec<ConfigChange> = RATE_KEYS
            .iter()
            .map(|k| ConfigChange::Set((*k).into(), rate.to_string()))
            .collect();
        connection
            .alter_configs(BROKER_RESOURCE, &broker.to_string(), &changes)
            .with_context(|| format!("cannot throttle broker {broker}"))?;
    }
    let mut lists: BTreeMap<&str, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for m in moves {
        let (leader, follower) = lists.entry(m.topic.as_str()).or_default();
        leader.extend(m.from.iter().map(|b| format!("{}:{b}", m.partition)));
        let added = m.to.iter().filter(|b| !m.from.contains(b));
        follower.extend(added.map(|b| format!("{}:{b}", m.partition)));
    }
    for (topic, (leader, follower)) in lists {
        let changes = [
            ConfigChange::Set(LEADER_REPLICAS.into(), leader.join(",")),
            ConfigChange::Set(FOLLOWER_REPLICAS.into(), follower.join(",")),
        ];
        connection
            .alter_configs(TOPIC_RESOURCE, topic, &changes)
            .with_context(|| format!("cannot throttle the replicas of {topic}"))?;
    }
    println!("throttled to {rate} bytes/s per broker while the moves run");
    Ok(())
}

fn remove_throttles(
    connection: &mut Connection,
    brokers: &BTreeSet<i32>,
    topics: &BTreeSet<String>,
) -> anyhow::Result<()> {
    for broker in brokers {
        let changes: Vec<ConfigChange> = RATE_KEYS
            .iter()
            .map(|k| ConfigChange::Delete((*k).into()))
            .collect();
        connection.alter_configs(BROKER_RESOURCE, &broker.to_string(), &changes)?;
    }
    for topic in topics {
        let changes = [
            ConfigChange::Delete(LEADER_REPLICAS.into()),
            ConfigChange::Delete(FOLLOWER_REPLICAS.into()),
        ];
        connection.alter_configs(TOPIC_RESOURCE, topic, &changes)?;
    }
    println!("throttles removed");
    Ok(())
}

/// Cancels every move in progress and removes the throttles from every broker and from the
/// topics that were moving.
pub fn cancel(connection: &mut Connection) -> anyhow::Result<()> {
    let ongoing = connection.list_partition_reassignments(None, ADMIN_TIMEOUT_MS)?;
    let wanted: Vec<Reassignment> = ongoing
        .iter()
        .map(|r| Reassignment {
            topic: r.topic.clone(),
            partition: r.partition,
            replicas: None,
        })
        .collect();
    if !wanted.is_empty() {
        connection.alter_partition_reassignments(&wanted, ADMIN_TIMEOUT_MS)?;
    }
    let metadata = connection.metadata(Some(&[]), false)?;
    let brokers: BTreeSet<i32> = metadata.brokers.iter().map(|b| b.node_id).collect();
    let topics: BTreeSet<String> = ongoing.iter().map(|r| r.topic.clone()).collect();
    remove_throttles(connection, &brokers, &topics)?;
    println!("{} moves cancelled", wanted.len());
    Ok(())
}
