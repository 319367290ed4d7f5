//! What a round cost each broker the harness started: CPU time from `/proc` (the process, and
//! its threads by role), and the bytes its `/metrics` counted in and out and how fetched bytes
//! reached the sockets, and the bytes it wrote to its disk. Read before and after each round;
//! the round's figures are the differences.

use std::net::SocketAddr;

use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::scale::probe::{cpu_seconds, thread_cpu_seconds};
use crate::scale::requests::get_metrics_text;
use laminar_sys::process::clock_ticks_per_second;

/// Record bytes per topic, by direction (`in` produced, `out` sent in fetch answers).
const REQUEST_BYTES: &str = "laminar_kafka_request_bytes_total";
/// Fetched record bytes by how they reached the socket.
const FETCH_BYTES: &str = "laminar_kafka_fetch_bytes_total";
/// Every fdatasync the broker's partitions made, timed around the syscall (a histogram).
const FDATASYNC: &str = "laminar_storage_fdatasync_latency_seconds";
/// Thread names (`comm`, cut at 15 bytes) of a broker's shard executors and follower fetchers.
const SHARD_THREAD_PREFIX: &str = "laminar-shard";
const FETCHER_THREAD_PREFIX: &str = "laminar-fetch";

/// A broker's counters at one moment, or their growth over a round.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// User and system CPU seconds of the whole process.
    pub cpu_seconds: f64,
    /// Of which its shard executors (requests, appends, fetch answers)...
    pub shard_cpu_seconds: f64,
    /// ...and its follower fetchers (requests to leaders, receiving their answers).
    pub fetcher_cpu_seconds: f64,
    /// Record bytes produced to it and accepted (as a leader).
    pub bytes_in: f64,
    /// Record bytes it sent in fetch answers, to consumers and followers alike.
    pub bytes_out: f64,
    /// Of the fetched bytes: sent with sendfile, never copied in user space...
    pub sendfile_bytes: f64,
    /// ...copied through user space (the socket was full at that moment)...
    pub copied_bytes: f64,
    /// ...or read into memory first (no longer cached).
    pub memory_bytes: f64,
    /// fdatasyncs of its partitions' files (acks=all waits for one on the leader)...
    pub fdatasyncs: f64,
    /// ...and the seconds they took.
    pub fdatasync_seconds: f64,
    /// Bytes the process sent to its disk (`write_bytes` of `/proc/PID/io`: for buffered
    /// writes, the pages it dirtied), so that a replicated round on one shared disk can be read
    /// for machines with a disk per broker.
    pub disk_bytes_written: f64,
}

impl Usage {
    /// Reads the counters of the broker `pid` serving `/metrics` on `http`.
    pub fn read(pid: u32, http: SocketAddr) -> anyhow::Result<Usage> {
        // The process's time and its threads' are read back to back, the /metrics scrape
        // (which costs the broker a little) after both.
        let cpu_seconds = cpu_seconds(pid)?;
        let disk_bytes_written = disk_bytes_written(pid)?;
        let (mut shard, mut fetcher) = (0.0, 0.0);
        for (name, seconds) in thread_cpu_seconds(pid)? {
            if name.starts_with(SHARD_THREAD_PREFIX) {
                shard += seconds;
            } else if name.starts_with(FETCHER_THREAD_PREFIX) {
                fetcher += seconds;
            }
        }
        let metrics = get_metrics_text(http).with_context(|| format!("GET /metrics of broker {pid}"))?;
        let sum = |name: &str, label: (&str, &str)| sum_samples(&metrics, name, Some(label));
        Ok(Usage {
            cpu_seconds,
            shard_cpu_seconds: shard,
            fetcher_cpu_seconds: fetcher,
            bytes_in: sum(REQUEST_BYTES, ("direction", "in"))?,
            bytes_out: sum(REQUEST_BYTES, ("direction", "out"))?,
            sendfile_bytes: sum(FETCH_BYTES, ("path", "sendfile"))?,
            copied_bytes: sum(FETCH_BYTES, ("path", "copied"))?,
            memory_bytes: sum(FETCH_BYTES, ("path", "memory"))?,
            fdatasyncs: sum_samples(&metrics, &format!("{FDATASYNC}_count"), None)?,
            fdatasync_seconds: sum_samples(&metrics, &format!("{FDATASYNC}_sum"), None)?,
            disk_bytes_written,
        })
    }

