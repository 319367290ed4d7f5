//! A cluster of three controller-only nodes and three broker-only nodes is operated while an
//! idempotent acks=all producer, a reader and a group member run: a controller is replaced
//! (a new one joins on a fresh log dir and is made a voter, an original one is removed and
//! stopped), a fourth broker joins and `laminar cluster rebalance` moves a share of the
//! partitions onto it, and a broker is decommissioned and stopped. Afterwards every
//! acknowledged record is in the log exactly once, in order (the fault tests' checker). Seven
//! real processes at most at once.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use laminar_tests::cli::ok_on;
use laminar_tests::history::check;
use laminar_tests::wire::{create_topic_replicated, partition_view};
use laminar_tests::workload::{read_final_logs, Workload};
use laminar_tests::{wait_for, Cluster};

const SESSION_TIMEOUT_MS: u64 = 3000;
const TOPIC: &str = "operated";
const PARTITIONS: i32 = 6;

/// Waits until every partition had an acknowledgement after `since`.
fn acks_everywhere_since(workload: &Workload, since: Instant) -> Result<()> {
    wait_for(
        Duration::from_secs(30),
        "acknowledgements in every partition",
        || {
            let last = workload.last_acks();
            Ok((0..PARTITIONS).all(|p| last.get(&p).is_some_and(|at| *at > since)))
        },
    )?;
    Ok(())
}

/// The voters `laminar cluster quorum describe` lists.
fn voters(bootstrap: &str) -> Result<Vec<i32>> {
    let shown = ok_on(bootstrap, &["cluster", "quorum", "describe"], "")?;
    let each = shown
        .lines()
        .filter_map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
            [id, "voter", ..] => id.parse().ok(),
            _ => None,
        });
    Ok(each.collect())
}

/// Node 7 joins as a controller and becomes a voter (once caught up); node 1 stops being one
/// and is stopped.
fn replace_controller(cluster: &mut Cluster) -> Result<()> {
    assert_eq!(cluster.add_node("controller")?, 7);
    let bootstrap = cluster.bootstrap();
    wait_for(Duration::from_secs(30), "node 7 made a voter", || {
        Ok(ok_on(&bootstrap, &["cluster", "quorum", "add-controller", "7"], "").is_ok())
    })?;
    ok_on(&bootstrap, &["cluster", "quorum", "remove-controller", "1"], "")?;
    cluster.node(1).terminate()?;
    assert_eq!(voters(&bootstrap)?, [2, 3, 7]);
    Ok(())
}

/// Replicas broker `id` holds of the topic.
fn replicas_on(cluster: &mut Cluster, id: i32) -> Result<usize> {
    let mut conn = cluster.connect(4)?;
    let views: Result<Vec<_>> = (0..PARTITIONS)
        .map(|p| partition_view(&mut conn, TOPIC, p))
        .collect();
    Ok(views?.iter().filter(|v| v.replicas.contains(&id)).count())
}

/// Broker 6 gives up its replicas and is stopped; decommission unregisters it once stopped.
fn decommission_broker_6(cluster: &mut Cluster) -> Result<()> {
    let survivors = [4, 5, 8].map(|id| cluster.node(id).bootstrap()).join(",");
    let running = std::thread::spawn(move || {
        ok_on(
            &survivors,
            &["cluster", "decommission", "6", "--stop-timeout", "60"],
            "",
        )
    });
    wait_for(Duration::from_secs(60), "broker 6 holding nothing", || {
        Ok(replicas_on(cluster, 6)? == 0)
    })?;
    cluster.node(6).terminate()?;
    let said = running
        .join()
        .map_err(|_| anyhow::anyhow!("the decommission thread panicked"))??;
    ensure!(said.contains("is unregistered"), "{said}");
    Ok(())
}

#[test]
fn a_split_cluster_replaces_a_controller_grows_and_shrinks_under_load_and_loses_nothing() -> Result<()> {
    let mut cluster = Cluster::start_split(3, 3, SESSION_TIMEOUT_MS, Cluster::node_options())?;
    let mut four = cluster.connect(4)?;
    wait_for(Duration::from_secs(10), "the topic created", || {
        Ok(create_topic_replicated(&mut four, TOPIC, (PARTITIONS, 3), &[("min.insync.replicas", "2")])? == 0)
    })?;
    let workload = Workload::start(&cluster.bootstrap(), TOPIC, PARTITIONS, "operated-group")?;
    acks_everywhere_since(&workload, Instant::now())?;

    let started = Instant::now();
    replace_controller(&mut cluster)?;
    eprintln!("controller replaced in {:.1} s", started.elapsed().as_secs_f64());
    acks_everywhere_since(&workload, Instant::now())?;

    assert_eq!(cluster.add_node("broker")?, 8);
    let started = Instant::now();
    let done = ok_on(
        &cluster.bootstrap(),
        &["cluster", "rebalance", "--execute", "--throttle", "20000000"],
        "",
    )?;
    eprintln!(
        "rebalance under load in {:.1} s:\n{done}",
        started.elapsed().as_secs_f64()
    );
    ensure!(
        replicas_on(&mut cluster, 8)? > 0,
        "broker 8 took no replica of {TOPIC}"
    );
    acks_everywhere_since(&workload, Instant::now())?;

    decommission_broker_6(&mut cluster)?;
    acks_everywhere_since(&workload, Instant::now())?;

    let history = workload.stop()?;
    ensure!(
        history.failures.is_empty(),
        "the producer gave up: {:?}",
        &history.failures[..history.failures.len().min(5)]
    );
    let bootstrap = [4, 5, 8].map(|id| cluster.node(id).bootstrap()).join(",");
    let logs = read_final_logs(&bootstrap, TOPIC, PARTITIONS, Duration::from_secs(60))?;
    let verdict = check(&history, &logs, &[]);
    eprintln!("{verdict}");
    ensure!(verdict.anomalies.is_empty(), "anomalies:\n{verdict}");
    ensure!(verdict.acknowledged > 0, "nothing was acknowledged");
    Ok(())
}
