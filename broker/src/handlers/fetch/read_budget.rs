//! The byte budget of one fetch, shared by the shards that read its partitions: the reads it
//! grants, in request order and in rounds while bytes are left, and the trim that keeps the
//! answer within it. Apart from reading one partition, which knows only the grant it is given.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use laminar_engine::partition::{ReadResult, RecordBytes};

use crate::broker::{on_owning_shards, BrokerCtx, PartitionAccessError, TopicPartition};

use super::partition_read::read_one;
use super::wanted::{Reads, Wanted};

/// The bytes one fetch may still read, shared by the shards reading its partitions. Without it
/// each partition read up to its own limit and the answer was cut to the request's afterwards:
/// 4 consumers of 2 500 partitions each read 250 MB per fetch to answer 50 MiB, all of it into
/// memory once descriptors ran short for sendfile (decision 0027, fetches over thousands of partitions).
struct ReadBudget {
    remaining: AtomicUsize,
    /// Whether some partition found data: only the first may return a batch past its limit.
    data_read: AtomicBool,
}

impl ReadBudget {
    fn new(max_bytes: usize) -> Arc<ReadBudget> {
        Arc::new(ReadBudget {
            remaining: AtomicUsize::new(max_bytes),
            data_read: AtomicBool::new(false),
        })
    }

    /// What `want` may read now: at most what is left of the budget (taken from it), and a
    /// first batch past that only while no partition has found data.
    fn take(&self, want: Wanted) -> Wanted {
        let taken = self
            .remaining
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                Some(left - left.min(want.max_bytes))
            })
            .unwrap_or_else(|left| left);
        Wanted {
            max_bytes: taken.min(want.max_bytes),
            min_one_batch: want.min_one_batch && !self.data_read.load(Ordering::Acquire),
            ..want
        }
    }

    /// Settles a read granted `granted` bytes that read `read`: what it left goes back, what a
    /// first batch past the grant took comes off.
    fn settle(&self, granted: usize, read: usize) {
        if read > 0 {
            self.data_read.store(true, Ordering::Release);
        }
        let _ = self
            .remaining
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                Some((left + granted).saturating_sub(read))
            });
    }
}

/// Reads every wanted partition on its shard, within `max_bytes` in all (plus, at most once per
/// shard reading at the same time, a first batch past it). Kafka fills an answer in request
/// order (clients rotate the order, so every partition has its turn), so the first round reads
/// the partitions `max_bytes` covers even if each before them fills its own limit: what they
/// leave goes to the others, read concurrently after them. Without that order, partitions of
/// the shard that read first took the budget, and those of the other starved while the first
/// had data. Reads take their grant when they start, so a read that waits (for the disk, or
/// for a descriptor) holds its grant meanwhile and later ones may find none: those are read
/// again, in rounds, while budget is left.
pub(super) async fn read_all(
    ctx: &Rc<BrokerCtx>,
    wanted: &[(TopicPartition, Wanted)],
    max_bytes: usize,
) -> Reads {
    let budget = ReadBudget::new(max_bytes);
    let first = covered_in_request_order(wanted, max_bytes);
    let mut results = read_round(ctx, &budget, wanted[..first].to_vec()).await;
    if first < wanted.len() {
        let rest = read_round(ctx, &budget, wanted[first..].to_vec()).await;
        results.extend(rest);
    }
    loop {
        let starved: Vec<usize> = (0..results.len())
            .filter(|i| matches!(&results[*i].1, Ok((_, true))))
            .collect();
        if starved.is_empty() || budget.remaining.load(Ordering::Acquire) == 0 {
            break;
        }
        let again = starved.iter().map(|i| wanted[*i].clone()).collect();
        let reread = read_round(ctx, &budget, again).await;
        let progressed = reread.iter().any(|(_, r)| !matches!(r, Ok((_, true))));
        for (index, read) in starved.into_iter().zip(reread) {
            results[index] = read;
        }
        if !progressed {
            break;
        }
    }
    results
        .into_iter()
        .map(|(tp, read)| (tp, read.map(|(read, _)| read)))
        .collect()
}

/// How many partitions from the first `max_bytes` covers if each before fills its own limit
/// (the last of them may get less than its limit; at least one).
fn covered_in_request_order(wanted: &[(TopicPartition, Wanted)], max_bytes: usize) -> usize {
    let mut left = max_bytes;
    for (index, (_, want)) in wanted.iter().enumerate() {
        if left == 0 {
            return index.max(1);
        }
        left = left.saturating_sub(want.max_bytes);
    }
    wanted.len()
}

