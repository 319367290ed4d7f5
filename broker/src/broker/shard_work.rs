//! How the owning shard runs the work `routing` hands it: prefetching the next partitions'
//! objects, and polling the runs in place, in order, with one allocation for all that finish at
//! their first poll. Apart from routing because this is what costs per partition when a
//! request names thousands.

use std::future::Future;
use std::task::{Context, Poll};

use laminar_engine::task_wakers::SharedWaker;

use crate::topic_partition::TopicPartition;

use super::shard_state::BrokerCtx;

/// Partitions prefetched at once, ahead of their work: enough that their cache misses overlap,
/// few enough that what is prefetched (a few lines of each partition's objects) is still in
/// the cache when its work runs, however many partitions the request names.
pub(super) const PREFETCH_PARTITIONS: usize = 128;

/// Asks the CPU to load what the work on the next [`PREFETCH_PARTITIONS`] partitions of a
/// shard's list touches first (`ShardPartitions::prefetch`, docs/decisions/0026, per-batch cost across many
/// partitions).
/// `left`: the partitions whose work has not started. One alone has no misses to overlap.
pub(super) fn prefetch_the_next_ones<T>(there: &BrokerCtx, left: &[(TopicPartition, T)]) {
    if left.len() > 1 {
        let next = &left[..left.len().min(PREFETCH_PARTITIONS)];
        there
            .state
            .partitions
            .prefetch(next.iter().map(|(tp, _)| (&*tp.topic, tp.partition)));
    }
}

/// Runs `runs` concurrently on this task and returns their outputs in order. Each is polled
/// once as it starts, and only those that wait then (a partition opening, a lock held) join a
/// `FuturesUnordered`: an append into the page cache finishes at its first poll, and the set's
/// task per future, with its linking and atomics, cost more than the append's own bookkeeping
/// in requests naming thousands of partitions (docs/decisions/0026, per-batch cost across many partitions).
/// The first polls
/// use a shared waker: a run that waits keeps a clone of the waker it was polled with until the
/// set polls it again, and glommio's own count of a task's wakers overflows at 32 768 runs
/// (`laminar_engine::task_wakers`).
pub(super) async fn run_all_in_order<F: Future>(runs: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    use futures::StreamExt;
    let mut outputs = Vec::new();
    let mut waiting = futures::stream::FuturesUnordered::new();
    let mut shared = SharedWaker::default();
    let waker = std::future::poll_fn(|cx| Poll::Ready(shared.waker_for(cx).clone())).await;
    // One heap slot, reused by every run that finishes at its first poll (most do): a run
    // cannot move once polled, and an allocation per partition was 3 % of a keyed produce's
    // CPU. A run that waits keeps its slot, and the next run gets a new one.
    let mut slot: std::pin::Pin<Box<Option<F>>> = Box::pin(None);
    for run in runs {
        slot.set(Some(run));
        let at = outputs.len();
        let mut started = slot
            .as_mut()
            .as_pin_mut()
            .expect("a run was just put in the slot");
        match started.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(output) => {
                outputs.push(Some(output));
                slot.set(None);
            }
            Poll::Pending => {
                outputs.push(None);
                let mut pending = std::mem::replace(&mut slot, Box::pin(None));
                waiting.push(async move {
                    let run = pending
                        .as_mut()
                        .as_pin_mut()
                        .expect("the slot holds the waiting run");
                    (at, run.await)
                });
            }
        }
    }
    while let Some((at, output)) = waiting.next().await {
        outputs[at] = Some(output);
    }
    let finished = outputs
        .into_iter()
        .map(|output| output.expect("every run finished"));
    finished.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_that_wait_finish_in_any_order_and_answer_in_theirs() {
        use futures::channel::oneshot;
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..6).map(|_| oneshot::channel::<u32>()).unzip();
        let runs = receivers.into_iter().enumerate().map(|(i, receiver)| async move {
            if i % 2 == 0 {
                return i as u32 * 10; // finishes at its first poll
            }
            receiver.await.expect("sent") + i as u32 * 10
        });
        let mut all = Box::pin(run_all_in_order(runs));
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(all.as_mut().poll(&mut cx).is_pending(), "three runs wait");
        // The waiting ones finish last first.
        for (i, sender) in senders.into_iter().enumerate().rev() {
            let _ = sender.send(1);
            if i == 1 {
                break;
            }
            assert!(all.as_mut().poll(&mut cx).is_pending());
        }
        let std::task::Poll::Ready(outputs) = all.as_mut().poll(&mut cx) else {
            panic!("every run finished");
        };
        assert_eq!(outputs, vec![0, 11, 20, 31, 40, 51]);
    }
}
