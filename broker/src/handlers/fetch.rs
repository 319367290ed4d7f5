//! Fetch: whole batches from each partition's owning shard, bounded by the request's byte
//! limits, long-polled by appends (not timers) until `min_bytes` arrive or `max_wait_ms` passes.
//! The records go into the answer as the engine's read left them — segment file ranges or
//! shared batches — never copied (see `laminar_protocol::fetch_response` and `send`).

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{select, select_all};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::FetchRequest;
use laminar_engine::partition::{Partition, ReadEnd, ReadResult, RecordBytes};
use laminar_engine::task_wakers::with_shared_waker;

use crate::broker::{by_owning_shard, on_owning_shards, BrokerCtx, PartitionAccessError, TopicPartition};
use crate::errors::partition_error_code;
use crate::fetch_sessions::{Answered, FetchContext, Opened, PartitionFetch, PartitionState};
use crate::handlers::partition_answers::{items_by_partition, push_partition};
use crate::handlers::placement::Placement;
use crate::replication::throttle::ThrottleSide;
use crate::replication::FollowerFetch;
use crate::reply::Reply;
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

/// Answers a fetch; `placement` is the asking connection's. A fetch short of `min_bytes`
/// is answered later (`crate::reply`), once data arrives or its wait ends, while the
/// connection handles its next requests.
pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    request: FetchRequest,
    version: i16,
    placement: &Placement,
) -> Reply<FetchAnswer> {
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
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
    let opened = match open_session(ctx, &request, version, reader) {
        Ok(opened) => opened,
        Err(error) => return Reply::Now(FetchAnswer::failed(error.code())),
    };
    let wanted: Vec<(TopicPartition, Wanted)> = opened
        .partitions
        .iter()
        .map(|(tp, fetch)| {
            let want = Wanted {
                offset: fetch.fetch_offset,
                max_bytes: (fetch.partition_max_bytes.max(0) as usize).min(max_bytes),
                min_one_batch: true,
                reader,
                current_leader_epoch: fetch.current_leader_epoch,
            };
            (tp.clone(), want)
        })
        .collect();
    placement.note(wanted.iter().map(|(tp, _)| tp));
    let results = read_all(ctx, &wanted, max_bytes).await;
    let fetch = Fetching {
        ctx: ctx.clone(),
        opened,
        wanted,
        max_bytes,
        min_bytes: request.min_bytes.max(0) as usize,
        deadline,
        reader,
        isolation_level: request.isolation_level,
    };
    if fetch.answers_now(&results) {
        return Reply::Now(fetch.answer(results).await);
    }
    Reply::Later(Box::pin(fetch.long_poll(results)))
}

/// A fetch whose first reads are done. Owned by the asking connection's shard.
struct Fetching {
    ctx: Rc<BrokerCtx>,
    opened: Opened,
    wanted: Vec<(TopicPartition, Wanted)>,
    max_bytes: usize,
    min_bytes: usize,
    deadline: Instant,
    reader: Reader,
    isolation_level: i8,
}

impl Fetching {
    /// Whether `results` answer the fetch: `min_bytes` (at least one byte) read, an error, the
    /// wait over, or the broker stopping.
    fn answers_now(&self, results: &Reads) -> bool {
        let any_error = results.iter().any(|(_, r)| r.is_err());
        let bytes: usize = results
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .map(|read| read.data.len())
            .sum();
        let shutting_down = self.ctx.state.shared.shutdown.is_triggered();
        bytes >= self.min_bytes.max(1) || any_error || Instant::now() >= self.deadline || shutting_down
    }

    /// Waits for appends and reads again until the results answer the fetch.
    async fn long_poll(self, mut results: Reads) -> FetchAnswer {
        let (ctx, wanted) = (&self.ctx, &self.wanted);
        while !self.answers_now(&results) {
            let read_end = self.reader.read_end();
            wait_for_appends(ctx, read_up_to(wanted, &results), read_end, self.deadline).await;
            if Instant::now() >= self.deadline && !ctx.state.shared.shutdown.is_triggered() {
                // The wait saw nothing grow before the deadline, so the reads before it still
                // answer: a caught-up consumer's long poll reads each partition once, not twice.
                break;
            }
            results = read_all(ctx, wanted, self.max_bytes).await;
        }
        self.answer(results).await
    }

