//! One producer thread: builds batches into reused buffers, keeps up to `max_in_flight` produce
//! requests in flight on its one connection, and records each record's latency from its
//! intended send time.
//!
//! Each record's key starts with the 8-byte big-endian wall-clock µs of its intended send time
//! (what `e2e` consumers read back); keyed records (`--keyed`) add 8 bytes that make every key
//! distinct. The value is `record_size` bytes shared by every record (a reference count, not a
//! copy, until the encoder writes the batch).
//!
//! An idempotent producer (`--idempotent`) asks InitProducerId first and its batches carry the
//! producer id and sequences; a transactional one (`--transactional`) writes in transactions
//! of `--transaction-batches` batches: AddPartitionsToTxn, the batches, and once all are
//! acknowledged EndTxn (commit).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use laminar_client::{Acks, ClientConfig, Connection, Pending};

pub use crate::batch_builder::{payload, BatchBuilder, ProducerFields};
use crate::cli::ProducerArgs;
use crate::pacing::{BatchPlan, Clock, Pacer};
use crate::produce_request::RequestBuilder;
use crate::stats::Recorder;
use crate::transactions::{init_producer_id, TransactionCoordinator, TransactionFigures};

/// While pacing, how often to look for acknowledgements between sends.
const ACK_POLL_US: u64 = 100;
/// How long the broker may take to acknowledge a produce request.
const PRODUCE_TIMEOUT_MS: i32 = 30_000;

/// What one producer thread does.
#[derive(Debug, Clone)]
pub struct ProducerJob {
    /// This producer's index in the run (salts its keyed records' keys).
    pub index: usize,
    /// Leader of `partitions`.
    pub leader: String,
    /// Topic.
    pub topic: String,
    /// Partitions written in turn, one batch each; a request carries batches for several.
    pub partitions: Vec<i32>,
    /// Records this producer sends.
    pub records: u64,
    /// This producer's share of the rate (`None`: unlimited).
    pub rate: Option<f64>,
    /// When the schedule starts (µs on the shared clock).
    pub start_us: u64,
    /// How to connect (TLS, SASL).
    pub client: ClientConfig,
    /// Plain, idempotent or transactional.
    pub delivery: Delivery,
}

/// How a producer delivers its batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Plain,
    /// A producer id and sequences in every batch.
    Idempotent,
    /// Idempotent, in transactions of `batches` batches under `transactional_id`.
    Transactional {
        transactional_id: String,
        batches: usize,
    },
}

/// A transactional producer's coordinator, and its transactions' size.
struct Transactions {
    coordinator: TransactionCoordinator,
    /// Batches in a transaction.
    batches: usize,
    /// Whether a transaction is open (partitions added, not yet committed).
    open: bool,
}

/// A request sent whose acknowledgement is awaited.
struct InFlight {
    pending: Pending<ProduceResponse>,
    /// Partitions (batches) the request carries.
    partitions: usize,
    records: SentRecords,
}

/// The records of a request, and where their latencies start.
enum SentRecords {
    /// Records `first_index..first_index + count`, built at `built_us` (unkeyed).
    Run {
        first_index: u64,
        count: usize,
        built_us: u64,
    },
    /// Each record's timestamp: when it joined the accumulator, or was due (keyed).
    Stamped(Vec<u64>),
}

impl SentRecords {
    fn count(&self) -> usize {
        match self {
            SentRecords::Run { count, .. } => *count,
            SentRecords::Stamped(timestamps) => timestamps.len(),
        }
    }
}

/// Connects a producer, and asks for its producer id when it has one.
fn connect_producer<'a>(
    job: &'a ProducerJob,
    args: &ProducerArgs,
    clock: Clock,
    recorder: &'a mut Recorder,
) -> anyhow::Result<Producer<'a>> {
    let mut connection = Connection::connect(&job.leader, &job.client)
        .with_context(|| format!("producer connecting to {}", job.leader))?;
    let mut request = RequestBuilder::new(&job.partitions, args, job.index);
    let mut transactions = None;
    match &job.delivery {
        Delivery::Plain => {}
        Delivery::Idempotent => request = request.with_identity(init_producer_id(&mut connection, None)?),
        Delivery::Transactional {
            transactional_id,
            batches,
        } => {
            let coordinator =
                TransactionCoordinator::connect(&job.leader, &job.client, transactional_id, &job.topic)?;
            request = request.with_identity(coordinator.identity());
            transactions = Some(Transactions {
                coordinator,
                batches: *batches,
                open: false,
            });
        }
    }
    Ok(Producer {
        connection,
        in_flight: VecDeque::with_capacity(args.max_in_flight),
        request,
        pacer: Pacer::new(job.start_us, job.rate, args.linger_ms * 1000),
        clock,
        record_bytes: args.record_size as u64,
        recorder,
        transactions,
    })
}

