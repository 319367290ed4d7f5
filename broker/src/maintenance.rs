//! Per-shard background work: retention checks and compaction, expiring idle producer ids,
//! forgetting the quota rates of clients gone quiet,
//! giving back disk reserved ahead by partitions that went idle and, with
//! `laminar.fsync=interval:<ms>`, the periodic flush. Each shard looks after only the partitions it owns, those not opened since
//! the start included (see `open_for_retention`).

use std::rc::Rc;
use std::time::Duration;

use laminar_engine::partition::{LogError, Partition, CHECKPOINT_IDLE_MS};
use laminar_engine::shard::shard_of_partition;

use crate::broker::{BrokerCtx, PartitionAccessError, TopicPartition};
use crate::clock::now_ms;
use crate::config::FsyncSetting;

pub async fn run(ctx: Rc<BrokerCtx>) {
    let config = &ctx.state.shared.config;
    let retention_every = Duration::from_millis(config.log_retention_check_interval_ms.max(1) as u64);
    let flush_every = match config.laminar_fsync {
        FsyncSetting::IntervalMs(ms) => Some(Duration::from_millis(ms.max(1))),
        FsyncSetting::Always | FsyncSetting::Never => None,
    };
    let tick = flush_every
        .map_or(retention_every, |f| f.min(retention_every))
        .min(IDLE_CHECK_EVERY);
    let (mut since_retention, mut since_reservations) = (Duration::ZERO, Duration::ZERO);
    // The open partitions of each pass; emptied after it, its capacity kept (the idle pass
    // allocated a vector of every partition each time: half its CPU at 50 000 partitions).
    let mut open = Vec::new();
    let mut listed_single = ListedSingleSegment::default();
    loop {
        glommio::timer::sleep(tick).await;
        since_retention += tick;
        since_reservations += tick;
        if flush_every.is_some() {
            ctx.state.partitions.all_into(&mut open);
            flush_all(&ctx, &open).await;
            open.clear();
        }
        if since_reservations >= IDLE_CHECK_EVERY {
            since_reservations = Duration::ZERO;
            release_idle(&ctx).await;
            // Rates of clients gone quiet remember nothing: their memory comes back.
            ctx.state.shared.client_quotas.forget_idle();
        }
        if since_retention >= retention_every {
            since_retention = Duration::ZERO;
            ctx.state.partitions.all_into(&mut open);
            apply_retention(&ctx, &open, &mut listed_single).await;
            open.clear();
        }
    }
}

/// How often each shard looks for partitions that hold disk reserved ahead of appends they no
/// longer get (half of `segment::RESERVE_IDLE_MS`) or index entries nothing reads.
const IDLE_CHECK_EVERY: Duration = Duration::from_secs(5);

/// Gives back what partitions that went idle hold: the blocks reserved ahead of appends that no
/// longer come, and the index entries of segments nothing read or appended to over a whole
/// check period (a read brings them back); and checkpoints those written but idle for
/// `CHECKPOINT_IDLE_MS`, so that a crash recovers only partitions written lately and a clean
/// shutdown has little left to do. A partition written without pause has its synced prefix
/// moved every `SYNCED_PREFIX_STEP_BYTES` instead, bounding what its recovery verifies. An idle
/// partition holds no disk but its bytes, and little memory. Only partitions that hold such
/// work are visited (the shard's idle list, engine `partition/idle_work.rs`): an idle broker's
/// pass costs nothing per partition that has nothing to give back.
async fn release_idle(ctx: &Rc<BrokerCtx>) {
    use futures::StreamExt;
    let now = now_ms();
    let idle_list = ctx.state.partitions.idle_list();
    let due = idle_list.take_due();
    // Several at once, so that their fdatasyncs overlap and the file system commits them
    // together: one at a time, the first pass after a burst into 10 000 partitions took 40 000
    // fdatasyncs in a row (decision 0022, open on first use and the log state file).
    futures::stream::iter(due.iter().map(|open| release_one(open, now)))
        .buffer_unordered(IDLE_CONCURRENCY)
        .for_each(|()| async {})
        .await;
    for open in &due {
        idle_list.visited(open);
    }
}

