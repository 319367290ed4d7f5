//! Making the partitions: CreateTopics in batches of topics, then one small record to every
//! partition with pipelined produce requests.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ProduceResponse;
use laminar_client::records::encode_plain_batch;
use laminar_client::{Acks, ClientConfig, Connection, KafkaError, NewTopic, Pending};

use super::broker::TopicSpec;
use super::step::StepLog;

/// Partitions one CreateTopics request asks for at most (whole topics; at least one topic).
const PARTITIONS_PER_CREATE_REQUEST: usize = 10_000;
/// Partitions one produce request carries at most: a few MiB of free disk at most between
/// two looks at the free space, whatever the broker reserves per partition.
const PARTITIONS_PER_PRODUCE_REQUEST: usize = 100;
/// Produce requests in flight on the connection.
const PRODUCE_IN_FLIGHT: usize = 8;
/// Bytes of the one record's value.
pub const SMALL_RECORD_BYTES: usize = 100;

/// The topics of `partitions` partitions in all, `per_topic` each (the last may have fewer),
/// named `prefix-00000`, ….
pub fn topic_specs(prefix: &str, partitions: u32, per_topic: u32) -> Vec<TopicSpec> {
    let per_topic = per_topic.max(1);
    let topics = partitions.div_ceil(per_topic);
    (0..topics)
        .map(|index| TopicSpec {
            name: format!("{prefix}-{index:05}"),
            partitions: per_topic.min(partitions - index * per_topic) as i32,
        })
        .collect()
}

/// A connection for set-up requests that may take as long as the step allows.
pub fn connect(bootstrap: &str, io_timeout: Duration) -> anyhow::Result<Connection> {
    let config = ClientConfig {
        client_id: "laminar-bench-scale".to_owned(),
        io_timeout: Some(io_timeout),
        ..ClientConfig::default()
    };
    Connection::connect(bootstrap, &config).with_context(|| format!("connecting to {bootstrap}"))
}

