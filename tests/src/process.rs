//! What a test can see of a broker process from outside: its resident memory and CPU time, read
//! from /proc (Linux).

use std::time::Duration;

use anyhow::{bail, Context, Result};

/// Resident set size of `pid`, in bytes (VmRSS).
pub fn rss_bytes(pid: u32) -> Result<u64> {
    status_kib(pid, "VmRSS:").map(|kib| kib * 1024)
}

/// Peak resident set size of `pid` so far, in bytes (VmHWM).
pub fn rss_peak_bytes(pid: u32) -> Result<u64> {
    status_kib(pid, "VmHWM:").map(|kib| kib * 1024)
}

fn status_kib(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|line| line.starts_with(field))
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?;
    let kib = line
        .split_whitespace()
        .nth(1)
        .with_context(|| format!("{line:?}"))?
        .parse()?;
    Ok(kib)
}

/// User plus system CPU time `pid` has used so far.
pub fn cpu_time(pid: u32) -> Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces; the fields after its ')' are plain.
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).context("stat")?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    if fields.len() < 14 {
        bail!("short /proc/{pid}/stat: {stat:?}");
    }
    let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    let per_second = laminar_sys::process::clock_ticks_per_second();
    Ok(Duration::from_millis(ticks * 1000 / per_second))
}
