//! Running `produce`, `consume` and `e2e`: set-up, worker threads, merging, output.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use anyhow::Context;
use laminar_client::{Connection, OffsetSpec};
use serde_json::json;

use crate::cli::{CommonArgs, ConsumeArgs, DeliveryArgs, E2eArgs, ProduceArgs, ProducerArgs};
use crate::consume::{connect_consumer, run_consumer, ConsumeTarget, ConsumerJob};
use crate::limits::{measure, Budget, Limits};
use crate::pacing::Clock;
use crate::produce::{run_producer, Delivery, ProducerJob};
use crate::progress::ProgressLine;
use crate::result::{RunResult, Section};
use crate::setup::{prepare_topic, TopicLayout};
use crate::stats::{Interval, Measurement, Progress, Recorder};
use crate::transactions::TransactionFigures;

type Finished = (hdrhistogram::Histogram<u64>, Vec<Interval>);
/// What a producer measured, and its transactions' figures when it had some.
type ProducerFinished = (Finished, Option<TransactionFigures>);

fn limits_for(common: &CommonArgs) -> anyhow::Result<Option<Limits>> {
    if common.no_limits {
        return Ok(None);
    }
    eprintln!(
        "measuring this machine's limits in {} (a few seconds)…",
        common.limits_dir.display()
    );
    measure(&common.limits_dir, &Budget::default()).map(Some)
}

fn producer_settings(args: &ProducerArgs, num_records: u64) -> serde_json::Value {
    json!({
        "record_size": args.record_size, "num_records": num_records, "throughput": args.rate(),
        "acks": args.acks.wire(), "batch_bytes": args.batch_bytes, "linger_ms": args.linger_ms,
        "compression": format!("{:?}", args.compression).to_lowercase(), "producers": args.producers,
        "max_in_flight": args.max_in_flight, "keyed": args.keyed, "buffer_bytes": args.buffer_bytes,
    })
}

fn producer_jobs(
    layout: &TopicLayout,
    topic: &str,
    (args, num_records): (&ProducerArgs, u64),
    start_us: u64,
) -> anyhow::Result<Vec<ProducerJob>> {
    let producers = args.producers.max(1);
    let mut dealt = layout.deal(producers)?;
    if let (true, Some(leader)) = (args.keyed, layout.single_leader()) {
        // Keyed records go wherever their keys hash, so every producer writes every partition
        // (over its one connection, which one leader for all of them allows).
        let all: Vec<i32> = layout.leaders.iter().map(|(partition, _)| *partition).collect();
        dealt = vec![(leader.to_owned(), all); producers];
    }
    Ok(dealt
        .into_iter()
        .enumerate()
        .map(|(index, (leader, partitions))| ProducerJob {
            index,
            leader,
            topic: topic.to_owned(),
            partitions,
            records: num_records / producers as u64
                + u64::from((index as u64) < num_records % producers as u64),
            rate: args.rate().map(|rate| rate / producers as f64),
            start_us,
            client: layout.client.clone(),
            delivery: Delivery::Plain,
        })
        .collect())
}

/// How producer `index` of `producers` delivers, as `--idempotent` and `--transactional` say.
fn delivery_of(args: &DeliveryArgs, index: usize, producers: usize) -> Delivery {
    match args.transactional_id_of(index, producers) {
        Some(transactional_id) => Delivery::Transactional {
            transactional_id,
            batches: args.transaction_batches,
        },
        None if args.is_idempotent() => Delivery::Idempotent,
        None => Delivery::Plain,
    }
}

fn consumer_jobs(
    layout: &TopicLayout,
    topic: &str,
    consumers: usize,
    spec: OffsetSpec,
    end_to_end: bool,
    fetch_max_bytes: i32,
    idle: Duration,
) -> anyhow::Result<Vec<ConsumerJob>> {
    let dealt = layout.deal(consumers.max(1).min(layout.leaders.len()))?;
    dealt
        .into_iter()
        .map(|(leader, partitions)| {
            let mut connection = Connection::connect(&leader, &layout.client)?;
            let asked: Vec<(i32, OffsetSpec)> = partitions.iter().map(|p| (*p, spec)).collect();
            let offsets = connection.list_offsets(topic, &asked)?;
            Ok(ConsumerJob {
                leader,
                topic: topic.to_owned(),
                partitions: offsets,
                fetch_max_bytes,
                end_to_end,
                idle_timeout: idle,
                fetch_session: false,
                client: layout.client.clone(),
            })
        })
        .collect()
}

fn spawn_producers(
    jobs: Vec<ProducerJob>,
    args: &ProducerArgs,
    clock: Clock,
    progress: &Arc<Progress>,
    stop: Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<anyhow::Result<ProducerFinished>>> {
    jobs.into_iter()
        .map(|job| {
            let (args, progress, stop) = (args.clone(), progress.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut recorder = Recorder::new(job.start_us, progress);
                let outcome = run_producer(&job, &args, clock, &mut recorder, &stop);
                if outcome.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                outcome.map(|transactions| (recorder.finish(), transactions))
            })
        })
        .collect()
}

