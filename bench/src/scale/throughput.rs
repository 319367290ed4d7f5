//! Throughput as the work spreads: `laminar bench produce` and `consume` (the same code paths,
//! run in-process) over topics of 1 to 10 000 partitions and with 1 to 64 producers or
//! consumers, unkeyed and keyed. Every run writes the same number of bytes into a topic
//! created for it; each series is read against its best run.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::bail;
use laminar_client::Acks;
use serde_json::{json, Value};

use super::broker::TopicSpec;
use super::partitions::{self, connect, DiskFloor};
use super::probe;
use super::step::{bounded, Status, Step, StepLog};
use crate::cli::{CommonArgs, CompressionArg, ConsumeArgs, DeliveryArgs, ProduceArgs, ProducerArgs};
use crate::run::{consume_result, produce_result};
use crate::stats::Measurement;

/// Partition counts of the partition series.
pub const PARTITION_COUNTS: [u32; 4] = [1, 100, 1_000, 10_000];
/// Producer (or consumer) counts of the connection series.
pub const WORKER_COUNTS: [usize; 4] = [1, 4, 16, 64];
/// Producers (and consumers) of the partition series.
pub const SERIES_WORKERS: usize = 4;
/// Partitions of the connection series.
pub const SERIES_PARTITIONS: u32 = 1_000;
/// Bytes of each record's value.
pub const RECORD_BYTES: usize = 1024;
/// Kafka's default `batch.size`: with the default budget, every partition of 10 000 gets a
/// batch or two (256 MiB / 10 000 = 26 KiB each), so the data does spread; the bench's own
/// default (256 KiB) would leave most of them empty.
pub const BATCH_BYTES: usize = 16 * 1024;
/// Kafka's default `buffer.memory`: each keyed producer's pool of 2 048 batch buffers, so
/// 1 000 partitions fill their batches and 10 000 send a record or two in each.
pub const BUFFER_BYTES: usize = 32 * 1024 * 1024;
/// The goal: within 20 % of the best run of its series.
pub const RATIO_GOAL: f64 = 0.8;

/// What every run shares.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Bootstrap of the broker measured.
    pub bootstrap: String,
    /// Record-value bytes each produce run sends.
    pub budget_bytes: u64,
    /// Longest one run may take.
    pub run_limit: Duration,
    /// Where writing stops for lack of disk.
    pub floor: DiskFloor,
    /// Tries of each run; the fastest is kept.
    pub tries: usize,
    /// The broker's pid, to wait for its background work to end.
    pub broker_pid: u32,
}

impl Plan {
    fn records(&self) -> u64 {
        (self.budget_bytes / RECORD_BYTES as u64).max(1)
    }
}

/// Produce or consume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `laminar bench produce`.
    Produce,
    /// `laminar bench consume`.
    Consume,
}

/// Unkeyed or keyed records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// Sticky batches, one partition after another.
    Unkeyed,
    /// Records spread by murmur2 of distinct keys.
    Keyed,
}

/// One measured run.
#[derive(Debug, Clone)]
pub struct Run {
    /// Produce or consume.
    pub side: Side,
    /// Partitions of its topic.
    pub partitions: u32,
    /// Producers or consumers (connections).
    pub workers: usize,
    /// Unkeyed or keyed (produce only).
    pub keys: Keys,
    /// The fastest try: status, figures (`mb_per_sec`, …), error.
    pub step: Step,
    /// MB/s of every try, one per round (`None`: it failed, and ended the tries).
    pub tries_mb_per_sec: Vec<Option<f64>>,
    /// The topic of its fastest try (deleted by the time the series is read).
    pub topic: String,
}

impl Run {
    /// MB/s of a run that finished.
    pub fn mb_per_sec(&self) -> Option<f64> {
        finished_mb_per_sec(&self.step)
    }

    /// The run in the `--json` document.
    pub fn to_json(&self) -> Value {
        let side = match self.side {
            Side::Produce => "produce",
            Side::Consume => "consume",
        };
        json!({"side": side, "partitions": self.partitions, "workers": self.workers,
               "keyed": self.keys == Keys::Keyed, "tries_mb_per_sec": self.tries_mb_per_sec,
               "fastest_try": self.step.to_json()})
    }

