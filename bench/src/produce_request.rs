//! The batches of a producer's next produce request, spread over its partitions the way a Kafka
//! producer spreads them:
//!
//! - unkeyed (sticky): each batch fills one partition, the next batch the next partition in
//!   turn; a request carries as many full batches as fit;
//! - keyed (`--keyed`): each record goes to the partition Kafka's default partitioner picks for
//!   its key and waits in that partition's batch in the producer's accumulator
//!   (`accumulator.rs`, bounded by `--buffer-bytes`, Kafka's `buffer.memory`); a request takes
//!   the oldest batch of each partition in turn, as many as fit.
//!
//! An idempotent producer's batches carry its producer id and each partition's next sequence
//! ([`ProducerIdentity`]); a transactional producer's requests stop at the end of the open
//! transaction ([`RequestBuilder::open_transaction`]).

use bytes::Bytes;
use laminar_client::partitioner::partition_for_key;

use crate::accumulator::{Accumulator, Waiting};
use crate::batch_builder::{next_sequence, BatchBuilder, ProducerFields};
use crate::cli::ProducerArgs;
use crate::layout::{BATCH_HEADER_BYTES, KEYED_KEY_BYTES, KEY_BYTES, RECORD_FRAMING_BYTES};
use crate::pacing::{BatchPlan, Pacer};

/// Where the next records go, for a keyed producer. Owned by one producer thread.
struct KeyedSpread {
    /// Set in the key of every record of this producer, so producers' keys differ.
    key_salt: u64,
    accumulator: Accumulator,
    /// The next record, when its partition needed a batch buffer and none was free: it goes
    /// first once one is (its key, and so its partition, are already chosen).
    blocked: Option<(usize, Waiting)>,
    /// Timestamps of the records the request being built carries (where their latencies
    /// start).
    timestamps: Vec<u64>,
    /// One batch's records while it is built.
    scratch: Vec<Waiting>,
}

/// The producer id and epoch InitProducerId gave an idempotent or transactional producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdentity {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub transactional: bool,
}

/// An idempotent producer's identity and the next sequence of each of its partitions.
struct Sequences {
    identity: ProducerIdentity,
    /// By partition slot (index in the producer's partitions).
    next: Vec<i32>,
}

impl Sequences {
    /// The fields of the next batch of `records` records to partition `slot`; the partition's
    /// sequence moves past them.
    fn fields_for(&mut self, slot: usize, records: usize) -> ProducerFields {
        let base_sequence = self.next[slot];
        let records = i32::try_from(records).expect("a batch holds fewer than 2^31 records");
        self.next[slot] = next_sequence(base_sequence, records);
        ProducerFields {
            producer_id: self.identity.producer_id,
            producer_epoch: self.identity.producer_epoch,
            base_sequence,
            transactional: self.identity.transactional,
        }
    }
}

/// The batches of the next produce request. Owned by one producer thread.
pub struct RequestBuilder<'a> {
    partitions: &'a [i32],
    next_partition: usize,
    batches_max: usize,
    batches: Vec<(i32, Bytes)>,
    keyed: Option<KeyedSpread>,
    /// Set for an idempotent producer.
    sequences: Option<Sequences>,
    /// Batches the open transaction still takes (transactional producers only).
    transaction_room: Option<usize>,
}

/// The 16-byte key of a keyed record: its intended send time (what `e2e` consumers read
/// back), then a number no other record of the run has.
pub fn keyed_key(timestamp_us: u64, key_salt: u64, index: u64) -> [u8; KEYED_KEY_BYTES] {
    let mut key = [0u8; KEYED_KEY_BYTES];
    key[..KEY_BYTES].copy_from_slice(&timestamp_us.to_be_bytes());
    key[KEY_BYTES..].copy_from_slice(&(key_salt | index).to_be_bytes());
    key
}

