//! Group state on disk: records appended to the group's `__consumer_offsets` partition, the
//! replay that rebuilds a shard's groups and offsets at start, and the timer task that applies
//! session and rebalance deadlines.

use laminar_model::{LeaderEpoch, Offset};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use futures::future::{select, Either};
use kafka_protocol::error::ResponseError;
use laminar_engine::log::batch::BatchHeader;
use laminar_engine::metadata::{MetadataError, MetadataStore};
use laminar_engine::partition::{AppendInfo, LogError, Partition};
use laminar_engine::shard::shard_of_partition;

use super::coordinator::Coordination;
use super::records::{decode_replayed, encode_batch, encode_txn_batch, GroupRecord, OffsetKey, OffsetValue};
use super::OFFSETS_TOPIC;
use crate::broker::{BrokerCtx, PartitionAccessError, TopicPartition};
use crate::clock::now_ms;
use crate::config::{BrokerConfig, FsyncSetting};

/// Kafka's `offsets.topic.segment.bytes` default.
const OFFSETS_SEGMENT_BYTES: &str = "104857600";
/// Bytes read per step while replaying.
const REPLAY_READ_BYTES: usize = 1 << 20;

/// Creates `__consumer_offsets` if it does not exist; returns its partition count (an existing
/// topic keeps its count, as in Kafka, so that no group changes home).
pub fn ensure_offsets_topic(metadata: &MetadataStore, config: &BrokerConfig) -> anyhow::Result<i32> {
    if let Some(topic) = metadata.current().get(OFFSETS_TOPIC) {
        return Ok(topic.partition_count);
    }
    let configs = offsets_topic_configs();
    let partitions = config.offsets_topic_num_partitions;
    match metadata.create_topic(OFFSETS_TOPIC, partitions, 1, configs) {
        Ok(topic) => {
            tracing::info!(partitions, "created {OFFSETS_TOPIC}");
            Ok(topic.partition_count)
        }
        Err(MetadataError::TopicAlreadyExists(_)) => metadata
            .current()
            .get(OFFSETS_TOPIC)
            .map(|t| t.partition_count)
            .ok_or_else(|| anyhow::anyhow!("{OFFSETS_TOPIC} vanished while being created")),
        Err(e) => Err(anyhow::anyhow!("cannot create {OFFSETS_TOPIC}: {e}")),
    }
}

/// `__consumer_offsets`' overrides. Compact only: every group's latest records stay
/// (retention.ms does not apply), older ones go at each compaction pass.
pub fn offsets_topic_configs() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("segment.bytes".to_string(), OFFSETS_SEGMENT_BYTES.to_string()),
    ])
}

fn offsets_partition(partition: i32) -> TopicPartition {
    TopicPartition {
        topic: OFFSETS_TOPIC.into(),
        partition,
    }
}

/// Appends `records` as one batch to `__consumer_offsets` partition `partition` (which this
/// shard owns) and returns once they are as durable as acks=all makes produced data.
pub async fn append(
    ctx: &Rc<BrokerCtx>,
    partition: i32,
    records: &[GroupRecord],
) -> Result<(), ResponseError> {
    let (log, info) = append_batch(ctx, partition, records).await?;
    wait_committed(ctx, partition, &log, info.last_offset).await
}

/// Appends `records` as [`append`] does, calls `appended` once they are in the log, and
/// returns once they are committed. For records whose state the coordinator already holds
/// (consumer groups): nothing is applied.
pub async fn append_then_wait(
    ctx: &Rc<BrokerCtx>,
    partition: i32,
    records: &[GroupRecord],
    appended: impl FnOnce(),
) -> Result<(), ResponseError> {
    let batch = append_batch(ctx, partition, records).await;
    appended();
    let (log, info) = batch?;
    wait_committed(ctx, partition, &log, info.last_offset).await
}

/// Appends `records` as [`append`] does, calls `appended` once they are in the log, and
/// applies them to the coordinator in log order once committed (`GroupCoordinator::settle`).
/// Between `appended` and the answer, the request's connection handles its next requests,
/// and commits that arrive meanwhile share the fdatasync.
pub async fn append_and_apply(
    ctx: &Rc<BrokerCtx>,
    partition: i32,
    records: Vec<GroupRecord>,
    appended: impl FnOnce(),
) -> Result<(), ResponseError> {
    let batch = append_batch(ctx, partition, &records).await;
    appended();
    let (log, info) = batch?;
    let ticket = ctx.state.groups.await_commit(partition, info.base_offset);
    // Settled by a task of its own: a request dropped while it waits (its connection closed)
    // must not leave the ticket unsettled, which would hold back every later batch of the
    // partition from being applied.
    let (done, answer) = futures::channel::oneshot::channel();
    let settling = ctx.clone();
    glommio::spawn_local(async move {
        let committed = wait_committed(&settling, partition, &log, info.last_offset).await;
        settling
            .state
            .groups
            .settle(ticket, committed.is_ok().then_some(records));
        let _ = done.send(committed);
    })
    .detach();
    answer.await.unwrap_or(Err(ResponseError::RequestTimedOut))
}

