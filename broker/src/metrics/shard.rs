//! The counters one shard keeps for itself: plain `Cell`s, no atomics or locks on the data path.
//! Owned by one shard; not Send. [`super::gather`] copies them out when `/metrics` is scraped.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use laminar_engine::partition::RecordBytes;
use laminar_protocol::fetch_response::FetchAnswer;
use laminar_protocol::records::batches;

use super::histogram::LatencyHistogram;

/// Requests of one Kafka API on one shard. Owned by one shard; not Send.
#[derive(Debug, Default)]
pub(super) struct RequestStats {
    /// Requests that got an answer (or, for acks=0 produce, were handled).
    pub(super) served: Cell<u64>,
    /// Requests that could not be answered and closed their connection.
    pub(super) failed: Cell<u64>,
    /// From the whole frame's arrival to the response being ready.
    pub(super) latency: LatencyHistogram,
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
    pub(super) fn add(&mut self, other: &TopicTraffic) {
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
    pub(super) fn add(&mut self, other: &FetchPaths) {
        self.sendfile += other.sendfile;
        self.copied += other.copied;
        self.memory += other.memory;
    }
}

/// One shard's counters. Owned by one shard; not Send.
#[derive(Debug, Default)]
pub struct ShardMetrics {
    pub(super) requests: RefCell<BTreeMap<i16, RequestStats>>,
    pub(super) topics: RefCell<BTreeMap<String, TopicTraffic>>,
    pub(super) fetch_paths: Cell<FetchPaths>,
    pub(super) durability_wait: LatencyHistogram,
    /// Every fdatasync this shard's partitions made, timed by the engine around the syscall.
    pub(super) fdatasync: Rc<LatencyHistogram>,
    /// Set once this shard's Kafka listener is bound; readiness needs every shard's.
    pub(super) kafka_listener_bound: Cell<bool>,
    /// Connections that left this shard for the one owning their partitions.
    pub(super) connections_moved: Cell<u64>,
    /// SASL authentications that ended here, by outcome.
    pub(super) authentications_succeeded: Cell<u64>,
    pub(super) authentications_failed: Cell<u64>,
    /// Transactions this shard's coordinator completed (their Complete value written), by
    /// result.
    pub(super) transactions_committed: Cell<u64>,
    pub(super) transactions_aborted: Cell<u64>,
}

/// The API key a request frame names (its first two bytes), read before the full decode so that a
/// request that fails to decode is still counted under its API.
pub fn api_key_of(frame: &[u8]) -> Option<i16> {
    frame.get(..2).map(|b| i16::from_be_bytes([b[0], b[1]]))
}

/// `(topic, partition, bytes, records)` of every partition in a produce request, taken before the
/// handler consumes the request and counted once the response says which partitions took them.
#[derive(Debug, Default)]
pub struct ProducedTraffic(Vec<(TopicName, i32, u64, u64)>);

impl ProducedTraffic {
    pub fn of(request: &ProduceRequest) -> ProducedTraffic {
        let mut parts = Vec::new();
        for topic in &request.topic_data {
            for partition in &topic.partition_data {
                let records = partition.records.as_deref().unwrap_or_default();
                // A topic name shares the request's buffer: no copy per partition.
                parts.push((
                    topic.name.clone(),
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
        // One lookup per partition, not a scan of the answer (a request may name thousands).
        let accepted: Option<HashSet<(&str, i32)>> = response.map(|response| {
            let topics = response.responses.iter();
            let each = topics.flat_map(|t| {
                let ok = t.partition_responses.iter().filter(|p| p.error_code == 0);
                ok.map(move |p| (t.name.as_str(), p.index))
            });
            each.collect()
        });
        let mut topics = self.topics.borrow_mut();
        for (topic, partition, bytes, records) in produced.0 {
            if accepted
                .as_ref()
                .is_some_and(|ok| !ok.contains(&(topic.as_str(), partition)))
            {
                continue;
            }
            let produced = TopicTraffic {
                bytes_in: bytes,
                records_in: records,
                ..TopicTraffic::default()
            };
            // A topic's name is copied once, when it first produces.
            match topics.get_mut(topic.as_str()) {
                Some(traffic) => traffic.add(&produced),
                None => {
                    topics.insert(topic.to_string(), produced);
                }
            }
        }
    }

    /// Counts the record bytes and records a fetch response carries.
    pub fn count_fetched(&self, answer: &FetchAnswer) {
        let mut topics = self.topics.borrow_mut();
        for topic in &answer.topics {
            let (mut bytes, mut records) = (0u64, 0u64);
            for partition in &topic.partitions {
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
                let traffic = topics.entry(topic.name.clone()).or_default();
                traffic.bytes_out += bytes;
                traffic.records_out += records;
            }
        }
    }

    /// Counts a SASL authentication that ended, in success or failure.
    pub fn count_authentication(&self, succeeded: bool) {
        let counter = match succeeded {
            true => &self.authentications_succeeded,
            false => &self.authentications_failed,
        };
        counter.set(counter.get() + 1);
    }

    /// Counts a transaction this shard's coordinator completed: committed, or aborted.
    pub fn count_transaction_completed(&self, committed: bool) {
        let counter = match committed {
            true => &self.transactions_committed,
            false => &self.transactions_aborted,
        };
        counter.set(counter.get() + 1);
    }

    /// Counts a connection that moved from this shard to the one its requests go to.
    pub fn count_connection_moved(&self) {
        self.connections_moved.set(self.connections_moved.get() + 1);
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
