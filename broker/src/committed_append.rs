//! Appends the broker makes itself (a coordinator's records, transaction markers), waited for
//! as produce waits for acks=all: durable as `laminar.fsync` says and, in a cluster, on every
//! in-sync replica. Runs on the shard that owns the partition.

use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use laminar_engine::partition::{AppendInfo, LogError, Partition};

use crate::broker::{BrokerCtx, PartitionAccessError, TopicPartition};
use crate::config::FsyncSetting;

/// Appends to `tp` through `append` and returns once the appended batches are committed, or
/// `timeout` passed waiting for the in-sync replicas (REQUEST_TIMED_OUT).
pub async fn append_committed<F, Fut>(
    ctx: &Rc<BrokerCtx>,
    tp: &TopicPartition,
    append: F,
    timeout: Duration,
) -> Result<AppendInfo, PartitionAccessError>
where
    F: FnOnce(Rc<Partition>) -> Fut,
    Fut: Future<Output = Result<AppendInfo, LogError>>,
{
    let partition = ctx.state.partition(tp).await?;
    let info = append(partition.clone()).await?;
    crate::maintenance::sync_rolled_segment(tp, &partition);
    if let Some(replication) = &ctx.state.replication {
        replication.leader_appended(tp, &partition);
    }
    if ctx.state.shared.config.laminar_fsync == FsyncSetting::Always {
        partition.wait_durable(info.last_offset).await?;
    }
    if let Some(replication) = &ctx.state.replication {
        let min_isr = ctx.state.shared.min_insync_replicas(&tp.topic);
        replication
            .wait_replicated(tp, &partition, (info.last_offset, min_isr), timeout)
            .await?;
    }
    Ok(info)
}