impl<'a> RequestBuilder<'a> {
    /// A builder for a producer writing `partitions`; `producer` (its index in the run) salts
    /// the keys of keyed records.
    pub fn new(partitions: &'a [i32], args: &ProducerArgs, producer: usize) -> RequestBuilder<'a> {
        let batches_max = if args.keyed {
            partitions.len()
        } else {
            args.batches_per_request().min(partitions.len())
        };
        assert!(
            (1..=partitions.len()).contains(&batches_max),
            "a request carries 1 to {} batches, one per partition",
            partitions.len()
        );
        let keyed = args.keyed.then(|| KeyedSpread {
            // Record indexes stay below 2^48 (280 T records), the salt above them.
            key_salt: (producer as u64) << 48,
            accumulator: Accumulator::new(partitions.len(), args.records_per_batch(), args.batch_buffers()),
            blocked: None,
            timestamps: Vec::new(),
            scratch: Vec::new(),
        });
        RequestBuilder {
            partitions,
            next_partition: 0,
            batches_max,
            batches: Vec::with_capacity(batches_max),
            keyed,
            sequences: None,
            transaction_room: None,
        }
    }

    /// The builder of an idempotent producer: its batches carry `identity` and sequences.
    pub fn with_identity(mut self, identity: ProducerIdentity) -> RequestBuilder<'a> {
        self.sequences = Some(Sequences {
            identity,
            next: vec![0; self.partitions.len()],
        });
        self
    }

    /// Requests from now on carry at most `batches` batches in all, until the next call: the
    /// batches of one transaction.
    pub fn open_transaction(&mut self, batches: usize) {
        assert!(batches > 0, "a transaction holds a batch at least");
        self.transaction_room = Some(batches);
    }

    /// Batches the open transaction still takes (`None`: not transactional).
    pub fn transaction_room(&self) -> Option<usize> {
        self.transaction_room
    }

    /// The partitions the next `batches` batches may go to: for unkeyed records the next
    /// partitions in turn, for keyed records every partition.
    pub fn partitions_of_next(&self, batches: usize) -> Vec<i32> {
        if self.keyed.is_some() {
            return self.partitions.to_vec();
        }
        let count = batches.min(self.partitions.len());
        let mut next: Vec<i32> = (0..count)
            .map(|step| self.partitions[(self.next_partition + step) % self.partitions.len()])
            .collect();
        next.sort_unstable();
        next
    }

    /// Batches this request may still take.
    fn room(&self) -> usize {
        let room = self.batches_max.saturating_sub(self.batches.len());
        self.transaction_room.map_or(room, |transaction| {
            room.min(transaction.saturating_sub(self.batches.len()))
        })
    }

    fn has_room(&self) -> bool {
        self.room() > 0
    }

    /// Builds what is ready at `now_us` into this request: records from `sent` on, `left` of
    /// them still to send. Returns the records gathered, or when the first will be ready.
    pub fn fill(
        &mut self,
        builder: &mut BatchBuilder,
        pacer: &Pacer,
        progress: (u64, u64),
        now_us: u64,
        args: &ProducerArgs,
    ) -> anyhow::Result<BatchPlan> {
        if self.keyed.is_some() {
            self.fill_keyed(builder, pacer, progress, now_us, args)
        } else {
            self.fill_sticky(builder, pacer, progress, now_us, args)
        }
    }