    /// The growth from `before` to `self`.
    pub fn since(&self, before: &Usage) -> Usage {
        self.zip(before, |now, then| now - then)
    }

    /// Both added.
    pub fn plus(&self, other: &Usage) -> Usage {
        self.zip(other, |a, b| a + b)
    }

    fn zip(&self, other: &Usage, f: impl Fn(f64, f64) -> f64) -> Usage {
        Usage {
            cpu_seconds: f(self.cpu_seconds, other.cpu_seconds),
            shard_cpu_seconds: f(self.shard_cpu_seconds, other.shard_cpu_seconds),
            fetcher_cpu_seconds: f(self.fetcher_cpu_seconds, other.fetcher_cpu_seconds),
            bytes_in: f(self.bytes_in, other.bytes_in),
            bytes_out: f(self.bytes_out, other.bytes_out),
            sendfile_bytes: f(self.sendfile_bytes, other.sendfile_bytes),
            copied_bytes: f(self.copied_bytes, other.copied_bytes),
            memory_bytes: f(self.memory_bytes, other.memory_bytes),
            fdatasyncs: f(self.fdatasyncs, other.fdatasyncs),
            fdatasync_seconds: f(self.fdatasync_seconds, other.fdatasync_seconds),
            disk_bytes_written: f(self.disk_bytes_written, other.disk_bytes_written),
        }
    }

    /// CPU seconds per MB (10^6 bytes) of `bytes`, `None` without bytes.
    pub fn cpu_seconds_per_mb(&self, bytes: f64) -> Option<f64> {
        (bytes > 0.0).then(|| self.cpu_seconds / (bytes / 1e6))
    }

    /// The figures for `--json`.
    pub fn to_json(self) -> Value {
        json!({
            "cpu_seconds": self.cpu_seconds, "shard_cpu_seconds": self.shard_cpu_seconds,
            "fetcher_cpu_seconds": self.fetcher_cpu_seconds, "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out, "sendfile_bytes": self.sendfile_bytes,
            "copied_bytes": self.copied_bytes, "memory_bytes": self.memory_bytes,
            "fdatasyncs": self.fdatasyncs, "fdatasync_seconds": self.fdatasync_seconds,
            "disk_bytes_written": self.disk_bytes_written,
        })
    }
}

/// The whole machine's CPU time (`/proc/stat`, all processes: the brokers, the harness and
/// whatever else runs), in seconds summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MachineCpu {
    /// user, nice, system, irq and softirq.
    pub busy: f64,
    /// Idle with I/O outstanding.
    pub iowait: f64,
    /// Taken by the hypervisor for others.
    pub steal: f64,
}

impl MachineCpu {
    /// Reads the `cpu` line of `/proc/stat`.
    pub fn read() -> anyhow::Result<MachineCpu> {
        let stat = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
        let line = stat
            .lines()
            .next()
            .filter(|l| l.starts_with("cpu "))
            .context("no cpu line in /proc/stat")?;
        let ticks: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .context("a /proc/stat cpu field that is not a number")?;
        let [user, nice, system, _idle, iowait, irq, softirq, steal, ..] = ticks[..] else {
            bail!("a short cpu line in /proc/stat");
        };
        let seconds = |t: u64| t as f64 / clock_ticks_per_second() as f64;
        Ok(MachineCpu {
            busy: seconds(user + nice + system + irq + softirq),
            iowait: seconds(iowait),
            steal: seconds(steal),
        })
    }

    /// The growth from `before` to `self`.
    pub fn since(&self, before: &MachineCpu) -> MachineCpu {
        MachineCpu {
            busy: self.busy - before.busy,
            iowait: self.iowait - before.iowait,
            steal: self.steal - before.steal,
        }
    }

    /// The figures for `--json`.
    pub fn to_json(self) -> Value {
        json!({"busy": self.busy, "iowait": self.iowait, "steal": self.steal})
    }

    /// Both added.
    pub fn plus(&self, other: &MachineCpu) -> MachineCpu {
        MachineCpu {
            busy: self.busy + other.busy,
            iowait: self.iowait + other.iowait,
            steal: self.steal + other.steal,
        }
    }
}

