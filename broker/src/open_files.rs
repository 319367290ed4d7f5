//! The partition files' share of the process's open-file limit.
//!
//! Every segment holds three files, so a data dir can hold more partitions than the limit lets
//! the broker hold open. The storage files of all shards share a [`DescriptorBudget`] below the
//! limit, and what the budget leaves is kept for sockets, rings and short-lived files, so the
//! broker always comes up and binds its listener. Partitions open on first use (start-up opens
//! none but the group coordinator's), and each shard's file cache closes idle files when the
//! budget runs short and opens them again on demand (`laminar_engine::io::FileCache`); an open
//! that cannot fit (the files in use at that instant do not) answers KAFKA_STORAGE_ERROR
//! (retriable), and the broker says once how many descriptors it needs.

use std::sync::Arc;

use laminar_engine::io::DescriptorBudget;

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
