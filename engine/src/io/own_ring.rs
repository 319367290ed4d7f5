//! What the shard's own small io_urings (write-behind, pre-writes) share: taking completions
//! without waiting, and counters kept in a `Cell`.

use std::cell::{Cell, RefCell};

use io_uring::IoUring;

/// Every completion `ring` has, as `(user_data, result)`, without waiting; first resubmits what
/// an interrupted `io_uring_enter` left queued (still failing: it stays queued, and the ops
/// counted in flight, for the next call).
pub(super) fn take_completions(ring: &RefCell<IoUring>) -> Vec<(u64, i32)> {
    let mut ring = ring.borrow_mut();
    if !ring.submission().is_empty() {
        let _ = ring.submit();
    }
    ring.completion().map(|c| (c.user_data(), c.result())).collect()
}

/// Applies `change` to the counters in `cell`.
pub(super) fn update<T: Copy>(cell: &Cell<T>, change: impl FnOnce(&mut T)) {
    let mut value = cell.get();
    change(&mut value);
    cell.set(value);
}
