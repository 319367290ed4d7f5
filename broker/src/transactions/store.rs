//! Transaction values on disk: writing an id's next value to its `__transaction_state`
//! partition, loading a partition's ids (at start on a single node, when this broker comes to
//! lead the partition in a cluster), and the timer that completes prepared transactions and
//! aborts those past their timeout.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use laminar_engine::log::batch::BatchHeader;
use laminar_engine::partition::{LogError, TxnResult};
use laminar_engine::shard::shard_of_partition;
use laminar_model::{LeaderEpoch, Offset};

use super::coordinator::Load;
use super::records::{decode_batch, encode_batch, TxnRecord, TxnState, TxnValue};
use super::{markers, state, TRANSACTION_TOPIC};
use crate::broker::{BrokerCtx, PartitionAccessError, TopicPartition};
use crate::clock::now_ms;
use crate::committed_append::append_committed;

/// Kafka's `transaction.state.log.segment.bytes` default.
const SEGMENT_BYTES: &str = "104857600";
/// Bytes read per step while loading.
const LOAD_READ_BYTES: usize = 1 << 20;
/// How long a value's write waits for the in-sync replicas (Kafka's
/// `transaction.state.log` writes use the request timeout; its default is 30 s).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the timer looks for transactions past their timeout, and prepared ones to finish
/// (Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms` is 10 s; ids are
/// few per shard, so a scan each second costs little and aborts promptly).
const TIMER_INTERVAL: Duration = Duration::from_secs(1);

fn state_partition(partition: i32) -> TopicPartition {
    TopicPartition {
        topic: TRANSACTION_TOPIC.into(),
        partition,
    }
}

/// `__transaction_state`'s overrides: compacted, every id's latest value stays.
pub fn topic_configs() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("segment.bytes".to_string(), SEGMENT_BYTES.to_string()),
    ])
}

/// The topic's partition count, if it exists.
pub fn partition_count(ctx: &BrokerCtx) -> Option<i32> {
    match &ctx.state.shared.cluster {
        Some(link) => {
            let image = link.image();
            let topic = image.metadata.topic_by_name(TRANSACTION_TOPIC)?;
            i32::try_from(topic.partitions.len()).ok().filter(|n| *n > 0)
        }
        None => Some(
            ctx.state
                .shared
                .metadata
                .current()
                .get(TRANSACTION_TOPIC)?
                .partition_count,
        ),
    }
}

/// Makes `__transaction_state` when a transactional producer first needs it (as Kafka does):
/// at once on a single node; through the quorum in a cluster, answering
/// COORDINATOR_NOT_AVAILABLE meanwhile (the client asks again).
pub async fn ensure_topic(ctx: &Rc<BrokerCtx>) -> Result<(), ResponseError> {
    if partition_count(ctx).is_some() {
        return Ok(());
    }
    let config = &ctx.state.shared.config;
    let partitions = config.transactions.state_log_num_partitions;
    let Some(link) = &ctx.state.shared.cluster else {
        let created =
            ctx.state
                .shared
                .metadata
                .create_topic(TRANSACTION_TOPIC, partitions, 1, topic_configs());
        return match created {
            Ok(_) | Err(laminar_engine::metadata::MetadataError::TopicAlreadyExists(_)) => Ok(()),
            Err(error) => {
                tracing::error!(%error, "cannot create {TRANSACTION_TOPIC}");
                Err(ResponseError::CoordinatorNotAvailable)
            }
        };
    };
    let inter_broker = crate::kafka_listener::inter_broker_name(config);
    let alive = crate::quorum::view::alive_brokers(&link.image().metadata, inter_broker).len();
    let replicas = usize::try_from(config.transactions.state_log_replication_factor).unwrap_or(1);
    let replicas = alive.clamp(1, replicas.max(1));
    let min_isr = usize::try_from(config.transactions.state_log_min_isr)
        .unwrap_or(1)
        .clamp(1, replicas);
    let mut configs = topic_configs();
    configs.insert("min.insync.replicas".into(), min_isr.to_string());
    let topic = laminar_controller::api::CreatableTopic {
        name: TRANSACTION_TOPIC.to_string(),
        num_partitions: partitions,
        replication_factor: i16::try_from(replicas).unwrap_or(1),
        configs,
        assignments: Vec::new(),
        topic_id: None,
    };
    match crate::quorum::admin::with_retries(|| link.handle.create_topics(vec![topic.clone()])).await {
        Ok(_) => tracing::info!(replicas, "created {TRANSACTION_TOPIC}"),
        Err(error) => tracing::warn!(%error, "cannot create {TRANSACTION_TOPIC} yet"),
    }
    Err(ResponseError::CoordinatorNotAvailable)
}

