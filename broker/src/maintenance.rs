//! Per-shard background work: retention checks and compaction, expiring idle producer ids and, with `laminar.fsync=interval:<ms>`, the
//! periodic flush. Each shard looks after only the partitions it owns.

use std::rc::Rc;
use std::time::Duration;

use crate::broker::BrokerCtx;
use crate::clock::now_ms;
use crate::config::FsyncSetting;

pub async fn run(ctx: Rc<BrokerCtx>) {
    let config = &ctx.state.shared.config;
    let retention_every = Duration::from_millis(config.log_retention_check_interval_ms.max(1) as u64);
    let flush_every = match config.laminar_fsync {
        FsyncSetting::IntervalMs(ms) => Some(Duration::from_millis(ms.max(1))),
        FsyncSetting::Always | FsyncSetting::Never => None,
    };
    let tick = flush_every.map_or(retention_every, |f| f.min(retention_every));
    let mut since_retention = Duration::ZERO;
    loop {
        glommio::timer::sleep(tick).await;
        since_retention += tick;
        if flush_every.is_some() {
            flush_all(&ctx).await;
        }
        if since_retention >= retention_every {
            since_retention = Duration::ZERO;
            apply_retention(&ctx).await;
        }
    }
}

/// How often shard 0 checks whether request memory has fallen after a peak.
const MEMORY_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Hands memory freed after a burst of large requests back to the kernel. The allocator keeps
/// freed memory for the next frames (see `sys::keep_freed_memory`), which is right under load but
/// would leave the burst's peak resident for good once the load goes away. Runs on shard 0 only:
/// the allocator is process-wide.
pub async fn give_back_memory(ctx: Rc<BrokerCtx>) {
    let memory = ctx.state.shared.request_memory.clone();
    loop {
        glommio::timer::sleep(MEMORY_CHECK_EVERY).await;
        if memory.take_trim_due() {
            crate::sys::release_freed_memory();
        }
    }
}

async fn flush_all(ctx: &Rc<BrokerCtx>) {
    for ((topic, partition), open) in ctx.state.partitions.all() {
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

async fn apply_retention(ctx: &Rc<BrokerCtx>) {
    let now = now_ms();
    let producer_idle_max_ms = ctx.state.shared.config.producer_id_expiration_ms;
    for ((topic, partition), open) in ctx.state.partitions.all() {
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
}
