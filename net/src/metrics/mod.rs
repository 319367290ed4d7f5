//! Broker metrics: counters each shard keeps for itself (plain `Cell`s, no atomics or locks on
//! the data path), copied out and added up only when `/metrics` is scraped.
//!
//! - [`ShardMetrics`]: one shard's request counts and latencies per Kafka API, per-topic bytes
//!   and records in and out, and durability-wait latency.
//! - [`gather`]: asks every shard for a [`ShardSnapshot`] and returns the [`BrokerSnapshot`].
//! - [`families`]: every metric family, documented in one table, and the Prometheus renderer.

pub mod families;
pub mod histogram;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};

use laminar_engine::io::WriteBehindStats;
use laminar_engine::partition::RecordBytes;
use laminar_engine::shard::shard_of_partition;

use crate::broker::{BrokerCtx, BrokerShard};
use crate::client::records::batches;
use crate::handlers::fetch_encode::FetchAnswer;
use histogram::{HistogramSnapshot, LatencyHistogram};

/// Requests of one Kafka API on one shard. Owned by one shard; not Send.
#[derive(Debug, Default)]
struct RequestStats {
    /// Requests that got an answer (or, for acks=0 produce, were handled).
    served: Cell<u64>,
    /// Requests that could not be answered and closed their connection.
    failed: Cell<u64>,
    /// From the whole frame's arrival to the response being ready.
    latency: LatencyHistogram,
}

/// Bytes and records of one topic through one shard's connections.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TopicTraffic {
    pub bytes_in: u64,
    pub records_in: u64,
    pub bytes_out: u64,
    pub records_out: u64,
}

impl TopicTraffic {
    fn add(&mut self, other: &TopicTraffic) {
        self.bytes_in += other.bytes_in;
        self.records_in += other.records_in;
        self.bytes_out += other.bytes_out;
        self.records_out += other.records_out;
    }
}

/// How fetched record bytes reached the sockets.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FetchPaths {
    /// Sent with sendfile from the page cache: never copied in user space.
    pub sendfile: u64,
    /// Left in the file, but copied through user space because the socket was full at that
    /// moment (or sendfile refused the file).
    pub copied: u64,
    /// Read into memory first (data no longer in the page cache, or storage without files).
    pub memory: u64,
}

impl FetchPaths {
    fn add(&mut self, other: &FetchPaths) {
        self.sendfile += other.sendfile;
        self.copied += other.copied;
        self.memory += other.memory;
    }
}

/// One shard's counters. Owned by one shard; not Send.
#[derive(Debug, Default)]
pub struct ShardMetrics {
    requests: RefCell<BTreeMap<i16, RequestStats>>,
    topics: RefCell<BTreeMap<String, TopicTraffic>>,
    fetch_paths: Cell<FetchPaths>,
    durability_wait: LatencyHistogram,
    /// Every fdatasync this shard's partitions made, timed by the engine around the syscall.
    fdatasync: Rc<LatencyHistogram>,
    /// Set once this shard's Kafka listener is bound; readiness needs every shard's.
    kafka_listener_bound: Cell<bool>,
}

/// The API key a request frame names (its first two bytes), read before the full decode so that a
/// request that fails to decode is still counted under its API.
pub fn api_key_of(frame: &[u8]) -> Option<i16> {
    frame.get(..2).map(|b| i16::from_be_bytes([b[0], b[1]]))
}

/// `(topic, partition, bytes, records)` of every partition in a produce request, taken before the
/// handler consumes the request and counted once the response says which partitions took them.
#[derive(Debug, Default)]
pub struct ProducedTraffic(Vec<(String, i32, u64, u64)>);

impl ProducedTraffic {
    pub fn of(request: &ProduceRequest) -> ProducedTraffic {
        let mut parts = Vec::new();
        for topic in &request.topic_data {
            for partition in &topic.partition_data {
                let records = partition.records.as_deref().unwrap_or_default();
                parts.push((
                    topic.name.to_string(),
                    partition.index,
                    records.len() as u64,
                    record_count(records),
                ));
            }
        }
        ProducedTraffic(parts)
    }
}