    /// Unkeyed: every batch ready (full, or lingered long enough) goes in, up to one per
    /// partition, each for the next partition in turn.
    fn fill_sticky(
        &mut self,
        builder: &mut BatchBuilder,
        pacer: &Pacer,
        (sent, left): (u64, u64),
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
            let timestamps =
                (first..first + batch_count as u64).map(|index| intended_us(pacer, index, now_us));
            let slot = self.next_partition % self.partitions.len();
            let producer = self
                .sequences
                .as_mut()
                .map(|sequences| sequences.fields_for(slot, batch_count));
            let batch = builder.build(timestamps, args.compression.codec(), producer)?;
            let partition = self.partitions[slot];
            self.next_partition += 1;
            self.batches.push((partition, batch));
            count += batch_count as u64;
        }
        Ok(BatchPlan::Send(count as usize))
    }

    /// Keyed: the records ready join their partitions' batches in the accumulator, until one
    /// needs a batch buffer and none is free; then the request takes the oldest batch of each
    /// partition in turn. Returns the records appended, or when the first will be ready; the
    /// request may be empty while every buffer is in flight.
    fn fill_keyed(
        &mut self,
        builder: &mut BatchBuilder,
        pacer: &Pacer,
        (sent, left): (u64, u64),
        now_us: u64,
        args: &ProducerArgs,
    ) -> anyhow::Result<BatchPlan> {
        let spread = self.keyed.as_mut().expect("a keyed builder");
        let mut appended = 0u64;
        if let Some((slot, record)) = spread.blocked.take() {
            if spread.accumulator.try_append(slot, record) {
                appended = 1;
            } else {
                spread.blocked = Some((slot, record));
            }
        }
        if spread.blocked.is_none() && appended < left {
            let first = sent + appended;
            // Unpaced, the application appends until the pool is full; paced, what is due, a
            // request's worth at a time, so that the pacer's linger applies.
            let room = if pacer.is_paced() {
                (args.records_per_keyed_request() as u64).min(left - appended)
            } else {
                left - appended
            };
            match pacer.plan(first, now_us, room as usize) {
                BatchPlan::Send(ready) => {
                    appended += spread.append(self.partitions.len(), pacer, first, ready as u64, now_us)
                }
                BatchPlan::WaitUntil(until_us) => {
                    if appended == 0 && !spread.accumulator.holds_records() {
                        return Ok(BatchPlan::WaitUntil(until_us));
                    }
                }
            }
        }
        let room = self.room();
        let spread = self.keyed.as_mut().expect("a keyed builder");
        let drained = Drained {
            partitions: self.partitions,
            batches: &mut self.batches,
            sequences: self.sequences.as_mut(),
        };
        spread.drain_request(drained, room, builder, args)?;
        Ok(BatchPlan::Send(appended as usize))
    }

    /// Whether records wait in the accumulator (keyed) to be sent.
    pub fn holds_records(&self) -> bool {
        self.keyed
            .as_ref()
            .is_some_and(|spread| spread.accumulator.holds_records() || spread.blocked.is_some())
    }

    /// `batches` batches sent were acknowledged: their buffers go back to the pool (keyed).
    pub fn acknowledged(&mut self, batches: usize) {
        if let Some(spread) = self.keyed.as_mut() {
            spread.accumulator.acknowledged(batches);
        }
    }

    /// The batches gathered, and for keyed records each record's timestamp; the builder
    /// starts the next request.
    pub fn take(&mut self) -> (Vec<(i32, Bytes)>, Option<Vec<u64>>) {
        let batches = std::mem::replace(&mut self.batches, Vec::with_capacity(self.batches_max));
        if let Some(room) = self.transaction_room.as_mut() {
            *room -= batches.len();
        }
        let timestamps = self
            .keyed
            .as_mut()
            .map(|spread| std::mem::take(&mut spread.timestamps));
        (batches, timestamps)
    }
}

impl KeyedSpread {
    /// Appends records `first..first + count` to their partitions' batches, until one finds
    /// no buffer (it is kept in `blocked`). Returns how many were appended.
    fn append(&mut self, partitions: usize, pacer: &Pacer, first: u64, count: u64, now_us: u64) -> u64 {
        for index in first..first + count {
            let timestamp_us = intended_us(pacer, index, now_us);
            let key = keyed_key(timestamp_us, self.key_salt, index);
            let slot = partition_for_key(&key, partitions as i32) as usize;
            let record = Waiting { index, timestamp_us };
            if !self.accumulator.try_append(slot, record) {
                self.blocked = Some((slot, record));
                return index - first;
            }
        }
        count
    }

