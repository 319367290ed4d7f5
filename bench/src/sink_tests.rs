use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use clap::Parser;
use laminar_client::{Acks, ClientConfig, Connection, OffsetSpec};

use super::*;
use crate::cli::{BenchCommand, ProduceArgs};
use crate::consume::{connect_consumer, run_consumer, ConsumeTarget, ConsumerJob};
use crate::pacing::Clock;
use crate::produce::{run_producer, Delivery, ProducerJob};
use crate::stats::{Measurement, Progress, Recorder};

fn producer_args(extra: &[&str]) -> ProduceArgs {
    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: BenchCommand,
    }
    let args = ["bench", "produce", "--topic", "t"].iter().chain(extra);
    match Cli::parse_from(args).command {
        BenchCommand::Produce(args) => args,
        _ => unreachable!("parsed a produce command"),
    }
}

/// Produces through the harness's producer into the sink; returns the measurement.
fn produce_into_sink(sink: &Sink, args: &ProduceArgs, topic: &str) -> Measurement {
    let clock = Clock::new();
    let job = ProducerJob {
        client: ClientConfig::default(),
        index: 0,
        leader: sink.address.to_string(),
        topic: topic.into(),
        partitions: vec![0, 1, 2, 3],
        records: args.num_records,
        rate: args.producer.rate(),
        start_us: clock.now_us(),
        delivery: Delivery::Plain,
    };
    let mut recorder = Recorder::new(job.start_us, Progress::new());
    let stop = std::sync::atomic::AtomicBool::new(false);
    run_producer(&job, &args.producer, clock, &mut recorder, &stop).expect("produce into the sink");
    Measurement::merge(
        vec![recorder.finish()],
        (clock.now_us() - job.start_us) as f64 / 1e6,
    )
}

/// 20 000 records of 1 KiB in batches of 64 records: 313 batches, the last of 32 records.
const TWENTY_THOUSAND_IN_64_KIB_BATCHES: [&str; 6] = [
    "--num-records",
    "20000",
    "--record-size",
    "1024",
    "--batch-bytes",
    "65536",
];

#[test]
fn harness_ceiling_against_the_sink() {
    let sink = start("127.0.0.1:0", 1024).expect("sink");
    let args = producer_args(&TWENTY_THOUSAND_IN_64_KIB_BATCHES);
    let produced = produce_into_sink(&sink, &args, "t");
    assert_eq!(produced.records, 20_000);
    assert_eq!(produced.bytes, 20_000 * 1024);
    assert_eq!(produced.latency_us.len(), 20_000, "one latency per record");
    // 64 records of 1 KiB a batch (~67 KB): 15 would fit Kafka's 1 MiB request, so each
    // request carries one for every one of the 4 partitions. 20 000 records = 312 full batches
    // and one of 32 records, in 79 requests; partition 0 takes batches 0, 4, … 312 (the short
    // one).
    assert_eq!(sink.produce_requests.load(Ordering::Relaxed), 79);
    assert_eq!(per_partition(&sink, "t"), vec![5024, 4992, 4992, 4992]);
    eprintln!(
        "harness producer ceiling (test build): {}",
        produced.summary_line("sent")
    );

    // acks=0: nothing is awaited, everything is still counted.
    let unacked = produce_into_sink(
        &sink,
        &producer_args(&["--num-records", "20000", "--acks", "0", "--record-size", "100"]),
        "u",
    );
    assert_eq!(unacked.records, 20_000);
    assert!(unacked.latency_us.is_empty());
    assert_eq!(args.producer.acks, Acks::Leader);
}

/// Records per partition the sink counted for `topic` (its log end offsets).
fn per_partition(sink: &Sink, topic: &str) -> Vec<i64> {
    let mut connection =
        Connection::connect(&sink.address.to_string(), &ClientConfig::default()).expect("connect");
    let specs: Vec<_> = (0..4).map(|partition| (partition, OffsetSpec::Latest)).collect();
    let ends = connection.list_offsets(topic, &specs).expect("offsets");
    ends.iter().map(|(_, end)| *end).collect()
}

#[test]
fn a_request_size_below_one_batch_sends_one_batch_per_request() {
    let sink = start("127.0.0.1:0", 1024).expect("sink");
    let args = producer_args(
        &[
            &TWENTY_THOUSAND_IN_64_KIB_BATCHES[..],
            &["--max-request-bytes", "1"],
        ]
        .concat(),
    );
    let produced = produce_into_sink(&sink, &args, "single");
    assert_eq!(produced.records, 20_000);
    assert_eq!(sink.produce_requests.load(Ordering::Relaxed), 313);
    assert_eq!(per_partition(&sink, "single"), vec![5024, 4992, 4992, 4992]);
}

