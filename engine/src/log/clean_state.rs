//! Whether a crash could have left anything torn in the log, as its state file says and as the
//! log knows it: one value ([`CleanState`]), changed only through [`Log::transition`], which
//! refuses any change the log is not meant to make (the state file's format and promises are in
//! `disk_state.rs`).

use super::disk_state::{DiskState, StateRecord};
use super::Log;
use crate::io::Storage;

/// The log's clean or dirty state: what its state file says, and whether anything was written
/// since. Plain data, kept in its [`Log`] (owned by the log's shard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CleanState {
    /// No state file: dirty. A new log until its first durable point creates the file (decision
    /// 0022, open on first use and the log state file), or a log a crash found before any.
    NoFile,
    /// The state file says dirty: a crash from now on is recovered.
    Dirty,
    /// The state file says clean with the active segment's synced prefix, and nothing was written
    /// since. An append only grows the log past that prefix, which the next open notices, so it
    /// writes nothing here first (decision 0022, open on first use and the log state file).
    Clean,
    /// The state file says clean with no prefix an append could be noticed against (format 1,
    /// or a log whose segments were all gone at the open), and nothing was written since: every
    /// writer, appends included, writes the dirty state first.
    CleanWithoutPrefix,
    /// The state file still says clean with a prefix, and appends grew the log past it since
    /// (or the open found it so): dirty, which the next open learns from the files themselves.
    AppendedSinceClean,
}

impl CleanState {
    /// Whether nothing was written since everything was last synced.
    pub(super) fn is_clean(self) -> bool {
        matches!(self, CleanState::Clean | CleanState::CleanWithoutPrefix)
    }

    /// What an open starts from: `on_disk` is the state file's record (`None`: there is none),
    /// `acted_on` what the open made of it (dirty once the log grew past a clean prefix), and
    /// `created` whether the open made the log's first segment.
    pub(super) fn at_open(on_disk: Option<StateRecord>, acted_on: DiskState, created: bool) -> CleanState {
        let Some(on_disk) = on_disk else {
            assert_eq!(acted_on, DiskState::Dirty, "a log without a state file is dirty");
            return CleanState::NoFile;
        };
        // A new first segment may already be longer than a prefix recorded of the old one.
        let growth_shows = on_disk.state == DiskState::Clean && on_disk.synced.is_some() && !created;
        match (acted_on, growth_shows) {
            (DiskState::Dirty, false) => CleanState::Dirty,
            (DiskState::Dirty, true) => CleanState::AppendedSinceClean,
            (DiskState::Clean, true) => CleanState::Clean,
            (DiskState::Clean, false) => CleanState::CleanWithoutPrefix,
        }
    }

    /// The state once `record` is written to the state file.
    pub(super) fn written(record: StateRecord) -> CleanState {
        match record.state {
            DiskState::Dirty => CleanState::Dirty,
            DiskState::Clean => {
                assert!(
                    record.synced.is_some(),
                    "the log writes a prefix with every clean state"
                );
                CleanState::Clean
            }
        }
    }

    /// Whether the log may go from `self` to `to`; see [`Log::transition`].
    fn may_become(self, to: CleanState) -> bool {
        use CleanState::{AppendedSinceClean, Clean, CleanWithoutPrefix, Dirty, NoFile};
        matches!(
            (self, to),
            (NoFile, Dirty)
                | (NoFile | Dirty | AppendedSinceClean, Clean)
                | (Dirty, Dirty)
                | (Clean, AppendedSinceClean)
                | (Clean | CleanWithoutPrefix | AppendedSinceClean, Dirty)
        )
    }
}

impl<S: Storage> Log<S> {
    /// Moves the log to `to`, which must be one of the changes it makes:
    ///
    /// - `NoFile -> Dirty`: a synced-prefix step, or the sync of a segment that rolled,
    ///   creates the state file saying dirty with the prefix it recorded.
    /// - `NoFile | Dirty | AppendedSinceClean -> Clean`: a checkpoint or a close, once
    ///   everything is synced.
    /// - `Dirty -> Dirty`: the state file rewritten with another synced prefix, or with none
    ///   before a truncation below it.
    /// - `Clean -> AppendedSinceClean`: an append, which writes nothing here.
    /// - `Clean | CleanWithoutPrefix | AppendedSinceClean -> Dirty`: any other first write
    ///   (removing segments, compacting, truncating, a new log start; an append when no prefix
    ///   would show it), durably before that write.
    ///
    /// Nothing goes back to `NoFile` (the state file is never removed) nor to
    /// `CleanWithoutPrefix` (only an open finds one: the log writes a prefix with every clean
    /// state), and `Clean -> Clean` would be a second checkpoint of a log nobody wrote.
    pub(super) fn transition(&self, to: CleanState) {
        let from = self.clean_state.get();
        assert!(
            from.may_become(to),
            "the log's state may not go from {from:?} to {to:?}"
        );
        self.clean_state.set(to);
    }
}