    /// A run of one try.
    fn one_try(
        side: Side,
        (partitions, workers, keys): (u32, usize, Keys),
        step: Step,
        topic: String,
    ) -> Run {
        let tries_mb_per_sec = vec![finished_mb_per_sec(&step)];
        Run {
            side,
            partitions,
            workers,
            keys,
            step,
            tries_mb_per_sec,
            topic,
        }
    }

    fn is(&self, side: Side, partitions: u32, workers: usize, keys: Keys) -> bool {
        (self.side, self.partitions, self.workers, self.keys) == (side, partitions, workers, keys)
    }
}

fn topic_name(partitions: u32, workers: usize, keys: Keys) -> String {
    let keys = match keys {
        Keys::Unkeyed => "unkeyed",
        Keys::Keyed => "keyed",
    };
    format!("throughput-p{partitions}-w{workers}-{keys}")
}

fn common(plan: &Plan, topic: &str, partitions: u32) -> CommonArgs {
    CommonArgs {
        brokers: plan.bootstrap.clone(),
        topic: topic.to_owned(),
        partitions: partitions as i32,
        replication_factor: -1,
        topic_configs: Vec::new(),
        json: None,
        report: None,
        limits_dir: PathBuf::from("."),
        no_limits: true,
        security: Default::default(),
    }
}

fn produce_args(plan: &Plan, topic: &str, partitions: u32, producers: usize, keys: Keys) -> ProduceArgs {
    ProduceArgs {
        common: common(plan, topic, partitions),
        num_records: plan.records(),
        producer: ProducerArgs {
            record_size: RECORD_BYTES,
            throughput: None,
            acks: Acks::Leader,
            batch_bytes: BATCH_BYTES,
            linger_ms: 5,
            compression: CompressionArg::None,
            producers,
            max_in_flight: 5,
            max_request_bytes: 1024 * 1024,
            keyed: keys == Keys::Keyed,
            buffer_bytes: BUFFER_BYTES,
        },
        delivery: DeliveryArgs::default(),
    }
}

