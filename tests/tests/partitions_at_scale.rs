//! Figures, not a pass/fail test (ignored by default): what many partitions cost a broker.
//!
//! ```text
//! LAMINAR_SCALE_TOPICS=10 LAMINAR_SCALE_PARTITIONS=1000 [LAMINAR_SCALE_BINARY=path/to/laminar] \
//!   cargo test -p laminar-tests --test partitions_at_scale -- --ignored --nocapture
//! ```
//!
//! Creates TOPICS topics of PARTITIONS partitions, produces one 100-byte record to every
//! partition (one produce request per topic), fetches them back, and prints: the time of each
//! step, the broker's RSS growth per partition, its open descriptors, the disk the partitions
//! hold, a clean shutdown's time, a start after it and the first fetch of everything, then the
//! same after a crash (kill -9 right after a second round of produce). The broker runs under
//! the test's open-file limit (raise it with `ulimit -n` to try other limits).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{BrokerId, FetchRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::{Broker, BrokerOptions};

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn topic(index: u64) -> String {
    format!("scale-{index}")
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// One request producing a 100-byte record to every partition of `topic`; fails on any error.
fn produce_all(conn: &mut WireConnection, topic: &str, partitions: i32) -> Result<()> {
    let value = [b'v'; 100];
    let data = (0..partitions)
        .map(|p| {
            let batch = wire::record_batch(&[&value], 1_700_000_000_000)?;
            Ok(PartitionProduceData::default()
                .with_index(p)
                .with_records(Some(batch)))
        })
        .collect::<Result<Vec<_>>>()?;
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(60_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(data)]);
    let response = conn.request(&request, 8)?;
    for answer in &response.responses[0].partition_responses {
        if answer.error_code != 0 {
            bail!("produce {topic}/{}: error {}", answer.index, answer.error_code);
        }
    }
    Ok(())
}

/// One request fetching every partition of `topic` from offset 0; returns the records' count.
fn fetch_all(conn: &mut WireConnection, topic: &str, partitions: i32) -> Result<usize> {
    let wanted = (0..partitions)
        .map(|p| {
            FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(0)
                .with_partition_max_bytes(64 << 10)
        })
        .collect();
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(256 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(wanted)]);
    let response = conn.request(&request, 11)?;
    let mut records = 0;
    for answer in &response.responses[0].partitions {
        if answer.error_code != 0 {
            bail!(
                "fetch {topic}/{}: error {}",
                answer.partition_index,
                answer.error_code
            );
        }
        records += wire::decode_records(answer)?.len();
    }
    Ok(records)
}

/// A line of `/proc/<pid>/status` in KiB (`VmRSS`, …).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Disk blocks the files under `dir` hold, and their length.
fn disk_bytes(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut total = (0, 0);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            let (blocks, len) = disk_bytes(&entry.path());
            total = (total.0 + blocks, total.1 + len);
        } else {
            total = (total.0 + meta.blocks() * 512, total.1 + meta.len());
        }
    }
    total
}

/// Runs `step` and prints how long it took.
fn timed<T>(what: &str, step: impl FnOnce() -> Result<T>) -> Result<T> {
    let started = Instant::now();
    let out = step()?;
    println!("{what}: {:.2} s", started.elapsed().as_secs_f64());
    Ok(out)
}

fn every_topic<T>(topics: u64, mut each: impl FnMut(&str) -> Result<T>) -> Result<Vec<T>> {
    (0..topics).map(|t| each(&topic(t))).collect()
}

fn fetch_everything(broker: &Broker, topics: u64, partitions: i32, expected: usize) -> Result<()> {
    let mut conn = WireConnection::connect(broker.addr())?;
    let counts = every_topic(topics, |t| fetch_all(&mut conn, t, partitions))?;
    let total: usize = counts.iter().sum();
    if total != expected {
        bail!("fetched {total} records, expected {expected}");
    }
    Ok(())
}

fn print_footprint(broker: &Broker, rss_before_kib: u64, total: u64) {
    let pid = broker.pid().unwrap_or(0);
    let rss = status_kib(pid, "VmRSS");
    let growth = rss.saturating_sub(rss_before_kib) * 1024;
    println!("broker RSS: {rss} KiB, {} bytes per partition", growth / total);
    println!("open descriptors: {}", open_descriptors(pid));
    let (allocated, len) = disk_bytes(&broker.data_dir());
    println!(
        "data dir: {allocated} bytes of disk for {len} bytes of files, {} per partition",
        allocated / total
    );
}

#[test]
#[ignore = "prints figures; run it by hand"]
fn figures() -> Result<()> {
    let topics = setting("LAMINAR_SCALE_TOPICS", 10);
    let partitions = setting("LAMINAR_SCALE_PARTITIONS", 1000) as i32;
    let total = topics * partitions as u64;
    let mut options = BrokerOptions::default().with_override("offsets.topic.num.partitions", "1");
    options.binary = std::env::var_os("LAMINAR_SCALE_BINARY").map(Into::into);
    (options.startup_timeout, options.shutdown_timeout) =
        (Duration::from_secs(600), Duration::from_secs(600));
    println!("{topics} topics x {partitions} partitions = {total}");
    let mut broker = Broker::start(options)?;
    let rss_before = status_kib(broker.pid().unwrap_or(0), "VmRSS");
    let mut conn = WireConnection::connect(broker.addr())?;
    timed("create", || {
        every_topic(topics, |t| wire::create_topic(&mut conn, t, partitions))
    })?;
    timed("produce one record to each", || {
        every_topic(topics, |t| produce_all(&mut conn, t, partitions))
    })?;
    let fetched = timed("fetch all", || {
        fetch_everything(&broker, topics, partitions, total as usize)
    });
    if let Err(error) = fetched {
        bail!("{error}; the broker's stderr:\n{}", broker.stderr_tail());
    }
    print_footprint(&broker, rss_before, total);
    timed("clean shutdown", || broker.terminate().map(drop))?;
    timed("start after a clean shutdown", || broker.restart())?;
    timed("first fetch of all", || {
        fetch_everything(&broker, topics, partitions, total as usize)
    })?;
    let mut conn = WireConnection::connect(broker.addr())?;
    timed("produce again", || {
        every_topic(topics, |t| produce_all(&mut conn, t, partitions))
    })?;
    broker.kill9()?;
    timed("start after kill -9", || broker.restart())?;
    let expected = 2 * total as usize;
    timed("first fetch of all (recovery)", || {
        fetch_everything(&broker, topics, partitions, expected)
    })?;
    timed("clean shutdown", || broker.terminate().map(drop))?;
    Ok(())
}