/// Records in the whole batches of `records`, as their headers say; bad bytes count nothing
/// (the handler rejects them).
fn record_count(records: &[u8]) -> u64 {
    batches(records)
        .map_while(Result::ok)
        .map(|batch| u64::try_from(batch.record_count()).unwrap_or(0))
        .sum()
}

impl ShardMetrics {
    /// Counts one request of API `api_key` (None: the frame was too short to name one).
    pub fn observe_request(&self, api_key: Option<i16>, elapsed: Duration, answered: bool) {
        let Some(api_key) = api_key else { return };
        let mut requests = self.requests.borrow_mut();
        let stats = requests.entry(api_key).or_default();
        let counter = if answered { &stats.served } else { &stats.failed };
        counter.set(counter.get() + 1);
        stats.latency.observe(elapsed);
    }

    /// Counts produced bytes and records of the partitions that accepted them. With acks=0
    /// (`response` None) the outcome is unknown to the client too; they are counted as sent.
    pub fn count_produced(&self, produced: ProducedTraffic, response: Option<&ProduceResponse>) {
        let mut topics = self.topics.borrow_mut();
        for (topic, partition, bytes, records) in produced.0 {
            let accepted = response.is_none_or(|response| {
                response.responses.iter().any(|t| {
                    t.name.as_str() == topic
                        && t.partition_responses
                            .iter()
                            .any(|p| p.index == partition && p.error_code == 0)
                })
            });
            if accepted {
                let traffic = topics.entry(topic).or_default();
                traffic.bytes_in += bytes;
                traffic.records_in += records;
            }
        }
    }

    /// Counts the record bytes and records a fetch response carries.
    pub fn count_fetched(&self, answer: &FetchAnswer) {
        let mut topics = self.topics.borrow_mut();
        for (topic, partitions) in &answer.topics {
            let (mut bytes, mut records) = (0u64, 0u64);
            for partition in partitions {
                bytes += partition.records.len() as u64;
                records += match &partition.records {
                    RecordBytes::Memory(batches) => {
                        self.count_fetch_paths(FetchPaths {
                            memory: partition.records.len() as u64,
                            ..FetchPaths::default()
                        });
                        batches.iter().map(|b| record_count(b)).sum()
                    }
                    // Unread file bytes: the offsets they cover (gaps only after compaction).
                    RecordBytes::File { offsets, .. } => (offsets.end - offsets.start) as u64,
                };
            }
            if bytes > 0 {
                let traffic = topics.entry(topic.clone()).or_default();
                traffic.bytes_out += bytes;
                traffic.records_out += records;
            }
        }
    }

    /// Adds to the counts of how fetched bytes were sent.
    pub fn count_fetch_paths(&self, paths: FetchPaths) {
        let mut total = self.fetch_paths.get();
        total.add(&paths);
        self.fetch_paths.set(total);
    }

    /// Time a produce or flush waited for its data to be fdatasync'd.
    pub fn observe_durability_wait(&self, elapsed: Duration) {
        self.durability_wait.observe(elapsed);
    }

    /// An observer to hand the engine: it times each fdatasync of this shard's partitions.
    pub fn fdatasync_observer(&self) -> Rc<dyn Fn(Duration)> {
        let fdatasync = self.fdatasync.clone();
        Rc::new(move |elapsed| fdatasync.observe(elapsed))
    }

    pub fn set_kafka_listener_bound(&self) {
        self.kafka_listener_bound.set(true);
    }
}

/// Request counters of one API, copied out of a shard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestSnapshot {
    pub served: u64,
    pub failed: u64,
    pub latency: HistogramSnapshot,
}

