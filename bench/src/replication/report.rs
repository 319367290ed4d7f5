//! The replication benchmark's report: every round, each side's totals, the RF3/RF1 ratios,
//! what each broker's CPU did, and how fetched bytes left the brokers. Printed as a table and
//! written as JSON; nothing is judged.

use std::path::Path;

use anyhow::Context;
use serde_json::{json, Map, Value};

use super::usage::{MachineCpu, Usage};
use super::{settings, Plan};
use crate::cli::ReplicationArgs;
use crate::output::section_json;
use crate::result::Section;
use crate::stats::Measurement;

/// One of the two topics compared.
#[derive(Debug, Clone)]
pub struct Side {
    /// "rf1", "rf3".
    pub label: String,
    pub topic: String,
    pub replication_factor: i16,
}

/// What a round did, and to which side (an index into the sides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundKind {
    Produce(usize),
    Consume(usize),
}

/// One measured round.
pub struct Round {
    /// 1-based.
    pub index: u32,
    pub kind: RoundKind,
    pub measurement: Measurement,
    /// Each broker's counters' growth over the round (none with `--bootstrap`).
    pub brokers: Vec<Usage>,
    /// This process's CPU seconds over the round (producers or consumers, progress, probes).
    pub harness_cpu_seconds: f64,
    /// The whole machine's CPU over the round.
    pub machine: MachineCpu,
}

impl Round {
    fn section(&self) -> Section {
        let (name, verb, latency_kind) = match self.kind {
            RoundKind::Produce(_) => (
                "produce",
                "acknowledged",
                "produce (request built to acknowledgement)",
            ),
            RoundKind::Consume(_) => ("consume", "consumed", "fetch round trip"),
        };
        Section {
            name,
            verb,
            latency_kind,
            bytes_kind: "record values (produce), record batches (consume)",
            measurement: self.measurement.clone(),
        }
    }
}

/// The rounds of one kind together: their measurements one after the other, and every
/// broker's counters added.
pub struct Totals {
    pub measurement: Measurement,
    pub brokers: Vec<Usage>,
    pub harness_cpu_seconds: f64,
    pub machine: MachineCpu,
}

impl Totals {
    /// All brokers' counters added.
    pub fn cluster(&self) -> Usage {
        self.brokers.iter().fold(Usage::default(), |sum, u| sum.plus(u))
    }

    /// `count` per second of the rounds (CPU seconds per second: cores busy).
    fn per_second(&self, count: f64) -> f64 {
        count / self.measurement.seconds.max(1e-9)
    }
}

/// Everything the run measured.
pub struct ReplicationReport {
    pub settings: Value,
    pub sides: [Side; 2],
    pub rounds: Vec<Round>,
    /// CPUs of this machine.
    pub cpus: usize,
}

impl ReplicationReport {
    pub fn new(args: &ReplicationArgs, plan: &Plan, rounds: Vec<Round>) -> ReplicationReport {
        ReplicationReport {
            settings: settings(args, plan),
            sides: plan.sides.clone(),
            rounds,
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        }
    }

    /// The rounds of `kind`, added up.
    pub fn totals(&self, kind: RoundKind) -> Totals {
        let rounds: Vec<&Round> = self.rounds.iter().filter(|r| r.kind == kind).collect();
        let brokers = rounds.iter().fold(Vec::new(), |sum: Vec<Usage>, round| {
            if sum.is_empty() {
                return round.brokers.clone();
            }
            sum.iter().zip(&round.brokers).map(|(a, b)| a.plus(b)).collect()
        });
        Totals {
            measurement: Measurement::concat(rounds.iter().map(|r| &r.measurement)),
            brokers,
            harness_cpu_seconds: rounds.iter().map(|r| r.harness_cpu_seconds).sum(),
            machine: rounds
                .iter()
                .fold(MachineCpu::default(), |sum, r| sum.plus(&r.machine)),
        }
    }