    /// Moves batches from the accumulator into `batches` while they fit `max_request_bytes`
    /// (one at least, as Kafka's producer sends a batch larger than a request alone), `room`
    /// batches at most.
    fn drain_request(
        &mut self,
        drained: Drained<'_>,
        room: usize,
        builder: &mut BatchBuilder,
        args: &ProducerArgs,
    ) -> anyhow::Result<()> {
        let Drained {
            partitions,
            batches,
            mut sequences,
        } = drained;
        let record_bytes = args.record_size + KEYED_KEY_BYTES + RECORD_FRAMING_BYTES;
        let (mut request_bytes, mut taken) = (0usize, 0usize);
        let fits = |records: usize| {
            let batch_bytes = records * record_bytes + BATCH_HEADER_BYTES;
            let fits = taken < room && (taken == 0 || request_bytes + batch_bytes <= args.max_request_bytes);
            if fits {
                (request_bytes, taken) = (request_bytes + batch_bytes, taken + 1);
            }
            fits
        };
        let KeyedSpread {
            key_salt,
            accumulator,
            timestamps,
            scratch,
            ..
        } = self;
        accumulator.drain(fits, |slot, records| {
            scratch.clear();
            scratch.extend(records);
            timestamps.extend(scratch.iter().map(|r| r.timestamp_us));
            let keys = scratch.iter().map(|r| (r.timestamp_us, *key_salt | r.index));
            let producer = sequences
                .as_mut()
                .map(|sequences| sequences.fields_for(slot, scratch.len()));
            let batch = builder.build_keyed(keys, args.compression.codec(), producer)?;
            batches.push((partitions[slot], batch));
            Ok(())
        })
    }
}

/// Where a keyed request's batches go, and the sequences they take.
struct Drained<'a> {
    partitions: &'a [i32],
    batches: &'a mut Vec<(i32, Bytes)>,
    sequences: Option<&'a mut Sequences>,
}

