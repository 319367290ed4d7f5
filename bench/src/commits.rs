//! `laminar bench commits`: a consumer that commits its offset after every message, as Kafka
//! clients' asynchronous commits do: OffsetCommit requests pipelined on one connection to the
//! group's coordinator, each timed from its send to its answer. Rounds of commits alternate
//! with rounds of the disk's own fdatasync latency (4 KiB appends, each synced) in a directory
//! on the broker's data disk, so the commit latency reads against what one fdatasync costs
//! there at that moment. With `laminar.fsync=always` every commit waits for an fdatasync; when
//! pipelined commits share them (group commit), the p99 stays near one fdatasync.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use laminar_client::{check_offset_commit, offset_commit_request, ClientConfig, CommittedOffset, Connection};
use serde_json::json;

use crate::cli::{CommitsArgs, CommonArgs};
use crate::stats::new_histogram;

/// One round of commits: how many per second, and their latency (µs).
struct CommitRound {
    commits_per_sec: f64,
    latency_us: Histogram<u64>,
}

/// One round of the disk's fdatasync probe: syncs per second, and their latency (µs).
struct SyncRound {
    syncs_per_sec: f64,
    latency_us: (u64, u64, u64),
}

pub fn run(args: CommitsArgs) -> anyhow::Result<()> {
    let common = topic_args(&args);
    crate::setup::prepare_topic(&common)?;
    let mut connection = coordinator_connection(&args)?;
    let mut commits = Vec::new();
    let mut syncs = Vec::new();
    for round in 0..args.rounds {
        let first_offset = (round * args.commits) as i64;
        let committed = commit_round(&mut connection, &args, first_offset)?;
        // As long as the commits took, so both sides see the disk over a like stretch of time.
        let probe_time = Duration::from_secs_f64(args.commits as f64 / committed.commits_per_sec.max(1.0));
        let synced = sync_round(&args, probe_time.max(Duration::from_millis(500)))?;
        println!("{}", describe_round(round, &committed, &synced));
        commits.push(committed);
        syncs.push(synced);
    }
    println!("{}", describe_all(&commits, &syncs));
    if let Some(path) = &args.json {
        std::fs::write(
            path,
            serde_json::to_string_pretty(&summary_json(&commits, &syncs))?,
        )?;
    }
    Ok(())
}

/// The topic the commits name (created with one partition if missing).
fn topic_args(args: &CommitsArgs) -> CommonArgs {
    CommonArgs {
        brokers: args.brokers.clone(),
        topic: args.topic.clone(),
        partitions: 1,
        replication_factor: -1,
        topic_configs: Vec::new(),
        json: None,
        report: None,
        limits_dir: args.sync_dir.clone(),
        no_limits: true,
        security: Default::default(),
    }
}

/// A connection to the coordinator of `--group`.
fn coordinator_connection(args: &CommitsArgs) -> anyhow::Result<Connection> {
    let config = ClientConfig::default();
    let mut bootstrap = Connection::connect(&args.brokers, &config)
        .with_context(|| format!("connecting to {}", args.brokers))?;
    let coordinator = bootstrap.find_coordinator(&args.group)?;
    let address = format!("{}:{}", coordinator.host, coordinator.port);
    Connection::connect(&address, &config).with_context(|| format!("connecting to the coordinator {address}"))
}

/// `--commits` commits of offsets from `first_offset` on, at most `--in-flight` unanswered.
fn commit_round(
    connection: &mut Connection,
    args: &CommitsArgs,
    first_offset: i64,
) -> anyhow::Result<CommitRound> {
    let mut latency_us = new_histogram();
    let in_flight_max = args.in_flight as usize;
    let mut in_flight = VecDeque::with_capacity(in_flight_max);
    let started = Instant::now();
    for offset in first_offset..first_offset + args.commits as i64 {
        if in_flight.len() == in_flight_max {
            take_answer(connection, &mut in_flight, &mut latency_us)?;
        }
        let committed = CommittedOffset {
            topic: args.topic.clone(),
            partition: 0,
            offset: offset + 1,
        };
        let request = offset_commit_request(&args.group, (-1, ""), &[committed]);
        in_flight.push_back((connection.send(&request)?, Instant::now()));
    }
    while !in_flight.is_empty() {
        take_answer(connection, &mut in_flight, &mut latency_us)?;
    }
    Ok(CommitRound {
        commits_per_sec: args.commits as f64 / started.elapsed().as_secs_f64(),
        latency_us,
    })
}