    /// RF3 over RF1: MB/s, records/s, latency p50 and p99 of the totals.
    pub fn ratios(&self) -> Ratios {
        let (single, replicated) = (
            self.totals(RoundKind::Produce(0)).measurement,
            self.totals(RoundKind::Produce(1)).measurement,
        );
        let latency = |q: f64| Some(replicated.latency_ms(q)? / single.latency_ms(q)?.max(1e-9));
        Ratios {
            mb_per_sec: replicated.mb_per_sec() / single.mb_per_sec().max(1e-12),
            records_per_sec: replicated.records_per_sec() / single.records_per_sec().max(1e-12),
            latency_p50: latency(0.5),
            latency_p99: latency(0.99),
            per_round_mb_per_sec: self.per_round_ratios(),
        }
    }

    /// RF3 MB/s over RF1 MB/s of each round.
    fn per_round_ratios(&self) -> Vec<f64> {
        let mb_per_sec = |index: u32, side: usize| {
            self.rounds
                .iter()
                .find(|r| r.index == index && r.kind == RoundKind::Produce(side))
                .map(|r| r.measurement.mb_per_sec())
        };
        let indexes = self.rounds.iter().map(|r| r.index).max().unwrap_or(0);
        (1..=indexes)
            .filter_map(|i| Some(mb_per_sec(i, 1)? / mb_per_sec(i, 0)?.max(1e-12)))
            .collect()
    }

    /// Prints the table and writes `--json`.
    pub fn emit(&self, json_path: Option<&Path>) -> anyhow::Result<()> {
        for line in self.lines() {
            println!("{line}");
        }
        if let Some(path) = json_path {
            let text = serde_json::to_string_pretty(&self.to_json())?;
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }

    fn label(&self, kind: RoundKind) -> String {
        match kind {
            RoundKind::Produce(side) => self.sides[side].label.clone(),
            RoundKind::Consume(side) => format!("consume {}", self.sides[side].label),
        }
    }

    /// The kinds of round the run had, produce sides first.
    fn kinds(&self) -> Vec<RoundKind> {
        let mut kinds = vec![RoundKind::Produce(0), RoundKind::Produce(1)];
        if self
            .rounds
            .iter()
            .any(|r| matches!(r.kind, RoundKind::Consume(_)))
        {
            kinds.push(RoundKind::Consume(0));
        }
        kinds
    }
}

/// RF3 over RF1.
#[derive(Debug, Clone)]
pub struct Ratios {
    pub mb_per_sec: f64,
    pub records_per_sec: f64,
    pub latency_p50: Option<f64>,
    pub latency_p99: Option<f64>,
    pub per_round_mb_per_sec: Vec<f64>,
}

impl ReplicationReport {
    /// The printed report.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![self.heading(), String::new()];
        lines.push(format!(
            "{:>5}  {:<12} {:>9} {:>11} {:>8} {:>8}  {}",
            "round",
            "topic",
            "MB/s",
            "records/s",
            "p50 ms",
            "p99 ms",
            "CPU cores busy: brokers 1..n | harness"
        ));
        for round in &self.rounds {
            lines.push(self.round_line(round));
        }
        lines.push(String::new());
        for kind in self.kinds() {
            let totals = self.totals(kind);
            let verb = if matches!(kind, RoundKind::Consume(_)) {
                "consumed"
            } else {
                "acknowledged"
            };
            lines.push(format!(
                "{}: {}",
                self.label(kind),
                totals.measurement.summary_line(verb)
            ));
        }
        lines.push(self.ratio_line());
        lines.extend(self.cpu_lines());
        lines.extend(self.fetch_lines());
        lines
    }

    fn heading(&self) -> String {
        let s = &self.settings;
        format!(
            "laminar bench replication: {} (rf{} vs rf1), {} partitions, acks={}, {}-byte records, {} producers, {} rounds x {} s each side ({} CPUs)",
            match s["brokers_started"].as_u64() {
                Some(0) | None => format!("cluster at {}", s["bootstrap"].as_str().unwrap_or("?")),
                Some(n) => format!(
                    "{n} brokers started here, {} core(s) each, replicating over {}",
                    s["cores_per_broker"],
                    s["inter_broker_protocol"].as_str().unwrap_or("PLAINTEXT")
                ),
            },
            self.sides[1].replication_factor,
            s["partitions"],
            s["acks"].as_str().unwrap_or("?"),
            s["record_size"],
            s["producers"],
            s["rounds"],
            s["seconds_per_round"],
            self.cpus
        )
    }