/// Everything one shard reports. Plain data: moves between shards.
#[derive(Debug, Clone, Default)]
pub struct ShardSnapshot {
    pub shard: usize,
    pub requests: BTreeMap<i16, RequestSnapshot>,
    pub topics: BTreeMap<String, TopicTraffic>,
    pub fetch_paths: FetchPaths,
    pub durability_wait: HistogramSnapshot,
    pub fdatasync: HistogramSnapshot,
    pub connections_active: usize,
    /// The partitions this shard owns.
    pub partitions: Vec<PartitionSnapshot>,
    pub kafka_listener_bound: bool,
    /// Offsets committed by the groups this shard coordinates.
    pub committed_offsets: Vec<GroupOffset>,
    /// This shard's write-behind counters; `None` when write-behind is off.
    pub write_behind: Option<WriteBehindStats>,
}

/// An offset a consumer group committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOffset {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// One open partition of a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSnapshot {
    pub topic: String,
    pub partition: i32,
    /// Not yet opened since its creation: no segment written, offsets and size are 0.
    pub open: bool,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub size_bytes: u64,
}

impl ShardSnapshot {
    /// Copies the counters and gauges of shard `shard` (of `shard_count`), whose state is
    /// `state`. Partitions come from the topic table (what the shard owns); offsets and sizes
    /// from those it has open (a partition opens on first use after its creation).
    pub fn of(shard: usize, shard_count: usize, state: &BrokerShard) -> ShardSnapshot {
        let metrics = &state.metrics;
        let table = state.shared.metadata.current();
        let mut partitions = Vec::new();
        for topic in table.topics.values() {
            for partition in 0..topic.partition_count {
                if shard_of_partition(&topic.name, partition, shard_count) != shard {
                    continue;
                }
                let open = state.partitions.get(&topic.name, partition);
                partitions.push(PartitionSnapshot {
                    topic: topic.name.clone(),
                    partition,
                    open: open.is_some(),
                    log_start_offset: open.as_ref().map_or(0, |p| p.log_start_offset()),
                    log_end_offset: open.as_ref().map_or(0, |p| p.log_end_offset()),
                    size_bytes: open.as_ref().map_or(0, |p| p.size_bytes()),
                });
            }
        }
        ShardSnapshot {
            shard,
            requests: metrics
                .requests
                .borrow()
                .iter()
                .map(|(key, stats)| {
                    let snapshot = RequestSnapshot {
                        served: stats.served.get(),
                        failed: stats.failed.get(),
                        latency: stats.latency.snapshot(),
                    };
                    (*key, snapshot)
                })
                .collect(),
            topics: metrics.topics.borrow().clone(),
            fetch_paths: metrics.fetch_paths.get(),
            durability_wait: metrics.durability_wait.snapshot(),
            fdatasync: metrics.fdatasync.snapshot(),
            connections_active: state.connections_active.get(),
            partitions,
            kafka_listener_bound: metrics.kafka_listener_bound.get(),
            committed_offsets: committed_offsets(state),
            write_behind: state.partitions.write_behind_stats(),
        }
    }
}

fn committed_offsets(state: &BrokerShard) -> Vec<GroupOffset> {
    let mut offsets = Vec::new();
    for listed in state.groups.list() {
        for ((topic, partition), value) in state.groups.committed(&listed.group_id) {
            offsets.push(GroupOffset {
                group: listed.group_id.clone(),
                topic,
                partition,
                offset: value.offset,
            });
        }
    }
    offsets
}

/// A consumer group's lag on one partition: log end offset minus committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupLag {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub lag: i64,
}

/// What a scrape sees: every shard that answered, in shard order.
#[derive(Debug, Clone, Default)]
pub struct BrokerSnapshot {
    pub shards: Vec<ShardSnapshot>,
    /// Shards that did not answer (stopped); readiness fails while any is missing.
    pub shards_missing: Vec<usize>,
    /// Computed from the shards' committed offsets and log end offsets by [`gather`].
    pub group_lag: Vec<GroupLag>,
}