/// Whether this shard coordinates the ids of `partition` now: in a cluster it leads the
/// partition (NOT_COORDINATOR otherwise) with a lease that lets it answer from memory; and it
/// has loaded the partition at the current leader epoch (COORDINATOR_LOAD_IN_PROGRESS while
/// it loads; the first request starts a load if none has).
pub fn check_coordinating(ctx: &Rc<BrokerCtx>, partition: i32) -> Result<(), ResponseError> {
    let epoch = match &ctx.state.shared.cluster {
        None => LeaderEpoch::FIRST,
        Some(link) => {
            if !link.session.is_held_for_reads() {
                return Err(ResponseError::NotCoordinator);
            }
            let image = link.image();
            let state = image.metadata.partition_by_name(TRANSACTION_TOPIC, partition);
            let state = state.filter(|s| s.leader == link.node_id);
            state.ok_or(ResponseError::NotCoordinator)?.leader_epoch
        }
    };
    match ctx.state.transactions.load_state(partition) {
        Some(Load::Ready(ready)) if ready == epoch => Ok(()),
        Some(Load::Loading(loading)) if loading == epoch => Err(ResponseError::CoordinatorLoadInProgress),
        _ => {
            start_load(ctx, partition, epoch);
            Err(ResponseError::CoordinatorLoadInProgress)
        }
    }
}

/// Loads `partition` at `epoch` from a task of its own.
fn start_load(ctx: &Rc<BrokerCtx>, partition: i32, epoch: LeaderEpoch) {
    ctx.state.transactions.begin_load(partition, epoch);
    let ctx = ctx.clone();
    glommio::spawn_local(async move {
        let loaded = replay(&ctx, partition).await;
        match &loaded {
            Ok(records) => tracing::info!(partition, records, "loaded transaction records"),
            Err(error) => tracing::warn!(partition, %error, "cannot load transaction records; retried at the next request"),
        }
        ctx.state.transactions.end_load(partition, epoch, loaded.is_ok());
    })
    .detach();
}

async fn replay(ctx: &Rc<BrokerCtx>, partition: i32) -> Result<usize, PartitionAccessError> {
    let log = ctx.state.partition(&state_partition(partition)).await?;
    let mut offset = log.log_start_offset();
    let mut applied = 0;
    while offset < log.log_end_offset() {
        let read = log.read(offset, LOAD_READ_BYTES, true).await?;
        if read.data.is_empty() {
            break;
        }
        for batch in read.data {
            let header =
                BatchHeader::parse(&batch).map_err(|e| PartitionAccessError::Log(LogError::Batch(e)))?;
            match decode_batch(batch) {
                Ok(records) => {
                    applied += records.len();
                    records
                        .into_iter()
                        .for_each(|r| ctx.state.transactions.apply(partition, r));
                }
                Err(error) => {
                    tracing::warn!(partition, %offset, %error, "skipping unreadable transaction batch")
                }
            }
            offset = offset.max(Offset::new(header.next_offset()));
        }
    }
    Ok(applied)
}

/// Single node: loads the partitions of an existing `__transaction_state` this shard owns, so
/// that prepared transactions are completed without waiting for a client.
pub fn load_at_start(ctx: &Rc<BrokerCtx>) {
    if ctx.state.shared.cluster.is_some() {
        return;
    }
    for partition in 0..partition_count(ctx).unwrap_or(0) {
        if shard_of_partition(TRANSACTION_TOPIC, partition, ctx.shard_count()) == ctx.id() {
            start_load(ctx, partition, LeaderEpoch::FIRST);
        }
    }
}

/// Cluster mode, after each metadata change: loads the partitions this shard's broker came to
/// lead, and forgets the ids of those it stopped leading.
pub fn follow_leadership(ctx: &Rc<BrokerCtx>, image: &laminar_controller::MetadataImage) {
    let Some(link) = &ctx.state.shared.cluster else {
        return;
    };
    let led = |partition: i32| {
        image
            .metadata
            .partition_by_name(TRANSACTION_TOPIC, partition)
            .filter(|s| s.leader == link.node_id)
            .map(|s| s.leader_epoch)
    };
    let coordinator = &ctx.state.transactions;
    for partition in coordinator.loaded_partitions() {
        if led(partition).is_none() {
            coordinator.forget_partition(partition);
        }
    }
    let Some(topic) = image.metadata.topic_by_name(TRANSACTION_TOPIC) else {
        return;
    };
    for &partition in topic.partitions.keys() {
        if shard_of_partition(TRANSACTION_TOPIC, partition, ctx.shard_count()) != ctx.id() {
            continue;
        }
        let Some(epoch) = led(partition) else { continue };
        let current = coordinator.load_state(partition);
        if current != Some(Load::Ready(epoch)) && current != Some(Load::Loading(epoch)) {
            start_load(ctx, partition, epoch);
        }
    }
}

/// Writes `value` as `id`'s next value, which the caller claimed (`TxnCoordinator::claim`),
/// and releases the id: with the value once it is durable, with the old one otherwise.
pub async fn write(
    ctx: &Rc<BrokerCtx>,
    partition: i32,
    id: &str,
    value: TxnValue,
) -> Result<(), ResponseError> {
    let written = write_record(ctx, partition, id, Some(&value)).await;
    ctx.state
        .transactions
        .release(id, written.is_ok().then_some(value));
    written
}

