//! [`FileCache`]: a shard's open files, closed while idle and reopened on demand, least
//! recently used first, so that the descriptor budget is never the reason a file in use cannot
//! open.
//!
//! Every file the log opens is a [`CachedFile`]: a path, the identity of the file it names, and
//! the open file of the storage underneath while it has one. When an open finds no descriptor
//! left (the budget's EMFILE, or the kernel's EMFILE/ENFILE), the cache closes a batch of the
//! shard's idle files (clean before dirty, least recently used first), and opens again. A
//! closed ("parked") file opens again by its path at its next operation, which checks that the
//! path still names the same file (device and inode) of the same length; anything else is an
//! error, never another file's bytes. The log above sees none of this: its files, segments and
//! in-memory state (indexes, offsets, producer state) stay as they are, and a partition whose
//! files are all parked holds no descriptor at all.
//!
//! Which files may be parked ("idle"):
//! - no operation in flight on it (a read, a write, an fdatasync, a reopen: each holds it in
//!   use from start to end), so an append, a read or a sync is never cut (a send in progress
//!   holds a duplicate of its own, [`StorageFile::sendable`], and does not keep it open);
//! - nothing written to it since its last fdatasync: a dirty file is fdatasync'd first and
//!   parked only if that succeeded and nothing was written meanwhile. A file is never closed
//!   with data the kernel has not written: a write-back error on an inode nobody holds open can
//!   be lost with the inode, and a failed fdatasync must fail the partition (invariant 5). A
//!   failed fdatasync or close here leaves the file failed: every later operation returns the
//!   error, so the log fails at its next write or sync, loudly;
//! - a file removed, renamed over or under a removed directory cannot open again: it stays
//!   open while descriptors suffice (a reader that took its segment before retention or
//!   compaction removed it keeps reading it), and once parked its next use fails with NotFound,
//!   as a read of a removed segment does after it is closed. A rename through the cache moves
//!   the path of the files it names.
//!
//! Shards share the budget. A shard that finds it full with nothing idle of its own to close
//! fails that open with EMFILE, which the partition answers as a retriable error
//! (KAFKA_STORAGE_ERROR), and raises the budget's pressure: every shard holding more than its
//! fair share (the budget over the shard count) closes idle files until it is back at it
//! ([`FileCache::answer_pressure`] waits for that on each shard). It does not wait for the
//! other shards itself: a shard cannot reach another shard's files (invariant 1), a synchronous
//! round trip from inside the storage could leave two short shards waiting on each other, and
//! the client's retry comes after the others have answered. When the shard that is short holds
//! at least its fair share and all of it is in use, the budget is too small for the files in
//! use: that is said once, with the number needed.
//!
//! An open that finds nothing idle to close while files of its shard that hold descriptors are
//! in use (or opens are in flight) waits for one of those uses to end, then tries again: many
//! partitions touched by one request (a produce or fetch naming hundreds of them) take turns
//! instead of failing, as long as what is in use at any instant fits the budget.
//!
//! Bounds: the registry of files holds a weak reference per file and is pruned once it holds
//! more than twice the live files (plus [`REGISTRY_SLACK`]); a shortage closes at most a batch
//! ([`PARK_BATCH_MIN`] files, or a [`PARK_FRACTION`]th of the open ones) per round, and an open
//! tries at most [`OPEN_ROUNDS_MAX`] rounds, each ended by a file closed or a use ended.

use super::descriptors::ShardDescriptors;
use super::path_index::PathIndex;
use super::{is_out_of_descriptors, FileId, LentFile, SharedDirSyncs, Storage, StorageFile};
use crate::local_sync::LocalEvent;
use bytes::Bytes;
use std::cell::{Cell, RefCell};
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::rc::{Rc, Weak};

