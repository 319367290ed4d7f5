//! Three controller nodes on loopback sockets and real files: election, replication,
//! failover, restart and catch-up (also through a snapshot), broker fencing.

mod common;

use std::time::{Duration, Instant};

use common::*;
use laminar_controller::{Refusal, NO_LEADER};
use laminar_model::NodeId;

const SECONDS_5: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_forms_replicates_and_every_node_agrees() {
    let cluster = Cluster::start(3, |_| {});
    let leader = cluster.wait_leader(SECONDS_5).await;
    let follower = (leader + 1) % 3;
    // Sent to a follower: forwarded to the active controller.
    let epochs = register_brokers(&cluster.handle(follower), 3, &[]).await;
    let results = cluster
        .handle(follower)
        .create_topics(vec![topic("orders", 30, 3)])
        .await
        .unwrap();
    assert!(results[0].result.is_ok(), "{results:?}");
    let again = cluster
        .handle(leader)
        .create_topics(vec![topic("orders", 1, 1), topic("wide", 1, 4)])
        .await
        .unwrap();
    assert_eq!(again[0].result, Err(Refusal::TopicAlreadyExists));
    assert!(matches!(again[1].result, Err(Refusal::Placement(_))), "{again:?}");
    cluster.wait_agreement(SECONDS_5).await;
    let image = cluster.handle(follower).metadata();
    let orders = image.metadata.topic_by_name("orders").unwrap();
    assert_eq!(orders.partitions.len(), 30);
    for broker in 1..=3 {
        let led = orders
            .partitions
            .values()
            .filter(|p| p.leader == NodeId::new(broker))
            .count();
        assert_eq!(led, 10, "broker {broker} leads {led}");
    }
    let (first, len) = cluster
        .handle(follower)
        .allocate_producer_ids(NodeId::new(1), epochs[&NodeId::new(1)])
        .await
        .unwrap();
    let (second, _) = cluster
        .handle(leader)
        .allocate_producer_ids(NodeId::new(2), epochs[&NodeId::new(2)])
        .await
        .unwrap();
    assert_eq!((first.get(), len, second.get()), (0, 1000, 1000));
    let status = cluster.handle(leader).quorum_status();
    assert_eq!(status.role, "Leader");
    assert_eq!(status.voters.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_leader_elects_another_and_writes_continue() {
    let mut cluster = Cluster::start(3, |_| {});
    let leader = cluster.wait_leader(SECONDS_5).await;
    register_brokers(&cluster.handle(leader), 3, &[]).await;
    let term_before = cluster.handle(leader).quorum_status().term;
    cluster.stop(leader);
    let stopped_at = Instant::now();
    let new_leader = cluster.wait_leader(SECONDS_5).await;
    assert_ne!(new_leader, leader);
    assert!(
        stopped_at.elapsed() < Duration::from_secs(3),
        "election took {:?}",
        stopped_at.elapsed()
    );
    assert!(cluster.handle(new_leader).quorum_status().term > term_before);
    let other = cluster
        .running()
        .into_iter()
        .find(|h| h.node_id() != new_leader as u64 + 1)
        .unwrap();
    let results = other
        .create_topics(vec![topic("after-failover", 3, 3)])
        .await
        .unwrap();
    assert!(results[0].result.is_ok(), "{results:?}");
    cluster.wait_agreement(SECONDS_5).await;
    // The old leader comes back from its directory and catches up.
    cluster.restart(leader);
    cluster.wait_agreement(SECONDS_5).await;
    assert!(cluster
        .handle(leader)
        .metadata()
        .metadata
        .topic_by_name("after-failover")
        .is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_catches_up_through_a_snapshot_after_the_purge() {
    let mut cluster = Cluster::start(3, |c| {
        c.entries_since_snapshot_max = 20;
        c.entries_kept_after_snapshot = 0;
        // Nobody heartbeats here: the brokers must stay unfenced however slow the machine.
        c.session_timeout_ms = 600_000;
    });
    let leader = cluster.wait_leader(SECONDS_5).await;
    register_brokers(&cluster.handle(leader), 3, &[]).await;
    let stopped = (leader + 1) % 3;
    cluster.stop(stopped);
    let handle = cluster.handle(leader);
    for i in 0..60 {
        let results = handle
            .create_topics(vec![topic(&format!("t{i}"), 2, 2)])
            .await
            .unwrap();
        assert!(results[0].result.is_ok(), "{results:?}");
    }
    let status = handle.quorum_status();
    assert!(
        status.snapshot_index.unwrap_or(0) >= 40,
        "no snapshot: {status:?}"
    );
    cluster.restart(stopped);
    cluster.wait_agreement(Duration::from_secs(10)).await;
    let restarted = cluster.handle(stopped);
    assert_eq!(restarted.metadata().metadata.topics.len(), 60);
    // It was behind the purge: it got the state as a snapshot.
    assert!(restarted.quorum_status().snapshot_index.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_whose_heartbeats_stop_is_fenced_and_its_leaderships_move_to_the_isr() {
    let cluster = Cluster::start(3, |_| {});
    let leader = cluster.wait_leader(SECONDS_5).await;
    let handle = cluster.handle(leader);
    let epochs = register_brokers(&handle, 3, &[]).await;
    handle.create_topics(vec![topic("fenced", 9, 3)]).await.unwrap();
    let before = handle
        .metadata()
        .metadata
        .topic_by_name("fenced")
        .unwrap()
        .clone();
    // Brokers 1 and 2 keep heartbeating; broker 3 goes quiet.
    let beating = handle.clone();
    let heartbeats = tokio::spawn(async move {
        loop {
            for id in [NodeId::new(1), NodeId::new(2)] {
                let _ = beating.broker_heartbeat(id, epochs[&id]).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let deadline = Instant::now() + SECONDS_5;
    while handle.metadata().metadata.is_unfenced(NodeId::new(3)) {
        assert!(Instant::now() < deadline, "broker 3 not fenced");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    heartbeats.abort();
    let after = handle
        .metadata()
        .metadata
        .topic_by_name("fenced")
        .unwrap()
        .clone();
    for (index, p) in &after.partitions {
        let old = &before.partitions[index];
        assert_ne!(p.leader, NodeId::new(3));
        assert!(!p.isr.contains(&NodeId::new(3)));
        assert!(p.isr.contains(&p.leader), "leader from the ISR");
        if old.leader == NodeId::new(3) {
            assert!(p.leader_epoch > old.leader_epoch);
        }
        assert!(p.partition_epoch > old.partition_epoch);
        assert_ne!(p.leader, NO_LEADER);
    }
    assert!(laminar_controller::preferred_leader_imbalance(&handle.metadata().metadata).is_empty());
}
