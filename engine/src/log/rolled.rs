//! The segment that rolled: fsynced in the background while appends go on into the next one.
//!
//! A roll does not fsync the old segment while it holds the writer lock: with the page cache
//! holding a whole segment of unwritten appends (1 GiB by default) that fsync took 0.6 s on
//! this machine, and every producer of the partition would wait that long (docs/decisions/0022,
//! open on first use and the log state file). Kafka schedules that flush instead; so does this
//! log:
//!
//! - A roll writes the old segment's pending index entries, creates the new segment and leaves
//!   the old one in `Log::rolled` (at most one: a roll that finds the previous one still there
//!   syncs it first). [`Log::claim_rolled_sync`] tells one caller to start
//!   [`Log::finish_rolled_sync`] in the background; every operation that needs the old segment
//!   durable (a checkpoint, a close, an acks=all sync, a synced-prefix step, a truncation,
//!   retention, compaction, the next roll) syncs it itself first if it is still there.
//! - The promise on disk follows (`disk_state.rs`, format 3): every segment before the prefix's
//!   segment is synced; once the rolled one is, the state records a prefix at the start of the
//!   active segment. Recovery verifies every segment from the prefix's segment on (without a
//!   prefix, the active one and the one before it), and when one of them lost batches in the
//!   crash (it ends short of the next one) the segments after it go (their offsets would
//!   follow a hole), as Kafka's recovery does.
//! - Compaction records that prefix before it rewrites anything, so a segment recovery may
//!   verify was never compacted: its end is the next segment's base, or something was lost.

use super::clean_state::CleanState;
use super::disk_state::{self, DiskState, StateRecord, SyncedPrefix};
use super::segment::Segment;
use super::{Log, LogError};
use crate::io::Storage;
use std::io;
use std::rc::Rc;

impl<S: Storage> Log<S> {
    /// Once per roll: whether the caller should run [`finish_rolled_sync`] in the background
    /// (the shard's runtime, which this layer does not know, does the spawning).
    ///
    /// [`finish_rolled_sync`]: Log::finish_rolled_sync
    pub fn claim_rolled_sync(&self) -> bool {
        self.rolled.borrow().is_some() && !self.rolled_sync_claimed.replace(true)
    }

    /// Whether a segment that rolled may still hold unsynced bytes.
    fn has_rolled_unsynced(&self) -> bool {
        self.rolled.borrow().is_some()
    }

    /// Syncs the segment that rolled, without the writer lock (appends go on), then records
    /// on disk that every segment before the active one is synced.
    pub async fn finish_rolled_sync(&self) -> Result<(), LogError> {
        self.sync_rolled().await?;
        let _writer = self.writer.lock().await;
        self.check_ok()?;
        if self.has_rolled_unsynced() || self.deleted.get() {
            return Ok(()); // it rolled again meanwhile (that roll's sync records it), or is gone
        }
        self.record_rolled_synced().await
    }

    /// Syncs the segment that rolled, if one is waiting; callers that overlap share the one
    /// sync. Needs no writer lock: nothing appends to that segment any more, and every
    /// operation that removes or replaces one, or rolls again, calls this first, under the
    /// lock. Recovery stays right without recording anything after it: the segments it
    /// verifies (from the recorded prefix's, or the last two) still include every unsynced one.
    pub(super) async fn sync_rolled(&self) -> Result<(), LogError> {
        // The common case (acks=all syncs call this each time): nothing rolled, no lock. A sync
        // in flight keeps its segment in the slot until done, so an empty slot means none.
        if !self.has_rolled_unsynced() {
            return Ok(());
        }
        let _one_at_a_time = self.rolled_sync.lock().await;
        let Some(segment) = self.rolled.borrow().clone() else {
            return Ok(());
        };
        segment.sync_all().await.map_err(|e| self.fail(e))?;
        let mut rolled = self.rolled.borrow_mut();
        if rolled.as_ref().is_some_and(|r| Rc::ptr_eq(r, &segment)) {
            *rolled = None;
        }
        Ok(())
    }

    /// Under the writer lock, before compaction: the segment that rolled synced, and the
    /// state on disk saying so, so that recovery verifies no segment compaction may rewrite.
    pub(super) async fn settle_rolled(&self) -> Result<(), LogError> {
        self.sync_rolled().await?;
        self.record_rolled_synced().await
    }

    /// Under the writer lock, with no rolled segment waiting: writes the dirty state with a
    /// prefix at the start of the active segment unless the state already has its prefix in
    /// the active segment (or is clean, which promises more).
    async fn record_rolled_synced(&self) -> Result<(), LogError> {
        assert!(
            self.rolled.borrow().is_none(),
            "the rolled segment is synced first"
        );
        let active = self.active();
        let recorded = self.synced_prefix.get().map(|p| p.base_offset);
        if self.is_clean() || recorded == Some(active.base_offset) {
            return Ok(());
        }
        let prefix = SyncedPrefix::start_of(active.base_offset);
        let record = StateRecord::new(DiskState::Dirty, Some(prefix));
        // Nothing changed on disk if the write is refused: the older promise still holds.
        let written = self.write_state(record).await;
        written.map_err(|e| self.refuse_or_fail(e))?;
        self.synced_prefix.set(Some(prefix));
        Ok(())
    }

    /// Writes the state file (creating it, durably, the first time) and moves the log to the
    /// state it now says.
    pub(super) async fn write_state(&self, record: StateRecord) -> io::Result<()> {
        let exists = self.clean_state.get() != CleanState::NoFile;
        disk_state::write(&*self.storage, &self.dir, record, exists).await?;
        if !exists {
            self.sync_dirs().await?;
        }
        self.transition(CleanState::written(record));
        Ok(())
    }

    /// Leaves `old`, which just rolled, to be synced in the background. Caller holds the writer
    /// lock and synced the previous one ([`sync_rolled`](Log::sync_rolled)).
    pub(super) fn leave_rolled(&self, old: Rc<Segment<S::File>>) {
        let previous = self.rolled.borrow_mut().replace(old);
        assert!(
            previous.is_none(),
            "at most one rolled segment waits for its sync"
        );
        self.rolled_sync_claimed.set(false);
    }
}