/// The fewest files a shortage closes at once.
pub const PARK_BATCH_MIN: usize = 8;
/// A shortage closes this fraction of the open files at once (when more than the minimum), so
/// that a shard cycling through more files than fit pays one scan per batch, not per open.
pub const PARK_FRACTION: usize = 32;
/// Rounds one open tries before it gives up: each either closed idle files or waited for a use
/// of a file that holds descriptors to end (files it freed may be taken by other opens of the
/// shard meanwhile, which are making progress).
pub const OPEN_ROUNDS_MAX: usize = 4096;
/// Dead registry entries tolerated beyond the live files before a prune.
pub const REGISTRY_SLACK: usize = 64;

/// What one shard's file cache did. Plain data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileCacheStats {
    /// Files the shard holds (open or parked, not closed).
    pub files: u64,
    /// Of those, parked: closed while idle, to reopen on demand.
    pub parked: u64,
    /// Times a file was parked.
    pub parks: u64,
    /// Times a parked file was opened again.
    pub reopens: u64,
    /// Opens refused for lack of descriptors after closing what was idle.
    pub refusals: u64,
}

/// One shard's cache of open files over the storage `S`. Owned by one shard; not Send.
pub struct FileCache<S: Storage> {
    shared: Rc<Shared<S>>,
}

struct Shared<S: Storage> {
    inner: S,
    /// Directory fsyncs in flight, shared by the callers that ask at once.
    dir_syncs: SharedDirSyncs,
    /// This shard's account on the descriptor budget (fair share, pressure); `None`: no budget,
    /// only the kernel's limit.
    descriptors: Option<Rc<ShardDescriptors>>,
    /// Every file opened through the cache that may still be alive.
    files: RefCell<Vec<Weak<CachedFile<S>>>>,
    /// The same files by path, for renames and removals; an unlinked file leaves it. Pruned of
    /// dropped files as `files` is.
    by_path: RefCell<PathIndex<Weak<CachedFile<S>>>>,
    /// Files alive (not dropped).
    live: Cell<usize>,
    /// Ticks at every use: a file's last use is the tick it was last used at.
    clock: Cell<u64>,
    stats: Cell<FileCacheStats>,
    /// Opens, directory fsyncs and closes of parked files underneath in flight (each holds
    /// descriptors it will give back or use).
    opening: Cell<usize>,
    /// Notified when a file may have become idle or given its descriptors back: an open that
    /// found nothing idle waits here while some file holding descriptors is in use. Every
    /// waiter is woken and looks again (they are this shard's opens, which the callers bound),
    /// and a notification without waiters is a counter increment: it comes at the end of every
    /// file use, where `event_listener`'s fence was 5 % of a keyed produce's CPU.
    freed: LocalEvent,
    /// Files in use that hold descriptors (open, not parked): each gives them up for parking
    /// when its use ends.
    in_use_open: Cell<usize>,
    /// Files chosen for parking whose park has not ended: their descriptors are as good as
    /// given back. Concurrent opens that each saw the files past their share parked a batch
    /// each before any park ended, and closed most of the cache (decision 0021, file cache and descriptor
    /// budget).
    parking: Cell<usize>,
    /// Of the files being parked for opens past the soft limit, how many no open has counted
    /// on yet: such an open takes one instead of parking a batch of its own.
    parked_room: Cell<usize>,
}

enum Handle<F> {
    Open(Rc<F>),
    /// Closed while idle; opens again at the next use. `len` is its length when parked.
    Parked {
        len: u64,
    },
    Closed {
        len: u64,
    },
}

/// A file of the cache: open, or parked until its next use. Owned by one shard; not Send.
pub struct CachedFile<S: Storage> {
    shared: Rc<Shared<S>>,
    /// The path it opens by; moved by renames.
    path: RefCell<PathBuf>,
    id: FileId,
    handle: RefCell<Handle<S::File>>,
    /// Operations in flight.
    busy: Cell<u32>,
    last_use: Cell<u64>,
    /// Writes and truncations made, and how many of them the last fdatasync covered.
    writes: Cell<u64>,
    writes_synced: Cell<u64>,
    /// Removed, renamed over or under a removed directory: it cannot open again by its path.
    /// Parked all the same when descriptors are short (its next use then fails).
    unlinked: Cell<bool>,
    /// Why the file failed while the cache parked it (an fdatasync or a close).
    failure: RefCell<Option<String>>,
    /// Chosen for parking ([`Shared::parking`]): no other shortage chooses it meanwhile.
    parking: Cell<bool>,
}