/// Starts the consumers and waits until each has connected and warmed its receive memory
/// ([`connect_consumer`]); returns them with the run's start, `start_delay_us` from then. The
/// time to connect and warm is not the run's.
fn spawn_consumers(
    jobs: Vec<ConsumerJob>,
    target: &Arc<ConsumeTarget>,
    clock: Clock,
    start_delay_us: u64,
    progress: &Arc<Progress>,
) -> (Vec<std::thread::JoinHandle<anyhow::Result<Finished>>>, u64) {
    // Two waits: every consumer ready, then the start set for all.
    let gate = Arc::new(Barrier::new(jobs.len() + 1));
    let start = Arc::new(AtomicU64::new(0));
    let threads = jobs
        .into_iter()
        .map(|job| {
            let (target, progress) = (target.clone(), progress.clone());
            let (gate, start) = (gate.clone(), start.clone());
            std::thread::spawn(move || {
                let connected = connect_consumer(&job);
                gate.wait();
                gate.wait();
                let mut recorder = Recorder::new(start.load(Ordering::Acquire), progress);
                let outcome = connected
                    .and_then(|connection| run_consumer(&job, connection, &target, clock, &mut recorder));
                if outcome.is_err() {
                    target.stop.store(true, Ordering::Relaxed);
                }
                outcome.map(|()| recorder.finish())
            })
        })
        .collect();
    gate.wait();
    let start_us = clock.now_us() + start_delay_us;
    start.store(start_us, Ordering::Release);
    gate.wait();
    (threads, start_us)
}

fn join<T>(threads: Vec<std::thread::JoinHandle<anyhow::Result<T>>>, what: &str) -> anyhow::Result<Vec<T>> {
    let mut finished = Vec::new();
    let mut first_error = None;
    for thread in threads {
        match thread.join().expect("worker threads do not panic") {
            Ok(part) => finished.push(part),
            Err(error) => {
                first_error.get_or_insert(error.context(format!("a {what} failed")));
            }
        }
    }
    first_error.map_or(Ok(finished), Err)
}

fn seconds_since(clock: Clock, start_us: u64) -> f64 {
    clock.now_us().saturating_sub(start_us) as f64 / 1e6
}

/// `laminar bench produce`.
pub fn produce(args: ProduceArgs) -> anyhow::Result<()> {
    let result = produce_result(&args, &Arc::new(AtomicBool::new(false)))?;
    result.emit(args.common.json.as_deref(), args.common.report.as_deref())
}

/// Runs `laminar bench produce` and returns what it measured, printing nothing but the
/// progress line. Setting `stop` ends the run early (the records sent until then count).
pub fn produce_result(args: &ProduceArgs, stop: &Arc<AtomicBool>) -> anyhow::Result<RunResult> {
    args.delivery.check(&args.producer)?;
    let limits = limits_for(&args.common)?;
    let layout = prepare_topic(&args.common)?;
    let clock = Clock::new();
    let start_us = clock.now_us() + 20_000;
    let mut jobs = producer_jobs(
        &layout,
        &args.common.topic,
        (&args.producer, args.num_records),
        start_us,
    )?;
    let producers = jobs.len();
    for job in &mut jobs {
        job.delivery = delivery_of(&args.delivery, job.index, producers);
    }
    let progress = Progress::new();
    let line = ProgressLine::start("produce", vec![("produce", progress.clone())]);
    let threads = spawn_producers(jobs, &args.producer, clock, &progress, stop.clone());
    let (parts, transactions) = split_transactions(join(threads, "producer")?);
    let seconds = seconds_since(clock, start_us);
    drop(line);
    let delivery = json!({"idempotent": args.delivery.is_idempotent(), "transactional": args.delivery.transactional, "transaction_batches": args.delivery.transaction_batches});
    Ok(RunResult {
        kind: "produce",
        settings: json!({"brokers": args.common.brokers, "topic": args.common.topic, "partitions": layout.leaders.len(), "producer": producer_settings(&args.producer, args.num_records), "delivery": delivery}),
        transactions,
        sections: vec![Section {
            name: "produce",
            verb: "sent",
            latency_kind: "produce (intended send to acknowledgement)",
            bytes_kind: "record values",
            measurement: Measurement::merge(parts, seconds),
        }],
        limits,
    })
}

/// The producers' measurements, and their transactions' figures added up (when they had any).
fn split_transactions(parts: Vec<ProducerFinished>) -> (Vec<Finished>, Option<TransactionFigures>) {
    let mut transactions: Option<TransactionFigures> = None;
    let finished = parts
        .into_iter()
        .map(|(finished, figures)| {
            if let Some(figures) = figures {
                transactions
                    .get_or_insert_with(TransactionFigures::new)
                    .add(&figures);
            }
            finished
        })
        .collect();
    (finished, transactions)
}