/// Partitions a shard checkpoints (and gives back reservations of) at once in its idle pass.
const IDLE_CONCURRENCY: usize = 64;

async fn release_one(open: &Partition, now: i64) {
    let dir = open.dir();
    open.release_unused_indexes();
    if let Err(error) = open.release_idle_reservation(now).await {
        tracing::error!(dir = %dir.display(), %error, "giving back reserved blocks failed");
    }
    if let Err(error) = open.checkpoint_if_idle(now, CHECKPOINT_IDLE_MS).await {
        tracing::error!(dir = %dir.display(), %error, "checkpoint failed");
    }
    if let Err(error) = open.advance_synced_prefix().await {
        tracing::error!(dir = %dir.display(), %error, "moving the synced prefix failed");
    }
}

/// After an append that rolled the partition's log: the old segment is fsynced by a task of its
/// own while appends go on into the new one (engine `log/rolled.rs`; decision 0022, open on first use and the
/// log state file).
/// The log hands out one such task per roll and syncs the previous segment before it rolls
/// again, so a partition has at most one.
pub fn sync_rolled_segment(tp: &TopicPartition, partition: &Rc<Partition>) {
    if !partition.claim_rolled_sync() {
        return;
    }
    let (partition, topic, index) = (partition.clone(), tp.topic.clone(), tp.partition);
    glommio::spawn_local(async move {
        match partition.finish_rolled_sync().await {
            Ok(()) | Err(LogError::Closed) => {}
            Err(error) => {
                tracing::error!(topic = &*topic, partition = index, %error, "syncing a rolled segment failed")
            }
        }
    })
    .detach();
}

/// How often shard 0 checks whether to hand freed memory back.
const MEMORY_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Hands memory freed after a burst back to the kernel. The allocator keeps freed memory for
/// the next allocations (see `laminar_sys::memory::keep_freed_memory`), which is right under load but would
/// leave a burst's peak resident for good once the load goes away. Two signs that it went:
/// request memory fell after a peak (large frames), or the process went quiet after work
/// ([`QuietAfterWork`]: whatever allocated, e.g. the per-partition state of requests naming
/// tens of thousands of partitions, which is not request memory). Runs on shard 0 only: the
/// allocator is process-wide.
pub async fn give_back_memory(ctx: Rc<BrokerCtx>) {
    let memory = ctx.state.shared.request_memory.clone();
    let mut quiet = QuietAfterWork::new(laminar_sys::process::cpu_time());
    loop {
        glommio::timer::sleep(MEMORY_CHECK_EVERY).await;
        let quiet_after_work = quiet.trim_due(laminar_sys::process::cpu_time());
        if memory.take_trim_due() || quiet_after_work {
            laminar_sys::memory::release_freed_memory();
        }
    }
}

/// Process CPU per check under which the broker counts as quiet: 5 % of a core.
const QUIET_CPU_PER_CHECK: Duration = Duration::from_millis(50);
/// CPU the process must have used since the last trim for a quiet check to trim again: an
/// idle broker trims about once per this much of its background work, a busy one not at all.
const WORK_CPU_BEFORE_TRIM: Duration = Duration::from_secs(1);

/// Tells when the process went quiet after doing work, from its CPU time sampled once per
/// check. Measured: a keyed produce into 20 000 new partitions left 640 MB resident of which
/// glibc's malloc had 570 MB free (`malloc_stats`); trimmed, 87 MB (decision 0024, what an idle partition
/// costs).
struct QuietAfterWork {
    cpu_at_last_check: Duration,
    cpu_at_last_trim: Duration,
}

impl QuietAfterWork {
    fn new(cpu_now: Duration) -> Self {
        QuietAfterWork {
            cpu_at_last_check: cpu_now,
            cpu_at_last_trim: cpu_now,
        }
    }