/// Why files are parked: for this shard's opens past the soft limit, or to give descriptors back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ParkFor {
    Opens,
    GivingBack,
}

/// Marks files chosen for parking until their parks end (or are dropped).
struct ChosenForParking<'a, S: Storage> {
    shared: &'a Shared<S>,
    files: &'a [Rc<CachedFile<S>>],
}

impl<'a, S: Storage> ChosenForParking<'a, S> {
    fn new(shared: &'a Shared<S>, files: &'a [Rc<CachedFile<S>>]) -> Self {
        for file in files {
            assert!(!file.parking.replace(true), "a file is chosen once at a time");
        }
        shared.parking.set(shared.parking.get() + files.len());
        ChosenForParking { shared, files }
    }
}

impl<S: Storage> Drop for ChosenForParking<'_, S> {
    fn drop(&mut self) {
        for file in self.files {
            file.parking.set(false);
        }
        let parking = self.shared.parking.get() - self.files.len();
        self.shared.parking.set(parking);
        // Room nobody took is in `files_used` again once the parks end.
        let room = self.shared.parked_room.get().min(parking);
        self.shared.parked_room.set(room);
    }
}

/// Marks a file in use for as long as it lives.
struct InUse<'a, S: Storage> {
    file: &'a CachedFile<S>,
}

impl<'a, S: Storage> InUse<'a, S> {
    fn new(file: &'a CachedFile<S>) -> Self {
        let busy = file.busy.get();
        file.busy.set(busy + 1);
        file.last_use.set(file.shared.tick());
        if busy == 0 && file.open_handle().is_some() {
            file.shared.in_use_open.set(file.shared.in_use_open.get() + 1);
        }
        InUse { file }
    }
}

impl<S: Storage> Drop for InUse<'_, S> {
    fn drop(&mut self) {
        let busy = self.file.busy.get();
        assert!(busy > 0, "a file's uses end once each");
        self.file.busy.set(busy - 1);
        if busy == 1 && self.file.open_handle().is_some() {
            let shared = &self.file.shared;
            shared.in_use_open.set(shared.in_use_open.get() - 1);
            shared.freed.notify_all();
        }
    }
}

fn closed_error() -> io::Error {
    io::Error::other("file already closed")
}

impl<S: Storage> FileCache<S> {
    /// A cache over `inner`, whose opens take their descriptors from `descriptors` (the same
    /// account `inner` was given), if any.
    pub fn new(inner: S, descriptors: Option<Rc<ShardDescriptors>>) -> Self {
        FileCache {
            shared: Rc::new(Shared {
                inner,
                dir_syncs: SharedDirSyncs::default(),
                descriptors,
                files: RefCell::default(),
                by_path: RefCell::default(),
                live: Cell::new(0),
                clock: Cell::new(0),
                stats: Cell::new(FileCacheStats::default()),
                opening: Cell::new(0),
                freed: LocalEvent::new(),
                in_use_open: Cell::new(0),
                parking: Cell::new(0),
                parked_room: Cell::new(0),
            }),
        }
    }

    /// The storage underneath.
    pub fn inner(&self) -> &S {
        &self.shared.inner
    }

    pub fn stats(&self) -> FileCacheStats {
        let mut stats = self.shared.stats.get();
        let (mut files, mut parked) = (0, 0);
        for file in self.shared.live_files() {
            match &*file.handle.borrow() {
                Handle::Open(_) => files += 1,
                Handle::Parked { .. } => (files, parked) = (files + 1, parked + 1),
                Handle::Closed { .. } => {}
            }
        }
        (stats.files, stats.parked) = (files, parked);
        stats
    }

