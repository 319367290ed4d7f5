//! Client byte-rate quotas with a real client (librdkafka through rdkafka), set with the
//! `laminar quota` command: a producer held to 1 MiB/s is acknowledged at about that rate once
//! its first burst is spent, while another client id on the same broker, without a quota,
//! produces several times faster; a consumer held to 1 MiB/s reads at about that rate, while
//! an unlimited one reads the same records several times faster. The quota is measured over 3
//! windows of 1 s (`quota.window.num`), so the burst a new client gets before it is held is
//! about 2 s of its quota.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use laminar_tests::cli;
use laminar_tests::rdkafka_client::{client_config, create_topic, unique_topic};
use laminar_tests::{Broker, BrokerOptions};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, ProducerContext};
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};

const QUOTA_BYTES_PER_S: f64 = 1_048_576.0;
const RECORD_BYTES: usize = 16 * 1024;
/// How long the held client runs, and from when its rate is measured (past the burst).
const RUN: Duration = Duration::from_secs(10);
const STEADY_FROM: Duration = Duration::from_secs(3);

fn broker() -> Result<Broker> {
    Broker::start(BrokerOptions::default().with_override("quota.window.num", "3"))
}

/// Bytes acknowledged, with when.
#[derive(Clone, Default)]
struct Acked(Arc<Mutex<Vec<(Instant, usize)>>>);

impl ClientContext for Acked {}

impl ProducerContext for Acked {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Ok(message) = result {
            let bytes = message.payload().map_or(0, <[u8]>::len);
            self.0.lock().unwrap().push((Instant::now(), bytes));
        }
    }
}

/// The bytes a second of `samples` from `from` to `to` after `start`.
fn rate_between(samples: &[(Instant, usize)], start: Instant, (from, to): (Duration, Duration)) -> f64 {
    let bytes: usize = samples
        .iter()
        .filter(|(at, _)| *at >= start + from && *at < start + to)
        .map(|(_, bytes)| bytes)
        .sum();
    bytes as f64 / (to - from).as_secs_f64()
}

/// Produces as fast as the client goes for `run`; the acknowledged bytes a second over
/// `window` of it.
fn produce_for(
    bootstrap: &str,
    topic: &str,
    client_id: &str,
    run: Duration,
    window: (Duration, Duration),
) -> Result<f64> {
    let acked = Acked::default();
    let producer: BaseProducer<Acked> = client_config(bootstrap)
        .set("client.id", client_id)
        .set("acks", "1")
        .set("linger.ms", "5")
        .set("queue.buffering.max.kbytes", "4096")
        .create_with_context(acked.clone())
        .context("creating a producer")?;
    let value = vec![b'q'; RECORD_BYTES];
    let start = Instant::now();
    while start.elapsed() < run {
        let record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic).partition(0).payload(&value);
        if producer.send(record).is_err() {
            producer.poll(Duration::from_millis(5)); // the queue is full: wait for acks
        }
        producer.poll(Duration::ZERO);
    }
    let samples = acked.0.lock().unwrap().clone();
    drop(producer);
    Ok(rate_between(&samples, start, window))
}

/// Reads `topic` from its start for at most `run` (until `total` bytes); the bytes a second
/// over `window` of it.
fn consume_for(
    bootstrap: &str,
    topic: &str,
    client_id: &str,
    (run, total): (Duration, usize),
    window: (Duration, Duration),
) -> Result<f64> {
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("client.id", client_id)
        .set("group.id", format!("{client_id}-group"))
        .set("enable.auto.commit", "false")
        .create()
        .context("creating a consumer")?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, 0, Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let (start, mut samples, mut read) = (Instant::now(), Vec::new(), 0);
    while start.elapsed() < run && read < total {
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let bytes = message?.payload().map_or(0, <[u8]>::len);
            read += bytes;
            samples.push((Instant::now(), bytes));
        }
    }
    Ok(rate_between(&samples, start, window))
}

fn set_quota(broker: &Broker, client_id: &str, quota: &str) -> Result<()> {
    let value = format!("{quota}={}", QUOTA_BYTES_PER_S as u64);
    let shown = cli::set_quota(&broker.bootstrap(), &["--client-id", client_id], &value)?;
    ensure!(
        shown.contains(&format!("client-id={client_id}")) && shown.contains(quota),
        "{shown}"
    );
    Ok(())
}

#[test]
fn a_producer_held_to_1_mib_per_s_is_acknowledged_at_about_that_rate() -> Result<()> {
    let broker = broker()?;
    let topic = unique_topic("produce-quota");
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(create_topic(&broker.bootstrap(), &topic, 1, &[]))?;
    set_quota(&broker, "held-producer", "producer_byte_rate")?;
    let held = produce_for(
        &broker.bootstrap(),
        &topic,
        "held-producer",
        RUN,
        (STEADY_FROM, RUN),
    )?;
    let free_run = Duration::from_secs(3);
    let free = produce_for(
        &broker.bootstrap(),
        &topic,
        "free-producer",
        free_run,
        (Duration::ZERO, free_run),
    )?;
    eprintln!("held producer {held:.0} B/s, unlimited producer {free:.0} B/s");
    ensure!(
        (0.7 * QUOTA_BYTES_PER_S..=1.3 * QUOTA_BYTES_PER_S).contains(&held),
        "the held producer ran at {held:.0} B/s, not about {QUOTA_BYTES_PER_S} B/s"
    );
    ensure!(
        free > 3.0 * held,
        "the unlimited producer ran at {free:.0} B/s only"
    );
    Ok(())
}

#[test]
fn a_consumer_held_to_1_mib_per_s_reads_at_about_that_rate() -> Result<()> {
    let broker = broker()?;
    let topic = unique_topic("fetch-quota");
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(create_topic(&broker.bootstrap(), &topic, 1, &[]))?;
    let fill = Duration::from_secs(3);
    produce_for(
        &broker.bootstrap(),
        &topic,
        "filler",
        fill,
        (Duration::ZERO, fill),
    )?;
    set_quota(&broker, "held-consumer", "consumer_byte_rate")?;
    let enough = (16.0 * QUOTA_BYTES_PER_S) as usize;
    let held = consume_for(
        &broker.bootstrap(),
        &topic,
        "held-consumer",
        (RUN, enough),
        (STEADY_FROM, RUN),
    )?;
    let free_run = Duration::from_secs(3);
    let free = consume_for(
        &broker.bootstrap(),
        &topic,
        "free-consumer",
        (free_run, enough),
        (Duration::ZERO, free_run),
    )?;
    eprintln!("held consumer {held:.0} B/s, unlimited consumer {free:.0} B/s");
    ensure!(
        (0.7 * QUOTA_BYTES_PER_S..=1.3 * QUOTA_BYTES_PER_S).contains(&held),
        "the held consumer read at {held:.0} B/s, not about {QUOTA_BYTES_PER_S} B/s"
    );
    ensure!(
        free > 3.0 * held,
        "the unlimited consumer read at {free:.0} B/s only"
    );
    Ok(())
}
