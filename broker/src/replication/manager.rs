//! Each shard's replication task in cluster mode: on every metadata change it takes up the
//! roles the metadata gives this broker for the shard's partitions (leader: track followers;
//! follower: truncate, then fetch from the leader) and starts the fetchers that needs; on a
//! timer it shrinks ISRs of followers that fell behind and writes the high-watermark
//! checkpoint. ISR changes go to the controller (AlterPartition), whose answer is the truth.

use laminar_model::{NodeId, Offset, UnixMillis};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{select, Either};
use laminar_controller::api::AlterPartitionRequest;
use laminar_controller::{MetadataImage, PartitionState, Refusal};
use laminar_engine::partition::high_watermarks;
use laminar_engine::shard::shard_of_partition;

use super::IsrChange;
use crate::broker::{BrokerCtx, TopicPartition};
use crate::quorum::ClusterLink;

/// How long a leader waits for the controller's answer to an ISR change before it may ask again.
const ISR_CHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs until the broker stops.
pub async fn run(ctx: Rc<BrokerCtx>, link: Arc<ClusterLink>) {
    let Some(replication) = ctx.state.replication.as_ref() else {
        return;
    };
    load_checkpoint(&ctx).await;
    let tick = Duration::from_millis(
        (replication.settings.lag_time_max_ms / 2)
            .min(replication.settings.high_watermark_checkpoint_interval_ms)
            .clamp(100, 5_000),
    );
    let checkpoint_every = Duration::from_millis(replication.settings.high_watermark_checkpoint_interval_ms);
    let mut checkpointed = Instant::now();
    let mut applied: Option<Arc<MetadataImage>> = None;
    while !ctx.state.shared.shutdown.is_triggered() {
        let changed = link.published();
        let image = link.image();
        if applied.as_ref().is_none_or(|a| !Arc::ptr_eq(a, &image)) {
            reconcile(&ctx, &image).await;
            crate::group::store::follow_leadership(&ctx, &image);
            crate::transactions::store::follow_leadership(&ctx, &image);
            applied = Some(image);
        }
        check_isr(&ctx);
        if checkpointed.elapsed() >= checkpoint_every {
            checkpoint(&ctx).await;
            checkpointed = Instant::now();
        }
        let nap = std::pin::pin!(glommio::timer::sleep(tick));
        let stop = std::pin::pin!(ctx.state.shared.shutdown.wait());
        if let Either::Right(_) = select(select(changed, nap), stop).await {
            break;
        }
    }
    checkpoint(&ctx).await;
}

/// Takes up this shard's share of the checkpointed high watermarks (every shard's file is read:
/// the shard count may have changed since they were written).
async fn load_checkpoint(ctx: &Rc<BrokerCtx>) {
    let Some(replication) = ctx.state.replication.as_ref() else {
        return;
    };
    let partitions = &ctx.state.partitions;
    match high_watermarks::read_log_dir(&**partitions.storage(), partitions.log_dir()).await {
        Ok(entries) => {
            for (tp, hw) in entries {
                if shard_of_partition(&tp.topic, tp.partition, ctx.shard_count()) == ctx.id() {
                    replication.high_watermarks.report(&tp, hw);
                }
            }
        }
        Err(error) => {
            tracing::warn!(%error, "replication-offset-checkpoint unreadable; high watermarks start at 0")
        }
    }
}

async fn checkpoint(ctx: &Rc<BrokerCtx>) {
    let Some(replication) = ctx.state.replication.as_ref() else {
        return;
    };
    let storage = ctx.state.partitions.storage();
    if let Err(error) = replication.high_watermarks.checkpoint(&**storage).await {
        tracing::warn!(%error, "replication-offset-checkpoint not written");
    }
}

/// The roles `image` gives this broker for this shard's partitions, taken up.
async fn reconcile(ctx: &Rc<BrokerCtx>, image: &MetadataImage) {
    let Some(replication) = ctx.state.replication.as_ref() else {
        return;
    };
    let node_id = replication.node_id;
    let unfenced = image.metadata.brokers.values().filter(|b| !b.fenced);
    replication.set_unfenced(unfenced.map(|b| b.broker_id));
    let mut assigned: HashMap<TopicPartition, PartitionState> = HashMap::new();
    for topic in image.metadata.topics.values() {
        let name: std::sync::Arc<str> = topic.name.as_str().into();
        for (index, state) in &topic.partitions {
            let owned = shard_of_partition(&topic.name, *index, ctx.shard_count()) == ctx.id();
            if owned && state.replicas.contains(&node_id) {
                assigned.insert(TopicPartition::new(name.clone(), *index), state.clone());
            }
        }
    }
    let now = UnixMillis::now();
    for (tp, state) in &assigned {
        if state.leader != node_id {
            replication.follow(tp, state);
        } else if !replication.update_leadership(tp, state, now) {
            lead(ctx, tp, state, now).await;
        }
    }
    for tp in replication.forget_unassigned(&assigned) {
        delete_moved_replica(ctx, image, &tp.topic, tp.partition).await;
    }
    for source in replication.sources_without_fetcher() {
        match super::fetcher::start(ctx, source) {
            Ok(()) => replication.fetcher_started(source),
            Err(error) => {
                tracing::error!(source = source.get(), %error, "cannot start a replica fetcher thread")
            }
        }
    }
}

