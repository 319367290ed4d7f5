//! SCRAM users of a cluster live in its metadata log: a user made with `laminar user create`
//! through one node logs in on every node, is listed by every node, and once deleted through
//! another logs in nowhere; and the brokers themselves replicate over a SASL_PLAINTEXT listener
//! with a SCRAM-SHA-512 user made that way (acks=all with `min.insync.replicas=2` succeeds only
//! if followers fetch). Three real broker processes; the CLI as the client.

use std::path::Path;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use laminar_tests::cli;
use laminar_tests::rdkafka_client::unique_topic;
use laminar_tests::wire::{self, create_topic_replicated, produce_when_known, record_batch};
use laminar_tests::{wait_for, Cluster};

const NODES: i32 = 3;
const APPLIED_WITHIN: Duration = Duration::from_secs(20);

fn create_user(cluster: &mut Cluster, via: i32, login: (&str, &str)) -> Result<()> {
    cli::create_scram_user(&cluster.node(via).bootstrap(), login)
}

/// Whether `user` logs in on node `node`'s CLIENTS listener (the CLI lists topics as that user).
fn logs_in(cluster: &mut Cluster, node: i32, dir: &Path, login: (&str, &str)) -> Result<bool> {
    let address = cluster.node(node).listener_addr("CLIENTS").context("CLIENTS")?;
    cli::logs_in_with_scram(&address.to_string(), dir, login)
}

#[test]
fn a_user_made_through_one_node_logs_in_on_every_node_until_deleted_through_another() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut cluster = Cluster::start(NODES as usize, 3000, laminar_tests::scram_cluster::node_options())?;
    let alice = ("alice", "alice-secret");
    create_user(&mut cluster, 1, alice)?;
    for node in 1..=NODES {
        wait_for(APPLIED_WITHIN, "alice logs in", || {
            logs_in(&mut cluster, node, dir.path(), alice)
        })?;
        let brokers = cluster.node(node).bootstrap();
        let listed = cli::ok(&["user", "list", "--brokers", &brokers], "")?;
        ensure!(
            listed.contains("alice") && listed.contains("SCRAM-SHA-512"),
            "node {node}: {listed}"
        );
        ensure!(!listed.contains(alice.1), "no secret is listed");
    }
    ensure!(
        !logs_in(&mut cluster, 2, dir.path(), ("alice", "a-guess"))?,
        "a wrong password logged in"
    );
    let brokers = cluster.node(2).bootstrap();
    let deleted = cli::run(
        &[
            "user",
            "delete",
            "alice",
            "--mechanism",
            "SCRAM-SHA-512",
            "--brokers",
            &brokers,
        ],
        "",
    )?;
    ensure!(deleted.success, "user delete: {}", deleted.stderr);
    wait_for(APPLIED_WITHIN, "alice refused on node 3", || {
        Ok(!logs_in(&mut cluster, 3, dir.path(), alice)?)
    })?;
    Ok(())
}

#[test]
fn brokers_replicate_over_sasl_with_a_scram_user_of_the_metadata_log() -> Result<()> {
    let mut cluster = Cluster::start(NODES as usize, 3000, laminar_tests::scram_cluster::node_options())?;
    create_user(&mut cluster, 1, ("replicator", "replicator-secret"))?;
    let topic = unique_topic("scram-replicated");
    let code = create_topic_replicated(&mut cluster.connect(1)?, &topic, (1, 3), &[])?;
    ensure!(code == 0, "creating {topic}: error {code}");
    let mut leader = -1;
    wait_for(APPLIED_WITHIN, "a leader", || {
        leader = wire::partition_view(&mut cluster.connect(1)?, &topic, 0)?.leader;
        Ok(leader > 0)
    })?;
    let mut conn = cluster.connect(leader)?;
    // Past replica.lag.time.max.ms: followers that could not fetch would have left the ISR,
    // and min.insync.replicas=2 would refuse acks=all.
    std::thread::sleep(Duration::from_secs(4));
    for i in 0..20 {
        let batch = record_batch(&[format!("record-{i}").as_bytes()], 1_000)?;
        let answer = produce_when_known(&mut conn, (&topic, 0), batch, -1, Duration::from_secs(10))?;
        ensure!(
            answer.error_code == 0,
            "acks=all produce {i}: error {}",
            answer.error_code
        );
    }
    let view = wire::partition_view(&mut conn, &topic, 0)?;
    ensure!(view.isr.len() == 3, "every replica in sync: {:?}", view.isr);
    Ok(())
}
