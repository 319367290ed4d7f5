//! Fetch: whole batches from each partition's owning shard, bounded by the request's byte
//! limits, long-polled by appends (not timers) until `min_bytes` arrive or `max_wait_ms` passes.
//! The records go into the answer as the engine's read left them — segment file ranges or
//! shared batches — never copied (see `laminar_protocol::fetch_response` and `send`).

use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::future::{select, select_all, Either};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::FetchRequest;
use laminar_engine::partition::{Partition, ReadEnd, ReadResult, RecordBytes};

use crate::broker::{on_owning_shards, owner_of, BrokerCtx, PartitionAccessError, TopicPartition};
use crate::errors::partition_error_code;
use crate::handlers::partition_answers::{items_by_partition, push_partition};
use crate::handlers::placement::Placement;
use crate::replication::throttle::ThrottleSide;
use crate::replication::FollowerFetch;
use laminar_protocol::fetch_response::{FetchAnswer, PartitionAnswer};

/// Kafka's READ_COMMITTED isolation level.
const READ_COMMITTED: i8 = 1;

#[derive(Clone, Copy)]
struct Wanted {
    offset: i64,
    max_bytes: usize,
    /// Whether a first batch larger than `max_bytes` still comes back (so the client progresses).
    min_one_batch: bool,
    /// Who reads: a consumer (to the high watermark) or a follower (to the log end).
    reader: Reader,
    /// The leader epoch the fetcher knows (-1: none given).
    current_leader_epoch: i32,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Reader {
    Consumer,
    /// A follower broker with this id (Kafka's `replica_id` ≥ 0).
    Follower(i32),
}

impl Reader {
    fn read_end(self) -> ReadEnd {
        match self {
            Reader::Consumer => ReadEnd::HighWatermark,
            Reader::Follower(_) => ReadEnd::LogEnd,
        }
    }
}

type Reads = Vec<(
    TopicPartition,
    Result<ReadResult<RecordBytes>, PartitionAccessError>,
)>;

/// Answers a fetch; `placement` is the asking connection's.
pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    request: FetchRequest,
    version: i16,
    placement: &Placement,
) -> FetchAnswer {
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let min_bytes = request.min_bytes.max(0) as usize;
    // The broker's fetch.max.bytes bounds every answer (as Kafka's does), so none nears the
    // 2 GiB a frame size can express, whatever the client asked.
    let broker_max_bytes = ctx.state.shared.config.fetch_max_bytes as usize;
    let max_bytes = if version >= 3 {
        (request.max_bytes.max(0) as usize).min(broker_max_bytes)
    } else {
        broker_max_bytes
    };
    let reader = match request.replica_id.0 {
        id if id >= 0 => Reader::Follower(id),
        _ => Reader::Consumer,
    };
    let wanted = items_by_partition(
        &request.topics,
        |t| (t.topic.as_str(), t.partitions.as_slice()),
        |p| {
            let want = Wanted {
                offset: p.fetch_offset,
                max_bytes: (p.partition_max_bytes.max(0) as usize).min(max_bytes),
                min_one_batch: true,
                reader,
                current_leader_epoch: p.current_leader_epoch,
            };
            (p.partition, want)
        },
    );
    placement.note(wanted.iter().map(|(tp, _)| tp));
    loop {
        let results = read_all(ctx, wanted.clone()).await;
        let any_error = results.iter().any(|(_, r)| r.is_err());
        let bytes: usize = results
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .map(|read| read.data.len())
            .sum();
        let now = Instant::now();
        if bytes >= min_bytes.max(1)
            || any_error
            || now >= deadline
            || ctx.state.shared.shutdown.is_triggered()
        {
            let results = fit_to_budget(ctx, &wanted, results, max_bytes).await;
            return respond(results, request.isolation_level);
        }
        wait_for_appends(ctx, &read_up_to(&wanted, &results), reader.read_end(), deadline).await;
    }
}