/// Runs one producer to completion, or until `stop` is set (another producer failed, or the
/// caller ends the run). Returns a transactional producer's transaction figures.
pub fn run_producer(
    job: &ProducerJob,
    args: &ProducerArgs,
    clock: Clock,
    recorder: &mut Recorder,
    stop: &AtomicBool,
) -> anyhow::Result<Option<TransactionFigures>> {
    let mut builder = BatchBuilder::new(
        args.record_size,
        args.records_per_batch(),
        job.start_us ^ job.partitions[0] as u64,
    );
    let mut producer = connect_producer(job, args, clock, recorder)?;
    let mut sent = 0u64;
    clock.sleep_until_us(job.start_us);
    while (sent < job.records || producer.request.holds_records()) && !stop.load(Ordering::Relaxed) {
        producer.open_transaction_if_none()?;
        let built_us = clock.now_us();
        let progress = (sent, job.records - sent);
        let plan = producer
            .request
            .fill(&mut builder, &producer.pacer, progress, built_us, args)?;
        let count = match plan {
            BatchPlan::Send(count) => count,
            BatchPlan::WaitUntil(until_us) => {
                // Use the wait to take an acknowledgement that has arrived; never block on
                // one, or a slow answer (an fdatasync) would hold back the next send and the rate.
                if !producer.in_flight.is_empty() && producer.connection.response_waiting()? {
                    producer.acknowledge_oldest()?;
                } else {
                    clock.sleep_until_us(until_us.min(clock.now_us() + ACK_POLL_US));
                }
                continue;
            }
        };
        sent += count as u64;
        let first_index = sent - count as u64;
        producer.send(
            job,
            args,
            SentRecords::Run {
                first_index,
                count,
                built_us,
            },
        )?;
        if producer.request.transaction_room() == Some(0) {
            producer.commit_transaction()?;
        }
    }
    producer.acknowledge_all()?;
    if producer.transactions.as_ref().is_some_and(|t| t.open) {
        producer.commit_transaction()?;
    }
    Ok(producer.transactions.map(|t| t.coordinator.figures))
}

/// One producer's connection, its requests in flight and what it measures. Owned by one
/// producer thread.
struct Producer<'a> {
    connection: Connection,
    /// At most `max_in_flight`.
    in_flight: VecDeque<InFlight>,
    request: RequestBuilder<'a>,
    pacer: Pacer,
    clock: Clock,
    record_bytes: u64,
    recorder: &'a mut Recorder,
    /// Set for a transactional producer.
    transactions: Option<Transactions>,
}

