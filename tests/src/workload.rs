//! The clients of a fault test, each on a thread of its own, recording what they see into one
//! [`History`]: an idempotent acks=all producer writing numbered records round-robin over the
//! partitions, a read_committed consumer reading them all as they come, and a consumer group
//! member committing its progress and reading its commits back.
//!
//! Every client waits as long as it takes (`message.timeout.ms` of 10 minutes): the guarantees
//! under test hold for a client that does not give up on a batch itself, and a stall shows up as
//! unavailability in the history rather than as records the producer dropped.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use crate::history::{Ack, Commit, CommittedRead, FinalLogs, History, Read, Sequence};
use crate::rdkafka_client::{assigned_consumer, client_config, group_member};

/// Time between two records the producer sends (over all partitions): about 300 a second.
const SEND_INTERVAL: Duration = Duration::from_micros(3300);
/// How long the producer waits for an answer before it retries (`request.timeout.ms`): what a
/// leader that froze with its connections open costs a client before it looks elsewhere.
pub const PRODUCE_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the group member commits what it has read.
const COMMIT_INTERVAL: Duration = Duration::from_millis(500);
/// How long stopping may wait for the producer's last records.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(60);

/// The workload's clients, running until [`Workload::stop`].
pub struct Workload {
    history: Arc<Mutex<History>>,
    stop: Arc<AtomicBool>,
    threads: Vec<(&'static str, JoinHandle<Result<()>>)>,
}

impl Workload {
    /// Starts the producer, the reader and the group member on `topic`'s `partitions`. The
    /// calling thread must be on the clients' network: the client threads start from it.
    pub fn start(bootstrap: &str, topic: &str, partitions: i32, group: &str) -> Result<Workload> {
        let history = Arc::new(Mutex::new(History::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut workload = Workload {
            history: history.clone(),
            stop: stop.clone(),
            threads: Vec::new(),
        };
        let clients = Clients {
            bootstrap: bootstrap.to_string(),
            topic: topic.to_string(),
            partitions,
            history,
            stop,
        };
        let (producer, reader, member) = (clients.clone(), clients.clone(), clients);
        let group = group.to_string();
        workload.spawn("producer", move || producer.produce())?;
        workload.spawn("reader", move || reader.read())?;
        workload.spawn("group member", move || member.commit_progress(&group))?;
        Ok(workload)
    }

    fn spawn(
        &mut self,
        name: &'static str,
        body: impl FnOnce() -> Result<()> + Send + 'static,
    ) -> Result<()> {
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(body)
            .with_context(|| format!("starting the {name} thread"))?;
        self.threads.push((name, thread));
        Ok(())
    }

    /// The history so far (the clients wait while it is held).
    pub fn history(&self) -> MutexGuard<'_, History> {
        lock(&self.history)
    }

    /// When each partition last had a record acknowledged.
    pub fn last_acks(&self) -> BTreeMap<i32, Instant> {
        let mut last = BTreeMap::new();
        for ack in &self.history().acks {
            let at = last.entry(ack.partition).or_insert(ack.at);
            *at = (*at).max(ack.at);
        }
        last
    }

    /// Stops every client (the producer waits for what it has in flight) and returns the
    /// history; fails if a client failed.
    pub fn stop(self) -> Result<History> {
        self.stop.store(true, Ordering::Relaxed);
        for (name, thread) in self.threads {
            thread
                .join()
                .map_err(|_| anyhow!("the {name} thread panicked"))?
                .with_context(|| format!("the {name}"))?;
        }
        let history = Arc::try_unwrap(self.history).map_err(|_| anyhow!("history still shared"))?;
        Ok(history
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner()))
    }
}

fn lock(history: &Mutex<History>) -> MutexGuard<'_, History> {
    history.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What each client thread needs.
#[derive(Clone)]
struct Clients {
    bootstrap: String,
    topic: String,
    partitions: i32,
    history: Arc<Mutex<History>>,
    stop: Arc<AtomicBool>,
}

/// Records every delivery report into the history.
struct Recorder {
    history: Arc<Mutex<History>>,
}

impl ClientContext for Recorder {}

impl ProducerContext for Recorder {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let mut history = lock(&self.history);
        match result {
            Ok(message) => {
                let Some(sequence) = sequence_of(message.payload()) else {
                    return;
                };
                history.acks.push(Ack {
                    partition: message.partition(),
                    sequence,
                    offset: message.offset(),
                    at: Instant::now(),
                });
            }
            Err((error, message)) => {
                let sequence = sequence_of(message.payload()).unwrap_or(Sequence::MAX);
                history
                    .failures
                    .push((message.partition(), sequence, error.to_string()));
            }
        }
    }
}