    /// Closes idle files (clean first, then least recently used) until this shard holds no
    /// more than its fair share of the budget (or nothing idle is left). Returns how many it
    /// closed.
    pub async fn give_back(&self) -> usize {
        self.shared.give_back().await
    }

    /// Parks up to `count` idle files, clean first (for tests and for trimming a shard that
    /// went quiet). Returns how many it parked.
    pub async fn park_idle(&self, count: usize) -> usize {
        self.shared.park_least_recent(count, ParkFor::GivingBack).await
    }

    /// Answers the budget's pressure until the future is dropped: each time some shard raises
    /// it, gives back what this shard holds above its fair share. Returns at once without a
    /// budget. Run it as one task per shard.
    pub async fn answer_pressure(&self) {
        let Some(descriptors) = self.shared.descriptors.clone() else {
            return;
        };
        loop {
            let raised = descriptors.pressure_raised();
            if descriptors.take_pressure() {
                self.shared.give_back().await;
            } else {
                raised.await;
            }
        }
    }
}

impl<S: Storage> Shared<S> {
    fn tick(&self) -> u64 {
        let now = self.clock.get() + 1;
        self.clock.set(now);
        now
    }

    fn update(&self, change: impl FnOnce(&mut FileCacheStats)) {
        let mut stats = self.stats.get();
        change(&mut stats);
        self.stats.set(stats);
    }

    fn live_files(&self) -> Vec<Rc<CachedFile<S>>> {
        self.files.borrow().iter().filter_map(Weak::upgrade).collect()
    }

    fn register(&self, file: &Rc<CachedFile<S>>) {
        self.live.set(self.live.get() + 1);
        let mut files = self.files.borrow_mut();
        if files.len() >= 2 * self.live.get() + REGISTRY_SLACK {
            files.retain(|f| f.strong_count() > 0);
        }
        files.push(Rc::downgrade(file));
        let mut by_path = self.by_path.borrow_mut();
        if by_path.len() >= 2 * self.live.get() + REGISTRY_SLACK {
            by_path.retain(|f| f.strong_count() > 0);
        }
        by_path.insert(file.path.borrow().clone(), Rc::downgrade(file));
    }

    /// Opens `path` underneath; without a descriptor left, parks idle files and tries again.
    async fn open_inner(&self, path: &Path, create: bool) -> io::Result<Rc<S::File>> {
        self.with_descriptor(|| self.inner.open(path, create)).await
    }

    /// Runs `op`, which needs a descriptor (an open, a directory fsync); without one left,
    /// parks idle files or waits for uses to end, and runs it again.
    async fn with_descriptor<T, Op, Fut>(&self, op: Op) -> io::Result<T>
    where
        Op: Fn() -> Fut,
        Fut: std::future::Future<Output = io::Result<T>>,
    {
        let mut took_room = false;
        if let Some(descriptors) = &self.descriptors {
            if descriptors.take_pressure() {
                self.give_back().await;
            }
            let budget = descriptors.budget();
            if budget.files_used() >= budget.files_soft_limit() {
                took_room = self.take_parked_room();
                if !took_room {
                    // Files past their share: close some idle ones first, so that sends keep
                    // the rest (descriptors.rs). Nothing idle: the op goes on into the sends'.
                    self.park_least_recent(self.batch(), ParkFor::Opens).await;
                }
            }
        }
        for _ in 0..OPEN_ROUNDS_MAX {
            match self.counted(op()).await {
                Err(error) if is_out_of_descriptors(&error) => {}
                Err(error) => {
                    // It holds no descriptor: the next open may have its place (recovery looks
                    // for index files that are often missing, decision 0023, partition files made at first
                    // write).
                    if took_room {
                        self.give_back_parked_room();
                    }
                    return Err(error);
                }
                done => return done,
            }
            if self.parking.get() == 0 && self.park_least_recent(self.batch(), ParkFor::Opens).await > 0 {
                continue;
            }
            let freed = self.freed.listen();
            if !self.will_free() {
                break;
            }
            freed.await;
        }
        let last = self.counted(op()).await;
        if matches!(&last, Err(error) if is_out_of_descriptors(error)) {
            self.refused();
        }
        last
    }