    /// Whether to trim now, given the process's CPU time now; answers true once per quiet
    /// spell that follows [`WORK_CPU_BEFORE_TRIM`] of work.
    fn trim_due(&mut self, cpu_now: Duration) -> bool {
        let since_check = cpu_now.saturating_sub(self.cpu_at_last_check);
        self.cpu_at_last_check = cpu_now;
        let worked = cpu_now.saturating_sub(self.cpu_at_last_trim) >= WORK_CPU_BEFORE_TRIM;
        if since_check > QUIET_CPU_PER_CHECK || !worked {
            return false;
        }
        self.cpu_at_last_trim = cpu_now;
        true
    }
}

async fn flush_all(ctx: &Rc<BrokerCtx>, partitions: &[(TopicPartition, Rc<Partition>)]) {
    for (tp, open) in partitions {
        let (topic, partition) = (&*tp.topic, tp.partition);
        if open.durable_offset() >= open.log_end_offset() {
            continue;
        }
        let started = std::time::Instant::now();
        match open.flush().await {
            Ok(()) => ctx.state.metrics.observe_durability_wait(started.elapsed()),
            Err(error) => tracing::error!(topic, partition, %error, "periodic flush failed"),
        }
    }
}

async fn apply_retention(
    ctx: &Rc<BrokerCtx>,
    partitions: &[(TopicPartition, Rc<Partition>)],
    listed_single: &mut ListedSingleSegment,
) {
    let now = now_ms();
    for (tp, open) in partitions {
        retain(ctx, &tp.topic, tp.partition, open, now).await;
    }
    open_for_retention(ctx, now, listed_single).await;
}

/// Retention, compaction and producer expiry of one open partition.
async fn retain(ctx: &Rc<BrokerCtx>, topic: &str, partition: i32, open: &Partition, now: i64) {
    let producer_idle_max_ms = ctx.state.shared.config.producer_id_expiration_ms;
    let expired = open.expire_producers(now, producer_idle_max_ms);
    if expired > 0 {
        tracing::debug!(topic, partition, expired, "idle producer ids expired");
    }
    match open.apply_retention(now).await {
        Ok(outcome) => tracing::debug!(topic, partition, ?outcome, "retention checked"),
        Err(error) => tracing::error!(topic, partition, %error, "retention failed"),
    }
    // A no-op unless the topic's cleanup.policy has compact.
    if let Err(error) = open.compact(now).await {
        tracing::error!(topic, partition, %error, "compaction failed");
    }
}

/// Partitions open on first use, so some this shard owns have not opened since the start.
/// Retention and compaction only ever act on segments other than the active one, so only a
/// partition whose directory holds more than one segment is opened for them (its directory
/// listed, nothing read); the others stay closed, and are not listed again while they stay
/// closed ([`ListedSingleSegment`]).
async fn open_for_retention(ctx: &Rc<BrokerCtx>, now: i64, listed_single: &mut ListedSingleSegment) {
    let table = ctx.state.shared.metadata.current();
    let mut next = ListedSingleSegment::default();
    for topic in table.topics.values() {
        for partition in 0..topic.partition_count {
            let owned = shard_of_partition(&topic.name, partition, ctx.shard_count()) == ctx.id();
            if !owned || ctx.state.partitions.get(&topic.name, partition).is_some() {
                continue;
            }
            if listed_single.holds(&topic.id, partition) {
                next.note(&topic.id, topic.partition_count, partition);
                continue;
            }
            glommio::yield_if_needed().await;
            let segments = ctx
                .state
                .partitions
                .segments_on_disk(&topic.name, partition)
                .await;
            match segments {
                Ok(segments) if segments > 1 => {}
                Ok(_) => {
                    next.note(&topic.id, topic.partition_count, partition);
                    continue;
                }
                Err(error) => {
                    tracing::error!(topic = topic.name, partition, %error, "cannot list partition");
                    continue;
                }
            }
            let tp = TopicPartition {
                topic: topic.name.clone().into(),
                partition,
            };
            match ctx.state.partition(&tp).await {
                Ok(open) => retain(ctx, &tp.topic, partition, &open, now).await,
                // Cluster mode: it waits until this broker leads it again.
                Err(PartitionAccessError::NotLeader) => {}
                Err(error) => {
                    tracing::error!(topic = &*tp.topic, partition, %error, "cannot open for retention")
                }
            }
        }
    }
    *listed_single = next;
}

