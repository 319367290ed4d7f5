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
}

/// A request sent whose acknowledgement is awaited.
struct InFlight {
    pending: Pending<ProduceResponse>,
    /// Partitions (batches) the request carries.
    partitions: usize,
    first_index: u64,
    count: usize,
    built_us: u64,
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
    let mut connection = Connection::connect(&job.leader, &ClientConfig::default())
        .with_context(|| format!("producer connecting to {}", job.leader))?;
    let pacer = Pacer::new(job.start_us, job.rate, args.linger_ms * 1000);
    let batch_max = args.records_per_batch();
    let mut builder = BatchBuilder::new(
        args.record_size,
        batch_max,
        job.start_us ^ job.partitions[0] as u64,
    );
    let mut in_flight: VecDeque<InFlight> = VecDeque::with_capacity(args.max_in_flight);
    let record_bytes = args.record_size as u64;
    let mut request = RequestBuilder::new(&job.partitions, args, job.index);
    let mut sent = 0u64;
    clock.sleep_until_us(job.start_us);
    while sent < job.records && !stop.load(Ordering::Relaxed) {
        let built_us = clock.now_us();
        let progress = (sent, job.records - sent);
        let count = match request.fill(&mut builder, &pacer, progress, built_us, args)? {
            BatchPlan::Send(count) => count,
            BatchPlan::WaitUntil(until_us) => {
                // Use the wait to take an acknowledgement that has arrived; never block on
                // one, or a slow answer (an fdatasync) would hold back the next send and the rate.
                if !in_flight.is_empty() && connection.response_waiting()? {
                    let oldest = in_flight.pop_front().expect("checked non-empty");
                    acknowledge(&mut connection, oldest, &pacer, clock, record_bytes, recorder)?;
                } else {
                    clock.sleep_until_us(until_us.min(clock.now_us() + ACK_POLL_US));
                }
                continue;
            }
        };
        if in_flight.len() >= args.max_in_flight {
            let oldest = in_flight.pop_front().expect("in flight is full");
            acknowledge(&mut connection, oldest, &pacer, clock, record_bytes, recorder)?;
        }
        let (batches, partitions) = request.take();
        let pending = connection.send_produce_batches(&job.topic, batches, args.acks, 30_000)?;
        match pending {
            Some(pending) => in_flight.push_back(InFlight {
                pending,
                partitions,
                first_index: sent,
                count,
                built_us,
            }),
            None => {
                debug_assert_eq!(args.acks, Acks::None);
                recorder.count(clock.now_us(), count as u64, count as u64 * record_bytes);
            }
        }
        sent += count as u64;
    }
    while let Some(oldest) = in_flight.pop_front() {
        acknowledge(&mut connection, oldest, &pacer, clock, record_bytes, recorder)?;
    }
    Ok(())
}

/// Waits for a request's acknowledgement and records its records' latencies.
fn acknowledge(
    connection: &mut Connection,
    batch: InFlight,
    pacer: &Pacer,
    clock: Clock,
    record_bytes: u64,
    recorder: &mut Recorder,
) -> anyhow::Result<()> {
    connection.receive_produce_batches(batch.pending, batch.partitions)?;
    let acked_us = clock.now_us();
    let count = batch.count as u64;
    recorder.count(acked_us, count, count * record_bytes);
    if pacer.is_paced() {
        for index in batch.first_index..batch.first_index + count {
            recorder.latency(acked_us, acked_us.saturating_sub(pacer.due_us(index)), 1);
        }
    } else {
        recorder.latency(acked_us, acked_us.saturating_sub(batch.built_us), count);
    }
    Ok(())
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