/// The sequence number a record's value carries.
pub fn sequence_of(value: Option<&[u8]>) -> Option<Sequence> {
    std::str::from_utf8(value?).ok()?.parse().ok()
}

impl Clients {
    fn produce(self) -> Result<()> {
        let producer: BaseProducer<Recorder> = client_config(&self.bootstrap)
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("message.timeout.ms", "600000")
            .set(
                "request.timeout.ms",
                PRODUCE_REQUEST_TIMEOUT.as_millis().to_string(),
            )
            // The metadata request that follows a timed-out produce may go to the same frozen
            // broker (its connection is still up): it waits this long, not the 10 s default.
            .set(
                "socket.timeout.ms",
                PRODUCE_REQUEST_TIMEOUT.as_millis().to_string(),
            )
            .set("linger.ms", "5")
            .create_with_context(Recorder {
                history: self.history.clone(),
            })
            .context("creating the idempotent producer")?;
        let mut next = Instant::now();
        for turn in 0u64.. {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let partition = (turn % self.partitions as u64) as i32;
            let sequence = {
                let mut history = lock(&self.history);
                let sent = history.sent.entry(partition).or_default();
                *sent += 1;
                *sent - 1
            };
            let value = sequence.to_string();
            let record = BaseRecord::<(), str>::to(&self.topic)
                .partition(partition)
                .payload(&value);
            if let Err((error, _)) = producer.send(record) {
                bail!("the producer refused record {partition}/{sequence}: {error}");
            }
            producer.poll(Duration::ZERO);
            next += SEND_INTERVAL;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        producer
            .flush(FLUSH_TIMEOUT)
            .context("flushing the producer's last records")?;
        Ok(())
    }

    fn read(self) -> Result<()> {
        let consumer = assigned_consumer(&self.bootstrap, &[("isolation.level", "read_committed")])?;
        consumer.assign(&self.all_partitions(Offset::Beginning)?)?;
        while !self.stop.load(Ordering::Relaxed) {
            // Errors while nodes fail are expected: the client retries by itself.
            let Some(Ok(message)) = consumer.poll(Duration::from_millis(100)) else {
                continue;
            };
            if let Some(sequence) = sequence_of(message.payload()) {
                lock(&self.history).reads.push(Read {
                    partition: message.partition(),
                    offset: message.offset(),
                    sequence,
                });
            }
        }
        Ok(())
    }

    fn commit_progress(self, group: &str) -> Result<()> {
        let member = group_member(&self.bootstrap, group)?;
        member.subscribe(&[&self.topic])?;
        let mut next_offsets: BTreeMap<i32, i64> = BTreeMap::new();
        let mut last_commit = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            if let Some(Ok(message)) = member.poll(Duration::from_millis(100)) {
                let next = message.offset() + 1;
                let before = next_offsets.insert(message.partition(), next);
                if let Some(before) = before.filter(|before| *before > next) {
                    // Its next commit will be lower than its last: said, so that an
                    // OffsetWentBack can be told from a commit the cluster lost.
                    eprintln!(
                        "{} group member went back in p{} to {next} from {before}",
                        utc_time_of_day(),
                        message.partition()
                    );
                }
            }
            if last_commit.elapsed() >= COMMIT_INTERVAL && !next_offsets.is_empty() {
                last_commit = Instant::now();
                self.commit_and_read_back(&member, &next_offsets)?;
            }
        }
        Ok(())
    }