/// `laminar bench consume`.
pub fn consume(args: ConsumeArgs) -> anyhow::Result<()> {
    let result = consume_result(&args)?;
    result.emit(args.common.json.as_deref(), args.common.report.as_deref())
}

/// Runs `laminar bench consume` and returns what it measured, printing nothing but the
/// progress line.
pub fn consume_result(args: &ConsumeArgs) -> anyhow::Result<RunResult> {
    let limits = limits_for(&args.common)?;
    let layout = prepare_topic(&args.common)?;
    let mut jobs = consumer_jobs(
        &layout,
        &args.common.topic,
        args.consumers,
        OffsetSpec::Earliest,
        false,
        args.fetch_max_bytes,
        Duration::from_secs(args.idle_timeout_s),
    )?;
    for job in &mut jobs {
        job.fetch_session = args.fetch_session;
    }
    let clock = Clock::new();
    let target = Arc::new(ConsumeTarget {
        consumed: AtomicU64::new(0),
        wanted: args.num_records,
        stop: AtomicBool::new(false),
    });
    let progress = Progress::new();
    let line = ProgressLine::start("consume", vec![("consume", progress.clone())]);
    let (consumers, start_us) = spawn_consumers(jobs, &target, clock, 0, &progress);
    let parts = join(consumers, "consumer")?;
    let seconds = seconds_since(clock, start_us);
    drop(line);
    Ok(RunResult {
        kind: "consume",
        transactions: None,
        settings: json!({"brokers": args.common.brokers, "topic": args.common.topic, "num_records": args.num_records, "consumers": args.consumers, "fetch_max_bytes": args.fetch_max_bytes}),
        sections: vec![Section {
            name: "consume",
            verb: "consumed",
            latency_kind: "fetch round trip",
            bytes_kind: "record batches",
            measurement: Measurement::merge(parts, seconds),
        }],
        limits,
    })
}

/// `laminar bench e2e`.
pub fn end_to_end(args: E2eArgs) -> anyhow::Result<()> {
    let limits = limits_for(&args.common)?;
    let layout = prepare_topic(&args.common)?;
    let consumer_jobs = consumer_jobs(
        &layout,
        &args.common.topic,
        args.consumers,
        OffsetSpec::Latest,
        true,
        8 << 20,
        Duration::from_secs(10),
    )?;
    let clock = Clock::new();
    let target = Arc::new(ConsumeTarget {
        consumed: AtomicU64::new(0),
        wanted: args.num_records,
        stop: AtomicBool::new(false),
    });
    let (produced, consumed) = (Progress::new(), Progress::new());
    let line = ProgressLine::start(
        "e2e",
        vec![("produce", produced.clone()), ("e2e", consumed.clone())],
    );
    // The producers start 50 ms after the consumers are ready.
    let (consumers, start_us) = spawn_consumers(consumer_jobs, &target, clock, 50_000, &consumed);
    let producer_jobs = producer_jobs(
        &layout,
        &args.common.topic,
        (&args.producer, args.num_records),
        start_us,
    )
    .inspect_err(|_| target.stop.store(true, Ordering::Relaxed))?;
    let producers = spawn_producers(
        producer_jobs,
        &args.producer,
        clock,
        &produced,
        Arc::new(AtomicBool::new(false)),
    );
    let producer_parts =
        join(producers, "producer").map(|parts| parts.into_iter().map(|(finished, _)| finished).collect());
    if producer_parts.is_err() {
        target.stop.store(true, Ordering::Relaxed);
    }
    let producer_seconds = seconds_since(clock, start_us);
    let consumer_parts = join(consumers, "consumer").context("consuming what was produced")?;
    let consumer_seconds = seconds_since(clock, start_us);
    drop(line);
    let result = RunResult {
        kind: "e2e",
        transactions: None,
        settings: json!({"brokers": args.common.brokers, "topic": args.common.topic, "partitions": layout.leaders.len(), "consumers": args.consumers, "producer": producer_settings(&args.producer, args.num_records)}),
        sections: vec![
            Section {
                name: "produce",
                verb: "sent",
                latency_kind: "produce (intended send to acknowledgement)",
                bytes_kind: "record values",
                measurement: Measurement::merge(producer_parts?, producer_seconds),
            },
            Section {
                name: "e2e",
                verb: "received",
                latency_kind: "end-to-end (intended send to fetched)",
                bytes_kind: "record batches",
                measurement: Measurement::merge(consumer_parts, consumer_seconds),
            },
        ],
        limits,
    };
    result.emit(args.common.json.as_deref(), args.common.report.as_deref())
}
