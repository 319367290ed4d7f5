//! A keyed producer's record accumulator, shaped as the Java producer's `RecordAccumulator`:
//!
//! - every batch that holds records, waiting or in flight, holds one buffer of `batch.size`
//!   from a pool of `buffer.memory / batch.size` (Kafka's `BufferPool` hands out whole
//!   `batch.size` buffers, however few records a batch holds);
//! - a record goes to the last batch of its partition; a record that needs a new batch while
//!   no buffer is free waits, and so does every record after it (the application's `send`
//!   blocks), until acknowledged batches give their buffers back;
//! - a request takes the oldest batch of each partition in turn, starting at the partition
//!   the previous request had no room for (Kafka's drain index), as many as fit
//!   `max.request.size`; with `linger.ms` over, every batch is ready.
//!
//! So a producer faster than the broker fills its buffer and sends full batches when its
//! partitions fit the pool (1 000 partitions of 16 KiB in 32 MiB), and batches of a record or
//! two when they do not (10 000 partitions). Owned by one producer thread.

use std::collections::VecDeque;

/// A record waiting in its partition's batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiting {
    /// Its index in the producer's records (part of its key).
    pub index: u64,
    /// When it was appended (or meant to be, at a fixed rate): its key's timestamp, and where
    /// its latency starts.
    pub timestamp_us: u64,
}

/// Records waiting per partition, and the pool of batch buffers. Owned by one producer thread.
pub struct Accumulator {
    /// By partition position: the records waiting, oldest first (whole batches of
    /// `records_per_batch`, then the open one). Bounded by the pool: at most
    /// `buffers_max * records_per_batch` records in all.
    waiting: Vec<VecDeque<Waiting>>,
    records_per_batch: usize,
    buffers_free: usize,
    buffers_max: usize,
    /// The partition position the next drain starts at.
    drain_from: usize,
    /// Records waiting, over all partitions.
    waiting_count: usize,
}

impl Accumulator {
    /// An accumulator for `partitions` partitions with `buffers_max` batch buffers (one at
    /// least) of `records_per_batch` records (one at least).
    pub fn new(partitions: usize, records_per_batch: usize, buffers_max: usize) -> Accumulator {
        assert!(partitions > 0, "a producer writes one partition at least");
        let buffers_max = buffers_max.max(1);
        Accumulator {
            waiting: vec![VecDeque::new(); partitions],
            records_per_batch: records_per_batch.max(1),
            buffers_free: buffers_max,
            buffers_max,
            drain_from: 0,
            waiting_count: 0,
        }
    }

    /// Appends `record` to partition `slot`'s last batch, or to a new one if a buffer is free.
    /// Returns false, appending nothing, when it needs a buffer and none is free.
    pub fn try_append(&mut self, slot: usize, record: Waiting) -> bool {
        let batch = &mut self.waiting[slot];
        if batch.len().is_multiple_of(self.records_per_batch) {
            if self.buffers_free == 0 {
                return false;
            }
            self.buffers_free -= 1;
        }
        batch.push_back(record);
        self.waiting_count += 1;
        true
    }

    /// Whether records wait to be sent.
    pub fn holds_records(&self) -> bool {
        self.waiting_count > 0
    }