    /// Runs `op` counted among the operations in flight that hold descriptors.
    /// An open refused for lack of descriptors frees nothing: it wakes no waiting open, or the
    /// opens waiting for parks to end would wake each other round after round.
    async fn counted<T>(&self, op: impl std::future::Future<Output = io::Result<T>>) -> io::Result<T> {
        self.opening.set(self.opening.get() + 1);
        let done = op.await;
        self.opening.set(self.opening.get() - 1);
        if !matches!(&done, Err(error) if is_out_of_descriptors(error)) {
            self.freed.notify_all();
        }
        done
    }

    /// Whether some descriptor of this shard will come back by itself: an open or close in
    /// flight, a file being parked, or a file that holds descriptors and is in use (it becomes
    /// idle when that use ends).
    fn will_free(&self) -> bool {
        self.opening.get() > 0 || self.parking.get() > 0 || self.in_use_open.get() > 0
    }

    /// How many files a shortage parks at once.
    fn batch(&self) -> usize {
        (self.live.get() / PARK_FRACTION).max(PARK_BATCH_MIN)
    }

    /// An open failed for lack of descriptors with nothing idle left to close here.
    fn refused(&self) {
        self.update(|s| s.refusals += 1);
        let Some(descriptors) = &self.descriptors else {
            return;
        };
        descriptors.budget().raise_pressure();
        if descriptors.held() >= descriptors.fair_share() {
            descriptors.budget().report_shortage(1, descriptors.held());
        }
    }

    async fn give_back(&self) -> usize {
        let Some(descriptors) = self.descriptors.clone() else {
            return 0;
        };
        let mut parked = 0;
        while descriptors.held() > descriptors.fair_share() {
            // Each file holds at least one descriptor: this many files at most are too many.
            let excess = (descriptors.held() - descriptors.fair_share()) as usize;
            match self.park_least_recent(excess, ParkFor::GivingBack).await {
                0 => break,
                n => parked += n,
            }
        }
        parked
    }

    /// Parks up to `count` idle files, clean ones first and least recently used first among
    /// each; returns how many. A dirty file must be fdatasync'd before it closes: parking the
    /// logs being written before index files nobody touched since their creation makes every
    /// append that needs a descriptor wait for other partitions' fdatasyncs.
    /// A descriptor that files being parked will give back and no other open counted on yet.
    fn take_parked_room(&self) -> bool {
        let room = self.parked_room.get().min(self.parking.get());
        self.parked_room.set(room.saturating_sub(1));
        room > 0
    }

    /// Gives back a place taken with [`Self::take_parked_room`] by an op that failed.
    fn give_back_parked_room(&self) {
        let room = (self.parked_room.get() + 1).min(self.parking.get());
        self.parked_room.set(room);
    }

    async fn park_least_recent(&self, count: usize, parking_for: ParkFor) -> usize {
        let mut idle: Vec<Rc<CachedFile<S>>> = (self.live_files().into_iter())
            .filter(|f| f.is_idle() && !f.parking.get())
            .collect();
        let count = count.min(idle.len());
        if count == 0 {
            return 0;
        }
        if count < idle.len() {
            idle.select_nth_unstable_by_key(count - 1, |f| (f.is_dirty(), f.last_use.get()));
            idle.truncate(count);
        }
        let _chosen = ChosenForParking::new(self, &idle);
        if parking_for == ParkFor::Opens {
            // The open that chose them takes one; the others are for the opens that follow.
            self.parked_room.set(self.parked_room.get() + idle.len() - 1);
        }
        let parked = futures::future::join_all(idle.iter().map(|f| f.park())).await;
        parked.into_iter().filter(|p| *p).count()
    }