/// For each readable partition, the offset the wait must see the log grow past: what this pass
/// already read up to (its high watermark, or its log end for a follower), so that a fetch
/// short of `min_bytes` sleeps until new data arrives instead of re-reading the same bytes.
fn read_up_to(wanted: &[(TopicPartition, Wanted)], results: &Reads) -> Vec<(TopicPartition, i64)> {
    wanted
        .iter()
        .zip(results)
        .filter_map(|((tp, want), (_, read))| {
            let read = read.as_ref().ok()?;
            let end = match want.reader {
                Reader::Consumer => read.high_watermark,
                Reader::Follower(_) => read.log_end_offset,
            };
            Some((tp.clone(), want.offset.max(end)))
        })
        .collect()
}

async fn read_all(ctx: &Rc<BrokerCtx>, wanted: Vec<(TopicPartition, Wanted)>) -> Reads {
    on_owning_shards(ctx, wanted, |there, tp, want: Wanted| async move {
        let partition = there.state.partition_to_read(&tp).await?;
        let mut throttled = false;
        match want.reader {
            Reader::Follower(replica_id) => {
                follower_fetched(&there, &tp, &want, replica_id, partition.as_ref())?;
                throttled = there.state.replication_throttled(ThrottleSide::Leader, &tp);
            }
            Reader::Consumer => check_consumer_epoch(&there, &tp, want.current_leader_epoch)?,
        }
        let read = match partition {
            Some(partition) if throttled && !leader_throttle_allows(&there) => {
                // Throttled and over budget: the partition answers without records this time.
                ReadResult {
                    data: RecordBytes::default(),
                    high_watermark: partition.high_watermark(),
                    log_start_offset: partition.log_start_offset(),
                    log_end_offset: partition.log_end_offset(),
                }
            }
            Some(partition) => {
                let end = want.reader.read_end();
                partition
                    .read_for_send(want.offset, want.max_bytes, want.min_one_batch, end)
                    .await?
            }
            None => ReadResult::of_unwritten(want.offset)?,
        };
        if throttled {
            if let Some(replication) = &there.state.replication {
                replication.leader_throttle.spend(read.data.len(), Instant::now());
            }
        }
        Ok(read)
    })
    .await
}

fn leader_throttle_allows(there: &Rc<BrokerCtx>) -> bool {
    let replication = there.state.replication.as_ref();
    replication.is_none_or(|r| r.leader_throttle.allows(Instant::now()))
}

/// KIP-320: a consumer that names the leader epoch it knows (not -1) is refused when that is
/// not this leader's: FENCED_LEADER_EPOCH for an older one (its metadata is stale),
/// UNKNOWN_LEADER_EPOCH for a newer one (this broker's is).
fn check_consumer_epoch(
    there: &Rc<BrokerCtx>,
    tp: &TopicPartition,
    known: i32,
) -> Result<(), PartitionAccessError> {
    if known < 0 || there.state.shared.cluster.is_none() {
        return Ok(());
    }
    let epoch = there.state.leader_epoch_of(tp);
    match known.cmp(&epoch) {
        std::cmp::Ordering::Less => Err(PartitionAccessError::Refused(ResponseError::FencedLeaderEpoch)),
        std::cmp::Ordering::Greater => Err(PartitionAccessError::Refused(ResponseError::UnknownLeaderEpoch)),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

/// A follower's fetch tells the leader how far it got: checked against the leadership, then
/// it moves the high watermark (and may change the ISR). Refused outside cluster mode.
fn follower_fetched(
    there: &Rc<BrokerCtx>,
    tp: &TopicPartition,
    want: &Wanted,
    replica_id: i32,
    partition: Option<&Rc<Partition>>,
) -> Result<(), PartitionAccessError> {
    let replication = there
        .state
        .replication
        .as_ref()
        .ok_or(PartitionAccessError::NotLeader)?;
    let fetch = FollowerFetch {
        replica_id,
        current_leader_epoch: want.current_leader_epoch,
        fetch_offset: want.offset,
    };
    if let Some(change) = replication.follower_fetched(tp, fetch, partition, crate::clock::now_ms())? {
        crate::replication::manager::send_isr_change(there, change);
    }
    Ok(())
}

/// Keeps the answer within the request's total `max_bytes`, in request order, as Kafka does:
/// each partition gets what the ones before it left, and only the first with data may exceed it
/// by one batch. Partitions read concurrently with their own limits, so one that overshoots
/// what is left is read again with that (rare: the total limit is usually many partitions'
/// worth). File ranges cannot be trimmed without knowing where batches start; the engine can.
async fn fit_to_budget(
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
            let again = read_all(ctx, vec![(tp.clone(), smaller)]).await;
            *result = again.into_iter().next().expect("one read asked, one answered").1;
        }
        let len = result.as_ref().map_or(0, |read| read.data.len());
        budget = budget.saturating_sub(len);
        first_data &= len == 0;
    }
    results
}

