//! The fetch session epochs of KIP-227, as broker and client both count them.

/// The epoch of a full fetch that asks for a new session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch of a fetch without a session (it closes the one named, if any).
pub const FINAL_EPOCH: i32 = -1;

/// The epoch after `epoch` in a session: 1, 2, ... `i32::MAX`, then 1 again.
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn epochs_count_up_and_wrap_to_one() {
        assert_eq!(super::next_epoch(1), 2);
        assert_eq!(super::next_epoch(i32::MAX), 1);
    }
}