/// The closed partitions of this shard that held one segment at most when retention listed
/// them, by topic id, a flag per partition. Nothing adds a segment to a closed partition (only
/// its shard writes it, and a write opens it first), so retention lists each once, not every
/// pass: at 10 000 closed partitions each pass listed them all, 0.1 s of CPU (1 s at 100 000)
/// every `log.retention.check.interval.ms`, for good. Rebuilt by every pass from the topics
/// that exist, so a deleted topic's flags go with it (a topic made again under its name has a
/// new id); bounded by their partitions, a byte each. Owned by one shard's maintenance task.
#[derive(Debug, Default)]
struct ListedSingleSegment {
    by_topic: std::collections::HashMap<[u8; 16], Vec<bool>>,
}

impl ListedSingleSegment {
    /// Whether `partition` of the topic with this id is one of them.
    fn holds(&self, topic_id: &[u8; 16], partition: i32) -> bool {
        let flags = self.by_topic.get(topic_id);
        flags
            .and_then(|flags| flags.get(usize::try_from(partition).ok()?))
            .copied()
            == Some(true)
    }

    /// Adds `partition` of a topic of `partition_count` partitions.
    fn note(&mut self, topic_id: &[u8; 16], partition_count: i32, partition: i32) {
        assert!(
            (0..partition_count).contains(&partition),
            "partition {partition} of {partition_count}"
        );
        let flags = self
            .by_topic
            .entry(*topic_id)
            .or_insert_with(|| vec![false; partition_count as usize]);
        flags[partition as usize] = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn closed_partitions_listed_with_one_segment_are_held_by_topic_id() {
        let (first, second) = ([1u8; 16], [2u8; 16]);
        let mut listed = ListedSingleSegment::default();
        assert!(!listed.holds(&first, 0));
        listed.note(&first, 3, 2);
        assert!(listed.holds(&first, 2));
        assert!(!listed.holds(&first, 1), "only what was noted");
        assert!(
            !listed.holds(&second, 2),
            "another topic, or one made again under the name"
        );
        assert!(
            !listed.holds(&first, 7) && !listed.holds(&first, -1),
            "past the topic's partitions"
        );
        assert_eq!(listed.by_topic[&first].len(), 3, "a byte per partition");
    }

    #[test]
    #[should_panic(expected = "partition 3 of 3")]
    fn noting_a_partition_the_topic_does_not_have_is_a_bug() {
        ListedSingleSegment::default().note(&[0; 16], 3, 3);
    }

    #[test]
    fn freed_memory_goes_back_once_per_quiet_spell_after_work() {
        let mut quiet = QuietAfterWork::new(ms(0));
        assert!(!quiet.trim_due(ms(10)), "quiet, but no work since the start");
        assert!(!quiet.trim_due(ms(900)), "busy");
        assert!(!quiet.trim_due(ms(1_800)), "busy");
        assert!(quiet.trim_due(ms(1_810)), "quiet after 1.8 s of work");
        assert!(!quiet.trim_due(ms(1_820)), "still quiet: once per spell");
        assert!(
            !quiet.trim_due(ms(2_500)),
            "busy again, less than a second of work"
        );
        assert!(
            !quiet.trim_due(ms(2_510)),
            "quiet, but too little work since the trim"
        );
        assert!(!quiet.trim_due(ms(3_400)), "busy");
        assert!(
            quiet.trim_due(ms(3_420)),
            "quiet after more than a second of work"
        );
    }
}