/// Creates `topics` with CreateTopics requests of whole topics, up to
/// [`PARTITIONS_PER_CREATE_REQUEST`] partitions each, adding those created to `created`.
/// Records the wall time, requests and partitions created; fails naming the first topic the
/// broker refused.
pub fn create_topics(
    bootstrap: &str,
    topics: &[TopicSpec],
    io_timeout: Duration,
    log: &StepLog,
    created_topics: &Mutex<Vec<TopicSpec>>,
) -> anyhow::Result<()> {
    let mut connection = connect(bootstrap, io_timeout)?;
    let per_request =
        (PARTITIONS_PER_CREATE_REQUEST / topics.first().map_or(1, |t| t.partitions.max(1) as usize)).max(1);
    let timeout_ms = i32::try_from(io_timeout.as_millis()).unwrap_or(i32::MAX);
    let started = Instant::now();
    let (mut created, mut requests, mut refused) = (0u64, 0u64, Vec::new());
    for chunk in topics.chunks(per_request) {
        if log.cancelled() {
            break;
        }
        let new: Vec<NewTopic> = chunk
            .iter()
            .map(|t| NewTopic {
                name: t.name.clone(),
                partitions: t.partitions,
                replication_factor: -1,
                configs: Vec::new(),
            })
            .collect();
        let outcome = connection.create_topics(&new, timeout_ms)?;
        requests += 1;
        for ((name, result), spec) in outcome.into_iter().zip(chunk) {
            match result {
                Ok(()) => {
                    created += spec.partitions as u64;
                    created_topics
                        .lock()
                        .expect("created topics lock")
                        .push(spec.clone());
                }
                Err(error) => refused.push(format!("{name}: {error}")),
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        log.put("seconds", seconds);
        log.put("requests", requests as f64);
        log.put("partitions_created", created as f64);
        log.put("partitions_per_sec", created as f64 / seconds.max(1e-9));
        log.put("topics_refused", refused.len() as f64);
    }
    if let Some(first) = refused.first() {
        bail!("{} topics refused, the first {first}", refused.len());
    }
    Ok(())
}

/// Where the disk must keep room: writing steps stop when the data dir's filesystem has less
/// than `min_free_bytes` free.
#[derive(Debug, Clone)]
pub struct DiskFloor {
    /// A directory on the filesystem watched.
    pub dir: std::path::PathBuf,
    /// Free bytes below which writing stops.
    pub min_free_bytes: u64,
}

impl DiskFloor {
    /// An error once the filesystem has less free space than the floor.
    pub fn check(&self) -> anyhow::Result<()> {
        check_free(&self.dir, self.min_free_bytes)
    }
}

fn check_free(dir: &Path, min_free_bytes: u64) -> anyhow::Result<()> {
    let free = laminar_sys::file_systems::stats(dir)
        .map(|stats| stats.usable_bytes())
        .with_context(|| format!("statvfs {}", dir.display()))?;
    if free < min_free_bytes {
        bail!(
            "stopped: the filesystem of {} has {} MiB free, under --min-free-mib {}",
            dir.display(),
            free >> 20,
            min_free_bytes >> 20
        );
    }
    Ok(())
}

/// A produce request sent, and the partitions it carries.
struct Sent {
    pending: Pending<ProduceResponse>,
    topic: String,
}

/// Outcomes of the partitions produced to so far.
#[derive(Default)]
struct Tally {
    acked: u64,
    /// Error name → (count, first partition that got it).
    refused: BTreeMap<String, (u64, String)>,
}

/// Sends one record of [`SMALL_RECORD_BYTES`] to each of the first `limit` partitions of
/// `topics` (acks=1, [`PRODUCE_IN_FLIGHT`] requests in flight). Records the wall time and the
/// partitions acknowledged and refused; fails if any was refused.
pub fn produce_one_each(
    bootstrap: &str,
    topics: &[TopicSpec],
    limit: u64,
    floor: &DiskFloor,
    log: &StepLog,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut tally = Tally::default();
    let sent = send_one_each(bootstrap, topics, limit, floor, log, &mut tally);
    log.put("seconds", started.elapsed().as_secs_f64());
    log.put("partitions_acked", tally.acked as f64);
    let refused: u64 = tally.refused.values().map(|(count, _)| count).sum();
    log.put("partitions_refused", refused as f64);
    sent?;
    if refused > 0 {
        let why: Vec<String> = tally
            .refused
            .iter()
            .map(|(name, (count, first))| format!("{count} × {name} (first {first})"))
            .collect();
        bail!("{refused} partitions refused the record: {}", why.join(", "));
    }
    Ok(())
}

fn send_one_each(
    bootstrap: &str,
    topics: &[TopicSpec],
    limit: u64,
    floor: &DiskFloor,
    log: &StepLog,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let mut connection = connect(bootstrap, Duration::from_secs(60))?;
    let batch = one_record_batch();
    let mut in_flight: VecDeque<Sent> = VecDeque::new();
    let mut stopped = Ok(());
    for (topic, partitions) in partition_chunks(topics, limit) {
        if let Err(error) = floor.check() {
            stopped = Err(error);
            break;
        }
        if log.cancelled() {
            break;
        }
        if in_flight.len() >= PRODUCE_IN_FLIGHT {
            let oldest = in_flight.pop_front().expect("in flight is full");
            receive(&mut connection, oldest, tally)?;
        }
        let batches = partitions.map(|p| (p, batch.clone())).collect();
        let pending = connection
            .send_produce_batches(&topic.name, batches, Acks::Leader, 30_000)?
            .context("acks=1 is answered")?;
        in_flight.push_back(Sent {
            pending,
            topic: topic.name.clone(),
        });
    }
    while let Some(oldest) = in_flight.pop_front() {
        receive(&mut connection, oldest, tally)?;
    }
    stopped
}

/// `(topic, partitions)` of each request: the first `limit` partitions of `topics`, at most
/// [`PARTITIONS_PER_PRODUCE_REQUEST`] a request.
fn partition_chunks(topics: &[TopicSpec], limit: u64) -> Vec<(&TopicSpec, std::ops::Range<i32>)> {
    let mut chunks = Vec::new();
    let mut left = limit;
    for topic in topics {
        let mut start = 0;
        while start < topic.partitions && left > 0 {
            let take = (topic.partitions - start)
                .min(PARTITIONS_PER_PRODUCE_REQUEST as i32)
                .min(left.min(i32::MAX as u64) as i32);
            chunks.push((topic, start..start + take));
            start += take;
            left -= take as u64;
        }
    }
    chunks
}

fn receive(connection: &mut Connection, sent: Sent, tally: &mut Tally) -> anyhow::Result<()> {
    let response = connection.receive(sent.pending)?;
    for topic in &response.responses {
        for partition in &topic.partition_responses {
            match KafkaError::from_code(partition.error_code, None) {
                None => tally.acked += 1,
                Some(error) => {
                    let entry = tally.refused.entry(error.name()).or_insert((0, String::new()));
                    if entry.0 == 0 {
                        entry.1 = format!("{}-{}", sent.topic, partition.index);
                    }
                    entry.0 += 1;
                }
            }
        }
    }
    Ok(())
}

/// One v2 batch of one record: key "k", [`SMALL_RECORD_BYTES`] of value.
fn one_record_batch() -> Bytes {
    let mut out = BytesMut::new();
    let value = [b'x'; SMALL_RECORD_BYTES];
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    encode_plain_batch(&mut out, &[b"k"], &value, now_ms);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_hold_the_partitions_asked_for() {
        let specs = topic_specs("scale", 2_500, 1_000);
        let counts: Vec<i32> = specs.iter().map(|t| t.partitions).collect();
        assert_eq!(counts, vec![1_000, 1_000, 500]);
        assert_eq!(specs[2].name, "scale-00002");
        let chunks = partition_chunks(&specs, 1_150);
        assert_eq!(chunks.len(), 12);
        assert_eq!(chunks[10].1, 0..100);
        assert_eq!(chunks[11], (&specs[1], 100..150));
        let all: i32 = partition_chunks(&specs, u64::MAX)
            .iter()
            .map(|(_, r)| r.len() as i32)
            .sum();
        assert_eq!(all, 2_500);
    }
}