/// The watched partition `tp` once it has been written (opened at once if it was), or `None`
/// at the deadline or on error: a partition never written has no files to watch, so the wait
/// is for this shard to open one, then looks again.
async fn written_partition(
    there: &Rc<BrokerCtx>,
    tp: &TopicPartition,
    deadline: Instant,
) -> Option<Rc<Partition>> {
    loop {
        let opened = there.state.partitions.partition_opened();
        if let Some(partition) = there.state.partition_to_read(tp).await.ok()? {
            return Some(partition);
        }
        let timeout = glommio::timer::sleep(deadline.saturating_duration_since(Instant::now()));
        if let Either::Right(_) = select(opened, std::pin::pin!(timeout)).await {
            return None;
        }
    }
}

/// Returns when any watched partition's high watermark passes its offset, or at the deadline.
/// The waits on other shards end with this future (`submit_wait_to`): a long poll that returns
/// leaves no waiter behind, and a waiting one costs no CPU.
async fn wait_for_appends(
    ctx: &Rc<BrokerCtx>,
    watched: &[(TopicPartition, i64)],
    read_end: ReadEnd,
    deadline: Instant,
) {
    let shard_count = ctx.shard_count();
    let waits = watched.iter().filter_map(|(tp, offset)| {
        let (tp, offset) = (tp.clone(), *offset);
        let shard = owner_of(&tp, shard_count)?;
        let ctx = ctx.clone();
        Some(Box::pin(async move {
            let _ = ctx
                .submit_wait_to(shard, move |there| async move {
                    let Some(partition) = written_partition(&there, &tp, deadline).await else {
                        return;
                    };
                    // Same thread as the appender: subscribe, then check, so no append is missed.
                    loop {
                        let appended = partition.appended();
                        let end = match read_end {
                            ReadEnd::HighWatermark => partition.high_watermark(),
                            ReadEnd::LogEnd => partition.log_end_offset(),
                        };
                        if end > offset || Instant::now() >= deadline {
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
        }))
    });
    let waits: Vec<_> = waits.collect();
    let shutdown = std::pin::pin!(ctx.state.shared.shutdown.wait());
    if waits.is_empty() {
        let timeout = glommio::timer::sleep(deadline.saturating_duration_since(Instant::now()));
        select(std::pin::pin!(timeout), shutdown).await;
        return;
    }
    select(select_all(waits), shutdown).await;
}

/// Builds the answer from reads already within the byte limits.
fn respond(results: Reads, isolation_level: i8) -> FetchAnswer {
    let read_committed = isolation_level == READ_COMMITTED;
    let mut answer = FetchAnswer::default();
    for (tp, result) in results {
        let partition = match result {
            Ok(read) => PartitionAnswer {
                partition: tp.partition,
                error_code: 0,
                high_watermark: read.high_watermark,
                last_stable_offset: read.high_watermark,
                log_start_offset: read.log_start_offset,
                read_committed,
                records: read.data,
            },
            Err(e) => PartitionAnswer {
                partition: tp.partition,
                error_code: partition_error_code(&e),
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                read_committed,
                records: RecordBytes::default(),
            },
        };
        push_partition(&mut answer.topics, tp.topic, partition);
    }
    answer
}