/// Appends the offsets a transaction of `producer` (id, epoch) commits as one transactional
/// batch, calls `appended` once it is in the log, and keeps them pending from then on (until
/// the producer's marker: [`super::transactions`]). Returns once the batch is committed; one
/// that never is no longer holds its offsets pending.
pub async fn append_txn_offsets(
    ctx: &Rc<BrokerCtx>,
    partition: i32,
    producer: (i64, i16),
    offsets: Vec<(OffsetKey, OffsetValue)>,
    appended: impl FnOnce(),
) -> Result<(), ResponseError> {
    let now = now_ms();
    let records: Vec<GroupRecord> = offsets
        .iter()
        .map(|(key, value)| GroupRecord::Offset(key.clone(), Some(value.clone())))
        .collect();
    let batch = encode_txn_batch(&records, producer, now).map_err(unencodable);
    let batch = match batch {
        Ok(batch) => append_encoded(ctx, partition, batch, true).await,
        Err(error) => Err(error),
    };
    // Pending from the moment the batch is in the log, before the connection's next request.
    let added = batch.map(|(log, info)| {
        let groups = &ctx.state.groups;
        let ticket = groups.add_txn_batch(partition, producer.0, info.base_offset, offsets);
        (log, info, ticket)
    });
    appended();
    let (log, info, ticket) = added?;
    // Waited for by a task of its own, as in `append_and_apply`: a dropped request must still
    // release the offsets of a batch that never becomes committed.
    let (done, answer) = futures::channel::oneshot::channel();
    let waiting = ctx.clone();
    glommio::spawn_local(async move {
        let committed = wait_committed(&waiting, partition, &log, info.last_offset).await;
        if committed.is_err() {
            waiting.state.groups.abandon_txn_batch(ticket);
        }
        let _ = done.send(committed);
    })
    .detach();
    answer.await.unwrap_or(Err(ResponseError::RequestTimedOut))
}

fn unencodable(error: super::records::RecordError) -> ResponseError {
    tracing::error!(%error, "cannot encode group records");
    ResponseError::UnknownServerError
}

/// Appends `records` as one batch, without waiting for it to be durable.
async fn append_batch(
    ctx: &Rc<BrokerCtx>,
    partition: i32,
    records: &[GroupRecord],
) -> Result<(Rc<Partition>, AppendInfo), ResponseError> {
    let batch = encode_batch(records, now_ms()).map_err(unencodable)?;
    append_encoded(ctx, partition, batch, false).await
}

/// Appends an encoded batch (`transactional`: a coordinator's transactional write, which the
/// partition takes without sequence checks), without waiting for it to be durable.
async fn append_encoded(
    ctx: &Rc<BrokerCtx>,
    partition: i32,
    batch: bytes::Bytes,
    transactional: bool,
) -> Result<(Rc<Partition>, AppendInfo), ResponseError> {
    let now = now_ms();
    let tp = offsets_partition(partition);
    let appended = async {
        let log = ctx.state.partition(&tp).await?;
        let info = match transactional {
            true => log.append_from_coordinator(batch, now).await?,
            false => log.append(batch, now).await?,
        };
        Ok::<_, PartitionAccessError>((log, info))
    };
    let (log, info) = appended.await.map_err(|e| refused(partition, e))?;
    crate::maintenance::sync_rolled_segment(&tp, &log);
    if let Some(replication) = &ctx.state.replication {
        replication.leader_appended(&tp, &log);
    }
    Ok((log, info))
}

/// Waits until the batch ending at `last_offset` is durable (`laminar.fsync=always`) and, in a
/// cluster, on every in-sync replica (Kafka's offsets.commit.required.acks=-1).
async fn wait_committed(
    ctx: &Rc<BrokerCtx>,
    partition: i32,
    log: &Rc<Partition>,
    last_offset: Offset,
) -> Result<(), ResponseError> {
    let committed = async {
        if ctx.state.shared.config.laminar_fsync == FsyncSetting::Always {
            log.wait_durable(last_offset).await?;
        }
        if let Some(replication) = &ctx.state.replication {
            let tp = offsets_partition(partition);
            let min_isr = ctx.state.shared.min_insync_replicas(OFFSETS_TOPIC);
            replication
                .wait_replicated(&tp, log, (last_offset, min_isr), OFFSETS_COMMIT_TIMEOUT)
                .await?;
        }
        Ok::<_, PartitionAccessError>(())
    };
    committed.await.map_err(|e| refused(partition, e))
}