type InFlight = VecDeque<(
    laminar_client::Pending<kafka_protocol::messages::OffsetCommitResponse>,
    Instant,
)>;

/// Receives the oldest commit's answer, checks it and records its latency.
fn take_answer(
    connection: &mut Connection,
    in_flight: &mut InFlight,
    latency_us: &mut Histogram<u64>,
) -> anyhow::Result<()> {
    let (pending, sent) = in_flight.pop_front().expect("a commit in flight");
    let response = connection.receive(pending)?;
    check_offset_commit(&response)?;
    latency_us.saturating_record((sent.elapsed().as_micros() as u64).max(1));
    Ok(())
}

fn sync_round(args: &CommitsArgs, duration: Duration) -> anyhow::Result<SyncRound> {
    let (syncs_per_sec, p50, p99, max) = crate::limits::fdatasync_probe(&args.sync_dir, duration)?;
    Ok(SyncRound {
        syncs_per_sec,
        latency_us: (p50, p99, max),
    })
}

fn describe_round(round: usize, commits: &CommitRound, syncs: &SyncRound) -> String {
    let h = &commits.latency_us;
    format!(
        "round {round}: {:.0} commits/s, latency p50 {} µs p99 {} µs max {} µs | fdatasync {:.0}/s, p50 {} µs p99 {} µs max {} µs",
        commits.commits_per_sec,
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        h.max(),
        syncs.syncs_per_sec,
        syncs.latency_us.0,
        syncs.latency_us.1,
        syncs.latency_us.2,
    )
}

/// Every round's commits together, against the median of the rounds' fdatasync p99.
fn describe_all(commits: &[CommitRound], syncs: &[SyncRound]) -> String {
    let all = merged(commits);
    let sync_p99 = median_sync_p99_us(syncs);
    format!(
        "all rounds: {} commits, latency p50 {} µs p99 {} µs; fdatasync p99 (median of rounds) {} µs; commit p99 / fdatasync p99 = {:.2}",
        all.len(),
        all.value_at_quantile(0.5),
        all.value_at_quantile(0.99),
        sync_p99,
        all.value_at_quantile(0.99) as f64 / sync_p99.max(1) as f64,
    )
}

fn merged(commits: &[CommitRound]) -> Histogram<u64> {
    let mut all = new_histogram();
    for round in commits {
        all.add(&round.latency_us).expect("histograms of one shape");
    }
    all
}

fn median_sync_p99_us(syncs: &[SyncRound]) -> u64 {
    let mut p99s: Vec<u64> = syncs.iter().map(|s| s.latency_us.1).collect();
    p99s.sort_unstable();
    p99s.get(p99s.len() / 2).copied().unwrap_or(0)
}

fn summary_json(commits: &[CommitRound], syncs: &[SyncRound]) -> serde_json::Value {
    let all = merged(commits);
    let rounds: Vec<serde_json::Value> = commits
        .iter()
        .zip(syncs)
        .map(|(c, s)| {
            json!({
                "commits_per_sec": c.commits_per_sec,
                "commit_latency_us_p50": c.latency_us.value_at_quantile(0.5),
                "commit_latency_us_p99": c.latency_us.value_at_quantile(0.99),
                "commit_latency_us_max": c.latency_us.max(),
                "fdatasync_per_sec": s.syncs_per_sec,
                "fdatasync_latency_us_p50": s.latency_us.0,
                "fdatasync_latency_us_p99": s.latency_us.1,
                "fdatasync_latency_us_max": s.latency_us.2,
            })
        })
        .collect();
    let sync_p99 = median_sync_p99_us(syncs);
    json!({
        "rounds": rounds,
        "commits": all.len(),
        "commit_latency_us_p50": all.value_at_quantile(0.5),
        "commit_latency_us_p99": all.value_at_quantile(0.99),
        "fdatasync_latency_us_p99": sync_p99,
        "commit_p99_to_fdatasync_p99": all.value_at_quantile(0.99) as f64 / sync_p99.max(1) as f64,
    })
}