    fn round_line(&self, round: &Round) -> String {
        let m = &round.measurement;
        let ms = |q: f64| m.latency_ms(q).map_or("-".to_owned(), |v| format!("{v:.2}"));
        let seconds = m.seconds.max(1e-9);
        let cores: Vec<String> = round
            .brokers
            .iter()
            .map(|u| format!("{:.2}", u.cpu_seconds / seconds))
            .collect();
        format!(
            "{:>5}  {:<12} {:>9.1} {:>11.0} {:>8} {:>8}  {} | {:.2}",
            round.index,
            self.label(round.kind),
            m.mb_per_sec(),
            m.records_per_sec(),
            ms(0.5),
            ms(0.99),
            if cores.is_empty() {
                "-".to_owned()
            } else {
                cores.join(" ")
            },
            round.harness_cpu_seconds / seconds
        )
    }

    fn ratio_line(&self) -> String {
        let r = self.ratios();
        let times = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}x"));
        let (low, high) = r
            .per_round_mb_per_sec
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
        format!(
            "{}/rf1: MB/s {:.2}x (rounds {:.2}-{:.2}), records/s {:.2}x, produce latency p50 {}, p99 {}",
            self.sides[1].label,
            r.mb_per_sec,
            low,
            high,
            r.records_per_sec,
            times(r.latency_p50),
            times(r.latency_p99)
        )
    }
}

/// The brokers' CPU per MB they sent by fetch: to the consumer in the consume round, and to
/// followers in the replicated rounds. A replicated round's broker CPU also holds the produce
/// work and the followers' appends; the produce work is taken out at the RF1 rounds' CPU per
/// MB produced, the appends stay in (so the follower figure is an upper bound on the leaders'
/// cost of serving them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FetchCost {
    /// All brokers' CPU seconds per MB sent to the consumer.
    pub consumer_cpu_seconds_per_mb: Option<f64>,
    /// All brokers' CPU seconds of the replicated rounds above what the RF1 rounds spent per
    /// MB produced, per MB sent to followers.
    pub follower_cpu_seconds_per_mb: Option<f64>,
    /// The followers' fetcher threads' CPU seconds per MB they received.
    pub fetcher_cpu_seconds_per_mb: Option<f64>,
}

impl ReplicationReport {
    /// What a fetched MB cost the brokers; `None` figures without brokers or bytes.
    pub fn fetch_cost(&self) -> FetchCost {
        let single = self.totals(RoundKind::Produce(0)).cluster();
        let replicated = self.totals(RoundKind::Produce(1)).cluster();
        let consumed = self.totals(RoundKind::Consume(0)).cluster();
        let follower = single
            .cpu_seconds_per_mb(single.bytes_in)
            .and_then(|produce_per_mb| {
                let extra = replicated.cpu_seconds - produce_per_mb * replicated.bytes_in / 1e6;
                (replicated.bytes_out > 0.0).then(|| extra / (replicated.bytes_out / 1e6))
            });
        let fetchers = Usage {
            cpu_seconds: replicated.fetcher_cpu_seconds,
            ..Usage::default()
        };
        FetchCost {
            consumer_cpu_seconds_per_mb: consumed.cpu_seconds_per_mb(consumed.bytes_out),
            follower_cpu_seconds_per_mb: follower,
            fetcher_cpu_seconds_per_mb: fetchers.cpu_seconds_per_mb(replicated.bytes_out),
        }
    }

