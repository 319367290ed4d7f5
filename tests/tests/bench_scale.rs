//! `laminar bench scale` against the debug broker: it starts the broker itself, runs every step
//! and reports each with its figures, in the table and in the JSON. No figure is judged here:
//! speed goals live in the benchmark's output, not in tests.

use std::time::Duration;

use anyhow::{Context, Result};
use laminar_tests::cli::{bench_json, entries_starting_with};

/// Far above what the run takes (about 15 s on a debug build); a hung step fails the test
/// instead of hanging it.
const RUN_LIMIT: Duration = Duration::from_secs(150);

/// Every step the run reports but the throughput runs, with a figure each must have.
const STEPS: [(&str, &str); 10] = [
    ("broker_empty", "rss_bytes"),
    ("create_partitions", "partitions_per_sec"),
    ("broker_idle", "rss_bytes_per_partition"),
    ("produce_every_partition", "partitions_acked"),
    ("broker_after_produce", "disk_allocated_bytes_per_partition"),
    ("requests", "metrics_bytes"),
    ("idle_connections", "rss_bytes_per_connection"),
    ("clean_shutdown", "seconds"),
    ("start_after_clean_shutdown", "ready_seconds"),
    ("start_after_crash", "ready_seconds"),
];

#[test]
fn bench_scale_reports_every_step_with_its_figures() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let args = [
        "scale",
        "--partitions",
        "200",
        "--partitions-per-topic",
        "50",
        "--connections",
        "100",
        "--skip-throughput",
    ];
    let (table, report) = bench_json(dir.path(), &args, RUN_LIMIT)?;
    let steps = report["steps"].as_array().context("steps")?;
    for (name, figure) in STEPS {
        let step = steps
            .iter()
            .find(|s| s["name"] == name)
            .with_context(|| format!("no step {name} in {report:#}"))?;
        assert_eq!(step["status"], "ok", "{name}: {step:#}");
        let figures = step["figures"].as_object().context("figures")?;
        assert!(
            figures.values().all(|v| v.as_f64().is_some_and(f64::is_finite)),
            "{name}: {step:#}"
        );
        assert!(figures.contains_key(figure), "{name} has no {figure}: {step:#}");
        assert!(
            table.contains(&format!("    {figure} ")),
            "{figure} not printed:\n{table}"
        );
    }
    let throughput = steps
        .iter()
        .find(|s| s["name"] == "throughput")
        .context("throughput")?;
    assert_eq!(throughput["status"], "skipped");
    let goals = report["goals"].as_array().context("goals")?;
    assert!(goals.len() >= 8, "{goals:#?}");
    for goal in goals {
        assert!(goal["value"].is_number() && goal["met"].is_boolean(), "{goal:#}");
    }
    assert!(table.contains("goal (decision 0029)"), "{table}");
    assert_eq!(report["settings"]["partitions"], 200);
    let left = entries_starting_with(dir.path(), "laminar-scale-")?;
    assert!(
        left.is_empty(),
        "the run's temporary directory is removed: {left:?}"
    );
    Ok(())
}
