//! The follower's side, on the shard that owns the partition: what each followed partition
//! needs next (truncation by leader epoch, then fetching from its log end), and what the shard
//! does with what a fetcher brings back. The fetcher threads (`fetcher.rs`) only carry requests
//! and answers; every decision and every write happens here, on the owning shard.
//!
//! Truncation (KIP-101, KIP-279): before fetching from a new leader, a follower asks it
//! (OffsetForLeaderEpoch) where its own latest epoch ends there, and cuts its log to that. When
//! the leader answers an older epoch, the follower cuts to where that epoch ends in both logs
//! and asks again: its latest epoch falls every round, so the rounds end, and the logs agree
//! below the cut.

use laminar_model::{BrokerEpoch, LeaderEpoch, NodeId, Offset};
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use laminar_engine::partition::Partition;

use crate::broker::{BrokerCtx, OpenMode, TopicPartition};
use crate::config::FsyncSetting;
use crate::replication::throttle::ThrottleSide;

/// What a followed partition does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Asking the leader where its log and ours diverge.
    Truncating,
    /// Fetching from its log end.
    Fetching,
    /// The leader answered OFFSET_OUT_OF_RANGE: asking where its log starts.
    OutOfRange,
}

/// A partition this shard follows, under one leader epoch. Owned by one shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowState {
    /// The leader's broker id; -1 while the partition has none.
    pub leader: NodeId,
    pub leader_epoch: LeaderEpoch,
    pub phase: Phase,
    /// After an error, no request for this partition before this time.
    pub retry_at_ms: i64,
}

/// An OffsetForLeaderEpoch question for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochQuery {
    pub tp: TopicPartition,
    pub current_leader_epoch: LeaderEpoch,
    /// The follower's latest epoch: where does it end at the leader?
    pub leader_epoch: LeaderEpoch,
}

/// Where to fetch one partition from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPoint {
    pub tp: TopicPartition,
    /// The topic's id: a follower's fetch names topics by id.
    pub topic_id: [u8; 16],
    pub offset: Offset,
    pub current_leader_epoch: LeaderEpoch,
    pub log_start_offset: Offset,
}

/// The leader's answer to an [`EpochQuery`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochAnswer {
    pub tp: TopicPartition,
    pub error_code: i16,
    pub leader_epoch: LeaderEpoch,
    pub end_offset: Offset,
}

/// The leader's answer for one fetched partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPart {
    pub tp: TopicPartition,
    pub error_code: i16,
    pub high_watermark: Offset,
    pub log_start_offset: Offset,
    pub records: Bytes,
}

/// What one fetcher asks of its leader next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The epoch this broker registered with, which its fetches carry (the leader checks it).
    pub broker_epoch: BrokerEpoch,
    pub queries: Vec<EpochQuery>,
    pub fetches: Vec<FetchPoint>,
    /// Partitions whose log start at the leader is wanted (ListOffsets earliest).
    pub starts: Vec<TopicPartition>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.queries.is_empty() && self.fetches.is_empty() && self.starts.is_empty()
    }
}

/// The leader's log start for one partition, or its error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderStart {
    pub tp: TopicPartition,
    pub log_start_offset: Result<Offset, i16>,
}

/// The requests due now for the partitions this shard follows from `source`. `None` when it
/// follows nothing from there any more (the fetcher stops).
pub async fn plan(ctx: &Rc<BrokerCtx>, source: NodeId) -> Option<Plan> {
    let replication = ctx.state.replication.as_ref()?;
    let now_ms = crate::clock::now_ms();
    let due = replication.followed_from(source, now_ms)?;
    let mut plan = Plan {
        broker_epoch: ctx.state.shared.cluster.as_ref()?.broker_epoch(),
        ..Plan::default()
    };
    for (tp, state) in due {
        let Ok(partition) = ctx.state.replica_partition(&tp, OpenMode::IfWritten).await else {
            replication.retry_later(&tp, state.leader_epoch, now_ms);
            continue;
        };
        if state.phase == Phase::OutOfRange {
            plan.starts.push(tp);
            continue;
        }
        match (state.phase, partition) {
            (Phase::Truncating, Some(partition)) if !partition.leader_epochs().is_empty() => {
                let latest = partition
                    .leader_epochs()
                    .last()
                    .map_or(LeaderEpoch::FIRST, |e| e.epoch);
                plan.queries.push(EpochQuery {
                    tp,
                    current_leader_epoch: state.leader_epoch,
                    leader_epoch: latest,
                });
            }
            (_, partition) => {
                let Some(topic_id) = ctx
                    .state
                    .shared
                    .metadata
                    .with_current(|t| t.get(&tp.topic).map(|t| t.id))
                else {
                    replication.retry_later(&tp, state.leader_epoch, now_ms);
                    continue; // deleted: its follower state goes with the next metadata
                };
                // Nothing written here: nothing to truncate.
                replication.set_phase(&tp, state.leader_epoch, Phase::Fetching);
                if ctx.state.replication_throttled(ThrottleSide::Follower, &tp)
                    && !replication.follower_throttle.allows(Instant::now())
                {
                    continue; // over budget: not asked for this time
                }
                plan.fetches.push(FetchPoint {
                    offset: partition.as_ref().map_or(Offset::ZERO, |p| p.log_end_offset()),
                    log_start_offset: partition.as_ref().map_or(Offset::ZERO, |p| p.log_start_offset()),
                    current_leader_epoch: state.leader_epoch,
                    tp,
                    topic_id,
                });
            }
        }
    }
    Some(plan)
}