    fn cpu_lines(&self) -> Vec<String> {
        if self.rounds.iter().all(|r| r.brokers.is_empty()) {
            return vec!["CPU: not measured (--bootstrap: the brokers' pids are unknown)".to_owned()];
        }
        let kinds = self.kinds();
        let totals: Vec<(String, Totals)> = kinds.iter().map(|k| (self.label(*k), self.totals(*k))).collect();
        let mut lines = vec![
            String::new(),
            "CPU cores busy while the rounds ran (process = shard threads + follower fetchers + rest):"
                .to_owned(),
        ];
        let brokers = totals[0].1.brokers.len();
        for broker in 0..brokers {
            let each: Vec<String> = totals
                .iter()
                .map(|(label, t)| {
                    let u = &t.brokers[broker];
                    // Counted in 10 ms ticks per thread: the rest may come out a tick below 0.
                    let rest = (u.cpu_seconds - u.shard_cpu_seconds - u.fetcher_cpu_seconds).max(0.0);
                    format!(
                        "{label} {:.2} = {:.2} + {:.2} + {:.2}",
                        t.per_second(u.cpu_seconds),
                        t.per_second(u.shard_cpu_seconds),
                        t.per_second(u.fetcher_cpu_seconds),
                        t.per_second(rest)
                    )
                })
                .collect();
            lines.push(format!("  broker {}: {}", broker + 1, each.join(" | ")));
        }
        let each = |f: &dyn Fn(&Totals) -> f64| -> String {
            let parts: Vec<String> = totals
                .iter()
                .map(|(label, t)| format!("{label} {:.2}", f(t)))
                .collect();
            parts.join(" | ")
        };
        lines.push(format!(
            "  harness:  {}",
            each(&|t| t.per_second(t.harness_cpu_seconds))
        ));
        let all = |t: &Totals| t.per_second(t.cluster().cpu_seconds + t.harness_cpu_seconds);
        lines.push(format!(
            "  brokers + harness: {} (of {} CPUs)",
            each(&all),
            self.cpus
        ));
        let machine = |t: &Totals| t.per_second(t.machine.busy);
        let waiting = |t: &Totals| t.per_second(t.machine.iowait);
        let steal = |t: &Totals| t.per_second(t.machine.steal);
        lines.push(format!(
            "  machine, every process: busy {}; iowait {}; steal {}",
            each(&machine),
            each(&waiting),
            each(&steal)
        ));
        lines
    }

    fn fetch_lines(&self) -> Vec<String> {
        if self.rounds.iter().all(|r| r.brokers.is_empty()) {
            return Vec::new();
        }
        let mut lines = vec![String::new(), "From the brokers' /metrics:".to_owned()];
        let replicated = self.totals(RoundKind::Produce(1)).cluster();
        lines.push(format!(
            "  {} rounds: {:.1} MB sent by fetch (to followers; no consumer reads then) for {:.1} MB produced ({:.2}x); {}",
            self.sides[1].label,
            replicated.bytes_out / 1e6,
            replicated.bytes_in / 1e6,
            replicated.bytes_out / replicated.bytes_in.max(1.0),
            paths(&replicated)
        ));
        if self.kinds().contains(&RoundKind::Consume(0)) {
            let consumed = self.totals(RoundKind::Consume(0)).cluster();
            lines.push(format!(
                "  consume {}: {:.1} MB sent by fetch (to the consumer); {}",
                self.sides[0].label,
                consumed.bytes_out / 1e6,
                paths(&consumed)
            ));
        }
        lines.push(self.fdatasync_line());
        lines.push(self.disk_written_line());
        let cost = self.fetch_cost();
        let per_mb = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{:.2} ms", v * 1e3));
        lines.push(format!(
            "  brokers' CPU per MB sent by fetch: to the consumer {}; to followers {} (the {} rounds' CPU above the rf1 rounds' per MB produced, per MB replicated: includes the followers' appends; their fetcher threads alone {})",
            per_mb(cost.consumer_cpu_seconds_per_mb),
            per_mb(cost.follower_cpu_seconds_per_mb),
            self.sides[1].label,
            per_mb(cost.fetcher_cpu_seconds_per_mb)
        ));
        lines
    }
}

impl ReplicationReport {
    /// The brokers' fdatasyncs per second of each kind of round, and their mean time.
    fn fdatasync_line(&self) -> String {
        let each: Vec<String> = self
            .kinds()
            .into_iter()
            .map(|kind| {
                let totals = self.totals(kind);
                let all = totals.cluster();
                format!(
                    "{} {:.0}/s, {:.2} ms each",
                    self.label(kind),
                    totals.per_second(all.fdatasyncs),
                    1e3 * all.fdatasync_seconds / all.fdatasyncs.max(1.0)
                )
            })
            .collect();
        format!("  fdatasyncs, all brokers: {}", each.join(" | "))
    }
}

