//! A three-node cluster whose brokers replicate over a SASL_SSL listener of their own
//! (REPLICATION, `inter.broker.listener.name`) and run the quorum over a SASL_SSL controller
//! listener, both with client certificates required and PLAIN logins: every acknowledged
//! record survives leaders killed with SIGKILL and restarted (checked over the whole history,
//! as the fault tests do), followers rejoin the ISR through the secured listener, and a peer
//! that does not speak TLS on the controller port is dropped while the cluster serves on.
//! Three real broker processes, librdkafka clients on the PLAINTEXT listener.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use laminar_tests::certs::TestCertificates;
use laminar_tests::history::check;
use laminar_tests::rdkafka_client::unique_topic;
use laminar_tests::wire::{self, create_topic_replicated};
use laminar_tests::workload::{read_final_logs, Workload};
use laminar_tests::{wait_for, BrokerOptions, Cluster};

const NODES: i32 = 3;
const PARTITIONS: i32 = 3;
const SESSION_TIMEOUT_MS: u64 = 3000;
/// Leaders killed in the CI run; `LAMINAR_SASL_SSL_KILLS` asks for more (a longer run).
const KILLS: usize = 3;
const REJOIN_TIMEOUT: Duration = Duration::from_secs(60);

fn jaas(user: &str, password: &str) -> String {
    format!(
        "org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=\"{user}\" password=\"{password}\" user_{user}=\"{password}\";"
    )
}

/// Node options for REPLICATION and CONTROLLER on SASL_SSL, certificates from `certs`.
fn secured_options(certs: &TestCertificates) -> BrokerOptions {
    BrokerOptions {
        extra_listeners: vec!["REPLICATION".to_string()],
        ..Cluster::node_options()
    }
    .with_override(
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,REPLICATION:SASL_SSL,CONTROLLER:SASL_SSL",
    )
    .with_override("inter.broker.listener.name", "REPLICATION")
    .with_override(
        "ssl.keystore.location",
        &certs.server_keystore.display().to_string(),
    )
    .with_override("ssl.truststore.location", &certs.ca.display().to_string())
    .with_override("ssl.client.auth", "required")
    .with_override("sasl.enabled.mechanisms", "PLAIN")
    .with_override("sasl.mechanism.inter.broker.protocol", "PLAIN")
    .with_override("sasl.mechanism.controller.protocol", "PLAIN")
    .with_override(
        "listener.name.replication.plain.sasl.jaas.config",
        &jaas("replicator", "replicator-secret"),
    )
    .with_override(
        "listener.name.controller.plain.sasl.jaas.config",
        &jaas("voter", "voter-secret"),
    )
    .with_override("replica.lag.time.max.ms", "2000")
    .with_override("min.insync.replicas", "2")
}

#[test]
fn acknowledged_records_survive_leader_kills_with_replication_and_quorum_over_sasl_ssl() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let certs = TestCertificates::write(dir.path())?;
    let mut cluster = Cluster::start(NODES as usize, SESSION_TIMEOUT_MS, secured_options(&certs))?;
    let (topic, group) = (unique_topic("sasl-ssl"), unique_topic("sasl-ssl-group"));
    let code = create_topic_replicated(&mut cluster.connect(1)?, &topic, (PARTITIONS, 3), &[])?;
    ensure!(code == 0, "creating {topic}: error {code}");
    every_replica_in_sync(&mut cluster, (&topic, PARTITIONS))?;
    let bootstrap = cluster.bootstrap();
    let workload = Workload::start(&bootstrap, &topic, PARTITIONS, &group)?;
    wait_for(REJOIN_TIMEOUT, "the first acknowledgements", || {
        Ok(workload.last_acks().len() == PARTITIONS as usize)
    })?;
    let kills = std::env::var("LAMINAR_SASL_SSL_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(KILLS);
    for round in 0..kills {
        let partition = (round as i32) % PARTITIONS;
        let via = live_node(&mut cluster)?;
        let leader = wire::partition_view(&mut cluster.connect(via)?, &topic, partition)?.leader;
        ensure!(leader > 0, "partition {partition} has a leader");
        cluster.node(leader).kill9()?;
        std::thread::sleep(Duration::from_secs(4));
        cluster.restart(leader)?;
        every_replica_in_sync(&mut cluster, (&topic, PARTITIONS))?;
        let since = Instant::now();
        wait_for(
            REJOIN_TIMEOUT,
            "acknowledgements on every partition again",
            || Ok(workload.last_acks().values().all(|at| *at > since)),
        )?;
    }
    let history = workload.stop()?;
    ensure!(
        history.failures.is_empty(),
        "the producer gave up: {:?}",
        history.failures
    );
    let logs = read_final_logs(&bootstrap, &topic, PARTITIONS, Duration::from_secs(60))?;
    let verdict = check(&history, &logs, &[]);
    eprintln!("{verdict}");
    ensure!(verdict.anomalies.is_empty(), "anomalies:\n{verdict}");
    ensure!(verdict.acknowledged > 0, "nothing was acknowledged");
    for node in &cluster.nodes {
        let refused = node.stderr_lines_where(|line| line.contains("refused by the leader"));
        ensure!(
            refused == 0,
            "a leader refused a follower:\n{}",
            node.stderr_tail()
        );
    }
    Ok(())
}