/// When record `index` was meant to be sent: its slot in a paced schedule, else now.
fn intended_us(pacer: &Pacer, index: u64, now_us: u64) -> u64 {
    if pacer.is_paced() {
        pacer.due_us(index)
    } else {
        now_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{BenchCommand, ProduceArgs};
    use clap::Parser;
    use laminar_client::records::{batches, for_each_record};

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: BenchCommand,
    }

    fn producer_args(extra: &[&str]) -> ProduceArgs {
        let args = [
            &["bench", "produce", "--topic", "t", "--num-records", "1"][..],
            extra,
        ]
        .concat();
        match Cli::try_parse_from(args).expect("parses").command {
            BenchCommand::Produce(args) => args,
            _ => unreachable!("parsed a produce command"),
        }
    }

    /// `(partition, keys)` of each batch of a request.
    type KeysByPartition = Vec<(i32, Vec<Vec<u8>>)>;

    fn keys_by_partition(batches_sent: &[(i32, Bytes)]) -> KeysByPartition {
        batches_sent
            .iter()
            .map(|(partition, bytes)| {
                let mut keys = Vec::new();
                for batch in batches(bytes) {
                    for_each_record(batch.expect("valid"), |r| {
                        keys.push(r.key.expect("keyed").to_vec())
                    })
                    .expect("walk");
                }
                (*partition, keys)
            })
            .collect()
    }

    /// Fills and takes one request at `now_us`: records appended, and `(partition, keys)`
    /// of each batch.
    fn keyed_request(
        request: &mut RequestBuilder,
        args: &ProducerArgs,
        (sent, left): (u64, u64),
        now_us: u64,
    ) -> (usize, KeysByPartition) {
        let mut builder = BatchBuilder::new(args.record_size, args.records_per_batch(), 1);
        let pacer = Pacer::new(0, None, 0);
        let plan = request
            .fill(&mut builder, &pacer, (sent, left), now_us, args)
            .expect("fill");
        let BatchPlan::Send(appended) = plan else {
            panic!("unpaced records are ready at once")
        };
        let (batches, timestamps) = request.take();
        let spread = keys_by_partition(&batches);
        let records: usize = spread.iter().map(|(_, keys)| keys.len()).sum();
        assert_eq!(
            timestamps.expect("keyed").len(),
            records,
            "a timestamp per record"
        );
        (appended, spread)
    }

    /// The record index in a keyed key.
    fn index_of(key: &[u8]) -> u64 {
        u64::from_be_bytes(key[KEY_BYTES..].try_into().expect("8 bytes")) & ((1 << 48) - 1)
    }

    #[test]
    fn keyed_records_go_where_kafkas_partitioner_puts_their_keys_one_batch_per_partition_a_request() {
        let args = producer_args(&["--keyed", "--record-size", "100", "--batch-bytes", "400"]).producer;
        let partitions: Vec<i32> = (10..20).collect();
        let mut request = RequestBuilder::new(&partitions, &args, 3);
        let (appended, first) = keyed_request(&mut request, &args, (0, 1000), 7_000_000);
        assert_eq!(appended, 1000, "the pool holds them all");
        assert_eq!(first.len(), 10, "one batch of each partition");
        assert!(first.iter().all(|(_, keys)| keys.len() == 4), "full batches of 4");
        let mut last_index = std::collections::HashMap::new();
        let mut records = 0;
        let mut spread = first;
        while !spread.is_empty() {
            for (partition, keys) in &spread {
                for key in keys {
                    assert_eq!(&key[..KEY_BYTES], &7_000_000u64.to_be_bytes(), "timestamp first");
                    assert_eq!(&key[KEY_BYTES..KEY_BYTES + 2], &[0, 3], "producer 3's salt");
                    assert_eq!(partitions[partition_for_key(key, 10) as usize], *partition);
                    let previous = last_index.insert(*partition, index_of(key));
                    assert!(previous < Some(index_of(key)), "in order within a partition");
                    records += 1;
                }
            }
            spread = keyed_request(&mut request, &args, (1000, 0), 8_000_000).1;
        }
        assert_eq!(records, 1000, "every record once");
        assert!(!request.holds_records());
    }

    #[test]
    fn a_keyed_record_that_needs_a_batch_while_every_buffer_is_taken_waits_for_an_acknowledgement() {
        let args = producer_args(&[
            "--keyed",
            "--record-size",
            "100",
            "--batch-bytes",
            "400",
            "--buffer-bytes",
            "800",
        ])
        .producer;
        let partitions: Vec<i32> = (0..10).collect();
        let mut request = RequestBuilder::new(&partitions, &args, 0);
        let (appended, spread) = keyed_request(&mut request, &args, (0, 1000), 1);
        assert!((2..=8).contains(&appended), "two batches of 1 to 4: {appended}");
        assert_eq!(spread.len(), 2, "two buffers, two batches");
        assert_eq!(spread.iter().map(|(_, k)| k.len()).sum::<usize>(), appended);
        let (blocked, spread) = keyed_request(&mut request, &args, (appended as u64, 1000), 2);
        assert_eq!(
            (blocked, spread.len()),
            (0, 0),
            "both buffers in flight: nothing moves"
        );
        assert!(request.holds_records(), "the blocked record waits");
        request.acknowledged(2);
        let (appended_after, spread) = keyed_request(&mut request, &args, (appended as u64, 1000), 3);
        assert!(
            appended_after >= 2,
            "the blocked record and the next: {appended_after}"
        );
        let first = spread
            .iter()
            .flat_map(|(_, keys)| keys)
            .map(|k| index_of(k))
            .min();
        assert_eq!(first, Some(appended as u64), "the blocked record goes first");
    }

    /// `(partition, producer id, base sequence, records, transactional)` of each batch.
    fn producer_fields(batches_sent: &[(i32, Bytes)]) -> Vec<(i32, i64, i32, i32, bool)> {
        batches_sent
            .iter()
            .map(|(partition, bytes)| {
                let mut encoded = bytes.clone();
                let decoded =
                    kafka_protocol::records::RecordBatchDecoder::decode(&mut encoded).expect("decodes");
                let first = &decoded.records[0];
                let records = decoded.records.len() as i32;
                (
                    *partition,
                    first.producer_id,
                    first.sequence,
                    records,
                    first.transactional,
                )
            })
            .collect()
    }

    const IDENTITY: ProducerIdentity = ProducerIdentity {
        producer_id: 9,
        producer_epoch: 0,
        transactional: true,
    };

    #[test]
    fn each_partitions_sequence_counts_the_records_sent_to_it_before() {
        let args = producer_args(&["--record-size", "100", "--batch-bytes", "400"]).producer;
        let partitions = [5, 6];
        let mut request = RequestBuilder::new(&partitions, &args, 0).with_identity(IDENTITY);
        let mut builder = BatchBuilder::new(100, 4, 1);
        let pacer = Pacer::new(0, None, 0);
        let mut sent = Vec::new();
        // Two partitions: a request carries two batches at most.
        for (first, left) in [(0, 10), (8, 2), (10, 3)] {
            request
                .fill(&mut builder, &pacer, (first, left), 1, &args)
                .expect("fill");
            sent.extend(producer_fields(&request.take().0));
        }
        assert_eq!(
            sent,
            vec![
                (5, 9, 0, 4, true),
                (6, 9, 0, 4, true),
                (5, 9, 4, 2, true),
                (6, 9, 4, 3, true)
            ]
        );
    }

    #[test]
    fn a_transaction_ends_requests_at_its_last_batch() {
        let args = producer_args(&["--record-size", "100", "--batch-bytes", "400"]).producer;
        let partitions = [0, 1, 2, 3];
        let mut request = RequestBuilder::new(&partitions, &args, 0).with_identity(IDENTITY);
        assert_eq!(request.transaction_room(), None);
        assert_eq!(request.partitions_of_next(3), vec![0, 1, 2]);
        request.open_transaction(3);
        let mut builder = BatchBuilder::new(100, 4, 1);
        let pacer = Pacer::new(0, None, 0);
        let plan = request.fill(&mut builder, &pacer, (0, 100), 1, &args);
        assert_eq!(plan.expect("fill"), BatchPlan::Send(12), "3 batches of 4, not 4");
        assert_eq!(request.take().0.len(), 3);
        assert_eq!(request.transaction_room(), Some(0));
        assert_eq!(
            request.partitions_of_next(3),
            vec![0, 1, 3],
            "the next transaction starts at partition 3"
        );
        let keyed = producer_args(&["--keyed"]).producer;
        let keyed_request = RequestBuilder::new(&partitions, &keyed, 0);
        assert_eq!(
            keyed_request.partitions_of_next(1),
            partitions,
            "keyed records go anywhere"
        );
    }

    #[test]
    fn unkeyed_batches_fill_one_partition_after_another() {
        let args = producer_args(&["--record-size", "100", "--batch-bytes", "400"]);
        let partitions = [5, 6, 7];
        let mut request = RequestBuilder::new(&partitions, &args.producer, 0);
        let mut builder = BatchBuilder::new(100, 4, 1);
        let pacer = Pacer::new(0, None, 0);
        let plan = request.fill(&mut builder, &pacer, (0, 10), 1, &args.producer);
        assert_eq!(plan.expect("fill"), BatchPlan::Send(10));
        let spread = keys_by_partition(&request.take().0);
        let sizes: Vec<(i32, usize)> = spread.iter().map(|(p, k)| (*p, k.len())).collect();
        assert_eq!(sizes, vec![(5, 4), (6, 4), (7, 2)]);
        assert!(spread
            .iter()
            .all(|(_, keys)| keys.iter().all(|k| k.len() == KEY_BYTES)));
    }
}
