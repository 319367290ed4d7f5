//! The batches of a producer's next produce request, spread over its partitions the way a Kafka
//! producer spreads them:
//!
//! - unkeyed (sticky): each batch fills one partition, the next batch the next partition in
//!   turn; a request carries as many full batches as fit;
//! - keyed (`--keyed`): each record goes to the partition Kafka's default partitioner picks for
//!   its key, so records of one request land in many partitions; a partition's batch grows
//!   until it is full (the producer would send it then) or the request is.

use bytes::Bytes;
use laminar_client::partitioner::partition_for_key;

use crate::batch_builder::BatchBuilder;
use crate::cli::ProducerArgs;
use crate::layout::{KEYED_KEY_BYTES, KEY_BYTES};
use crate::pacing::{BatchPlan, Pacer};

/// Where the next records go, for a keyed producer. Owned by one producer thread.
struct KeyedSpread {
    /// Set in the key of every record of this producer, so producers' keys differ.
    key_salt: u64,
    /// Record indexes waiting for each of the producer's partitions (by position).
    pending: Vec<Vec<u64>>,
    /// Positions in `pending` that hold records, in the order they got their first.
    touched: Vec<usize>,
}

/// The batches of the next produce request. Owned by one producer thread.
pub struct RequestBuilder<'a> {
    partitions: &'a [i32],
    next_partition: usize,
    batches_max: usize,
    batches: Vec<(i32, Bytes)>,
    keyed: Option<KeyedSpread>,
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
            pending: vec![Vec::new(); partitions.len()],
            touched: Vec::new(),
        });
        RequestBuilder {
            partitions,
            next_partition: 0,
            batches_max,
            batches: Vec::with_capacity(batches_max),
            keyed,
        }
    }

    fn has_room(&self) -> bool {
        self.batches.len() < self.batches_max
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
            let batch = builder.build(timestamps, args.compression.codec())?;
            let partition = self.partitions[self.next_partition % self.partitions.len()];
            self.next_partition += 1;
            self.batches.push((partition, batch));
            count += batch_count as u64;
        }
        Ok(BatchPlan::Send(count as usize))
    }

    /// Keyed: the records ready go to the partitions their keys pick, until a partition's
    /// batch is full or the request is; then one batch per partition that got records.
    fn fill_keyed(
        &mut self,
        builder: &mut BatchBuilder,
        pacer: &Pacer,
        (sent, left): (u64, u64),
        now_us: u64,
        args: &ProducerArgs,
    ) -> anyhow::Result<BatchPlan> {
        let room = (args.records_per_keyed_request() as u64).min(left) as usize;
        let ready = match pacer.plan(sent, now_us, room) {
            BatchPlan::Send(ready) => ready as u64,
            wait => return Ok(wait),
        };
        let spread = self.keyed.as_mut().expect("a keyed builder");
        let partitions = self.partitions.len() as i32;
        let mut count = 0u64;
        for index in sent..sent + ready {
            let key = keyed_key(intended_us(pacer, index, now_us), spread.key_salt, index);
            let slot = partition_for_key(&key, partitions) as usize;
            if spread.pending[slot].len() >= args.records_per_batch() {
                break;
            }
            if spread.pending[slot].is_empty() {
                spread.touched.push(slot);
            }
            spread.pending[slot].push(index);
            count += 1;
        }
        for slot in spread.touched.drain(..) {
            let keys = spread.pending[slot]
                .iter()
                .map(|&index| (intended_us(pacer, index, now_us), spread.key_salt | index));
            let batch = builder.build_keyed(keys, args.compression.codec())?;
            spread.pending[slot].clear();
            self.batches.push((self.partitions[slot], batch));
        }
        Ok(BatchPlan::Send(count as usize))
    }

    /// The batches gathered and how many there are; the builder starts the next request.
    pub fn take(&mut self) -> (Vec<(i32, Bytes)>, usize) {
        let batches = std::mem::replace(&mut self.batches, Vec::with_capacity(self.batches_max));
        let count = batches.len();
        (batches, count)
    }
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
    fn keys_by_partition(batches_sent: &[(i32, Bytes)]) -> Vec<(i32, Vec<Vec<u8>>)> {
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

    #[test]
    fn keyed_records_go_where_kafkas_partitioner_puts_their_keys() {
        let args = producer_args(&["--keyed", "--record-size", "100", "--batch-bytes", "400"]);
        let partitions: Vec<i32> = (10..20).collect();
        let mut request = RequestBuilder::new(&partitions, &args.producer, 3);
        let mut builder = BatchBuilder::new(100, 4, 1);
        let pacer = Pacer::new(0, None, 0);
        let plan = request
            .fill(&mut builder, &pacer, (0, 1000), 7_000_000, &args.producer)
            .expect("fill");
        let BatchPlan::Send(count) = plan else {
            panic!("unpaced records are ready at once")
        };
        let (sent, batch_count) = request.take();
        assert!(batch_count > 1, "records spread over partitions");
        let spread = keys_by_partition(&sent);
        let records: usize = spread.iter().map(|(_, keys)| keys.len()).sum();
        assert_eq!(records, count);
        let mut per_partition = std::collections::HashMap::new();
        for (partition, keys) in spread {
            assert!(
                per_partition.insert(partition, keys.len()).is_none(),
                "one batch per partition"
            );
            assert!(
                (1..=4).contains(&keys.len()),
                "batches hold 1 to 4 records of 100 bytes"
            );
            for key in keys {
                assert_eq!(&key[..KEY_BYTES], &7_000_000u64.to_be_bytes(), "timestamp first");
                assert_eq!(&key[KEY_BYTES..KEY_BYTES + 2], &[0, 3], "producer 3's salt");
                assert_eq!(partitions[partition_for_key(&key, 10) as usize], partition);
            }
        }
        // The request ends where the next record's partition already has a full batch.
        let next_key = keyed_key(7_000_000, 3 << 48, count as u64);
        let next_partition = partitions[partition_for_key(&next_key, 10) as usize];
        assert_eq!(per_partition.get(&next_partition), Some(&4));
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