    /// The answer from `results`, trimmed to the fetch's byte budget, as the fetch session
    /// sends it.
    async fn answer(self, results: Reads) -> FetchAnswer {
        let ctx = &self.ctx;
        let results = fit_to_budget(ctx, &self.wanted, results, self.max_bytes).await;
        let answers = partition_answers(results, self.isolation_level);
        // Sessionless fetches (librdkafka's, kafkajs's, followers') keep nothing per partition.
        let told: Vec<Answered> = match self.opened.context {
            FetchContext::Sessionless => Vec::new(),
            _ => answers.iter().map(|(_, answer)| told_of(answer)).collect(),
        };
        let sessions = &ctx.state.shared.fetch_sessions;
        let (session_id, sent) = sessions.answered(&self.opened, &told, Instant::now());
        let mut answer = FetchAnswer {
            session_id,
            ..FetchAnswer::default()
        };
        for (at, (tp, partition)) in answers.into_iter().enumerate() {
            if sent.as_ref().is_none_or(|sent| sent[at]) {
                push_partition(&mut answer.topics, &tp.topic, partition);
            }
        }
        answer
    }
}

/// The partitions to read for `request`, once its fetch session fields (v7+) are applied: those
/// it names, or its session's; or the error that answers it whole.
fn open_session(
    ctx: &Rc<BrokerCtx>,
    request: &FetchRequest,
    version: i16,
    reader: Reader,
) -> Result<Opened, ResponseError> {
    let named = items_by_partition(
        &request.topics,
        |t| (t.topic.as_str(), t.partitions.as_slice()),
        |p| {
            let fetch = PartitionFetch {
                fetch_offset: p.fetch_offset,
                partition_max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
            };
            (p.partition, fetch)
        },
    );
    if version < 7 {
        let context = FetchContext::Sessionless;
        return Ok(Opened {
            context,
            partitions: named,
        });
    }
    let forgotten: Vec<TopicPartition> = items_by_partition(
        &request.forgotten_topics_data,
        |t| (t.topic.as_str(), t.partitions.as_slice()),
        |p| (*p, ()),
    )
    .into_iter()
    .map(|(tp, ())| tp)
    .collect();
    let session = (request.session_id, request.session_epoch);
    let follower = matches!(reader, Reader::Follower(_));
    let sessions = &ctx.state.shared.fetch_sessions;
    sessions.open(session, named, &forgotten, follower, Instant::now())
}

/// What a fetch session keeps of a partition's answer.
fn told_of(answer: &PartitionAnswer) -> Answered {
    let state = PartitionState {
        high_watermark: answer.high_watermark,
        last_stable_offset: answer.last_stable_offset,
        log_start_offset: answer.log_start_offset,
    };
    Answered {
        state,
        has_records: !answer.records.is_empty(),
        error_code: answer.error_code,
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
async fn read_all(ctx: &Rc<BrokerCtx>, wanted: &[(TopicPartition, Wanted)], max_bytes: usize) -> Reads {
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

/// Reads one partition on its owning shard.
async fn read_one(
    there: &Rc<BrokerCtx>,
    tp: &TopicPartition,
    want: Wanted,
) -> Result<ReadResult<RecordBytes>, PartitionAccessError> {
    let partition = there.state.partition_to_read(tp).await?;
    let mut throttled = false;
    match want.reader {
        Reader::Follower(replica_id) => {
            follower_fetched(there, tp, &want, replica_id, partition.as_ref())?;
            throttled = there.state.replication_throttled(ThrottleSide::Leader, tp);
        }
        Reader::Consumer => check_consumer_epoch(there, tp, want.current_leader_epoch)?,
    }
    let read = match partition {
        Some(partition) if throttled && !leader_throttle_allows(there) => {
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
            let again = read_all(ctx, &[(tp.clone(), smaller)], budget).await;
            *result = again.into_iter().next().expect("one read asked, one answered").1;
        }
        let len = result.as_ref().map_or(0, |read| read.data.len());
        budget = budget.saturating_sub(len);
        first_data &= len == 0;
    }
    results
}

/// Returns when any watched partition's high watermark passes its offset, or at the deadline.
/// One wait goes to each owning shard with all of that shard's partitions; the waits on other
/// shards end with this future (`submit_wait_to`): a long poll that returns leaves no waiter
/// behind, and a waiting one costs no CPU. A caught-up consumer's long poll names every
/// partition it reads, thousands at scale, so nothing here is per partition that need not be:
/// one message, one timer and one future per shard.
async fn wait_for_appends(
    ctx: &Rc<BrokerCtx>,
    watched: Vec<(TopicPartition, i64)>,
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
async fn any_grown_past(there: &Rc<BrokerCtx>, watched: &[(TopicPartition, i64)], read_end: ReadEnd) {
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

/// Builds the answer from reads already within the byte limits.
/// Each partition's answer, in read order.
fn partition_answers(results: Reads, isolation_level: i8) -> Vec<(TopicPartition, PartitionAnswer)> {
    let read_committed = isolation_level == READ_COMMITTED;
    let mut answers = Vec::with_capacity(results.len());
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
        answers.push((tp, partition));
    }
    answers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(max_bytes: usize) -> Wanted {
        Wanted {
            offset: 0,
            max_bytes,
            min_one_batch: true,
            reader: Reader::Consumer,
            current_leader_epoch: -1,
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