/// The sum of the samples of `name` that carry `label` (e.g. every topic's
/// `direction="out"`; `None`: all of them), 0 when there is none. A sample that is not a
/// finite, non-negative number fails: counters are neither.
fn sum_samples(text: &str, name: &str, label: Option<(&str, &str)>) -> anyhow::Result<f64> {
    let wanted = label.map(|(key, value)| format!("{key}=\"{value}\""));
    let mut sum = 0.0;
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let Some((series, number)) = line.rsplit_once(' ') else {
            continue;
        };
        let (series_name, labels) = series.split_once('{').unwrap_or((series, ""));
        let labels = labels.strip_suffix('}').unwrap_or(labels);
        let labelled = wanted
            .as_ref()
            .is_none_or(|wanted| labels.split(',').any(|label| label == wanted));
        if series_name != name || !labelled {
            continue;
        }
        let number: f64 = number
            .parse()
            .with_context(|| format!("{name}: {number:?} is not a number"))?;
        if !number.is_finite() || number < 0.0 {
            bail!("{name}: {number} is no counter value");
        }
        sum += number;
    }
    Ok(sum)
}

/// `write_bytes` of `/proc/PID/io`: what the process sent (or, buffered, dirtied) for its disk.
fn disk_bytes_written(pid: u32) -> anyhow::Result<f64> {
    let path = format!("/proc/{pid}/io");
    let io = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let line = io.lines().find_map(|line| line.strip_prefix("write_bytes:"));
    let bytes = line.with_context(|| format!("no write_bytes in {path}"))?;
    bytes
        .trim()
        .parse::<f64>()
        .with_context(|| format!("write_bytes of {path}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_written_counts_in_the_bytes_the_process_wrote_to_its_disk() {
        // Beside the build, on a disk (a tmpfs would count nothing).
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let before = disk_bytes_written(std::process::id()).unwrap();
        std::fs::write(dir.path().join("written"), vec![7u8; 1 << 20]).unwrap();
        let after = disk_bytes_written(std::process::id()).unwrap();
        assert!(after - before >= (1 << 20) as f64, "{before} then {after}");
    }

    #[test]
    fn counters_are_summed_over_the_label_asked() {
        let text = "# HELP laminar_kafka_request_bytes_total Record bytes\n\
            laminar_kafka_request_bytes_total{topic=\"a\",direction=\"in\"} 100\n\
            laminar_kafka_request_bytes_total{topic=\"a\",direction=\"out\"} 200\n\
            laminar_kafka_request_bytes_total{topic=\"b\",direction=\"out\"} 50\n\
            laminar_kafka_request_bytes_total_other{direction=\"out\"} 7\n\
            laminar_kafka_fetch_bytes_total{path=\"sendfile\"} 250\n";
        let out = sum_samples(text, REQUEST_BYTES, Some(("direction", "out")));
        assert_eq!(out.unwrap(), 250.0);
        let produced = sum_samples(text, REQUEST_BYTES, Some(("direction", "in")));
        assert_eq!(produced.unwrap(), 100.0);
        assert_eq!(sum_samples(text, REQUEST_BYTES, None).unwrap(), 350.0);
        let copied = sum_samples(text, FETCH_BYTES, Some(("path", "copied")));
        assert_eq!(copied.unwrap(), 0.0);
        let bad = "laminar_kafka_fetch_bytes_total{path=\"copied\"} -1\n";
        assert!(sum_samples(bad, FETCH_BYTES, None).is_err());
        let garbage = "laminar_kafka_fetch_bytes_total many\nother 2\n";
        assert!(sum_samples(garbage, FETCH_BYTES, None).is_err());
        let infinite = "laminar_kafka_fetch_bytes_total 1e999\n";
        assert!(sum_samples(infinite, FETCH_BYTES, None).is_err());
    }

    #[test]
    fn growth_and_sums() {
        let before = Usage {
            cpu_seconds: 1.0,
            bytes_out: 1e6,
            ..Usage::default()
        };
        let after = Usage {
            cpu_seconds: 3.0,
            bytes_out: 5e6,
            ..Usage::default()
        };
        let grown = after.since(&before);
        assert_eq!((grown.cpu_seconds, grown.bytes_out), (2.0, 4e6));
        assert_eq!(grown.cpu_seconds_per_mb(grown.bytes_out), Some(0.5));
        assert_eq!(grown.cpu_seconds_per_mb(0.0), None);
        assert_eq!(grown.plus(&grown).cpu_seconds, 4.0);
        let machine = MachineCpu::read().expect("/proc/stat");
        assert!(machine.busy > 0.0 && machine.since(&machine) == MachineCpu::default());
    }
}