/// Applies the leader's OffsetForLeaderEpoch answers: cut each log where it diverges.
pub async fn apply_epochs(ctx: &Rc<BrokerCtx>, source: NodeId, answers: Vec<EpochAnswer>) {
    let Some(replication) = ctx.state.replication.as_ref() else {
        return;
    };
    for answer in answers {
        let Some(state) = replication.following(&answer.tp, source, Phase::Truncating) else {
            continue;
        };
        let now_ms = crate::clock::now_ms();
        if answer.error_code != 0 {
            replication.retry_later(&answer.tp, state.leader_epoch, now_ms);
            continue;
        }
        let partition = match ctx.state.replica_partition(&answer.tp, OpenMode::IfWritten).await {
            Ok(Some(partition)) => partition,
            Ok(None) => continue,
            Err(_) => {
                replication.retry_later(&answer.tp, state.leader_epoch, now_ms);
                continue;
            }
        };
        match truncate_for(&partition, &answer).await {
            Ok(next) => replication.set_phase(&answer.tp, state.leader_epoch, next),
            Err(error) => {
                tracing::warn!(topic = &*answer.tp.topic, partition = answer.tp.partition, %error, "truncation failed");
                replication.retry_later(&answer.tp, state.leader_epoch, now_ms);
            }
        }
    }
}

/// Cuts `partition` where the leader's answer says it diverges; returns the phase that follows
/// (another question when the leader answered an older epoch than ours).
async fn truncate_for(
    partition: &Rc<Partition>,
    answer: &EpochAnswer,
) -> Result<Phase, laminar_engine::partition::LogError> {
    let ours = partition
        .leader_epochs()
        .last()
        .map_or(LeaderEpoch::UNKNOWN, |e| e.epoch);
    let end = partition.log_end_offset();
    let (cut, next) = if answer.end_offset < Offset::ZERO {
        // The leader has no epoch up to ours: only what was committed is common.
        (partition.high_watermark(), Phase::Fetching)
    } else if answer.leader_epoch == ours {
        (answer.end_offset, Phase::Fetching)
    } else if answer.leader_epoch < ours {
        let (_, our_end) = partition.end_offset_for(answer.leader_epoch);
        (
            answer.end_offset.min(our_end.max(Offset::ZERO)),
            Phase::Truncating,
        )
    } else {
        // A leader answers the largest epoch up to the asked one: this is not an answer.
        return Ok(Phase::Truncating);
    };
    if cut < end {
        let kept = partition.truncate_to(cut.max(Offset::ZERO)).await?;
        tracing::info!(
            dir_end = %end,
            %kept,
            leader_epoch = answer.leader_epoch.get(),
            "follower truncated"
        );
    }
    Ok(next)
}

/// Appends what the leader sent, durably as configured, and takes its high watermark.
pub async fn apply_fetched(ctx: &Rc<BrokerCtx>, source: NodeId, parts: Vec<FetchedPart>) {
    let Some(replication) = ctx.state.replication.as_ref() else {
        return;
    };
    for part in parts {
        let Some(state) = replication.following(&part.tp, source, Phase::Fetching) else {
            continue;
        };
        let now_ms = crate::clock::now_ms();
        if part.error_code != 0 {
            note_fetch_error(ctx, &part, &state, now_ms);
            continue;
        }
        if ctx.state.replication_throttled(ThrottleSide::Follower, &part.tp) {
            replication
                .follower_throttle
                .spend(part.records.len(), Instant::now());
        }
        if let Err(error) = append_fetched(ctx, &part).await {
            tracing::warn!(topic = &*part.tp.topic, partition = part.tp.partition, %error, "follower append failed");
            replication.set_phase(&part.tp, state.leader_epoch, Phase::Truncating);
            replication.retry_later(&part.tp, state.leader_epoch, now_ms);
        }
    }
}