/// Watches the free space while a run writes; sets `stop` when it falls under the floor.
fn watch_floor(
    floor: DiskFloor,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Option<String>> {
    std::thread::spawn(move || {
        while !done.load(Ordering::Relaxed) {
            if let Err(error) = floor.check() {
                stop.store(true, Ordering::Relaxed);
                return Some(format!("{error:#}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    })
}

/// Before a measured produce run: its topic created and one small record written to each of
/// its partitions, so that the run measures appends rather than the creation of each
/// partition's files (which the step "one record to every partition" measures; decision 0023,
/// partition files made at first write), as benchmark harnesses warm up before they measure. Its time is
/// reported apart.
fn warm_up(plan: &Plan, args: &ProduceArgs, log: &StepLog) -> anyhow::Result<()> {
    let topic = [TopicSpec {
        name: args.common.topic.clone(),
        partitions: args.common.partitions,
    }];
    let scratch = StepLog::default();
    partitions::create_topics(
        &plan.bootstrap,
        &topic,
        plan.run_limit,
        &scratch,
        &Mutex::new(Vec::new()),
    )?;
    let every_partition = u64::try_from(args.common.partitions).unwrap_or(0);
    partitions::produce_one_each(&plan.bootstrap, &topic, every_partition, &plan.floor, &scratch)?;
    log.put("warmup_seconds", scratch.get("seconds").unwrap_or(0.0));
    Ok(())
}

fn measure_produce(plan: &Plan, args: &ProduceArgs, log: &StepLog) -> anyhow::Result<()> {
    warm_up(plan, args, log)?;
    let stop = log.cancel_flag();
    let done = Arc::new(AtomicBool::new(false));
    let watcher = watch_floor(plan.floor.clone(), stop.clone(), done.clone());
    let cpu_before = probe::cpu_seconds(plan.broker_pid).ok();
    let result = produce_result(args, &stop);
    done.store(true, Ordering::Relaxed);
    let floor_error = watcher.join().unwrap_or(None);
    let measurement = &result?.sections[0].measurement;
    put_figures(plan, log, measurement, cpu_before);
    if let Some(error) = floor_error {
        bail!("{error}");
    }
    if measurement.records < args.num_records {
        bail!(
            "stopped after {} of {} records",
            measurement.records,
            args.num_records
        );
    }
    Ok(())
}

fn measure_consume(plan: &Plan, args: &ConsumeArgs, log: &StepLog) -> anyhow::Result<()> {
    let cpu_before = probe::cpu_seconds(plan.broker_pid).ok();
    let result = consume_result(args)?;
    put_figures(plan, log, &result.sections[0].measurement, cpu_before);
    Ok(())
}

/// A run's figures; with the broker's CPU time since `cpu_before` (user and system, all its
/// threads), per GiB of the run's bytes: what the broker pays for them, apart from the share
/// of the machine's cores the client takes (decision 0029, bench scale and its goals).
fn put_figures(plan: &Plan, log: &StepLog, measurement: &Measurement, cpu_before: Option<f64>) {
    log.put("seconds", measurement.seconds);
    log.put("records", measurement.records as f64);
    log.put("mb_per_sec", measurement.mb_per_sec());
    let cpu_after = probe::cpu_seconds(plan.broker_pid).ok();
    if let (Some(before), Some(after)) = (cpu_before, cpu_after) {
        if measurement.bytes > 0 {
            let gib = measurement.bytes as f64 / f64::from(1u32 << 30);
            log.put("broker_cpu_s_per_gib", (after - before).max(0.0) / gib);
        }
    }
}

/// MB/s of a step that finished.
fn finished_mb_per_sec(step: &Step) -> Option<f64> {
    (step.status == Status::Ok)
        .then(|| step.figure("mb_per_sec"))
        .flatten()
}

/// Before a produce try: the data of earlier runs is written out, so that no try starts with
/// another's writeback pending.
fn settle(plan: &Plan, log: &StepLog) {
    if let Err(error) = laminar_sys::file_systems::sync_file_system(&plan.floor.dir) {
        log.note(format!("syncfs before a run: {error}"));
    }
}

/// Before the consume runs of a topic just written: its partitions are checkpointed 10–15 s
/// after their last append (4–5 s of broker CPU at 10 000 partitions), which must not fall
/// into a consume try of one second (decision 0022, open on first use and the log state file).
fn quiet(plan: &Plan, log: &StepLog) {
    if let Err(error) = super::connections::wait_until_quiet(plan.broker_pid, log) {
        log.note(format!("waiting for the broker to go quiet: {error}"));
    }
}

/// One try of a produce point, into a topic created for it (`round` in its name).
fn produce_run(plan: &Plan, log: &StepLog, point: (u32, usize, Keys), round: usize) -> Run {
    let (partitions, producers, keys) = point;
    let topic = format!("{}-{round}", topic_name(partitions, producers, keys));
    settle(plan, log);
    let args = produce_args(plan, &topic, partitions, producers, keys);
    let title = format!(
        "produce {topic}: {} MiB of 1 KiB records",
        plan.budget_bytes >> 20
    );
    let run_plan = plan.clone();
    let step = bounded("produce", title, plan.run_limit, move |log| {
        measure_produce(&run_plan, &args, log)
    });
    Run::one_try(Side::Produce, point, step, topic)
}

/// One try of a consume point, reading `topic`.
fn consume_run(plan: &Plan, topic: &str, partitions: u32, consumers: usize) -> Run {
    let args = ConsumeArgs {
        common: common(plan, topic, partitions),
        num_records: plan.records(),
        consumers,
        fetch_max_bytes: crate::consume::FETCH_MAX_BYTES_DEFAULT,
        idle_timeout_s: 10,
        fetch_session: false,
    };
    // The harness deals partitions to consumers: never more consumers than partitions.
    let title = format!(
        "consume {topic} with {} consumers",
        (consumers as u32).min(partitions)
    );
    let run_plan = plan.clone();
    let step = bounded("consume", title, plan.run_limit, move |log| {
        measure_consume(&run_plan, &args, log)
    });
    Run::one_try(
        Side::Consume,
        (partitions, consumers, Keys::Unkeyed),
        step,
        topic.to_owned(),
    )
}

fn delete_noting(plan: &Plan, log: &StepLog, topic: &str) {
    if let Err(error) = delete_topic(plan, topic) {
        log.note(format!("{error:#}"));
    }
}

fn delete_topic(plan: &Plan, topic: &str) -> anyhow::Result<()> {
    let mut connection = connect(&plan.bootstrap, Duration::from_secs(60))?;
    for (name, outcome) in connection.delete_topics(&[topic], 60_000)? {
        if let Err(error) = outcome {
            bail!("deleting {name}: {error}");
        }
    }
    Ok(())
}

/// Every run, `plan.tries` rounds of them (one at least): each round tries every point once,
/// in the same order, so that the tries of one point are minutes apart and alternate with the
/// other points' (the VM's speed drifts over minutes, decision 0008: tries made one after
/// another shared their luck). Each point keeps its fastest try; a point whose try failed is
/// not tried again (the same failure would come again).
pub fn run_all(plan: &Plan, log: &StepLog) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for round in 1..=plan.tries.max(1) {
        run_round(plan, log, round, &mut runs);
    }
    runs
}

/// One try of every point not failed yet, topic by topic: each topic is deleted once its runs
/// are done, so the disk holds one run's data at a time.
fn run_round(plan: &Plan, log: &StepLog, round: usize, runs: &mut Vec<Run>) {
    let failed = |runs: &[Run], side, (partitions, workers, keys)| {
        runs.iter()
            .any(|run| run.is(side, partitions, workers, keys) && run.tries_mb_per_sec.contains(&None))
    };
    for partitions in PARTITION_COUNTS {
        let point = (partitions, SERIES_WORKERS, Keys::Unkeyed);
        if !failed(runs, Side::Produce, point) {
            let run = produce_run(plan, log, point, round);
            let (topic, produced) = (run.topic.clone(), run.mb_per_sec().is_some());
            merge(runs, run);
            if produced {
                quiet(plan, log);
                let mut consumer_counts = vec![SERIES_WORKERS];
                if partitions == SERIES_PARTITIONS {
                    consumer_counts.extend(WORKER_COUNTS.into_iter().filter(|w| *w != SERIES_WORKERS));
                }
                for consumers in consumer_counts {
                    if !failed(runs, Side::Consume, (partitions, consumers, Keys::Unkeyed)) {
                        merge(runs, consume_run(plan, &topic, partitions, consumers));
                    }
                }
            }
            delete_noting(plan, log, &topic);
        }
        produce_and_delete(
            plan,
            log,
            (partitions, SERIES_WORKERS, Keys::Keyed),
            round,
            runs,
            failed,
        );
    }
    for producers in WORKER_COUNTS.into_iter().filter(|w| *w != SERIES_WORKERS) {
        for keys in [Keys::Unkeyed, Keys::Keyed] {
            produce_and_delete(
                plan,
                log,
                (SERIES_PARTITIONS, producers, keys),
                round,
                runs,
                failed,
            );
        }
    }
}

/// One produce try of `point` unless an earlier one failed; its topic is deleted after.
fn produce_and_delete(
    plan: &Plan,
    log: &StepLog,
    point: (u32, usize, Keys),
    round: usize,
    runs: &mut Vec<Run>,
    failed: impl Fn(&[Run], Side, (u32, usize, Keys)) -> bool,
) {
    if failed(runs, Side::Produce, point) {
        return;
    }
    let run = produce_run(plan, log, point, round);
    delete_noting(plan, log, &run.topic);
    merge(runs, run);
}

/// Adds a try to the runs: to its point's run if there is one (kept as the run's step and
/// topic if it is the fastest yet), else as a new run.
fn merge(runs: &mut Vec<Run>, tried: Run) {
    let existing = runs
        .iter_mut()
        .find(|run| run.is(tried.side, tried.partitions, tried.workers, tried.keys));
    let Some(run) = existing else {
        runs.push(tried);
        return;
    };
    run.tries_mb_per_sec
        .extend(tried.tries_mb_per_sec.iter().copied());
    if run.mb_per_sec().is_none() || tried.mb_per_sec() > run.mb_per_sec() {
        (run.step, run.topic) = (tried.step, tried.topic);
    }
}

/// One line of a series: the value of its axis and the run.
#[derive(Debug, Clone)]
pub struct Point {
    /// Partitions or workers.
    pub x: u64,
    /// MB/s, if the run finished.
    pub mb_per_sec: Option<f64>,
    /// Share of the series' best.
    pub ratio_to_best: Option<f64>,
    /// MB/s of every try.
    pub tries_mb_per_sec: Vec<Option<f64>>,
    /// The broker's CPU seconds per GiB in the fastest try.
    pub broker_cpu_s_per_gib: Option<f64>,
    /// Why the run did not finish.
    pub error: Option<String>,
}

/// Runs that differ in one thing, read against the best of them.
#[derive(Debug, Clone)]
pub struct Series {
    /// Key in the JSON.
    pub name: &'static str,
    /// Heading in the table.
    pub title: String,
    /// What `x` counts.
    pub axis: &'static str,
    /// In axis order.
    pub points: Vec<Point>,
}

impl Series {
    fn of(name: &'static str, title: String, axis: &'static str, runs: Vec<(u64, Option<&Run>)>) -> Series {
        let best = runs
            .iter()
            .filter_map(|(_, run)| run.and_then(Run::mb_per_sec))
            .fold(0.0f64, f64::max);
        let points = runs
            .into_iter()
            .map(|(x, run)| {
                let mb_per_sec = run.and_then(Run::mb_per_sec);
                let error = match run {
                    None => Some("not run (an earlier run of its topic failed)".to_owned()),
                    Some(run) => run.step.error.clone(),
                };
                Point {
                    x,
                    mb_per_sec,
                    ratio_to_best: mb_per_sec.filter(|_| best > 0.0).map(|mb| mb / best),
                    tries_mb_per_sec: run.map(|run| run.tries_mb_per_sec.clone()).unwrap_or_default(),
                    broker_cpu_s_per_gib: run
                        .filter(|_| mb_per_sec.is_some())
                        .and_then(|run| run.step.figure("broker_cpu_s_per_gib")),
                    error,
                }
            })
            .collect();
        Series {
            name,
            title,
            axis,
            points,
        }
    }

    /// Points that finished below [`RATIO_GOAL`] of the best, or did not finish.
    pub fn short_points(&self) -> usize {
        self.points
            .iter()
            .filter(|p| p.ratio_to_best.is_none_or(|ratio| ratio < RATIO_GOAL))
            .count()
    }

    /// The series in the `--json` document.
    pub fn to_json(&self) -> Value {
        let points: Vec<Value> = self
            .points
            .iter()
            .map(|p| {
                json!({"x": p.x, "mb_per_sec": p.mb_per_sec, "ratio_to_best": p.ratio_to_best,
                       "tries_mb_per_sec": p.tries_mb_per_sec, "broker_cpu_s_per_gib": p.broker_cpu_s_per_gib,
                       "below_goal": p.ratio_to_best.is_none_or(|r| r < RATIO_GOAL), "error": p.error})
            })
            .collect();
        json!({"name": self.name, "title": self.title, "axis": self.axis, "points": points})
    }
}

/// The six series of the runs.
pub fn series(runs: &[Run]) -> Vec<Series> {
    let find = |side, partitions, workers, keys| runs.iter().find(|r| r.is(side, partitions, workers, keys));
    let by_partitions = |side, keys| {
        PARTITION_COUNTS
            .iter()
            .map(|&p| (u64::from(p), find(side, p, SERIES_WORKERS, keys)))
            .collect::<Vec<_>>()
    };
    let by_workers = |side, keys| {
        WORKER_COUNTS
            .iter()
            .map(|&w| (w as u64, find(side, SERIES_PARTITIONS, w, keys)))
            .collect::<Vec<_>>()
    };
    let (w, p) = (SERIES_WORKERS, SERIES_PARTITIONS);
    vec![
        Series::of(
            "produce_by_partitions_unkeyed",
            format!("produce, unkeyed, {w} producers"),
            "partitions",
            by_partitions(Side::Produce, Keys::Unkeyed),
        ),
        Series::of(
            "produce_by_partitions_keyed",
            format!("produce, keyed, {w} producers"),
            "partitions",
            by_partitions(Side::Produce, Keys::Keyed),
        ),
        Series::of(
            "produce_by_producers_unkeyed",
            format!("produce, unkeyed, {p} partitions"),
            "producers",
            by_workers(Side::Produce, Keys::Unkeyed),
        ),
        Series::of(
            "produce_by_producers_keyed",
            format!("produce, keyed, {p} partitions"),
            "producers",
            by_workers(Side::Produce, Keys::Keyed),
        ),
        Series::of(
            "consume_by_partitions",
            format!("consume, {w} consumers (at most one a partition)"),
            "partitions",
            by_partitions(Side::Consume, Keys::Unkeyed),
        ),
        Series::of(
            "consume_by_consumers",
            format!("consume, {p} partitions"),
            "consumers",
            by_workers(Side::Consume, Keys::Unkeyed),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(side: Side, partitions: u32, workers: usize, mb: Option<f64>) -> Run {
        let mut step = Step::skipped("run", "run".into(), "");
        step.status = if mb.is_some() { Status::Ok } else { Status::Failed };
        step.figures = mb
            .map(|mb| vec![("mb_per_sec", mb), ("broker_cpu_s_per_gib", mb / 1000.0)])
            .unwrap_or_default();
        step.error = mb.is_none().then(|| "failed run".to_owned());
        Run {
            side,
            partitions,
            workers,
            keys: Keys::Unkeyed,
            step,
            tries_mb_per_sec: vec![mb],
            topic: String::new(),
        }
    }

    #[test]
    fn each_point_is_read_against_the_best_of_its_series() {
        let runs = vec![
            run(Side::Produce, 1, 4, Some(400.0)),
            run(Side::Produce, 100, 4, Some(500.0)),
            run(Side::Produce, 1_000, 4, Some(300.0)),
            run(Side::Produce, 10_000, 4, None),
        ];
        let all = series(&runs);
        let unkeyed = &all[0];
        let ratios: Vec<Option<f64>> = unkeyed.points.iter().map(|p| p.ratio_to_best).collect();
        assert_eq!(ratios, vec![Some(0.8), Some(1.0), Some(0.6), None]);
        assert_eq!(unkeyed.short_points(), 2, "0.6 and the failed run");
        assert_eq!(unkeyed.points[3].error.as_deref(), Some("failed run"));
        let keyed = &all[1];
        assert!(keyed.points.iter().all(|p| p.error.is_some()), "no keyed runs");
        assert_eq!(unkeyed.to_json()["points"][2]["below_goal"], true);
        let cpu: Vec<Option<f64>> = unkeyed.points.iter().map(|p| p.broker_cpu_s_per_gib).collect();
        assert_eq!(
            cpu,
            vec![Some(0.4), Some(0.5), Some(0.3), None],
            "the fastest try's"
        );
        assert_eq!(unkeyed.to_json()["points"][1]["broker_cpu_s_per_gib"], 0.5);
    }

    #[test]
    fn tries_of_a_point_from_every_round_are_kept_and_its_fastest_is_its_figure() {
        let mut runs = Vec::new();
        for (partitions, mb) in [(1, 400.0), (100, 500.0), (1, 700.0), (100, 450.0), (1, 600.0)] {
            let mut tried = run(Side::Produce, partitions, 4, Some(mb));
            tried.topic = format!("p{partitions}-{mb}");
            merge(&mut runs, tried);
        }
        merge(&mut runs, run(Side::Consume, 1, 4, Some(900.0)));
        let one = &runs[0];
        assert_eq!(one.tries_mb_per_sec, vec![Some(400.0), Some(700.0), Some(600.0)]);
        assert_eq!((one.mb_per_sec(), one.topic.as_str()), (Some(700.0), "p1-700"));
        assert_eq!(runs[1].tries_mb_per_sec, vec![Some(500.0), Some(450.0)]);
        assert_eq!(runs[1].mb_per_sec(), Some(500.0));
        assert_eq!(runs.len(), 3, "a consume point is its own run");
        merge(&mut runs, run(Side::Produce, 100, 4, None));
        assert_eq!(runs[1].tries_mb_per_sec, vec![Some(500.0), Some(450.0), None]);
        assert_eq!(
            runs[1].mb_per_sec(),
            Some(500.0),
            "a failed try keeps the fastest"
        );
    }
}