async fn write_record(
    ctx: &Rc<BrokerCtx>,
    partition: i32,
    id: &str,
    value: Option<&TxnValue>,
) -> Result<(), ResponseError> {
    let now = now_ms();
    let record = TxnRecord {
        transactional_id: id.to_string(),
        value: value.cloned(),
    };
    let batch = encode_batch(&record, now).map_err(|error| {
        tracing::error!(%error, "cannot encode a transaction record");
        ResponseError::UnknownServerError
    })?;
    let tp = state_partition(partition);
    let appended = append_committed(
        ctx,
        &tp,
        |log| async move { log.append(batch, now).await },
        WRITE_TIMEOUT,
    );
    appended.await.map(drop).map_err(|error| {
        tracing::warn!(partition, %error, "cannot write to {TRANSACTION_TOPIC}");
        match error {
            PartitionAccessError::NotLeader => ResponseError::NotCoordinator,
            PartitionAccessError::Refused(ResponseError::RequestTimedOut) => ResponseError::RequestTimedOut,
            _ => ResponseError::CoordinatorNotAvailable,
        }
    })
}

/// Finishes the prepared transaction of `id` (claimed, `prepared` durable) from a task of its
/// own: its markers on every partition, then the Complete value. The id stays busy
/// throughout; should this coordinator lose the partition meanwhile, the next one finishes it.
pub fn complete_in_background(ctx: &Rc<BrokerCtx>, partition: i32, id: String, prepared: TxnValue) {
    let ctx = ctx.clone();
    glommio::spawn_local(async move {
        let result = match prepared.state {
            TxnState::PrepareCommit => TxnResult::Commit,
            _ => TxnResult::Abort,
        };
        let Some(epoch) = ctx.state.transactions.ready_epoch(partition) else {
            return ctx.state.transactions.release(&id, None);
        };
        if !markers::write_all(&ctx, (partition, epoch), &prepared, result).await {
            // The partition moved: its next coordinator completes the transaction.
            return ctx.state.transactions.release(&id, None);
        }
        let completed = state::complete(&prepared, now_ms());
        let coordinator = &ctx.state.transactions;
        loop {
            match write_record(&ctx, partition, &id, Some(&completed)).await {
                Ok(()) => {
                    let committed = result == TxnResult::Commit;
                    ctx.state.metrics.count_transaction_completed(committed);
                    return coordinator.release(&id, Some(completed));
                }
                Err(_) if coordinator.ready_epoch(partition) != Some(epoch) => {
                    return coordinator.release(&id, None)
                }
                Err(_) => glommio::timer::sleep(Duration::from_millis(500)).await,
            }
        }
    })
    .detach();
}

/// Each second: aborts transactions past their timeout (at a bumped epoch, fencing their
/// producer), finishes prepared ones a load found, and removes expired ids.
pub async fn run_timers(ctx: Rc<BrokerCtx>) {
    loop {
        glommio::timer::sleep(TIMER_INTERVAL).await;
        expire_ids(&ctx).await;
        let now = now_ms();
        let coordinator = &ctx.state.transactions;
        let due = coordinator.idle_ids_where(|v| {
            state::time_out(v, now).is_some()
                || matches!(v.state, TxnState::PrepareCommit | TxnState::PrepareAbort)
        });
        for (id, partition) in due {
            if coordinator.ready_epoch(partition).is_none() {
                continue;
            }
            let Some(current) = coordinator.value(&id) else {
                continue;
            };
            if !coordinator.claim(&id, partition) {
                continue;
            }
            let prepared = match state::time_out(&current, now) {
                Some(aborting) => {
                    tracing::info!(transactional_id = %id, "aborting a transaction past its timeout");
                    if write(&ctx, partition, &id, aborting.clone()).await.is_err() {
                        continue;
                    }
                    coordinator.claim(&id, partition);
                    aborting
                }
                None => current,
            };
            complete_in_background(&ctx, partition, id, prepared);
        }
    }
}

/// Writes the tombstone of every id past `transactional.id.expiration.ms`, then forgets it.
async fn expire_ids(ctx: &Rc<BrokerCtx>) {
    let (now, expiration_ms) = (now_ms(), ctx.state.shared.config.transactions.id_expiration_ms);
    let coordinator = &ctx.state.transactions;
    for (id, partition) in coordinator.idle_ids_where(|v| state::is_expired(v, now, expiration_ms)) {
        if coordinator.ready_epoch(partition).is_none() || !coordinator.claim(&id, partition) {
            continue;
        }
        match write_record(ctx, partition, &id, None).await {
            Ok(()) => {
                tracing::info!(transactional_id = %id, "transactional id expired");
                coordinator.forget(&id);
            }
            Err(_) => coordinator.release(&id, None),
        }
    }
}