/// What a group request that cannot write its records answers, logged.
fn refused(partition: i32, error: PartitionAccessError) -> ResponseError {
    tracing::error!(partition, %error, "cannot write to {OFFSETS_TOPIC}");
    match error {
        PartitionAccessError::Log(LogError::MessageTooLarge { .. }) => ResponseError::InvalidCommitOffsetSize,
        // A transactional write of a producer a newer epoch fenced.
        PartitionAccessError::Log(LogError::InvalidProducerEpoch { .. }) => {
            ResponseError::InvalidProducerEpoch
        }
        // A full log dir: retriable, Kafka's answer when the offsets topic's append meets a
        // storage error.
        PartitionAccessError::Log(LogError::Exhausted(_)) => ResponseError::NotCoordinator,
        PartitionAccessError::Log(_) => ResponseError::UnknownServerError,
        // Leadership of the group's partition moved: the client finds the new coordinator.
        PartitionAccessError::NotLeader => ResponseError::NotCoordinator,
        PartitionAccessError::Refused(ResponseError::RequestTimedOut) => ResponseError::RequestTimedOut,
        PartitionAccessError::UnknownTopicOrPartition
        | PartitionAccessError::NamedTwice
        | PartitionAccessError::Refused(_)
        | PartitionAccessError::ShardGone(_) => ResponseError::CoordinatorNotAvailable,
    }
}

/// Kafka's `offsets.commit.timeout.ms`: how long a commit waits for the in-sync replicas.
const OFFSETS_COMMIT_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(5_000);

/// Writes the group's metadata record if the group changed since it was last written.
pub async fn persist_group(ctx: &Rc<BrokerCtx>, partition: i32, group_id: &str) {
    if let Some(record) = ctx.state.groups.take_group_record(group_id) {
        // The record only restores the generation after a restart; a failure is logged in
        // `append` and costs nothing else.
        let _ = append(ctx, partition, &[record]).await;
    }
}

/// Cluster mode: whether this broker coordinates the groups of `partition` now — it leads
/// the partition (NOT_COORDINATOR otherwise) and has loaded its records at this leader epoch
/// (COORDINATOR_LOAD_IN_PROGRESS while it loads; the first request after a leadership change
/// starts the load if the replication task has not yet).
pub fn check_coordinating(ctx: &Rc<BrokerCtx>, partition: i32) -> Result<(), ResponseError> {
    let Some(link) = &ctx.state.shared.cluster else {
        return Ok(());
    };
    // Group answers come from memory: a coordinator that may have been replaced must not
    // give them (docs/ARCHITECTURE.md, "Faults between nodes").
    if !link.session.is_held_for_reads() {
        return Err(ResponseError::NotCoordinator);
    }
    let image = link.image();
    let state = image.metadata.partition_by_name(OFFSETS_TOPIC, partition);
    let Some(state) = state.filter(|s| s.leader == link.node_id) else {
        return Err(ResponseError::NotCoordinator);
    };
    match ctx.state.groups.coordination(partition, state.leader_epoch) {
        Coordination::Ready => Ok(()),
        Coordination::Loading => Err(ResponseError::CoordinatorLoadInProgress),
        Coordination::NeedsLoad => {
            start_load(ctx, partition, state.leader_epoch);
            Err(ResponseError::CoordinatorLoadInProgress)
        }
    }
}

/// Cluster mode, after each metadata change: loads the groups of the `__consumer_offsets`
/// partitions this shard's broker came to lead, and drops those of partitions it stopped
/// leading. The groups and committed offsets move with the leadership: the new leader's
/// replica has every committed record.
pub fn follow_leadership(ctx: &Rc<BrokerCtx>, image: &laminar_controller::MetadataImage) {
    let Some(link) = &ctx.state.shared.cluster else {
        return;
    };
    let groups = &ctx.state.groups;
    let led = |partition: i32| {
        image
            .metadata
            .partition_by_name(OFFSETS_TOPIC, partition)
            .filter(|s| s.leader == link.node_id)
            .map(|s| s.leader_epoch)
    };
    for partition in groups.coordinated_partitions() {
        if led(partition).is_none() {
            groups.stop_coordinating(partition);
            tracing::info!(partition, "no longer coordinating the groups of {OFFSETS_TOPIC}");
        }
    }
    for partition in 0..groups.offsets_partition_count {
        if shard_of_partition(OFFSETS_TOPIC, partition, ctx.shard_count()) != ctx.id() {
            continue;
        }
        if let Some(epoch) = led(partition) {
            if groups.coordination(partition, epoch) == Coordination::NeedsLoad {
                start_load(ctx, partition, epoch);
            }
        }
    }
}