    /// Commits `next_offsets`; records the commit if acknowledged, then what the group's
    /// committed offsets read back as.
    fn commit_and_read_back(&self, member: &BaseConsumer, next_offsets: &BTreeMap<i32, i64>) -> Result<()> {
        let mut offsets = TopicPartitionList::new();
        for (partition, offset) in next_offsets {
            offsets.add_partition_offset(&self.topic, *partition, Offset::Offset(*offset))?;
        }
        // A commit that fails (a coordinator moving) is simply not acknowledged.
        if member.commit(&offsets, CommitMode::Sync).is_ok() {
            let at = Instant::now();
            let mut history = lock(&self.history);
            for (partition, offset) in next_offsets {
                history.commits.push(Commit {
                    partition: *partition,
                    offset: *offset,
                    at,
                });
            }
        }
        let asked_at = Instant::now();
        let Ok(committed) = member.committed_offsets(offsets, Duration::from_secs(10)) else {
            return Ok(());
        };
        let mut history = lock(&self.history);
        for element in committed.elements() {
            if let Offset::Offset(offset) = element.offset() {
                let acknowledged = history
                    .commits
                    .iter()
                    .filter(|c| c.partition == element.partition() && c.at < asked_at)
                    .max_by_key(|c| c.offset);
                if let Some(commit) = acknowledged.filter(|c| c.offset > offset) {
                    // Said at once, with the time the brokers' logs use, to find the answer there.
                    eprintln!(
                        "{} committed offset of p{} read back as {offset}, below {} acknowledged {:?} before",
                        utc_time_of_day(),
                        element.partition(),
                        commit.offset,
                        asked_at.duration_since(commit.at)
                    );
                }
                history.committed_reads.push(CommittedRead {
                    partition: element.partition(),
                    offset,
                    asked_at,
                });
            }
        }
        Ok(())
    }

    fn all_partitions(&self, offset: Offset) -> Result<TopicPartitionList> {
        let mut list = TopicPartitionList::new();
        for partition in 0..self.partitions {
            list.add_partition_offset(&self.topic, partition, offset)?;
        }
        Ok(list)
    }
}

/// Every partition of `topic` read from its start to its high watermark, as `(offset,
/// sequence)`; fails if a partition cannot be read to the end within `timeout`.
pub fn read_final_logs(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<FinalLogs> {
    let consumer = assigned_consumer(bootstrap, &[("isolation.level", "read_committed")])?;
    let mut logs = FinalLogs::new();
    for partition in 0..partitions {
        let (_, high) = consumer.fetch_watermarks(topic, partition, timeout)?;
        let mut assignment = TopicPartitionList::new();
        assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
        consumer.assign(&assignment)?;
        let log = logs.entry(partition).or_default();
        let deadline = Instant::now() + timeout;
        while log.last().is_none_or(|(offset, _)| *offset < high - 1) {
            if Instant::now() > deadline {
                bail!(
                    "{topic}/{partition}: read {} records, never reached offset {}",
                    log.len(),
                    high - 1
                );
            }
            match consumer.poll(Duration::from_millis(200)) {
                Some(Ok(message)) => {
                    let sequence = sequence_of(message.payload()).with_context(|| {
                        format!("{topic}/{partition}@{}: not a sequence", message.offset())
                    })?;
                    log.push((message.offset(), sequence));
                }
                Some(Err(error)) => bail!("reading {topic}/{partition}: {error}"),
                None => {}
            }
        }
    }
    Ok(logs)
}

/// The time of day in UTC, `HH:MM:SS.mmm`, as the brokers' log lines give it.
fn utc_time_of_day() -> String {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let ms = since_epoch.as_millis() % 86_400_000;
    let (h, m, s, ms) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    format!("{h:02}:{m:02}:{s:02}.{ms:03}Z")
}
