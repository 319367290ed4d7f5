//! `laminar bench replication` against the debug broker: it starts three brokers in combined
//! mode itself (or uses a cluster it is given), produces with acks=all to a topic of
//! replication factor 1 and to one of replication factor 3, and reports every round, the
//! ratios, the brokers' CPU and their fetch traffic. No figure is judged here: speed goals live
//! in the benchmark's output, not in tests.

use std::time::Duration;

use anyhow::{Context, Result};
use laminar_tests::cli::{bench_json, entries_starting_with};
use laminar_tests::Cluster;
use serde_json::Value;

/// Far above what the run takes (about 20 s on a debug build); a hung run fails the test
/// instead of hanging it.
const RUN_LIMIT: Duration = Duration::from_secs(240);
/// One round of one second each side, tiny records.
const BRIEF: [&str; 8] = [
    "--rounds",
    "1",
    "--seconds",
    "1",
    "--record-size",
    "100",
    "--batch-bytes",
    "16384",
];

fn number(value: &Value, what: &str) -> Result<f64> {
    value
        .as_f64()
        .filter(|v| v.is_finite())
        .with_context(|| format!("{what} is no finite number: {value}"))
}

/// Every produce round acknowledged records and measured their latency.
fn check_produce_round(round: &Value, brokers: usize) -> Result<()> {
    assert!(number(&round["records"], "records")? > 0.0, "{round:#}");
    number(&round["latency_ms_p50"], "p50")?;
    number(&round["latency_ms_p99"], "p99")?;
    let usage = round["brokers"].as_array().context("brokers")?;
    assert_eq!(usage.len(), brokers, "{round:#}");
    for broker in usage {
        for figure in [
            "cpu_seconds",
            "shard_cpu_seconds",
            "bytes_in",
            "bytes_out",
            "sendfile_bytes",
            "disk_bytes_written",
        ] {
            assert!(number(&broker[figure], figure)? >= 0.0, "{broker:#}");
        }
    }
    Ok(())
}

#[test]
fn bench_replication_acknowledges_records_on_both_topics_of_a_cluster_it_starts() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let args = [&["replication"][..], &BRIEF].concat();
    let (table, report) = bench_json(dir.path(), &args, RUN_LIMIT)?;
    assert_eq!(report["kind"], "replication");
    assert_eq!(report["settings"]["acks"], "all");
    assert_eq!(report["settings"]["brokers_started"], 3);
    let rounds = report["rounds"].as_array().context("rounds")?;
    let labels: Vec<&str> = rounds.iter().filter_map(|r| r["label"].as_str()).collect();
    assert_eq!(labels, ["rf1", "rf3", "consume rf1"], "{report:#}");
    for round in &rounds[..2] {
        check_produce_round(round, 3)?;
    }
    let sides = &report["sides"];
    let acknowledged = number(&sides["rf1"]["records"], "rf1 records")?;
    assert!(number(&sides["consume rf1"]["records"], "consumed")? >= acknowledged);
    // acks=all at replication factor 3: every byte acknowledged went to both followers.
    let replicated = &sides["rf3"]["cluster"];
    let (sent, produced) = (
        number(&replicated["bytes_out"], "bytes out")?,
        number(&replicated["bytes_in"], "bytes in")?,
    );
    assert!(produced > 0.0 && sent >= 2.0 * produced, "{replicated:#}");
    // Each of the three replicas wrote every byte to its disk (a temporary directory on disk).
    let written = number(&replicated["disk_bytes_written"], "disk bytes written")?;
    assert!(written >= 2.0 * produced, "{replicated:#}");
    for ratio in ["mb_per_sec", "records_per_sec", "latency_p50", "latency_p99"] {
        assert!(number(&report["ratios"][ratio], ratio)? > 0.0, "{report:#}");
    }
    number(
        &report["fetch_cpu_seconds_per_mb"]["consumer"],
        "consumer CPU per MB",
    )?;
    for printed in [
        "rf3/rf1: MB/s",
        "CPU cores busy",
        "broker 3:",
        "sendfile",
        "fdatasyncs",
        "bytes each broker wrote to its disk",
    ] {
        assert!(table.contains(printed), "{printed} not printed:\n{table}");
    }
    let left = entries_starting_with(dir.path(), "laminar-replication-")?;
    assert!(
        left.is_empty(),
        "the run's temporary directory is removed: {left:?}"
    );
    Ok(())
}

#[test]
fn bench_replication_runs_against_a_cluster_it_is_given() -> Result<()> {
    let cluster = Cluster::start(3, 3000, Cluster::node_options())?;
    let dir = tempfile::tempdir()?;
    let bootstrap = cluster.nodes[0].bootstrap();
    let args = [
        &["replication", "--bootstrap", &bootstrap, "--skip-consume"][..],
        &BRIEF,
    ]
    .concat();
    let (table, report) = bench_json(dir.path(), &args, RUN_LIMIT)?;
    assert_eq!(report["settings"]["brokers_started"], 0);
    let rounds = report["rounds"].as_array().context("rounds")?;
    assert_eq!(rounds.len(), 2, "{report:#}");
    for round in rounds {
        check_produce_round(round, 0)?;
    }
    assert!(table.contains("CPU: not measured"), "{table}");
    Ok(())
}

/// The brokers it starts replicate over a SASL_SSL listener of their own (TLS and SASL PLAIN,
/// certificates made by the run): acks=all at replication factor 3 is acknowledged only if the
/// followers fetch over it, and every byte acknowledged went to both.
#[test]
fn bench_replication_replicates_over_a_sasl_ssl_link_it_sets_up() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let args = [
        &[
            "replication",
            "--inter-broker-protocol",
            "sasl_ssl",
            "--skip-consume",
        ][..],
        &BRIEF,
    ]
    .concat();
    let (table, report) = bench_json(dir.path(), &args, RUN_LIMIT)?;
    assert_eq!(
        report["settings"]["inter_broker_protocol"], "SASL_SSL",
        "{report:#}"
    );
    assert!(table.contains("replicating over"), "{table}");
    let rounds = report["rounds"].as_array().context("rounds")?;
    for round in rounds {
        check_produce_round(round, 3)?;
    }
    let replicated = &report["sides"]["rf3"]["cluster"];
    let (sent, produced) = (
        number(&replicated["bytes_out"], "bytes out")?,
        number(&replicated["bytes_in"], "bytes in")?,
    );
    assert!(produced > 0.0 && sent >= 2.0 * produced, "{replicated:#}");
    Ok(())
}
