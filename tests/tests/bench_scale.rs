//! `laminar bench scale` against the debug broker: it starts the broker itself, runs every step
//! and reports each with its figures, in the table and in the JSON. No figure is judged here:
//! speed goals live in the benchmark's output, not in tests.

use std::fs::File;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use laminar_tests::{default_binary, sys};
use serde_json::Value;

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

/// Runs `laminar bench scale ARGS` in `dir`; returns its stdout and the JSON it wrote.
fn run_scale(dir: &std::path::Path, args: &[&str]) -> Result<(String, Value)> {
    let json_path = dir.join("scale.json");
    let (stdout_path, stderr_path) = (dir.join("stdout.txt"), dir.join("stderr.txt"));
    let mut command = Command::new(default_binary());
    command
        .args(["bench", "scale"])
        .args(args)
        .arg("--json")
        .arg(&json_path)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path)?)
        .stderr(File::create(&stderr_path)?);
    sys::kill_with_parent(&mut command);
    let mut child = command.spawn().context("spawning laminar bench scale")?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            bail!("laminar bench scale ran past {RUN_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = std::fs::read_to_string(&stderr_path)?;
    if !status.success() {
        bail!("laminar bench scale failed ({status}): {stderr}");
    }
    let json = std::fs::read_to_string(&json_path).with_context(|| format!("no JSON; stderr: {stderr}"))?;
    Ok((
        std::fs::read_to_string(stdout_path)?,
        serde_json::from_str(&json)?,
    ))
}

#[test]
fn bench_scale_reports_every_step_with_its_figures() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let args = [
        "--partitions",
        "200",
        "--partitions-per-topic",
        "50",
        "--connections",
        "100",
        "--skip-throughput",
    ];
    let (table, report) = run_scale(dir.path(), &args)?;
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
    assert!(table.contains("goal (issue 14)"), "{table}");
    assert_eq!(report["settings"]["partitions"], 200);
    let left: Vec<String> = std::fs::read_dir(dir.path())?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<_>>()?;
    assert!(
        left.iter().all(|name| !name.starts_with("laminar-scale-")),
        "the run's temporary directory is removed: {left:?}"
    );
    Ok(())
}