impl BrokerSnapshot {
    /// Requests per API, added up over shards.
    pub fn requests(&self) -> BTreeMap<i16, RequestSnapshot> {
        let mut total: BTreeMap<i16, RequestSnapshot> = BTreeMap::new();
        for shard in &self.shards {
            for (key, stats) in &shard.requests {
                let entry = total.entry(*key).or_default();
                entry.served += stats.served;
                entry.failed += stats.failed;
                entry.latency.merge(&stats.latency);
            }
        }
        total
    }

    /// Traffic per topic, added up over shards.
    pub fn topics(&self) -> BTreeMap<String, TopicTraffic> {
        let mut total: BTreeMap<String, TopicTraffic> = BTreeMap::new();
        for shard in &self.shards {
            for (topic, traffic) in &shard.topics {
                total.entry(topic.clone()).or_default().add(traffic);
            }
        }
        total
    }

    pub fn durability_wait(&self) -> HistogramSnapshot {
        self.merged(|shard| &shard.durability_wait)
    }

    pub fn fetch_paths(&self) -> FetchPaths {
        let mut total = FetchPaths::default();
        for shard in &self.shards {
            total.add(&shard.fetch_paths);
        }
        total
    }

    pub fn fdatasync(&self) -> HistogramSnapshot {
        self.merged(|shard| &shard.fdatasync)
    }

    fn merged(&self, histogram: impl Fn(&ShardSnapshot) -> &HistogramSnapshot) -> HistogramSnapshot {
        let mut total = HistogramSnapshot::default();
        for shard in &self.shards {
            total.merge(histogram(shard));
        }
        total
    }

    /// Every shard answered and has its Kafka listener bound.
    pub fn all_shards_serving(&self) -> bool {
        self.shards_missing.is_empty() && self.shards.iter().all(|s| s.kafka_listener_bound)
    }
}

/// The Kafka name of an API key (`Produce`, `Fetch`, …), or `api_<key>` for a key this build
/// does not know.
pub fn api_name(key: i16) -> String {
    match ApiKey::try_from(key) {
        Ok(api) => format!("{api:?}"),
        Err(_) => format!("api_{key}"),
    }
}

/// Asks every shard for its snapshot (one `submit_to` each, concurrently).
pub async fn gather(ctx: &Rc<BrokerCtx>) -> BrokerSnapshot {
    let asks = (0..ctx.shard_count()).map(|shard| async move {
        let answer = ctx
            .submit_to(shard, move |there| async move {
                ShardSnapshot::of(there.id(), there.shard_count(), &there.state)
            })
            .await;
        (shard, answer)
    });
    let mut snapshot = BrokerSnapshot::default();
    for (shard, answer) in futures::future::join_all(asks).await {
        match answer {
            Ok(shard_snapshot) => snapshot.shards.push(shard_snapshot),
            Err(_) => snapshot.shards_missing.push(shard),
        }
    }
    snapshot.group_lag = group_lag(&snapshot.shards);
    snapshot
}

/// Lag of every committed offset: the partition's log end offset (from the shard that owns it)
/// minus the committed offset, never below 0. Partitions of shards that did not answer are left
/// out rather than guessed.
pub fn group_lag(shards: &[ShardSnapshot]) -> Vec<GroupLag> {
    let ends: BTreeMap<(&str, i32), i64> = shards
        .iter()
        .flat_map(|s| s.partitions.iter())
        .map(|p| ((p.topic.as_str(), p.partition), p.log_end_offset))
        .collect();
    let mut lag: Vec<GroupLag> = shards
        .iter()
        .flat_map(|s| s.committed_offsets.iter())
        .filter_map(|c| {
            let end = ends.get(&(c.topic.as_str(), c.partition))?;
            Some(GroupLag {
                group: c.group.clone(),
                topic: c.topic.clone(),
                partition: c.partition,
                lag: (end - c.offset).max(0),
            })
        })
        .collect();
    lag.sort_by(|a, b| (&a.group, &a.topic, a.partition).cmp(&(&b.group, &b.topic, b.partition)));
    lag
}

#[cfg(test)]
mod tests;