impl Producer<'_> {
    /// A transactional producer with no transaction open begins one: the partitions its next
    /// batches go to join it, and requests stop at its last batch.
    fn open_transaction_if_none(&mut self) -> anyhow::Result<()> {
        let Some(transactions) = self.transactions.as_mut().filter(|t| !t.open) else {
            return Ok(());
        };
        let partitions = self.request.partitions_of_next(transactions.batches);
        transactions.coordinator.add_partitions(&partitions)?;
        self.request.open_transaction(transactions.batches);
        transactions.open = true;
        Ok(())
    }

    /// Commits the open transaction once every batch of it is acknowledged.
    fn commit_transaction(&mut self) -> anyhow::Result<()> {
        self.acknowledge_all()?;
        let transactions = self.transactions.as_mut().expect("a transactional producer");
        transactions.coordinator.commit()?;
        transactions.open = false;
        Ok(())
    }

    fn acknowledge_all(&mut self) -> anyhow::Result<()> {
        while !self.in_flight.is_empty() {
            self.acknowledge_oldest()?;
        }
        Ok(())
    }

    /// Sends `batches` of `topic`: a transactional producer's request names its transactional
    /// id (the protocol crate encodes it, copying the batches), others go out as pieces.
    fn send_batches(
        &mut self,
        topic: &str,
        batches: Vec<(i32, Bytes)>,
        acks: Acks,
    ) -> anyhow::Result<Option<Pending<ProduceResponse>>> {
        let Some(transactions) = &self.transactions else {
            return Ok(self
                .connection
                .send_produce_batches(topic, batches, acks, PRODUCE_TIMEOUT_MS)?);
        };
        let request =
            transactional_produce_request(transactions.coordinator.transactional_id(), topic, batches, acks);
        Ok(Some(self.connection.send(&request)?))
    }

    /// Sends the request built (its records `run` when unkeyed), once one of `max_in_flight`
    /// is free; a keyed request left empty while every batch buffer is in flight waits for an
    /// acknowledgement instead.
    fn send(&mut self, job: &ProducerJob, args: &ProducerArgs, run: SentRecords) -> anyhow::Result<()> {
        let (batches, timestamps) = self.request.take();
        if batches.is_empty() {
            assert!(
                !self.in_flight.is_empty(),
                "records wait while no buffer is free: batches are in flight"
            );
            return self.acknowledge_oldest();
        }
        if self.in_flight.len() >= args.max_in_flight {
            self.acknowledge_oldest()?;
        }
        let partitions = batches.len();
        let records = timestamps.map_or(run, SentRecords::Stamped);
        let pending = self.send_batches(&job.topic, batches, args.acks)?;
        match pending {
            Some(pending) => self.in_flight.push_back(InFlight {
                pending,
                partitions,
                records,
            }),
            None => {
                debug_assert_eq!(args.acks, Acks::None);
                let count = records.count() as u64;
                self.recorder
                    .count(self.clock.now_us(), count, count * self.record_bytes);
                self.request.acknowledged(partitions);
            }
        }
        Ok(())
    }

    /// Waits for the oldest request's acknowledgement, records its records' latencies, and
    /// gives its batches' buffers back to the accumulator.
    fn acknowledge_oldest(&mut self) -> anyhow::Result<()> {
        let batch = self.in_flight.pop_front().expect("a request in flight");
        self.connection
            .receive_produce_batches(batch.pending, batch.partitions)?;
        self.request.acknowledged(batch.partitions);
        let acked_us = self.clock.now_us();
        let count = batch.records.count() as u64;
        let recorder = &mut *self.recorder;
        recorder.count(acked_us, count, count * self.record_bytes);
        match batch.records {
            SentRecords::Run {
                first_index,
                built_us,
                ..
            } => {
                if self.pacer.is_paced() {
                    for index in first_index..first_index + count {
                        let due_us = self.pacer.due_us(index);
                        recorder.latency(acked_us, acked_us.saturating_sub(due_us), 1);
                    }
                } else {
                    recorder.latency(acked_us, acked_us.saturating_sub(built_us), count);
                }
            }
            SentRecords::Stamped(timestamps) => {
                for timestamp_us in timestamps {
                    recorder.latency(acked_us, acked_us.saturating_sub(timestamp_us), 1);
                }
            }
        }
        Ok(())
    }
}

/// A produce request of a transaction: `batches` of `topic` under `transactional_id`.
fn transactional_produce_request(
    transactional_id: &TransactionalId,
    topic: &str,
    batches: Vec<(i32, Bytes)>,
    acks: Acks,
) -> ProduceRequest {
    let partitions = batches
        .into_iter()
        .map(|(index, records)| {
            PartitionProduceData::default()
                .with_index(index)
                .with_records(Some(records))
        })
        .collect();
    ProduceRequest::default()
        .with_transactional_id(Some(transactional_id.clone()))
        .with_acks(acks.wire())
        .with_timeout_ms(PRODUCE_TIMEOUT_MS)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_data(partitions)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use laminar_client::records::{batches, for_each_record};
    use laminar_client::Compression;

    #[test]
    fn builder_writes_keyed_batches_and_reuses_its_buffers() {
        let mut builder = BatchBuilder::new(100, 10, 7);
        for round in 0..3u64 {
            let batch = builder
                .build((0..10).map(|i| 1_000_000 * round + i), Compression::None, None)
                .expect("build");
            let view = batches(&batch).next().expect("a batch").expect("valid");
            assert!(view.crc_is_valid());
            assert_eq!(view.record_count(), 10);
            let mut keys = Vec::new();
            for_each_record(view, |record| {
                assert_eq!(record.value.map(<[u8]>::len), Some(100));
                keys.push(u64::from_be_bytes(record.key.unwrap().try_into().unwrap()));
            })
            .expect("walk");
            assert_eq!(keys, (0..10).map(|i| 1_000_000 * round + i).collect::<Vec<_>>());
        }
        let payload = payload(64, 3);
        assert!(payload.iter().all(u8::is_ascii_uppercase));
    }
}