#[test]
fn a_peer_without_tls_is_dropped_from_the_controller_port_and_the_cluster_serves_on() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let certs = TestCertificates::write(dir.path())?;
    let mut cluster = Cluster::start(NODES as usize, SESSION_TIMEOUT_MS, secured_options(&certs))?;
    let controller = SocketAddr::from(([127, 0, 0, 1], cluster.controller_ports[0]));
    // A transport frame in clear: a 4-byte length and a body, as a plaintext voter would send.
    let mut stranger = TcpStream::connect(controller)?;
    stranger.set_read_timeout(Some(Duration::from_secs(20)))?;
    stranger.write_all(&[8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8])?;
    let mut answer = Vec::new();
    // The TLS server may answer with an alert before it closes; nothing more.
    let closed = stranger.read_to_end(&mut answer);
    ensure!(
        closed.is_ok(),
        "the controller port kept the connection: {closed:?}"
    );
    ensure!(
        answer.len() < 64,
        "the controller port answered {} bytes",
        answer.len()
    );
    let topic = unique_topic("after-stranger");
    let code = create_topic_replicated(&mut cluster.connect(2)?, &topic, (1, 3), &[])?;
    ensure!(code == 0, "creating {topic} after the stranger: error {code}");
    every_replica_in_sync(&mut cluster, (&topic, 1))?;
    let secured = cluster.node(1).stderr_lines_where(|line| {
        line.contains("controller listening")
            && line.contains("CONTROLLER (SASL_SSL, PLAIN)")
            && line.contains("REPLICATION (SASL_SSL, PLAIN)")
    });
    ensure!(secured == 1, "the startup log does not name both links SASL_SSL");
    let warned = cluster
        .node(1)
        .stderr_tail_with("controller listener: connection refused", Duration::from_secs(10));
    ensure!(warned.is_ok(), "the refusal was not logged");
    Ok(())
}

/// A node that is up, for asking the metadata.
fn live_node(cluster: &mut Cluster) -> Result<i32> {
    (1..=NODES)
        .find(|id| cluster.node(*id).is_running())
        .context("every node is down")
}

/// Waits until each of `topic`'s `partitions` has its three replicas in sync: the followers
/// fetched through the secured listener.
fn every_replica_in_sync(cluster: &mut Cluster, (topic, partitions): (&str, i32)) -> Result<()> {
    wait_for(REJOIN_TIMEOUT, "every replica in sync", || {
        let via = live_node(cluster)?;
        let mut conn = cluster.connect(via)?;
        for partition in 0..partitions {
            let view = wire::partition_view(&mut conn, topic, partition)?;
            if view.leader <= 0 || view.isr.len() != view.replicas.len() {
                return Ok(false);
            }
        }
        Ok(true)
    })?;
    Ok(())
}