    /// Files whose path is `path` (or, with `below`, lies under it) can no longer open by it.
    fn unlink(&self, path: &Path, below: bool) {
        let taken = self.by_path.borrow_mut().take(path, below);
        for file in taken
            .iter()
            .flat_map(|(_, files)| files)
            .filter_map(Weak::upgrade)
        {
            file.unlinked.set(true);
        }
    }

    /// A file renamed, or a directory: the files under it keep their names below `to`.
    fn renamed(&self, from: &Path, to: &Path) {
        self.unlink(to, false);
        let moved = self.by_path.borrow_mut().take(from, true);
        for (old, files) in moved {
            let new = super::moved_below(&old, from, to).expect("the index took paths below `from`");
            for file in files.iter().filter_map(Weak::upgrade) {
                *file.path.borrow_mut() = new.clone();
                self.by_path
                    .borrow_mut()
                    .insert(new.clone(), Rc::downgrade(&file));
            }
        }
    }
}

impl<S: Storage> CachedFile<S> {
    /// The open file underneath, if it is open.
    fn open_handle(&self) -> Option<Rc<S::File>> {
        match &*self.handle.borrow() {
            Handle::Open(file) => Some(file.clone()),
            Handle::Parked { .. } | Handle::Closed { .. } => None,
        }
    }

    fn is_dirty(&self) -> bool {
        self.writes.get() > self.writes_synced.get()
    }

    fn is_idle(&self) -> bool {
        self.busy.get() == 0
            && self.failure.borrow().is_none()
            && matches!(&*self.handle.borrow(), Handle::Open(_))
    }

    /// The open file to run one operation on, reopened if parked, and the mark that keeps it
    /// from being parked until the operation ends.
    async fn acquire(&self) -> io::Result<(Rc<S::File>, InUse<'_, S>)> {
        if let Some(reason) = &*self.failure.borrow() {
            let path = self.path.borrow();
            let message = format!("{}: failed while closed idle: {reason}", path.display());
            return Err(io::Error::other(message));
        }
        let in_use = InUse::new(self);
        let len = match &*self.handle.borrow() {
            Handle::Open(file) => return Ok((file.clone(), in_use)),
            Handle::Parked { len } => *len,
            Handle::Closed { .. } => return Err(closed_error()),
        };
        let file = self.reopen(len).await?;
        Ok((file, in_use))
    }

    /// Opens the parked file again by its path: it must still be the same file, `len` long.
    async fn reopen(&self, len: u64) -> io::Result<Rc<S::File>> {
        let path = self.path.borrow().clone();
        if self.unlinked.get() {
            let message = format!("{}: removed while closed idle", path.display());
            return Err(io::Error::new(io::ErrorKind::NotFound, message));
        }
        let file = self.shared.open_inner(&path, false).await?;
        if (file.id(), file.len()) != (self.id, len) {
            let found = (file.id(), file.len());
            let _ = file.close().await;
            let message = format!(
                "{}: another file than the one closed idle: {found:?}, not {:?}",
                path.display(),
                (self.id, len)
            );
            return Err(io::Error::new(io::ErrorKind::InvalidData, message));
        }
        let current = match &*self.handle.borrow() {
            Handle::Open(other) => Some(Ok(other.clone())),
            Handle::Closed { .. } => Some(Err(closed_error())),
            Handle::Parked { .. } => None,
        };
        if let Some(current) = current {
            // Reopened by another use, or closed, meanwhile: this open is not needed.
            file.close().await?;
            return current;
        }
        *self.handle.borrow_mut() = Handle::Open(file.clone());
        // In use (by the caller) and open from now on.
        self.shared.in_use_open.set(self.shared.in_use_open.get() + 1);
        self.shared.update(|s| s.reopens += 1);
        Ok(file)
    }