fn note_fetch_error(ctx: &Rc<BrokerCtx>, part: &FetchedPart, state: &FollowState, now_ms: i64) {
    let Some(replication) = ctx.state.replication.as_ref() else {
        return;
    };
    if part.error_code == ResponseError::OffsetOutOfRange.code() {
        // Below the leader's log start, or past its end: find out which.
        tracing::warn!(
            topic = &*part.tp.topic,
            partition = part.tp.partition,
            "follower fetch out of range"
        );
        replication.set_phase(&part.tp, state.leader_epoch, Phase::OutOfRange);
        return;
    }
    replication.retry_later(&part.tp, state.leader_epoch, now_ms);
}

/// Appends the whole batches of one answer (a trailing partial batch waits for the next
/// fetch), fdatasyncs them when `laminar.fsync=always` (the next fetch tells the leader they
/// are here), then takes the leader's high watermark and log start.
async fn append_fetched(ctx: &Rc<BrokerCtx>, part: &FetchedPart) -> anyhow::Result<()> {
    let whole =
        laminar_protocol::records::whole_batches_len(&part.records).map_err(|e| anyhow::anyhow!("{e}"))?;
    let partition = if whole > 0 {
        let partition = ctx.state.replica_partition(&part.tp, OpenMode::Create).await?;
        let partition = partition.ok_or_else(|| anyhow::anyhow!("replica partition not opened"))?;
        let info = partition.append_as_follower(part.records.slice(..whole)).await?;
        crate::maintenance::sync_rolled_segment(&part.tp, &partition);
        if ctx.state.shared.config.laminar_fsync == FsyncSetting::Always {
            partition.wait_durable(info.last_offset).await?;
        }
        Some(partition)
    } else {
        ctx.state.replica_partition(&part.tp, OpenMode::IfWritten).await?
    };
    let Some(partition) = partition else {
        return Ok(());
    };
    let high_watermark = part.high_watermark.min(partition.log_end_offset());
    if high_watermark > partition.high_watermark() {
        partition.set_high_watermark(high_watermark);
        if let Some(replication) = &ctx.state.replication {
            replication.high_watermarks.report(&part.tp, high_watermark);
        }
    }
    let leader_start = part.log_start_offset.min(partition.high_watermark());
    if leader_start > partition.log_start_offset() {
        partition.delete_records_before(leader_start).await?;
    }
    Ok(())
}

/// Applies the leader's log starts for partitions whose fetch was out of range: a log that ends
/// below the leader's start starts again there (Kafka's "truncate fully and start at"); one
/// that does not is past the leader's end, and truncation by leader epoch sorts it out.
pub async fn apply_starts(ctx: &Rc<BrokerCtx>, source: NodeId, starts: Vec<LeaderStart>) {
    let Some(replication) = ctx.state.replication.as_ref() else {
        return;
    };
    for start in starts {
        let Some(state) = replication.following(&start.tp, source, Phase::OutOfRange) else {
            continue;
        };
        let now_ms = crate::clock::now_ms();
        let Ok(leader_start) = start.log_start_offset else {
            replication.retry_later(&start.tp, state.leader_epoch, now_ms);
            continue;
        };
        match start_at_or_truncate(ctx, &start.tp, leader_start).await {
            Ok(next) => replication.set_phase(&start.tp, state.leader_epoch, next),
            Err(error) => {
                tracing::warn!(topic = &*start.tp.topic, partition = start.tp.partition, %error, "cannot start again at the leader's log start");
                replication.retry_later(&start.tp, state.leader_epoch, now_ms);
            }
        }
    }
}

async fn start_at_or_truncate(
    ctx: &Rc<BrokerCtx>,
    tp: &TopicPartition,
    leader_start: Offset,
) -> anyhow::Result<Phase> {
    let partition = ctx.state.replica_partition(tp, OpenMode::Create).await?;
    let partition = partition.ok_or_else(|| anyhow::anyhow!("replica partition not opened"))?;
    if partition.log_end_offset() < leader_start {
        partition.start_again_at(leader_start).await?;
        return Ok(Phase::Fetching);
    }
    Ok(Phase::Truncating)
}
