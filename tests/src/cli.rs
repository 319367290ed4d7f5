//! Runs the `laminar` binary's client commands against a test broker and captures the outcome.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::broker::default_binary;

/// What a `laminar` command did.
#[derive(Debug, Clone)]
pub struct CliRun {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `laminar ARGS` with `stdin` as its input.
pub fn run(args: &[&str], stdin: &str) -> Result<CliRun> {
    let binary = default_binary();
    let mut child = Command::new(&binary)
        .args(args)
        .env_remove("LAMINAR_BROKERS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {} {}", binary.display(), args.join(" ")))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(stdin.as_bytes())
        .context("writing stdin")?;
    let output = child.wait_with_output().context("waiting for laminar")?;
    Ok(CliRun {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// Runs `laminar ARGS`, which must succeed; returns its stdout.
pub fn ok(args: &[&str], stdin: &str) -> Result<String> {
    let outcome = run(args, stdin)?;
    if !outcome.success {
        bail!("laminar {} failed: {}", args.join(" "), outcome.stderr);
    }
    Ok(outcome.stdout)
}

/// Runs `laminar ARGS --brokers BROKERS`, which must succeed; returns its stdout.
pub fn ok_on(brokers: &str, args: &[&str], stdin: &str) -> Result<String> {
    let mut args = args.to_vec();
    args.extend(["--brokers", brokers]);
    ok(&args, stdin)
}

/// `laminar user create USER --mechanism SCRAM-SHA-512` through `brokers`, the password on
/// stdin; it must succeed.
pub fn create_scram_user(brokers: &str, (user, password): (&str, &str)) -> Result<()> {
    let args = [
        "user",
        "create",
        user,
        "--mechanism",
        "SCRAM-SHA-512",
        "--iterations",
        "4096",
    ];
    ok_on(brokers, &args, &format!("{password}\n")).map(drop)
}

/// Runs `laminar ARGS`, which must fail with exactly one line on stderr; returns that line.
pub fn fails(args: &[&str]) -> Result<String> {
    let outcome = run(args, "")?;
    if outcome.success {
        bail!("laminar {} succeeded: {}", args.join(" "), outcome.stdout);
    }
    let lines: Vec<&str> = outcome.stderr.lines().collect();
    if lines.len() != 1 {
        bail!("expected one line on stderr, got {:?}", outcome.stderr);
    }
    Ok(lines[0].to_string())
}

/// The rows of a printed table whose first column is `first`, split on whitespace.
pub fn rows_starting<'a>(text: &'a str, first: &str) -> Vec<Vec<&'a str>> {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|cells| cells.first() == Some(&first))
        .collect()
}

/// Runs `laminar bench ARGS --json <dir>/bench.json` in `dir` (where the run's own temporary
/// directories go), killing it past `limit` so that a hung run fails the test instead of
/// hanging it. It must succeed; returns its stdout and the JSON it wrote.
pub fn bench_json(dir: &Path, args: &[&str], limit: Duration) -> Result<(String, serde_json::Value)> {
    let json_path = dir.join("bench.json");
    let (stdout_path, stderr_path) = (dir.join("stdout.txt"), dir.join("stderr.txt"));
    let mut command = Command::new(default_binary());
    command
        .arg("bench")
        .args(args)
        .arg("--json")
        .arg(&json_path)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path)?)
        .stderr(File::create(&stderr_path)?);
    laminar_sys::process::kill_with_parent(&mut command);
    let mut child = command.spawn().context("spawning laminar bench")?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            bail!("laminar bench {} ran past {limit:?}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = std::fs::read_to_string(&stderr_path)?;
    if !status.success() {
        bail!("laminar bench {} failed ({status}): {stderr}", args.join(" "));
    }
    let json = std::fs::read_to_string(&json_path).with_context(|| format!("no JSON; stderr: {stderr}"))?;
    Ok((
        std::fs::read_to_string(stdout_path)?,
        serde_json::from_str(&json)?,
    ))
}

/// Names of the entries of `dir` that start with `prefix`.
pub fn entries_starting_with(dir: &Path, prefix: &str) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.starts_with(prefix) {
            found.push(name);
        }
    }
    Ok(found)
}

/// Sets `quota` (`key=value`) on the entity `entity` names (`--client-id`, `app`, ...) with
/// `laminar quota set` through `brokers`; returns what it printed.
pub fn set_quota(brokers: &str, entity: &[&str], quota: &str) -> Result<String> {
    let mut args = vec!["quota", "set"];
    args.extend(entity);
    args.extend(["--quota", quota]);
    ok_on(brokers, &args, "")
}

/// Whether `user` logs in with SCRAM-SHA-512 on the SASL_PLAINTEXT listener at `address` (the
/// CLI lists topics as that user, its settings in a properties file under `dir`).
pub fn logs_in_with_scram(address: &str, dir: &Path, (user, password): (&str, &str)) -> Result<bool> {
    let config = dir.join(format!("{user}.properties"));
    std::fs::write(
        &config,
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
             sasl.username={user}\nsasl.password={password}\n"
        ),
    )?;
    let config = config.display().to_string();
    let args = ["topic", "list", "--brokers", address, "--command-config", &config];
    Ok(run(&args, "")?.success)
}