/// Replays `partition` at `leader_epoch` into the coordinator from a task of its own.
fn start_load(ctx: &Rc<BrokerCtx>, partition: i32, leader_epoch: LeaderEpoch) {
    ctx.state.groups.begin_load(partition, leader_epoch);
    let ctx = ctx.clone();
    glommio::spawn_local(async move {
        let replayed = replay_partition(&ctx, partition).await;
        match &replayed {
            Ok(records) => tracing::info!(
                partition,
                records,
                leader_epoch = leader_epoch.get(),
                "loaded group records"
            ),
            Err(error) => {
                tracing::warn!(partition, %error, "cannot load group records; retried at the next request")
            }
        }
        ctx.state
            .groups
            .end_load(partition, leader_epoch, replayed.is_ok());
    })
    .detach();
}

/// Replays every `__consumer_offsets` partition this shard owns into its coordinator (single
/// node). In a cluster the partitions are loaded as this broker comes to lead them
/// (`follow_leadership`).
pub async fn load(ctx: &Rc<BrokerCtx>) {
    let coordinator = &ctx.state.groups;
    if ctx.state.shared.cluster.is_some() {
        coordinator.set_loaded();
        return;
    }
    for partition in 0..coordinator.offsets_partition_count {
        if shard_of_partition(OFFSETS_TOPIC, partition, ctx.shard_count()) != ctx.id() {
            continue;
        }
        match replay_partition(ctx, partition).await {
            // Cluster mode: another broker leads (and coordinates) this partition's groups.
            Ok(0) | Err(PartitionAccessError::NotLeader) => {}
            Ok(records) => tracing::info!(partition, records, "loaded group records"),
            Err(error) => tracing::error!(partition, %error, "cannot load group records"),
        }
    }
    coordinator.set_loaded();
}

async fn replay_partition(ctx: &Rc<BrokerCtx>, partition: i32) -> Result<usize, PartitionAccessError> {
    let log = ctx.state.partition(&offsets_partition(partition)).await?;
    let mut offset = log.log_start_offset();
    let mut applied = 0;
    while offset < log.log_end_offset() {
        let read = log.read(offset, REPLAY_READ_BYTES, true).await?;
        if read.data.is_empty() {
            break;
        }
        for batch in read.data {
            let header =
                BatchHeader::parse(&batch).map_err(|e| PartitionAccessError::Log(LogError::Batch(e)))?;
            match decode_replayed(&header, batch) {
                Ok(replayed) => {
                    applied += replayed.len();
                    let position = Offset::new(header.base_offset);
                    ctx.state.groups.replay(partition, position, replayed);
                }
                Err(error) => tracing::warn!(partition, %offset, %error, "skipping unreadable group batch"),
            }
            offset = offset.max(Offset::new(header.next_offset()));
        }
    }
    let topics = super::consumer::subscription::BrokerTopics::of(&ctx.state.shared);
    let groups = &ctx.state.groups;
    groups.finish_consumer_replay(partition, &topics, groups.now_ms());
    Ok(applied)
}

/// Applies session and rebalance deadlines as they come due: sleeps until the earliest one, or
/// until a request changes a group (which may bring a deadline forward).
pub async fn run_timers(ctx: Rc<BrokerCtx>) {
    let coordinator = &ctx.state.groups;
    loop {
        let changed = coordinator.changed.listen();
        let wait = coordinator
            .next_deadline_ms()
            .map(|t| Duration::from_millis((t - coordinator.now_ms()).max(0) as u64));
        match wait {
            Some(wait) if wait.is_zero() => {}
            Some(wait) => {
                let sleep = std::pin::pin!(glommio::timer::sleep(wait));
                if let Either::Left(_) = select(changed, sleep).await {
                    continue;
                }
            }
            None => {
                changed.await;
                continue;
            }
        }
        let topics = super::consumer::subscription::BrokerTopics::of(&ctx.state.shared);
        for (group_id, records) in coordinator.tick_consumer_groups(&topics, coordinator.now_ms()) {
            let (_, partition) = super::coordinator_of(&ctx, &group_id);
            let ctx = ctx.clone();
            glommio::spawn_local(async move {
                let _ = append(&ctx, partition, &records).await;
            })
            .detach();
        }
        for group_id in coordinator.tick_all(coordinator.now_ms()) {
            let (_, partition) = super::coordinator_of(&ctx, &group_id);
            let record = coordinator.with_group(&group_id, false, |g| {
                super::coordinator::group_record(g, now_ms())
            });
            if let Some(record) = record {
                let ctx = ctx.clone();
                glommio::spawn_local(async move {
                    let _ = append(&ctx, partition, &[record]).await;
                })
                .detach();
            }
        }
    }
}
