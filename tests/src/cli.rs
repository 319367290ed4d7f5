//! Runs the `laminar` binary's client commands against a test broker and captures the outcome.

use std::io::Write;
use std::process::{Command, Stdio};

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