#[test]
fn keyed_records_spread_over_every_partition() {
    let sink = start("127.0.0.1:0", 1024).expect("sink");
    let args = producer_args(&[&TWENTY_THOUSAND_IN_64_KIB_BATCHES[..], &["--keyed"]].concat());
    let produced = produce_into_sink(&sink, &args, "keyed");
    assert_eq!(produced.records, 20_000);
    let counts = per_partition(&sink, "keyed");
    assert_eq!(counts.iter().sum::<i64>(), 20_000);
    // murmur2 of distinct keys: about a quarter each.
    assert!(
        counts.iter().all(|count| (4_500..5_500).contains(count)),
        "{counts:?}"
    );
    // The accumulator's 512 buffers of 64 KiB hold every record at once, so each request
    // takes a full batch of each partition: 79 requests of 4 batches of 64 records and a
    // last one or two, as unkeyed records take 79 of full batches.
    let requests = sink.produce_requests.load(Ordering::Relaxed);
    assert!((79..=81).contains(&requests), "{requests} requests");
}

#[test]
fn a_keyed_producer_whose_pool_is_full_waits_for_acknowledgements_and_sends_every_record() {
    let sink = start("127.0.0.1:0", 1024).expect("sink");
    // Two batch buffers of 64 records: at most two batches waiting or in flight at once.
    let two_buffers = ["--keyed", "--buffer-bytes", "131072"];
    let args = producer_args(&[&TWENTY_THOUSAND_IN_64_KIB_BATCHES[..], &two_buffers].concat());
    let produced = produce_into_sink(&sink, &args, "pool");
    assert_eq!(produced.records, 20_000);
    assert_eq!(produced.latency_us.len(), 20_000, "one latency per record");
    let counts = per_partition(&sink, "pool");
    assert_eq!(counts.iter().sum::<i64>(), 20_000);
    let requests = sink.produce_requests.load(Ordering::Relaxed);
    assert!(
        requests >= 20_000 / 128,
        "two batches of 64 at most a request: {requests}"
    );

    // acks=0: buffers come back as each request is sent.
    let unacked = [&two_buffers[..], &["--num-records", "20000", "--acks", "0"]].concat();
    let unacked = produce_into_sink(&sink, &producer_args(&unacked), "pool0");
    assert_eq!(unacked.records, 20_000);
}

#[test]
fn paced_producer_holds_its_rate() {
    let sink = start("127.0.0.1:0", 100).expect("sink");
    let args = producer_args(&[
        "--num-records",
        "2000",
        "--throughput",
        "4000",
        "--record-size",
        "100",
        "--linger-ms",
        "2",
    ]);
    let produced = produce_into_sink(&sink, &args, "paced");
    assert_eq!(produced.records, 2000);
    // 2000 records at 4000/s take 0.5 s; allow for start-up and the last acknowledgement.
    assert!((0.45..0.9).contains(&produced.seconds), "{} s", produced.seconds);
    // With a 2 ms linger, a record waits at most ~2 ms for its batch before the round trip.
    assert!(produced.latency_ms(0.5).expect("latency") < 50.0);
}

#[test]
fn consumer_counts_canned_batches_from_the_sink() {
    let sink = start("127.0.0.1:0", 1024).expect("sink");
    let clock = Clock::new();
    let target = Arc::new(ConsumeTarget {
        consumed: AtomicU64::new(0),
        wanted: 100_000,
        stop: AtomicBool::new(false),
    });
    let job = ConsumerJob {
        client: ClientConfig::default(),
        leader: sink.address.to_string(),
        topic: "c".into(),
        partitions: vec![(0, 0), (1, 0)],
        fetch_max_bytes: 16 << 20,
        end_to_end: false,
        idle_timeout: Duration::from_secs(5),
        fetch_session: false,
    };
    let start_us = clock.now_us();
    let mut recorder = Recorder::new(start_us, Progress::new());
    let connection = connect_consumer(&job).expect("connect");
    run_consumer(&job, connection, &target, clock, &mut recorder).expect("consume");
    let consumed = Measurement::merge(vec![recorder.finish()], (clock.now_us() - start_us) as f64 / 1e6);
    assert!(consumed.records >= 100_000);
    assert_eq!(
        consumed.records,
        target.consumed.load(std::sync::atomic::Ordering::Relaxed)
    );
    eprintln!(
        "harness consumer ceiling (test build): {}",
        consumed.summary_line("consumed")
    );
}
