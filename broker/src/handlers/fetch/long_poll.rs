//! The long poll's wait: until a watched partition grows past what the last reads reached, the
//! deadline passes, or the broker stops. Woken by appends on the owning shards, not by timers;
//! apart from the reads because it reads nothing.

use std::rc::Rc;
use std::time::Instant;

use futures::future::{select, select_all};
use laminar_engine::partition::ReadEnd;
use laminar_engine::task_wakers::with_shared_waker;
use laminar_model::Offset;

use crate::broker::{by_owning_shard, BrokerCtx, TopicPartition};

use super::wanted::{Reader, Reads, Wanted};

/// For each readable partition, the offset the wait must see the log grow past: what this pass
/// already read up to (its high watermark, last stable offset for read_committed, or its log
/// end for a follower), so that a fetch short of `min_bytes` sleeps until new data arrives
/// instead of re-reading the same bytes.
pub(super) fn read_up_to(
    wanted: &[(TopicPartition, Wanted)],
    results: &Reads,
) -> Vec<(TopicPartition, Offset)> {
    wanted
        .iter()
        .zip(results)
        .filter_map(|((tp, want), (_, read))| {
            let read = read.as_ref().ok()?;
            let end = match want.reader {
                Reader::Consumer if want.read_committed => read.last_stable_offset,
                Reader::Consumer => read.high_watermark,
                Reader::Follower(_) => read.log_end_offset,
            };
            Some((tp.clone(), want.offset.max(end)))
        })
        .collect()
}

/// Returns when any watched partition's read end (see `read_up_to`) passes its offset, or at
/// the deadline.
/// One wait goes to each owning shard with all of that shard's partitions; the waits on other
/// shards end with this future (`submit_wait_to`): a long poll that returns leaves no waiter
/// behind, and a waiting one costs no CPU. A caught-up consumer's long poll names every
/// partition it reads, thousands at scale, so nothing here is per partition that need not be:
/// one message, one timer and one future per shard.
pub(super) async fn wait_for_appends(
    ctx: &Rc<BrokerCtx>,
    watched: Vec<(TopicPartition, Offset)>,
    read_end: ReadEnd,
    deadline: Instant,
) {
    // A partition no shard owns never grows: nothing to wait for.
    let (by_shard, _unowned) = by_owning_shard(watched, ctx.shard_count());
    let waits: Vec<_> = by_shard
        .into_iter()
        .map(|(shard, watched)| {
            let ctx = ctx.clone();
            Box::pin(async move {
                let _ = ctx
                    .submit_wait_to(shard, move |there| async move {
                        let any_grown = std::pin::pin!(any_grown_past(&there, &watched, read_end));
                        select(any_grown, std::pin::pin!(sleep_until(deadline))).await;
                    })
                    .await;
            })
        })
        .collect();
    let shutdown = std::pin::pin!(ctx.state.shared.shutdown.wait());
    if waits.is_empty() {
        select(std::pin::pin!(sleep_until(deadline)), shutdown).await;
        return;
    }
    select(select_all(waits), shutdown).await;
}

/// On the owning shard of every partition in `watched`: returns once one's read end (high
/// watermark, or log end for a follower) passes its offset, or one cannot be read. Each
/// partition adds this one task's waker to its append event, without a future or an
/// allocation of its own (a task per partition was a tenth of a caught-up consumer's long
/// poll over 10 000 partitions, decision 0027, fetches over thousands of partitions), as a shared waker:
/// glommio's count
/// of one task's wakers overflows at 32 768 (`laminar_engine::task_wakers`); any wake ends the
/// wait or checks them all again. A partition never written has no files to watch: for those
/// the wait is also for this shard to open one.
async fn any_grown_past(there: &Rc<BrokerCtx>, watched: &[(TopicPartition, Offset)], read_end: ReadEnd) {
    loop {
        let opened = there.state.partitions.partition_opened();
        let mut appended = Vec::with_capacity(watched.len());
        let mut any_unopened = false;
        for (tp, offset) in watched {
            let partition = match there.state.partition_to_read(tp).await {
                Ok(Some(partition)) => partition,
                Ok(None) => {
                    any_unopened = true;
                    continue;
                }
                Err(_) => return,
            };
            // Same thread as the appender: subscribe, then check, so no append is missed.
            appended.push(partition.appended());
            if partition.read_end_offset(read_end) > *offset {
                return;
            }
        }
        let any_appended = async move {
            match appended.is_empty() {
                true => std::future::pending().await,
                false => drop(with_shared_waker(select_all(appended)).await),
            }
        };
        let any_opened = async move {
            match any_unopened {
                true => opened.await,
                false => std::future::pending().await,
            }
        };
        select(std::pin::pin!(any_appended), std::pin::pin!(any_opened)).await;
    }
}

async fn sleep_until(deadline: Instant) {
    glommio::timer::sleep(deadline.saturating_duration_since(Instant::now())).await;
}