    /// Closes the file if it is idle, fdatasyncing it first if it is dirty; returns whether it
    /// did.
    async fn park(&self) -> bool {
        if !self.is_idle() {
            return false;
        }
        if self.is_dirty() {
            if let Err(error) = StorageFile::fdatasync(self).await {
                self.fail("fdatasync before closing an idle file", &error);
                return false;
            }
            if !self.is_idle() || self.is_dirty() {
                return false;
            }
        }
        let Some(file) = self.open_handle() else {
            return false;
        };
        *self.handle.borrow_mut() = Handle::Parked { len: file.len() };
        self.shared.update(|s| s.parks += 1);
        // Counted in flight: its descriptors come back when the close completes.
        if let Err(error) = self.shared.counted(file.close()).await {
            self.fail("closing an idle file", &error);
        }
        true
    }

    fn fail(&self, what: &str, error: &io::Error) {
        let path = self.path.borrow();
        tracing::error!(path = %path.display(), %error, "{what} failed: the file fails");
        self.failure
            .borrow_mut()
            .get_or_insert_with(|| format!("{what}: {error}"));
    }
}

impl<S: Storage> Drop for CachedFile<S> {
    fn drop(&mut self) {
        self.shared.live.set(self.shared.live.get() - 1);
        self.shared.freed.notify_all();
    }
}

impl<S: Storage> StorageFile for CachedFile<S> {
    /// Level 0 is the open file's object; the next ones are the file's own.
    fn prefetch_append(&self, level: u8, pos: u64) {
        if let Ok(Handle::Open(file)) = self.handle.try_borrow().as_deref() {
            match level {
                0 => laminar_sys::memory::prefetch_rc(file),
                _ => file.prefetch_append(level - 1, pos),
            }
        }
    }

    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        let (file, _in_use) = self.acquire().await?;
        file.read_at(pos, len).await
    }

    async fn write_at(&self, pos: u64, parts: &[&[u8]]) -> io::Result<()> {
        let (file, _in_use) = self.acquire().await?;
        self.writes.set(self.writes.get() + 1);
        file.write_at(pos, parts).await
    }

    /// A file with nothing written since its last successful fdatasync needs none: a parked
    /// file is such a file (parked only after one), and is not opened for it.
    async fn fdatasync(&self) -> io::Result<()> {
        let parked = matches!(&*self.handle.borrow(), Handle::Parked { .. });
        if parked && self.failure.borrow().is_none() {
            assert!(!self.is_dirty(), "a parked file was synced before it was closed");
            return Ok(());
        }
        if !self.is_dirty() && self.failure.borrow().is_none() {
            // Nothing written through this file since its last successful fdatasync: nothing
            // of it is dirty, so there is nothing for writeback to fail on either.
            return Ok(());
        }
        let (file, _in_use) = self.acquire().await?;
        let covered = self.writes.get();
        file.fdatasync().await?;
        self.writes_synced.set(self.writes_synced.get().max(covered));
        Ok(())
    }

    /// A truncate to the current length changes no byte (it gives back blocks reserved past
    /// it): the file does not become dirty for it.
    async fn truncate(&self, len: u64) -> io::Result<()> {
        let unchanged = matches!(&*self.handle.borrow(), Handle::Parked { len: at } if *at == len);
        if unchanged && self.failure.borrow().is_none() {
            return Ok(()); // a closed file holds no blocks ahead (its close gave them back)
        }
        let (file, _in_use) = self.acquire().await?;
        if len != file.len() {
            self.writes.set(self.writes.get() + 1);
        }
        file.truncate(len).await
    }

    async fn reuse_blocks(&self) -> io::Result<()> {
        let (file, _in_use) = self.acquire().await?;
        self.writes.set(self.writes.get() + 1);
        file.reuse_blocks().await
    }

    fn reserve(&self, end: u64) {
        if let Some(file) = self.open_handle() {
            file.reserve(end);
        }
    }

    /// A parked file was closed, which waited for its writes.
    async fn wait_written(&self) -> io::Result<()> {
        match self.open_handle() {
            Some(file) => file.wait_written().await,
            None => Ok(()),
        }
    }

    fn reserved_bytes(&self) -> u64 {
        self.open_handle().map_or(0, |file| file.reserved_bytes())
    }

    fn sendable(&self) -> io::Result<Option<LentFile>> {
        match self.open_handle() {
            Some(file) => file.sendable(),
            None => Ok(None),
        }
    }

    /// A parked file answers "not cached": the caller then reads through the path that opens it.
    fn is_cached(&self, pos: u64, len: u64) -> io::Result<bool> {
        match self.open_handle() {
            Some(file) => file.is_cached(pos, len),
            None => Ok(false),
        }
    }

    fn uncached_runs(&self, pos: u64, len: u64, runs_max: usize) -> io::Result<Option<Vec<Range<u64>>>> {
        match self.open_handle() {
            Some(file) => file.uncached_runs(pos, len, runs_max),
            None => Ok(None),
        }
    }

    fn len(&self) -> u64 {
        match &*self.handle.borrow() {
            Handle::Open(file) => file.len(),
            Handle::Parked { len } | Handle::Closed { len } => *len,
        }
    }

    fn id(&self) -> FileId {
        self.id
    }

    async fn close_until_used(&self) {
        self.park().await;
    }

    async fn close(&self) -> io::Result<()> {
        let len = self.len();
        if self.busy.get() > 0 && self.open_handle().is_some() {
            self.shared.in_use_open.set(self.shared.in_use_open.get() - 1);
        }
        let before = std::mem::replace(&mut *self.handle.borrow_mut(), Handle::Closed { len });
        let closed = match before {
            Handle::Open(file) => file.close().await,
            Handle::Parked { .. } | Handle::Closed { .. } => Ok(()),
        };
        self.shared.freed.notify_all();
        closed
    }
}