    /// Takes the oldest batch of each partition in turn, from the drain index on, while
    /// `fits(records)` says a batch of that many records still fits the request; calls
    /// `take(slot, records)` for each, and stops at its first error. Their buffers stay taken
    /// until [`Accumulator::acknowledged`].
    pub fn drain<E>(
        &mut self,
        mut fits: impl FnMut(usize) -> bool,
        mut take: impl FnMut(usize, std::collections::vec_deque::Drain<'_, Waiting>) -> Result<(), E>,
    ) -> Result<(), E> {
        let partitions = self.waiting.len();
        for step in 0..partitions {
            if self.waiting_count == 0 {
                break;
            }
            let slot = (self.drain_from + step) % partitions;
            let count = self.waiting[slot].len().min(self.records_per_batch);
            if count == 0 {
                continue;
            }
            if !fits(count) {
                self.drain_from = slot;
                return Ok(());
            }
            self.waiting_count -= count;
            take(slot, self.waiting[slot].drain(..count))?;
        }
        // A whole round: every partition sent its oldest batch; the next round starts where
        // this one did.
        Ok(())
    }

    /// Gives back the buffers of `batches` batches that were acknowledged.
    pub fn acknowledged(&mut self, batches: usize) {
        self.buffers_free += batches;
        assert!(
            self.buffers_free <= self.buffers_max,
            "more buffers given back ({}) than the pool holds ({})",
            self.buffers_free,
            self.buffers_max
        );
    }

    /// Buffers taken by batches waiting or in flight.
    #[cfg(test)]
    pub fn buffers_taken(&self) -> usize {
        self.buffers_max - self.buffers_free
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(index: u64) -> Waiting {
        Waiting {
            index,
            timestamp_us: 1_000 + index,
        }
    }

    /// Drains one request of at most `records_max` records: `(slot, indexes)` per batch.
    fn drain(accumulator: &mut Accumulator, records_max: usize) -> Vec<(usize, Vec<u64>)> {
        let mut room = records_max;
        let mut batches = Vec::new();
        accumulator
            .drain(
                |count| {
                    let fits = count <= room;
                    if fits {
                        room -= count;
                    }
                    fits
                },
                |slot, records| {
                    batches.push((slot, records.map(|r| r.index).collect()));
                    Ok::<(), ()>(())
                },
            )
            .expect("nothing fails");
        batches
    }

    #[test]
    fn a_batch_takes_a_buffer_and_a_record_that_needs_one_more_than_the_pool_holds_waits() {
        let mut accumulator = Accumulator::new(3, 2, 2);
        assert!(accumulator.try_append(0, record(0)));
        assert!(accumulator.try_append(0, record(1)), "the batch has room");
        assert!(accumulator.try_append(1, record(2)), "a second buffer");
        assert!(accumulator.try_append(1, record(3)));
        assert!(
            !accumulator.try_append(2, record(4)),
            "a third batch: no buffer left"
        );
        assert!(
            !accumulator.try_append(0, record(4)),
            "partition 0's batch is full"
        );
        assert_eq!(accumulator.buffers_taken(), 2);
        let sent = drain(&mut accumulator, 100);
        assert_eq!(sent, vec![(0, vec![0, 1]), (1, vec![2, 3])]);
        assert!(!accumulator.holds_records());
        assert!(
            !accumulator.try_append(2, record(4)),
            "in flight, the buffers stay taken"
        );
        accumulator.acknowledged(1);
        assert!(accumulator.try_append(2, record(4)));
    }

    #[test]
    fn each_request_takes_one_batch_per_partition_in_turn_from_where_the_last_stopped() {
        let mut accumulator = Accumulator::new(3, 2, 100);
        for index in 0..5 {
            assert!(accumulator.try_append(0, record(index)));
        }
        for (slot, index) in [(1, 5), (2, 6), (2, 7), (2, 8)] {
            assert!(accumulator.try_append(slot, record(index)));
        }
        assert_eq!(accumulator.buffers_taken(), 3 + 1 + 2);
        // Room for three records: partition 0's oldest batch (2) and partition 1's (1).
        assert_eq!(drain(&mut accumulator, 3), vec![(0, vec![0, 1]), (1, vec![5])]);
        // The next starts at partition 2, where the last stopped, and goes round.
        assert_eq!(drain(&mut accumulator, 4), vec![(2, vec![6, 7]), (0, vec![2, 3])]);
        // A whole round from partition 2: the next starts there again.
        assert_eq!(drain(&mut accumulator, 100), vec![(2, vec![8]), (0, vec![4])]);
        assert!(!accumulator.holds_records());
        accumulator.acknowledged(6);
        assert_eq!(accumulator.buffers_taken(), 0);
    }

    #[test]
    #[should_panic(expected = "more buffers given back")]
    fn giving_back_more_buffers_than_were_taken_is_a_bug() {
        let mut accumulator = Accumulator::new(1, 1, 1);
        accumulator.acknowledged(1);
    }
}
