//! One producer thread: builds batches into reused buffers, keeps up to `max_in_flight` produce
//! requests in flight on its one connection, and records each record's latency from its
//! intended send time.
//!
//! Each record's key is the 8-byte big-endian wall-clock µs of its intended send time (what
//! `e2e` consumers read back); the value is `record_size` bytes shared by every record
//! (a reference count, not a copy, until the encoder writes the batch).

use std::collections::VecDeque;

use anyhow::Context;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ProduceResponse;
use kafka_protocol::records::Record;
use laminar_client::records::{encode_batch, encode_plain_batch, plain_record};
use laminar_client::{Acks, ClientConfig, Connection, Pending};

use crate::cli::ProducerArgs;
use crate::layout::KEY_BYTES;
use crate::pacing::{BatchPlan, Clock, Pacer};
use crate::stats::Recorder;

/// While pacing, how often to look for acknowledgements between sends.
const ACK_POLL_US: u64 = 100;

/// What one producer thread does.
#[derive(Debug, Clone)]
pub struct ProducerJob {
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

/// A record value of `size` pseudo-random letters (like kafka-producer-perf-test's payload:
/// compressible about as much as text).
pub fn payload(size: usize, seed: u64) -> Bytes {
    let mut state = seed | 1;
    (0..size)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            b'A' + (state % 26) as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

/// Builds batches with buffers kept across batches. Owned by one producer thread.
pub struct BatchBuilder {
    value: Bytes,
    keys: BytesMut,
    records: Vec<Record>,
    out: BytesMut,
}

impl BatchBuilder {
    /// A builder for records of `record_size` value bytes, up to `batch_max` per batch.
    pub fn new(record_size: usize, batch_max: usize, seed: u64) -> BatchBuilder {
        BatchBuilder {
            value: payload(record_size, seed),
            keys: BytesMut::with_capacity(batch_max * KEY_BYTES),
            records: Vec::with_capacity(batch_max),
            out: BytesMut::with_capacity(batch_max * (record_size + 32) + 128),
        }
    }

    /// One v2 batch of `timestamps_us.len()` records, keyed by their timestamps.
    pub fn build(
        &mut self,
        timestamps_us: impl Iterator<Item = u64>,
        compression: laminar_client::Compression,
    ) -> anyhow::Result<Bytes> {
        self.keys.clear();
        let mut first_ms = None;
        for timestamp_us in timestamps_us {
            self.keys.put_u64(timestamp_us);
            first_ms.get_or_insert(timestamp_us as i64 / 1000);
        }
        let timestamp_ms = first_ms.context("a batch has records")?;
        self.out.clear();
        self.out
            .reserve(self.keys.len() / KEY_BYTES * (self.value.len() + 32) + 128);
        if compression == laminar_client::Compression::None {
            let keys: Vec<&[u8]> = self.keys.chunks_exact(KEY_BYTES).collect();
            encode_plain_batch(&mut self.out, &keys, &self.value, timestamp_ms);
        } else {
            self.encode_with_crate(timestamp_ms, compression)?;
        }
        Ok(self.out.split().freeze())
    }

    /// Compressed batches go through the protocol crate's encoder (compression costs far more
    /// than building its records).
    fn encode_with_crate(
        &mut self,
        timestamp_ms: i64,
        compression: laminar_client::Compression,
    ) -> anyhow::Result<()> {
        let keys = self.keys.split().freeze();
        for (index, key) in keys.chunks_exact(KEY_BYTES).enumerate() {
            let start = index * KEY_BYTES;
            debug_assert_eq!(key.len(), KEY_BYTES);
            self.records.push(plain_record(
                index as i64,
                timestamp_ms,
                Some(keys.slice(start..start + KEY_BYTES)),
                Some(self.value.clone()),
            ));
        }
        let encoded = encode_batch(&mut self.out, &self.records, compression);
        self.records.clear();
        drop(keys); // lets `self.keys` take its allocation back on the next batch
        Ok(encoded?)
    }
}

/// Runs one producer to completion.
pub fn run_producer(
    job: &ProducerJob,
    args: &ProducerArgs,
    clock: Clock,
    recorder: &mut Recorder,
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
    let batches_max = args.batches_per_request().min(job.partitions.len());
    let mut request = RequestBuilder::new(&job.partitions, batches_max);
    let mut sent = 0u64;
    clock.sleep_until_us(job.start_us);
    while sent < job.records {
        let built_us = clock.now_us();
        let left = job.records - sent;
        let count = match request.fill(&mut builder, &pacer, sent, left, built_us, args)? {
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

/// The batches of the next produce request, for the producer's partitions in turn. Owned by
/// one producer thread.
struct RequestBuilder<'a> {
    partitions: &'a [i32],
    next_partition: usize,
    batches_max: usize,
    batches: Vec<(i32, Bytes)>,
}

impl<'a> RequestBuilder<'a> {
    fn new(partitions: &'a [i32], batches_max: usize) -> RequestBuilder<'a> {
        assert!(
            (1..=partitions.len()).contains(&batches_max),
            "a request carries 1 to {} batches, one per partition",
            partitions.len()
        );
        RequestBuilder {
            partitions,
            next_partition: 0,
            batches_max,
            batches: Vec::with_capacity(batches_max),
        }
    }

    fn has_room(&self) -> bool {
        self.batches.len() < self.batches_max
    }

    /// Builds every batch ready at `now_us` (full, or lingered long enough) into this request,
    /// up to one per partition; records from `sent` on, `left` of them still to send. Returns
    /// the records gathered, or when the first batch will be ready.
    fn fill(
        &mut self,
        builder: &mut BatchBuilder,
        pacer: &Pacer,
        sent: u64,
        left: u64,
        now_us: u64,
        args: &ProducerArgs,
    ) -> anyhow::Result<BatchPlan> {
        let mut count = 0u64;
        while self.has_room() && count < left {
            let room = (args.records_per_batch() as u64).min(left - count) as usize;
            let first = sent + count;
            let batch_count = match pacer.plan(first, now_us, room) {
                BatchPlan::Send(batch_count) => batch_count,
                BatchPlan::WaitUntil(until_us) if count == 0 => return Ok(BatchPlan::WaitUntil(until_us)),
                BatchPlan::WaitUntil(_) => break,
            };
            let timestamps = (first..first + batch_count as u64).map(|index| {
                if pacer.is_paced() {
                    pacer.due_us(index)
                } else {
                    now_us
                }
            });
            self.add(builder.build(timestamps, args.compression.codec())?);
            count += batch_count as u64;
        }
        Ok(BatchPlan::Send(count as usize))
    }

    /// Adds a batch for the next partition in turn.
    fn add(&mut self, batch: Bytes) {
        assert!(self.has_room(), "the request is full");
        let partition = self.partitions[self.next_partition % self.partitions.len()];
        self.next_partition += 1;
        self.batches.push((partition, batch));
    }

    /// The batches gathered and how many there are; the builder starts the next request.
    fn take(&mut self) -> (Vec<(i32, Bytes)>, usize) {
        let batches = std::mem::replace(&mut self.batches, Vec::with_capacity(self.batches_max));
        let count = batches.len();
        (batches, count)
    }
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
