//! Routing: work on partitions goes to the shard that owns each one, one message per shard, and
//! comes back in the order it was asked (docs/ARCHITECTURE.md invariant 2). Apart from the state
//! it routes to, and from how the owning shard runs the work once there (`shard_work`).

use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;

use laminar_engine::shard::{shard_of_partition, ShardGone, ShardId};

use crate::topic_partition::{PartitionAccessError, TopicPartition};

use super::shard_state::BrokerCtx;
use super::shard_work::{prefetch_the_next_ones, run_all_in_order, PREFETCH_PARTITIONS};

/// The shard that owns `tp` in a broker running `shard_count` shards; `None` for a negative
/// index, which a client may send but no partition has (so it never reaches the routing table).
pub fn owner_of(tp: &TopicPartition, shard_count: usize) -> Option<ShardId> {
    (tp.partition >= 0).then(|| shard_of_partition(&tp.topic, tp.partition, shard_count))
}

/// Runs `work` for every item on the shard that owns its partition: one message per shard,
/// items of one shard run concurrently there, and the results come back in the input's order
/// (docs/ARCHITECTURE.md invariant 2: split by owning shard, forwarded, reassembled).
pub async fn on_owning_shards<T, R, F, Fut>(
    ctx: &Rc<BrokerCtx>,
    items: Vec<(TopicPartition, T)>,
    work: F,
) -> Vec<(TopicPartition, Result<R, PartitionAccessError>)>
where
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(Rc<BrokerCtx>, TopicPartition, T) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = Result<R, PartitionAccessError>> + 'static,
{
    let item_count = items.len();
    // One copy of each name stays here for the answer; the other goes to the owning shard.
    let mut names = Vec::with_capacity(item_count);
    let indexed = items.into_iter().enumerate().map(|(index, (tp, item))| {
        names.push(tp.clone());
        (tp, (index, item))
    });
    let (by_shard, unowned) = by_owning_shard(indexed, ctx.shard_count());
    let mut results: Vec<Option<Result<R, PartitionAccessError>>> = (0..item_count).map(|_| None).collect();
    for (_, (index, _)) in unowned {
        results[index] = Some(Err(PartitionAccessError::UnknownTopicOrPartition));
    }
    let per_shard = handover_order(by_shard, ctx.id())
        .into_iter()
        .map(|(shard, batch)| {
            let work = work.clone();
            let indices: Vec<usize> = batch.iter().map(|(_, (index, _))| *index).collect();
            async move {
                let done = ctx
                    .submit_to(shard, move |there| async move {
                        let mut left = batch.into_iter();
                        let mut started = 0usize;
                        let runs = std::iter::from_fn(|| {
                            if started.is_multiple_of(PREFETCH_PARTITIONS) {
                                prefetch_the_next_ones(&there, left.as_slice());
                            }
                            started += 1;
                            let (tp, (_, item)) = left.next()?;
                            Some(work(there.clone(), tp, item))
                        });
                        run_all_in_order(runs).await
                    })
                    .await;
                match done {
                    Ok(answers) => indices.into_iter().zip(answers).collect::<Vec<_>>(),
                    Err(gone) => {
                        let lost = |index| (index, Err(PartitionAccessError::ShardGone(ShardGone(gone.0))));
                        indices.into_iter().map(lost).collect()
                    }
                }
            }
        });
    for (index, result) in futures::future::join_all(per_shard).await.into_iter().flatten() {
        results[index] = Some(result);
    }
    let answered = names.into_iter().zip(results);
    answered
        .map(|(tp, result)| (tp, result.expect("every item gets exactly one result")))
        .collect()
}

/// Items by the shard that owns each one's partition, in their order within each shard, and
/// apart those naming a negative partition index, which no shard owns.
pub type ByOwningShard<T> = (
    BTreeMap<ShardId, Vec<(TopicPartition, T)>>,
    Vec<(TopicPartition, T)>,
);

/// Splits `items` by owning shard (see [`ByOwningShard`]).
pub fn by_owning_shard<T>(
    items: impl IntoIterator<Item = (TopicPartition, T)>,
    shard_count: usize,
) -> ByOwningShard<T> {
    let (mut by_shard, mut unowned): ByOwningShard<T> = Default::default();
    for (tp, item) in items {
        match owner_of(&tp, shard_count) {
            Some(shard) => by_shard.entry(shard).or_insert_with(Vec::new).push((tp, item)),
            None => unowned.push((tp, item)),
        }
    }
    (by_shard, unowned)
}

/// The order in which per-shard work is started: every other shard first, `here` last. This
/// shard's own work runs inline when first polled and may finish without yielding (an append
/// into the page cache does), so polled first it would hold back the hand-over to the other
/// shards until it is done: their appends (and fdatasyncs) would start only after this shard's
/// instead of beside them. Measured: acks=all 1.18x, acks=1 1.04x (docs/decisions/0008).
fn handover_order<V>(by_shard: BTreeMap<ShardId, V>, here: ShardId) -> Vec<(ShardId, V)> {
    let (local, mut order): (Vec<_>, Vec<_>) = by_shard.into_iter().partition(|(shard, _)| *shard == here);
    order.extend(local);
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_shards_are_handed_their_work_before_this_one_runs_its_own() {
        let by_shard: BTreeMap<ShardId, &str> = [(0, "a"), (1, "b"), (2, "c")].into_iter().collect();
        let order = |here| handover_order(by_shard.clone(), here);
        assert_eq!(order(0), vec![(1, "b"), (2, "c"), (0, "a")]);
        assert_eq!(order(1), vec![(0, "a"), (2, "c"), (1, "b")]);
        // Work for other shards only: the order stays by shard.
        assert_eq!(order(5), vec![(0, "a"), (1, "b"), (2, "c")]);
    }
}
