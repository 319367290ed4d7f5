//! [`ReserveBudget`]: how much disk the segments of one log dir may hold reserved ahead of
//! their appends, all shards together.
//!
//! A segment that takes appends fast reserves disk blocks ahead of them (`fallocate` with
//! `FALLOC_FL_KEEP_SIZE`, see `log/segment.rs` and decision 0008): ext4 then maps each new page
//! to a reserved block instead of making a delayed-allocation reservation per 4 KiB page. The
//! blocks count as used on the disk until the segment gives them back (a truncate to its
//! length: it rolls, closes, goes idle, or its file is closed while idle). Without a bound,
//! thousands of partitions could each hold their reservation; with one, a reservation past the
//! budget is granted in part or not at all (appends then allocate as they go: slower, never
//! wrong).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The default budget is this fraction of the log dir's file system (1/`DIVISOR`)...
pub const RESERVE_BUDGET_DISK_DIVISOR: u64 = 100;
/// ...at least this much...
pub const RESERVE_BUDGET_MIN_BYTES: u64 = 64 << 20;
/// ...and at most this much (256 segments reserving their most, 16 MiB).
pub const RESERVE_BUDGET_MAX_BYTES: u64 = 4 << 30;

/// Bytes of disk reserved ahead of appends in one log dir. Shared across shards (atomics).
#[derive(Debug)]
pub struct ReserveBudget {
    limit: u64,
    reserved: AtomicU64,
}

impl ReserveBudget {
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(ReserveBudget {
            limit,
            reserved: AtomicU64::new(0),
        })
    }

    /// The default budget of `dir`'s file system: a hundredth of its size, within
    /// [`RESERVE_BUDGET_MIN_BYTES`] and [`RESERVE_BUDGET_MAX_BYTES`] (the least when its size
    /// cannot be read).
    pub fn for_log_dir(dir: &Path) -> Arc<Self> {
        let size = laminar_sys::file_systems::stats(dir)
            .map(|stats| stats.total_bytes())
            .unwrap_or_else(|error| {
                tracing::warn!(dir = %dir.display(), %error, "cannot read the file system's size");
                0
            });
        Self::new(Self::default_limit(size))
    }

    /// The default budget of a file system of `size` bytes.
    pub fn default_limit(size: u64) -> u64 {
        (size / RESERVE_BUDGET_DISK_DIVISOR).clamp(RESERVE_BUDGET_MIN_BYTES, RESERVE_BUDGET_MAX_BYTES)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes reserved now.
    pub fn reserved(&self) -> u64 {
        self.reserved.load(Ordering::Relaxed)
    }

    /// Grants as much of `want` bytes as the budget has left (possibly 0).
    pub fn take_up_to(&self, want: u64) -> u64 {
        let mut granted = 0;
        let _ = self
            .reserved
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |reserved| {
                granted = want.min(self.limit.saturating_sub(reserved));
                (granted > 0).then_some(reserved + granted)
            });
        granted
    }

    /// Gives back `bytes` granted before.
    pub fn give_back(&self, bytes: u64) {
        let before = self.reserved.fetch_sub(bytes, Ordering::AcqRel);
        assert!(before >= bytes, "reservations give back at most what they took");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_what_is_left_and_takes_back_what_is_given() {
        let budget = ReserveBudget::new(10);
        assert_eq!(budget.take_up_to(4), 4);
        assert_eq!(budget.take_up_to(8), 6);
        assert_eq!(budget.take_up_to(1), 0);
        budget.give_back(5);
        assert_eq!((budget.reserved(), budget.take_up_to(9)), (5, 5));
    }

    #[test]
    fn the_default_is_a_hundredth_of_the_disk_within_bounds() {
        assert_eq!(ReserveBudget::default_limit(0), RESERVE_BUDGET_MIN_BYTES);
        assert_eq!(ReserveBudget::default_limit(100 << 30), 1 << 30);
        assert_eq!(ReserveBudget::default_limit(10 << 40), RESERVE_BUDGET_MAX_BYTES);
    }
}
