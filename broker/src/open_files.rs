//! Opening the partitions at start within the process's open-file limit.
//!
//! Every segment holds three files, so a data dir can hold more partitions than the limit lets
//! the broker hold open. The storage files of all shards share a [`DescriptorBudget`] below the
//! limit, and what the budget leaves is kept for sockets, rings and short-lived files, so the
//! broker always comes up and binds its listener. Each shard's file cache closes idle files
//! when the budget runs short and opens them again on demand (`laminar_engine::io::FileCache`),
//! so every partition opens; one that cannot (the files in use do not fit) stays closed,
//! answers KAFKA_STORAGE_ERROR (retriable) and opens on a later request. Start-up logs one line
//! with the count of those.

use std::rc::Rc;
use std::sync::Arc;

use laminar_engine::io::DescriptorBudget;
use laminar_engine::shard::shard_of_partition;

use crate::broker::{BrokerCtx, PartitionAccessError, TopicPartition};

/// The least and the most descriptors kept out of the storage's budget.
const DESCRIPTORS_KEPT_MIN: u64 = 64;
const DESCRIPTORS_KEPT_MAX: u64 = 4096;

/// The storage's share of `open_files_limit` descriptors: all but a quarter, and at least 64 and
/// at most 4096 are kept for the rest (a connection takes one).
pub fn storage_budget(open_files_limit: u64) -> Arc<DescriptorBudget> {
    let kept = (open_files_limit / 4).clamp(DESCRIPTORS_KEPT_MIN, DESCRIPTORS_KEPT_MAX);
    DescriptorBudget::new(open_files_limit.saturating_sub(kept))
}

/// The raised open-file limit (see [`crate::sys::raise_open_files_limit`]); without one, a
/// limit no open reaches, so the kernel's EMFILE is the only bound.
pub fn open_files_limit() -> u64 {
    crate::sys::raise_open_files_limit().unwrap_or_else(|error| {
        tracing::warn!(%error, "cannot read the open-file limit; partition files are not budgeted");
        u64::MAX
    })
}

/// What the shards opened at start. Sent from each shard to the starting thread.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OpenedAtStart {
    pub opened: u64,
    /// Left closed: no descriptor was left for them.
    pub not_opened: u64,
}

impl OpenedAtStart {
    pub fn add(&mut self, other: OpenedAtStart) {
        self.opened += other.opened;
        self.not_opened += other.not_opened;
    }

    /// The start-up line for partitions left closed, if any.
    pub fn report(&self, budget: &DescriptorBudget, open_files_limit: u64) {
        if self.not_opened == 0 {
            return;
        }
        tracing::warn!(
            opened = self.opened,
            not_opened = self.not_opened,
            open_files_limit,
            partition_file_descriptors = budget.limit(),
            "{} of {} partitions are not open: no file descriptor left for their files; they answer \
             KAFKA_STORAGE_ERROR until descriptors free up. Raise the open-file limit (ulimit -n, \
             systemd LimitNOFILE=) to serve them all",
            self.not_opened,
            self.opened + self.not_opened,
        );
    }
}

/// Opens (and so recovers) every partition this shard owns, before it serves, internal topics
/// first. Once descriptors run out the rest are only counted: each open would fail alike.
pub async fn open_owned_partitions(ctx: &Rc<BrokerCtx>) -> OpenedAtStart {
    let table = ctx.state.shared.metadata.current();
    let (internal, others): (Vec<_>, Vec<_>) = table.topics.values().partition(|t| t.name.starts_with("__"));
    let owned = internal.into_iter().chain(others).flat_map(|topic| {
        (0..topic.partition_count)
            .filter(|&partition| shard_of_partition(&topic.name, partition, ctx.shard_count()) == ctx.id())
            .map(|partition| TopicPartition {
                topic: topic.name.clone(),
                partition,
            })
    });
    let mut counts = OpenedAtStart::default();
    for tp in owned {
        if counts.not_opened > 0 {
            counts.not_opened += 1;
            continue;
        }
        match ctx.state.partition(&tp).await {
            Ok(_) => counts.opened += 1,
            Err(PartitionAccessError::Log(e)) if e.is_out_of_descriptors() => counts.not_opened += 1,
            Err(error) => {
                tracing::error!(topic = tp.topic, partition = tp.partition, %error, "cannot open partition")
            }
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_storage_leaves_a_quarter_of_the_limit_within_bounds() {
        assert_eq!(storage_budget(256).limit(), 192);
        assert_eq!(storage_budget(100).limit(), 36);
        assert_eq!(storage_budget(10).limit(), 0);
        assert_eq!(storage_budget(1 << 20).limit(), (1 << 20) - 4096);
        assert_eq!(storage_budget(u64::MAX).limit(), u64::MAX - 4096);
    }
}
