//! What moves with leadership when a broker dies, three real brokers, replication factor 3:
//! a consumer group's committed offsets (its `__consumer_offsets` partition's new leader loads
//! them) and the idempotent producer's sequence state (followers replay it from the batches
//! they copy), so that clients go on as before after the failover.

use std::time::Duration;

use anyhow::{Context, Result};
use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::StrBytes;
use laminar_tests::rdkafka_client::{
    assigned_consumer, commit, first_offset_seen, group_member, poll_records, produce_all, producer,
    sample_records, unique_topic,
};
use laminar_tests::wire::{create_topic_replicated, fetch_code_at_leader_epoch, partition_view};
use laminar_tests::{wait_for, Cluster};
use rdkafka::consumer::Consumer;
use rdkafka::{Offset, TopicPartitionList};

const SESSION_TIMEOUT_MS: u64 = 3000;

fn create_topic(cluster: &mut Cluster, topic: &str) -> Result<()> {
    let code = create_topic_replicated(&mut cluster.connect(1)?, topic, (1, 3), &[])?;
    anyhow::ensure!(code == 0, "create {topic}: error {code}");
    Ok(())
}

/// The leader of partition 0 of `topic` and its epoch, as node `via` tells.
fn leader_and_epoch(cluster: &mut Cluster, via: i32, topic: &str) -> Result<(i32, i32)> {
    let view = partition_view(&mut cluster.connect(via)?, topic, 0)?;
    Ok((view.leader, view.leader_epoch))
}

/// The node coordinating `group`, as node `via` answers FindCoordinator.
fn coordinator_of(cluster: &mut Cluster, via: i32, group: &str) -> Result<i32> {
    let mut conn = cluster.connect(via)?;
    let request = FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.to_string()));
    let answer = conn.request(&request, 3)?;
    anyhow::ensure!(
        answer.error_code == 0,
        "FindCoordinator: error {}",
        answer.error_code
    );
    Ok(answer.node_id.0)
}

/// The leader of partition 0 of `topic` as node `via` tells.
fn leader_of(cluster: &mut Cluster, via: i32, topic: &str) -> Result<i32> {
    Ok(leader_and_epoch(cluster, via, topic)?.0)
}

/// `bootstrap.servers` of every node but `dead`.
fn bootstrap_without(cluster: &mut Cluster, dead: i32) -> String {
    let alive: Vec<String> = (1..=3)
        .filter(|n| *n != dead)
        .map(|n| cluster.node(n).bootstrap())
        .collect();
    alive.join(",")
}

#[tokio::test]
async fn committed_offsets_move_to_the_new_coordinator_after_kill_9() -> Result<()> {
    let mut cluster = Cluster::start(3, SESSION_TIMEOUT_MS, Cluster::node_options())?;
    let (topic, group) = (unique_topic("failover-offsets"), unique_topic("group"));
    create_topic(&mut cluster, &topic)?;
    produce_all(
        &producer(&cluster.bootstrap(), &[])?,
        &topic,
        0,
        &sample_records(100),
    )
    .await?;
    {
        let member = group_member(&cluster.bootstrap(), &group)?;
        member.subscribe(&[&topic])?;
        assert_eq!(first_offset_seen(&member)?, 0);
        commit(&member, &topic, 0, 40)?;
    }
    let coordinator = coordinator_of(&mut cluster, 1, &group)?;
    cluster.node(coordinator).kill9()?;
    let witness = (1..=3).find(|n| *n != coordinator).context("a witness")?;
    wait_for(Duration::from_secs(15), "another coordinator", || {
        Ok(coordinator_of(&mut cluster, witness, &group)? != coordinator)
    })?;
    let member = group_member(&bootstrap_without(&mut cluster, coordinator), &group)?;
    let mut wanted = TopicPartitionList::new();
    wanted.add_partition(&topic, 0);
    let mut committed = None;
    // The new coordinator answers COORDINATOR_LOAD_IN_PROGRESS while it loads; clients retry.
    wait_for(
        Duration::from_secs(20),
        "the committed offset from the new coordinator",
        || {
            let offsets = member.committed_offsets(wanted.clone(), Duration::from_secs(5))?;
            committed = offsets.find_partition(&topic, 0).map(|e| e.offset());
            Ok(committed == Some(Offset::Offset(40)))
        },
    )
    .with_context(|| format!("last seen: {committed:?}"))?;
    member.subscribe(&[&topic])?;
    assert_eq!(
        first_offset_seen(&member)?,
        40,
        "a new member resumes at the committed offset"
    );
    Ok(())
}

#[tokio::test]
async fn an_idempotent_producer_goes_on_exactly_once_after_its_leader_is_killed() -> Result<()> {
    let mut cluster = Cluster::start(3, SESSION_TIMEOUT_MS, Cluster::node_options())?;
    let topic = unique_topic("failover-idempotence");
    create_topic(&mut cluster, &topic)?;
    let records = sample_records(200);
    let idempotent = [("enable.idempotence", "true"), ("acks", "all")];
    let producer = producer(&cluster.bootstrap(), &idempotent)?;
    let first = produce_all(&producer, &topic, 0, &records[..100]).await?;
    assert_eq!(first, (0..100).collect::<Vec<i64>>());
    let leader = leader_of(&mut cluster, 1, &topic)?;
    cluster.node(leader).kill9()?;
    // The same producer (same id, sequence going on) to the new leader.
    let second = produce_all(&producer, &topic, 0, &records[100..]).await?;
    assert_eq!(second, (100..200).collect::<Vec<i64>>(), "no gap, no duplicate");
    // KIP-320: a consumer still naming the dead leader's epoch is told its metadata is stale.
    let witness = (1..=3).find(|n| *n != leader).context("a witness")?;
    let new_leader = leader_of(&mut cluster, witness, &topic)?;
    let mut conn = cluster.connect(new_leader)?;
    let (_, epoch) = leader_and_epoch(&mut cluster, new_leader, &topic)?;
    assert!(epoch > 0, "the leader changed");
    assert_eq!(fetch_code_at_leader_epoch(&mut conn, &topic, 0, epoch - 1)?, 74);
    assert_eq!(fetch_code_at_leader_epoch(&mut conn, &topic, 0, epoch)?, 0);
    let consumer = assigned_consumer(&bootstrap_without(&mut cluster, leader), &[])?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(&topic, 0, Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let consumed = poll_records(&consumer, 200)?;
    let offsets: Vec<i64> = consumed.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..200).collect::<Vec<i64>>());
    for (i, (got, want)) in consumed.iter().zip(&records).enumerate() {
        assert_eq!(got.record.value, want.value, "record {i}");
    }
    Ok(())
}
