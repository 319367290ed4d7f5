//! Growing and shrinking a running cluster with the CLI: after a broker-only node joins,
//! `laminar cluster rebalance` shows a plan without changing anything, and `--execute
//! --throttle` carries it out: every broker ends with its share of replicas, the new one leads
//! some, every record is still there, and the throttles are gone afterwards. Then the new
//! node is killed and `laminar cluster decommission` re-creates its replicas on the others from
//! the in-sync copies and unregisters it. Four real broker processes.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{ensure, Result};
use laminar_tests::cli::ok_on;
use laminar_tests::wire::{
    create_topic_replicated, fetch_records, partition_view, produce_when_known, record_batch, PartitionView,
};
use laminar_tests::{wait_for, Cluster};

const SESSION_TIMEOUT_MS: u64 = 3000;
const TOPIC: &str = "spread";
const PARTITIONS: i32 = 6;
const RECORDS: usize = 5;

/// Every partition of the topic as node `via` sees it.
fn views(cluster: &mut Cluster, via: i32) -> Result<Vec<PartitionView>> {
    let mut conn = cluster.connect(via)?;
    (0..PARTITIONS)
        .map(|p| partition_view(&mut conn, TOPIC, p))
        .collect()
}

/// Replicas and preferred leaders per broker.
fn counts(views: &[PartitionView]) -> (BTreeMap<i32, usize>, BTreeMap<i32, usize>) {
    let (mut replicas, mut leaders) = (BTreeMap::new(), BTreeMap::new());
    for view in views {
        for broker in &view.replicas {
            *replicas.entry(*broker).or_default() += 1;
        }
        *leaders.entry(view.replicas[0]).or_default() += 1;
    }
    (replicas, leaders)
}

/// The topic on nodes 1–3 (two replicas each), `RECORDS` records in every partition.
fn topic_with_records(cluster: &mut Cluster) -> Result<()> {
    let mut first = cluster.connect(1)?;
    wait_for(Duration::from_secs(10), "the topic created", || {
        Ok(create_topic_replicated(&mut first, TOPIC, (PARTITIONS, 2), &[])? != 38)
    })?;
    for partition in 0..PARTITIONS {
        let mut leader = 0;
        wait_for(Duration::from_secs(10), "a leader", || {
            leader = partition_view(&mut first, TOPIC, partition)?.leader;
            Ok(leader > 0)
        })?;
        let values: Vec<&[u8]> = vec![b"record".as_slice(); RECORDS];
        let mut conn = cluster.connect(leader)?;
        let within = Duration::from_secs(10);
        let answer = produce_when_known(
            &mut conn,
            (TOPIC, partition),
            record_batch(&values, 1)?,
            -1,
            within,
        )?;
        ensure!(
            answer.error_code == 0,
            "produce to {partition}: {}",
            answer.error_code
        );
    }
    Ok(())
}

/// Every partition still holds its records, read from its leader.
fn every_record_is_there(cluster: &mut Cluster) -> Result<()> {
    for (partition, view) in (0..PARTITIONS).zip(views(cluster, 1)?) {
        let mut conn = cluster.connect(view.leader)?;
        ensure!(fetch_records(&mut conn, TOPIC, partition, 0, RECORDS)?.len() == RECORDS);
    }
    Ok(())
}

fn replica_lists(views: &[PartitionView]) -> Vec<Vec<i32>> {
    views.iter().map(|v| v.replicas.clone()).collect()
}

#[test]
fn rebalance_spreads_replicas_onto_a_new_broker_and_decommission_takes_them_off_again() -> Result<()> {
    let mut cluster = Cluster::start(3, SESSION_TIMEOUT_MS, Cluster::node_options())?;
    topic_with_records(&mut cluster)?;
    assert_eq!(cluster.add_broker_only()?, 4);
    let bootstrap = cluster.bootstrap();

    let before = replica_lists(&views(&mut cluster, 1)?);
    let shown = ok_on(&bootstrap, &["cluster", "rebalance"], "")?;
    assert!(
        shown.contains("partitions move;") && shown.contains("bytes to copy"),
        "{shown}"
    );
    assert_eq!(
        replica_lists(&views(&mut cluster, 1)?),
        before,
        "a plan alone changes nothing"
    );

    let done = ok_on(
        &bootstrap,
        &["cluster", "rebalance", "--execute", "--throttle", "10000000"],
        "",
    )?;
    assert!(done.contains("throttles removed"), "{done}");
    let (replicas, leaders) = counts(&views(&mut cluster, 1)?);
    assert_eq!(
        replicas.values().copied().collect::<Vec<_>>(),
        [3, 3, 3, 3],
        "{replicas:?}"
    );
    assert!(leaders.get(&4).copied().unwrap_or(0) >= 1, "{leaders:?}");
    wait_for(Duration::from_secs(20), "the preferred replicas leading", || {
        Ok(views(&mut cluster, 1)?.iter().all(|v| v.leader == v.replicas[0]))
    })?;
    every_record_is_there(&mut cluster)?;
    let rate = ok_on(&bootstrap, &["cluster", "config", "--broker", "4"], "")?;
    assert!(!rate.contains("throttled.rate"), "the throttle is gone: {rate}");
    assert_eq!(
        ok_on(&bootstrap, &["cluster", "rebalance"], "")?.trim(),
        "balanced: nothing to move"
    );

    cluster.node(4).kill9()?;
    let survivors: Vec<String> = (1..=3).map(|id| cluster.node(id).bootstrap()).collect();
    let survivors = survivors.join(",");
    ok_on(&survivors, &["cluster", "decommission", "4"], "")?;
    let after = views(&mut cluster, 1)?;
    assert!(
        after
            .iter()
            .all(|v| !v.replicas.contains(&4) && v.replicas.len() == 2),
        "{after:?}"
    );
    let listed = ok_on(&survivors, &["cluster", "brokers"], "")?;
    assert!(!listed.lines().any(|line| line.starts_with('4')), "{listed}");
    every_record_is_there(&mut cluster)?;
    Ok(())
}