/// One concurrent read of `wanted` within what is left of `budget`; each read comes with
/// whether it was starved (granted nothing, so it read nothing, whatever its partition holds).
async fn read_round(
    ctx: &Rc<BrokerCtx>,
    budget: &Arc<ReadBudget>,
    wanted: Vec<(TopicPartition, Wanted)>,
) -> Vec<(
    TopicPartition,
    Result<(ReadResult<RecordBytes>, bool), PartitionAccessError>,
)> {
    let budget = budget.clone();
    on_owning_shards(ctx, wanted, move |there, tp, want: Wanted| {
        let budget = budget.clone();
        async move {
            let granted = budget.take(want);
            let starved = granted.max_bytes == 0 && !granted.min_one_batch && want.max_bytes > 0;
            let read = read_one(&there, &tp, granted).await;
            let len = read.as_ref().map_or(0, |read| read.data.len());
            budget.settle(granted.max_bytes, len);
            read.map(|read| (read, starved))
        }
    })
    .await
}

/// Keeps the answer within the request's total `max_bytes`, in request order, as Kafka does:
/// each partition gets what the ones before it left, and only the first with data may exceed it
/// by one batch. Partitions read concurrently with their own limits, so one that overshoots
/// what is left is read again with that (rare: the total limit is usually many partitions'
/// worth). File ranges cannot be trimmed without knowing where batches start; the engine can.
pub(super) async fn fit_to_budget(
    ctx: &Rc<BrokerCtx>,
    wanted: &[(TopicPartition, Wanted)],
    mut results: Reads,
    max_bytes: usize,
) -> Reads {
    let mut budget = max_bytes;
    let mut first_data = true;
    for ((tp, want), (_, result)) in wanted.iter().zip(results.iter_mut()) {
        let len = match result {
            Ok(read) => read.data.len(),
            Err(_) => continue,
        };
        // The first partition with data was read with the whole limit (or is one big batch).
        if len > budget && !first_data {
            let smaller = Wanted {
                max_bytes: budget,
                min_one_batch: false,
                ..*want
            };
            let again = read_all(ctx, &[(tp.clone(), smaller)], budget).await;
            *result = again.into_iter().next().expect("one read asked, one answered").1;
        }
        let len = result.as_ref().map_or(0, |read| read.data.len());
        budget = budget.saturating_sub(len);
        first_data &= len == 0;
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::fetch::wanted::Reader;
    use laminar_model::LeaderEpoch;
    use laminar_model::Offset;

    fn want(max_bytes: usize) -> Wanted {
        Wanted {
            offset: Offset::ZERO,
            max_bytes,
            min_one_batch: true,
            reader: Reader::Consumer,
            read_committed: false,
            current_leader_epoch: LeaderEpoch::UNKNOWN,
            authorized: true,
            preferred_replica: None,
            follower_may_serve: false,
        }
    }

    #[test]
    fn partitions_read_within_the_fetch_budget_and_only_the_first_with_data_may_pass_it() {
        let budget = ReadBudget::new(100);
        let first = budget.take(want(60));
        assert_eq!((first.max_bytes, first.min_one_batch), (60, true));
        budget.settle(60, 0); // no data: all of it goes back
        let second = budget.take(want(60));
        assert_eq!((second.max_bytes, second.min_one_batch), (60, true));
        budget.settle(60, 50);
        let third = budget.take(want(60));
        assert_eq!(
            (third.max_bytes, third.min_one_batch),
            (50, false),
            "what is left, and no batch past it once data was found"
        );
        budget.settle(50, 50);
        let fourth = budget.take(want(60));
        assert_eq!((fourth.max_bytes, fourth.min_one_batch), (0, false));
    }

    #[test]
    fn the_first_round_holds_the_partitions_the_budget_covers_in_request_order() {
        let wanted = |limits: &[usize]| -> Vec<(TopicPartition, Wanted)> {
            let tp = |partition| TopicPartition::new("t", partition);
            limits
                .iter()
                .enumerate()
                .map(|(p, &l)| (tp(p as i32), want(l)))
                .collect()
        };
        assert_eq!(covered_in_request_order(&wanted(&[200, 200, 200]), 300), 2);
        assert_eq!(covered_in_request_order(&wanted(&[100, 200, 50]), 300), 2);
        assert_eq!(covered_in_request_order(&wanted(&[100, 100, 50]), 300), 3);
        assert_eq!(covered_in_request_order(&wanted(&[0, 500, 10]), 300), 2);
        assert_eq!(covered_in_request_order(&wanted(&[10]), 0), 1);
        assert_eq!(covered_in_request_order(&wanted(&[]), 300), 0);
    }

    #[test]
    fn a_first_batch_past_its_grant_comes_off_the_budget() {
        let budget = ReadBudget::new(100);
        let first = budget.take(want(10));
        budget.settle(first.max_bytes, 70); // one batch of 70 bytes, past its 10
        assert_eq!(budget.take(want(100)).max_bytes, 30);
    }
}