impl<S: Storage> Storage for FileCache<S> {
    type File = CachedFile<S>;

    fn recycles_segments(&self) -> bool {
        self.shared.inner.recycles_segments()
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.shared.inner.create_dir_all(path).await
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.shared.inner.list_dir(path).await
    }

    async fn file_len(&self, path: &Path) -> io::Result<u64> {
        self.shared.inner.file_len(path).await
    }

    async fn open(&self, path: &Path, create: bool) -> io::Result<Rc<CachedFile<S>>> {
        let file = self.shared.open_inner(path, create).await?;
        let cached = Rc::new(CachedFile {
            shared: self.shared.clone(),
            path: RefCell::new(path.to_path_buf()),
            id: file.id(),
            handle: RefCell::new(Handle::Open(file)),
            busy: Cell::new(0),
            last_use: Cell::new(self.shared.tick()),
            // What the file held when opened is on disk: the log syncs what recovery keeps
            // after a crash, and everything else at rolls, checkpoints and closes.
            writes: Cell::new(0),
            writes_synced: Cell::new(0),
            unlinked: Cell::new(false),
            failure: RefCell::new(None),
            parking: Cell::new(false),
        });
        self.shared.register(&cached);
        Ok(cached)
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.shared.inner.remove_file(path).await?;
        self.shared.unlink(path, false);
        Ok(())
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.shared.inner.remove_dir_all(path).await?;
        self.shared.unlink(path, true);
        Ok(())
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.shared.inner.rename(from, to).await?;
        self.shared.renamed(from, to);
        Ok(())
    }

    async fn exists(&self, path: &Path) -> io::Result<bool> {
        self.shared.inner.exists(path).await
    }

    /// Callers asking for the same directory at once share an fsync (`dir_syncs.rs`). Its
    /// descriptor is not the budget's: the inner storage bounds directory fsyncs on its own, so
    /// a burst of them parks no file.
    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let shared = &self.shared;
        shared.dir_syncs.sync(path, || shared.inner.sync_dir(path)).await
    }
}

#[cfg(test)]
#[path = "file_cache_tests.rs"]
mod tests;