/// Deletes this broker's replica of a partition a reassignment moved off it (its topic still
/// exists without this broker among its replicas). Only a partition this process had a role
/// for gets here, so an image not yet caught up at start deletes nothing; deleted topics are
/// shard 0's (`quorum::view::apply_topic_changes`).
async fn delete_moved_replica(ctx: &Rc<BrokerCtx>, image: &MetadataImage, topic: &str, partition: i32) {
    let Some(state) = image.metadata.partition_by_name(topic, partition) else {
        return;
    };
    let node_id = ctx.state.replication.as_ref().map_or(NodeId::NONE, |r| r.node_id);
    if state.replicas.contains(&node_id) {
        return;
    }
    match ctx.state.partitions.remove(topic, partition).await {
        Ok(()) => tracing::info!(topic, partition, "deleted the replica moved off this broker"),
        Err(error) => {
            tracing::error!(topic, partition, %error, "cannot delete a replica moved off this broker")
        }
    }
}

/// Begins leading `tp` in the epoch of `state`, from its log end.
async fn lead(ctx: &Rc<BrokerCtx>, tp: &TopicPartition, state: &PartitionState, now: UnixMillis) {
    let Some(replication) = ctx.state.replication.as_ref() else {
        return;
    };
    let partition = match ctx.state.partition_to_read(tp).await {
        Ok(partition) => partition,
        // The metadata moved on meanwhile (the next change brings it), or the partition
        // cannot be opened (its error is reported where it is used).
        Err(_) => return,
    };
    let log_end = partition.as_ref().map_or(Offset::ZERO, |p| p.log_end_offset());
    replication.become_leader(tp, state, log_end, now);
    if let Some(partition) = partition {
        replication.leader_appended(tp, &partition);
    }
}

/// Asks for the ISR changes due (followers behind for `replica.lag.time.max.ms`).
fn check_isr(ctx: &Rc<BrokerCtx>) {
    let Some(replication) = ctx.state.replication.as_ref() else {
        return;
    };
    let now = UnixMillis::now();
    for tp in replication.led_partitions() {
        let partition = ctx.state.partitions.get(&tp.topic, tp.partition);
        if let Some(change) = replication.advance_led(&tp, partition.as_ref(), now) {
            send_isr_change(ctx, change);
        }
    }
}

/// Sends an ISR change to the controller from a task of its own; applies the answer.
pub fn send_isr_change(ctx: &Rc<BrokerCtx>, change: IsrChange) {
    let Some(link) = ctx.state.shared.cluster.clone() else {
        return;
    };
    let ctx = ctx.clone();
    glommio::spawn_local(async move {
        let Some(replication) = ctx.state.replication.as_ref() else {
            return;
        };
        let image = link.image();
        let Some(topic) = image.metadata.topic_by_name(&change.tp.topic) else {
            replication.isr_change_failed(&change.tp, change.leader_epoch, UnixMillis::now(), false);
            return;
        };
        let request = AlterPartitionRequest {
            broker_id: replication.node_id,
            broker_epoch: link.broker_epoch(),
            topic_id: topic.topic_id,
            partition: change.tp.partition,
            leader_epoch: change.leader_epoch,
            partition_epoch: change.partition_epoch,
            new_isr: change.new_isr.clone(),
        };
        // Bounded: an answer that never comes (a controller lost mid-request) must not leave
        // the change pending for good; the next check asks again.
        let answer = std::pin::pin!(link.handle.alter_partition(request));
        let timeout = std::pin::pin!(glommio::timer::sleep(ISR_CHANGE_TIMEOUT));
        let answered = match select(answer, timeout).await {
            Either::Left((answered, _)) => answered,
            Either::Right(_) => Err(Refusal::RequestTimedOut),
        };
        match answered {
            Ok(result) => {
                tracing::info!(topic = &*change.tp.topic, partition = change.tp.partition, isr = ?result.isr, "ISR changed");
                replication.isr_committed(&change.tp, &result);
                let partition = ctx.state.partitions.get(&change.tp.topic, change.tp.partition);
                if let Some(next) = replication.advance_led(&change.tp, partition.as_ref(), UnixMillis::now()) {
                    send_isr_change(&ctx, next);
                }
            }
            Err(error) => {
                let outcome_unknown = error.may_have_taken_effect();
                tracing::info!(topic = &*change.tp.topic, partition = change.tp.partition, %error, outcome_unknown, "ISR change refused");
                replication.isr_change_failed(&change.tp, change.leader_epoch, UnixMillis::now(), outcome_unknown);
            }
        }
    })
    .detach();
}
