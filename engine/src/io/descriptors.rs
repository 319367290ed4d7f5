//! The storage's share of the process's file descriptors, and telling the two kinds of
//! resource exhaustion a storage error can mean: no space, no descriptor.
//!
//! Every segment holds three open files, so a data dir with more partitions than the
//! descriptor limit allows would use up every descriptor while the partitions open at start,
//! and the broker could then not even create its listening socket. The storage of every shard
//! therefore takes its descriptors from one [`DescriptorBudget`] that stays below the process
//! limit: what is left is kept for sockets (listeners, connections), rings and short-lived
//! files. An open past the budget fails like an open past the limit (EMFILE), before any system
//! call, and the partition it was for answers a retriable error until descriptors free up.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How many descriptors the storage files of every shard may hold at once. Shared across
/// shards (atomics).
#[derive(Debug)]
pub struct DescriptorBudget {
    limit: u64,
    used: AtomicU64,
}

impl DescriptorBudget {
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(DescriptorBudget {
            limit,
            used: AtomicU64::new(0),
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Descriptors held now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Takes `count` descriptors, or fails with EMFILE when that would pass the limit.
    pub fn take(self: &Arc<Self>, count: u64) -> io::Result<DescriptorSlots> {
        self.claim(count)?;
        Ok(DescriptorSlots {
            budget: self.clone(),
            count,
        })
    }

    fn claim(&self, count: u64) -> io::Result<()> {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(count).filter(|after| *after <= self.limit)
            })
            .map(drop)
            .map_err(|_| io::Error::from_raw_os_error(libc::EMFILE))
    }
}

/// Descriptors taken from a [`DescriptorBudget`], given back when dropped. Owned by the file
/// that holds them (one shard).
#[derive(Debug)]
pub struct DescriptorSlots {
    budget: Arc<DescriptorBudget>,
    count: u64,
}

impl DescriptorSlots {
    /// Takes `count` more from the same budget.
    pub fn grow(&mut self, count: u64) -> io::Result<()> {
        self.budget.claim(count)?;
        self.count += count;
        Ok(())
    }
}

impl Drop for DescriptorSlots {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.count, Ordering::AcqRel);
    }
}

/// Whether `error` is a write refused for lack of space (ENOSPC, or EDQUOT for a quota). Only
/// a write's own errno counts: such a write put nothing in the page cache past the bytes it
/// reported, so it can be undone and retried once space returns. Callers must not ask it about
/// fdatasync or write-behind failures, which are never retried: after one, the kernel may have
/// dropped dirty pages it could not write.
pub fn is_out_of_space(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// Whether `error` means no descriptor was left (EMFILE, ENFILE, or the [`DescriptorBudget`]).
pub fn is_out_of_descriptors(error: &io::Error) -> bool {
    const CODES: [i32; 2] = [libc::EMFILE, libc::ENFILE];
    match error.raw_os_error() {
        Some(code) => CODES.contains(&code),
        // glommio reports a failed open with the errno's text only (its error loses the code).
        None => {
            let text = error.to_string();
            CODES
                .iter()
                .any(|code| text.contains(&format!("(os error {code})")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_refuses_past_its_limit_and_dropped_slots_give_back() {
        let budget = DescriptorBudget::new(4);
        let mut three = budget.take(3).unwrap();
        let refused = budget.take(2).unwrap_err();
        assert!(is_out_of_descriptors(&refused), "{refused}");
        assert!(three.grow(2).is_err());
        three.grow(1).unwrap();
        assert_eq!(budget.used(), 4);
        drop(three);
        assert_eq!(budget.used(), 0);
        let _again = budget.take(4).unwrap();
    }

    #[test]
    fn exhaustion_is_told_by_errno_or_by_glommio_text() {
        assert!(is_out_of_space(&io::Error::from_raw_os_error(libc::ENOSPC)));
        assert!(is_out_of_space(&io::Error::from_raw_os_error(libc::EDQUOT)));
        // A write-behind failure keeps the kind of ENOSPC but not its errno: never retried.
        let wrapped = io::Error::new(io::ErrorKind::StorageFull, "write-behind failed");
        assert!(!is_out_of_space(&wrapped));
        assert!(is_out_of_descriptors(&io::Error::from_raw_os_error(libc::ENFILE)));
        let glommio = io::Error::other("Too many open files (os error 24), op: Open path: x");
        assert!(is_out_of_descriptors(&glommio));
        assert!(!is_out_of_descriptors(&io::Error::from_raw_os_error(libc::EIO)));
    }
}
