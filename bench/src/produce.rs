//! One producer thread: builds batches into reused buffers, keeps up to `max_in_flight` produce
//! requests in flight on its one connection, and records each record's latency from its
//! intended send time.
//!
//! Each record's key starts with the 8-byte big-endian wall-clock µs of its intended send time
//! (what `e2e` consumers read back); keyed records (`--keyed`) add 8 bytes that make every key
//! distinct. The value is `record_size` bytes shared by every record (a reference count, not a
//! copy, until the encoder writes the batch).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use kafka_protocol::messages::ProduceResponse;
use laminar_client::{Acks, ClientConfig, Connection, Pending};

pub use crate::batch_builder::{payload, BatchBuilder};
use crate::cli::ProducerArgs;
use crate::pacing::{BatchPlan, Clock, Pacer};
use crate::produce_request::RequestBuilder;
use crate::stats::Recorder;

/// While pacing, how often to look for acknowledgements between sends.
const ACK_POLL_US: u64 = 100;

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

/// Runs one producer to completion, or until `stop` is set (another producer failed, or the
/// caller ends the run).
pub fn run_producer(
    job: &ProducerJob,
    args: &ProducerArgs,
    clock: Clock,
    recorder: &mut Recorder,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let connection = Connection::connect(&job.leader, &job.client)
        .with_context(|| format!("producer connecting to {}", job.leader))?;
    let pacer = Pacer::new(job.start_us, job.rate, args.linger_ms * 1000);
    let mut builder = BatchBuilder::new(
        args.record_size,
        args.records_per_batch(),
        job.start_us ^ job.partitions[0] as u64,
    );
    let mut producer = Producer {
        connection,
        in_flight: VecDeque::with_capacity(args.max_in_flight),
        request: RequestBuilder::new(&job.partitions, args, job.index),
        pacer,
        clock,
        record_bytes: args.record_size as u64,
        recorder,
    };
    let mut sent = 0u64;
    clock.sleep_until_us(job.start_us);
    while (sent < job.records || producer.request.holds_records()) && !stop.load(Ordering::Relaxed) {
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
    }
    while !producer.in_flight.is_empty() {
        producer.acknowledge_oldest()?;
    }
    Ok(())
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
}

impl Producer<'_> {
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
        let pending = self
            .connection
            .send_produce_batches(&job.topic, batches, args.acks, 30_000)?;
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
                .build((0..10).map(|i| 1_000_000 * round + i), Compression::None)
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
