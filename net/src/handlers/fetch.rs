//! Fetch: whole batches from each partition's owning shard, bounded by the request's byte
//! limits, long-polled by appends (not timers) until `min_bytes` arrive or `max_wait_ms` passes.
//! The batches go into the answer shared, not copied (see `fetch_encode`).

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::{select, select_all, Either};
use kafka_protocol::messages::FetchRequest;
use laminar_engine::partition::ReadResult;

use crate::broker::{on_owning_shards, owner_of, BrokerCtx, PartitionAccessError, TopicPartition};
use crate::errors::partition_error_code;
use crate::handlers::fetch_encode::{FetchAnswer, PartitionAnswer};
use crate::handlers::partition_answers::{items_by_partition, push_partition};

/// Kafka's READ_COMMITTED isolation level.
const READ_COMMITTED: i8 = 1;

#[derive(Clone, Copy)]
struct Wanted {
    offset: i64,
    max_bytes: usize,
}

pub async fn handle(ctx: &Rc<BrokerCtx>, request: FetchRequest, version: i16) -> FetchAnswer {
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let min_bytes = request.min_bytes.max(0) as usize;
    let max_bytes = if version >= 3 {
        request.max_bytes.max(0) as usize
    } else {
        usize::MAX
    };
    let wanted = items_by_partition(
        &request.topics,
        |t| (t.topic.as_str(), t.partitions.as_slice()),
        |p| {
            let want = Wanted {
                offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes.max(0) as usize,
            };
            (p.partition, want)
        },
    );
    loop {
        let results = read_all(ctx, &wanted).await;
        let any_error = results.iter().any(|(_, r)| r.is_err());
        let bytes: usize = results
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .map(read_len)
            .sum();
        let now = Instant::now();
        if bytes >= min_bytes.max(1)
            || any_error
            || now >= deadline
            || ctx.state.shared.shutdown.is_triggered()
        {
            return respond(results, max_bytes, request.isolation_level);
        }
        wait_for_appends(ctx, &wanted, deadline).await;
    }
}

async fn read_all(
    ctx: &Rc<BrokerCtx>,
    wanted: &[(TopicPartition, Wanted)],
) -> Vec<(TopicPartition, Result<ReadResult, PartitionAccessError>)> {
    on_owning_shards(ctx, wanted.to_vec(), |there, tp, want: Wanted| async move {
        let partition = there.state.partition(&tp).await?;
        Ok(partition.read(want.offset, want.max_bytes, true).await?)
    })
    .await
}

fn read_len(read: &ReadResult) -> usize {
    read.data.iter().map(Bytes::len).sum()
}

/// Returns when any wanted partition grows past its fetch offset, or at the deadline.
async fn wait_for_appends(ctx: &Rc<BrokerCtx>, wanted: &[(TopicPartition, Wanted)], deadline: Instant) {
    let shard_count = ctx.shard_count();
    let waits = wanted.iter().map(|(tp, want)| {
        let (tp, offset) = (tp.clone(), want.offset);
        let ctx = ctx.clone();
        Box::pin(async move {
            let _ = ctx
                .submit_to(owner_of(&tp, shard_count), move |there| async move {
                    let Ok(partition) = there.state.partition(&tp).await else {
                        return;
                    };
                    // Same thread as the appender: subscribe, then check, so no append is missed.
                    loop {
                        let appended = partition.appended();
                        if partition.high_watermark() > offset || Instant::now() >= deadline {
                            return;
                        }
                        let timeout =
                            glommio::timer::sleep(deadline.saturating_duration_since(Instant::now()));
                        if let Either::Right(_) =
                            select(std::pin::pin!(appended), std::pin::pin!(timeout)).await
                        {
                            return;
                        }
                    }
                })
                .await;
        })
    });
    let waits: Vec<_> = waits.collect();
    if waits.is_empty() {
        glommio::timer::sleep(deadline.saturating_duration_since(Instant::now())).await;
        return;
    }
    select_all(waits).await;
}

/// Builds the answer, trimming whole batches to the request's total `max_bytes` in request order;
/// the first partition with data always returns at least one batch, so a client can progress.
fn respond(
    results: Vec<(TopicPartition, Result<ReadResult, PartitionAccessError>)>,
    max_bytes: usize,
    isolation_level: i8,
) -> FetchAnswer {
    let read_committed = isolation_level == READ_COMMITTED;
    let mut budget = max_bytes;
    let mut first_data = true;
    let mut answer = FetchAnswer::default();
    for (tp, result) in results {
        let partition = match result {
            Ok(read) => {
                let mut batches = Vec::new();
                for batch in read.data {
                    if batch.len() > budget && !first_data {
                        break;
                    }
                    budget = budget.saturating_sub(batch.len());
                    first_data = false;
                    batches.push(batch);
                }
                PartitionAnswer {
                    partition: tp.partition,
                    error_code: 0,
                    high_watermark: read.high_watermark,
                    last_stable_offset: read.high_watermark,
                    log_start_offset: read.log_start_offset,
                    read_committed,
                    batches,
                }
            }
            Err(e) => PartitionAnswer {
                partition: tp.partition,
                error_code: partition_error_code(&e),
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                read_committed,
                batches: Vec::new(),
            },
        };
        push_partition(&mut answer.topics, tp.topic, partition);
    }
    answer
}