impl ReplicationReport {
    /// The bytes each broker wrote to its disk in each kind of round, per byte produced: with
    /// every broker on one disk, what a disk per broker would each have to take.
    fn disk_written_line(&self) -> String {
        let each: Vec<String> = self
            .kinds()
            .into_iter()
            .map(|kind| {
                let totals = self.totals(kind);
                let produced = totals.cluster().bytes_in;
                let written = |u: &Usage| {
                    let mb = u.disk_bytes_written / 1e6;
                    match produced > 0.0 {
                        true => format!("{mb:.1} MB ({:.2}x)", u.disk_bytes_written / produced),
                        false => format!("{mb:.1} MB"),
                    }
                };
                let brokers: Vec<String> = totals.brokers.iter().map(written).collect();
                format!("{} {}", self.label(kind), brokers.join(", "))
            })
            .collect();
        format!(
            "  bytes each broker wrote to its disk (x the bytes produced): {}",
            each.join(" | ")
        )
    }
}

/// How fetched bytes left: the shares sent with sendfile, copied, and read into memory first.
fn paths(usage: &Usage) -> String {
    let all = (usage.sendfile_bytes + usage.copied_bytes + usage.memory_bytes).max(1.0);
    format!(
        "sendfile {:.2} %, copied through user space {:.2} %, read into memory {:.2} %",
        100.0 * usage.sendfile_bytes / all,
        100.0 * usage.copied_bytes / all,
        100.0 * usage.memory_bytes / all
    )
}

impl ReplicationReport {
    /// The `--json` document.
    pub fn to_json(&self) -> Value {
        let figures = |kind: RoundKind, measurement: &Measurement| {
            let round = Round {
                index: 0,
                kind,
                measurement: measurement.clone(),
                brokers: Vec::new(),
                harness_cpu_seconds: 0.0,
                machine: MachineCpu::default(),
            };
            Value::Object(section_json(&round.section(), None))
        };
        let mut sides = Map::new();
        for kind in self.kinds() {
            let totals = self.totals(kind);
            let mut side = figures(kind, &totals.measurement);
            side["brokers"] = json!(totals.brokers.iter().map(|u| u.to_json()).collect::<Vec<_>>());
            side["cluster"] = totals.cluster().to_json();
            side["harness_cpu_seconds"] = json!(totals.harness_cpu_seconds);
            side["machine_cpu_seconds"] = totals.machine.to_json();
            sides.insert(self.label(kind), side);
        }
        let rounds: Vec<Value> = self
            .rounds
            .iter()
            .map(|r| {
                let mut round = Value::Object(section_json(&r.section(), None));
                round["round"] = json!(r.index);
                round["label"] = json!(self.label(r.kind));
                round["brokers"] = json!(r.brokers.iter().map(|u| u.to_json()).collect::<Vec<_>>());
                round["harness_cpu_seconds"] = json!(r.harness_cpu_seconds);
                round["machine_cpu_seconds"] = r.machine.to_json();
                round
            })
            .collect();
        let (ratios, cost) = (self.ratios(), self.fetch_cost());
        json!({
            "kind": "replication", "settings": self.settings, "cpus": self.cpus,
            "sides": sides, "rounds": rounds,
            "ratios": {"side": self.sides[1].label, "of": self.sides[0].label,
                "mb_per_sec": ratios.mb_per_sec, "records_per_sec": ratios.records_per_sec,
                "latency_p50": ratios.latency_p50, "latency_p99": ratios.latency_p99,
                "per_round_mb_per_sec": ratios.per_round_mb_per_sec},
            "fetch_cpu_seconds_per_mb": {"consumer": cost.consumer_cpu_seconds_per_mb,
                "follower": cost.follower_cpu_seconds_per_mb, "fetcher_threads": cost.fetcher_cpu_seconds_per_mb},
        })
    }
}
