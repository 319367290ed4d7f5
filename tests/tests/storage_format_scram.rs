//! SCRAM users a node starts with, as Kafka's `kafka-storage format --add-scram`: `laminar
//! storage format` puts them in a log dir before the first start, so that a broker whose
//! clients' listener takes SCRAM only is administered from its first minute; a running broker's
//! log dir is refused (its users change through the API). In a cluster whose brokers replicate
//! over SCRAM, the formatted users let the followers in from the start (acks=all with
//! `min.insync.replicas=2` succeeds only if they fetch) and every node knows them; once the
//! quorum wrote its log, formatting again is refused.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use laminar_tests::cli;
use laminar_tests::rdkafka_client::unique_topic;
use laminar_tests::wire::{self, create_topic_replicated, produce_when_known, record_batch};
use laminar_tests::{wait_for, Broker, BrokerOptions, Cluster};

const ADMIN: (&str, &str) = ("admin", "admin-secret");
use laminar_tests::scram_cluster::REPLICATOR;
const WITHIN: Duration = Duration::from_secs(20);

fn add_scram((user, password): (&str, &str)) -> String {
    format!("SCRAM-SHA-512=[name={user},password=\"{password}\"]")
}

/// `laminar storage format` of `log_dir` with `users`, for a node with `overrides`.
fn format(log_dir: &Path, overrides: &[(&str, &str)], users: &[(&str, &str)]) -> Result<cli::CliRun> {
    let log_dirs = format!("log.dirs={}", log_dir.display());
    let mut args = vec![
        "storage".to_string(),
        "format".into(),
        "--override".into(),
        log_dirs,
    ];
    for (key, value) in overrides {
        args.extend(["--override".into(), format!("{key}={value}")]);
    }
    for user in users {
        args.extend(["--add-scram".into(), add_scram(*user)]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cli::run(&args, "")
}

fn scram_clients(options: BrokerOptions) -> BrokerOptions {
    BrokerOptions {
        extra_listeners: vec!["CLIENTS".to_string()],
        ..options
    }
    .with_override("sasl.enabled.mechanisms", "SCRAM-SHA-512")
}

#[test]
fn a_formatted_user_logs_in_on_the_first_start_and_a_running_brokers_dir_is_refused() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let log_dir = dir.path().join("data");
    let formatted = format(&log_dir, &[], &[ADMIN])?;
    ensure!(formatted.success, "format: {}", formatted.stderr);
    let options = scram_clients(BrokerOptions {
        log_dir: Some(log_dir.clone()),
        ..BrokerOptions::default()
    })
    .with_override(
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,CLIENTS:SASL_PLAINTEXT",
    );
    let broker = Broker::start(options)?;
    let clients = broker.listener_addr("CLIENTS").context("CLIENTS")?.to_string();
    ensure!(
        cli::logs_in_with_scram(&clients, dir.path(), ADMIN)?,
        "the formatted admin cannot log in"
    );
    ensure!(!cli::logs_in_with_scram(
        &clients,
        dir.path(),
        ("admin", "a-guess")
    )?);
    let again = format(&log_dir, &[], &[("eve", "eve-secret")])?;
    ensure!(!again.success, "a running broker's log dir was formatted");
    Ok(())
}

#[test]
fn a_cluster_formatted_with_its_replication_user_replicates_over_scram_from_the_start() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let log_dirs: Vec<PathBuf> = (1..=3).map(|n| dir.path().join(format!("node-{n}"))).collect();
    for log_dir in &log_dirs {
        let formatted = format(log_dir, &[], &[ADMIN, REPLICATOR])?;
        ensure!(formatted.success, "format: {}", formatted.stderr);
    }
    let options = laminar_tests::scram_cluster::node_options();
    let mut cluster = Cluster::start_on_log_dirs(3, 3000, options, &log_dirs)?;
    let topic = unique_topic("formatted");
    let code = create_topic_replicated(&mut cluster.connect(1)?, &topic, (1, 3), &[])?;
    ensure!(code == 0, "creating {topic}: error {code}");
    let mut leader = -1;
    wait_for(WITHIN, "a leader", || {
        leader = wire::partition_view(&mut cluster.connect(1)?, &topic, 0)?.leader;
        Ok(leader > 0)
    })?;
    // Past replica.lag.time.max.ms: followers that could not fetch would have left the ISR,
    // and min.insync.replicas=2 would refuse acks=all.
    std::thread::sleep(Duration::from_secs(4));
    let batch = record_batch(&[b"acknowledged by three"], 1_000)?;
    let produced = produce_when_known(&mut cluster.connect(leader)?, (&topic, 0), batch, -1, WITHIN)?;
    ensure!(
        produced.error_code == 0,
        "acks=all over SCRAM replication: error {}",
        produced.error_code
    );
    let view = wire::partition_view(&mut cluster.connect(leader)?, &topic, 0)?;
    ensure!(view.isr.len() == 3, "every replica in sync: {:?}", view.isr);
    for node in 1..=3 {
        let clients = cluster
            .node(node)
            .listener_addr("CLIENTS")
            .context("CLIENTS")?
            .to_string();
        wait_for(WITHIN, "the formatted admin logs in", || {
            cli::logs_in_with_scram(&clients, dir.path(), ADMIN)
        })?;
    }
    for node in &mut cluster.nodes {
        node.terminate()?;
    }
    let again = format(&log_dirs[0], &[], &[("eve", "eve-secret")])?;
    ensure!(
        !again.success && again.stderr.contains("laminar user create"),
        "{}",
        again.stderr
    );
    Ok(())
}