/// Bytes of one batch of [`two_partitions_then_a_second_broker`]: 100 records of 10 kB.
const MEGABYTE_BATCH: usize = 100 * 10_000;

/// A one-node cluster with `topic` (two partitions, one replica) holding `batches` batches of
/// a megabyte in each partition, then a second broker joined: half the replicas to move.
fn two_partitions_then_a_second_broker(topic: &str, batches: usize) -> Result<Cluster> {
    let mut cluster = Cluster::start(1, SESSION_TIMEOUT_MS, Cluster::node_options())?;
    let mut first = cluster.connect(1)?;
    ensure!(create_topic_replicated(&mut first, topic, (2, 1), &[])? == 0);
    let record = vec![b'x'; MEGABYTE_BATCH / 100];
    for partition in 0..2 {
        for _ in 0..batches {
            let batch = record_batch(&vec![record.as_slice(); 100], 1)?;
            let answer =
                produce_when_known(&mut first, (topic, partition), batch, -1, Duration::from_secs(10))?;
            ensure!(answer.error_code == 0, "produce: {}", answer.error_code);
        }
    }
    cluster.add_broker_only()?;
    Ok(cluster)
}

/// Bytes the measured topic holds, over two partitions on one broker.
const MEASURED_BYTES: usize = 40 << 20;

/// The "moves done in ... s" line of a rebalance's output.
fn moves_done(said: &str) -> String {
    let line = said.lines().find(|l| l.starts_with("moves done in"));
    line.unwrap_or("no moves").to_string()
}

/// A topic of `MEASURED_BYTES` in two partitions on a one-node cluster; a second broker joins;
/// `rebalance --execute --throttle 10000000` moves one partition onto it, then `decommission`
/// of the new broker moves it back unthrottled. Prints the bytes and the time of each: the
/// documented measurement of decision 0044,
/// `cargo test -p laminar-tests --test cluster_rebalance -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: a move's time at a throttle against none"]
fn rebalance_at_a_throttle_figures() -> Result<()> {
    let batches = MEASURED_BYTES / 2 / MEGABYTE_BATCH;
    let cluster = two_partitions_then_a_second_broker("measured", batches)?;
    let bootstrap = cluster.bootstrap();
    let throttled = ok_on(
        &bootstrap,
        &["cluster", "rebalance", "--execute", "--throttle", "10000000"],
        "",
    )?;
    let bytes = throttled
        .lines()
        .find(|l| l.contains("bytes to copy"))
        .unwrap_or("?");
    eprintln!("at 10 MB/s: {bytes}; {}", moves_done(&throttled));
    let args = [
        "cluster",
        "decommission",
        "2",
        "--stop-timeout",
        "0",
        "--brokers",
        bootstrap.as_str(),
    ];
    let back = laminar_tests::cli::run(&args, "")?;
    eprintln!("unthrottled, back: {}", moves_done(&back.stdout));
    Ok(())
}

/// A rebalance held back by a small throttle is cancelled from another process: its moves stop,
/// every partition keeps the replicas it had, the running `--execute` returns, and no throttle
/// is left on the brokers or the topic.
#[test]
fn a_throttled_rebalance_is_cancelled_and_leaves_no_throttle_behind() -> Result<()> {
    let mut cluster = two_partitions_then_a_second_broker("slow", 1)?;
    let bootstrap = cluster.bootstrap();
    let running = {
        let bootstrap = bootstrap.clone();
        // 1 MB to copy at 10 kB/s: it would take minutes.
        std::thread::spawn(move || {
            ok_on(
                &bootstrap,
                &["cluster", "rebalance", "--execute", "--throttle", "10000"],
                "",
            )
        })
    };
    wait_for(Duration::from_secs(20), "a move in progress", || {
        Ok(ok_on(&bootstrap, &["topic", "reassignments"], "")?.contains("slow"))
    })?;
    let cancelled = ok_on(&bootstrap, &["cluster", "rebalance", "--cancel"], "")?;
    assert!(cancelled.contains("1 moves cancelled"), "{cancelled}");
    running
        .join()
        .map_err(|_| anyhow::anyhow!("the rebalance thread panicked"))??;
    let mut conn = cluster.connect(1)?;
    for partition in 0..2 {
        assert_eq!(
            partition_view(&mut conn, "slow", partition)?.replicas,
            [1],
            "{partition} stays"
        );
    }
    for broker in ["1", "2"] {
        let shown = ok_on(&bootstrap, &["cluster", "config", "--broker", broker], "")?;
        assert!(!shown.contains("throttled.rate"), "broker {broker}: {shown}");
    }
    let described = ok_on(&bootstrap, &["topic", "describe", "slow"], "")?;
    let throttle_lines: Vec<&str> = described
        .lines()
        .filter(|line| line.contains("throttled.replicas"))
        .collect();
    assert_eq!(throttle_lines.len(), 2, "{described}");
    assert!(
        throttle_lines
            .iter()
            .all(|line| line.trim_end().ends_with("default")),
        "{described}"
    );
    Ok(())
}
