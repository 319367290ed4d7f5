//! What a log that went idle gives back, and whether it holds anything to give: the shard's
//! idle pass (broker `maintenance.rs`) visits only logs that do (`partition/idle_work.rs`).

use super::{Log, LogError};
use crate::io::{Storage, StorageFile};

impl<S: Storage> Log<S> {
    /// Whether the shard's idle pass has anything to do here: a checkpoint (the log is dirty),
    /// blocks reserved ahead of appends to give back, or index entries in memory to drop once
    /// unused. Reads only what the log keeps in memory.
    pub fn holds_idle_work(&self) -> bool {
        if !self.is_clean() {
            return true;
        }
        let state = self.state.borrow();
        let reserved = state
            .segments
            .last()
            .is_some_and(|active| active.log.reserved_bytes() > 0);
        reserved || state.segments.iter().any(|segment| segment.holds_index_entries())
    }

    /// Drops from memory the index entries of segments no read or append used since the last
    /// call; returns how many indexes it dropped. A read brings them back.
    pub fn release_unused_indexes(&self) -> usize {
        let state = self.state.borrow();
        state.segments.iter().map(|s| s.release_unused_indexes()).sum()
    }

    /// Gives back the blocks the active segment reserved ahead of its appends when it took
    /// none for a while (`segment::RESERVE_IDLE_MS`); returns whether it did.
    pub async fn release_idle_reservation(&self, now_ms: i64) -> Result<bool, LogError> {
        if self.active().log.reserved_bytes() == 0 {
            return Ok(false); // the common case, without the lock
        }
        let _writer = self.writer.lock().await;
        self.check_ok()?;
        let released = self.active().release_reservation_if_idle(now_ms).await;
        released.map_err(|e| self.fail(e))
    }
}
