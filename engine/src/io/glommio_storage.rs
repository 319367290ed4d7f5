//! [`Storage`] on glommio 0.9 files: buffered (page cache) by default, O_DIRECT on request.
//!
//! Directory operations (mkdir, readdir, rename, unlink) are rare — segment roll, retention,
//! topic deletion — and glommio 0.9 offers no io_uring version of most of them, so they use
//! blocking `std::fs` calls; directory fsync goes through glommio.

use super::descriptors::{DescriptorSlots, ShardDescriptors};
use super::direct_appends::{DirectAppendStats, DirectRing, FileAppends};
use super::mapped_appends::{MappedEnd, ShardMappedAppends};
use super::prewrite::{FilePrewrite, PrewriteRing, PrewriteStats};
use super::reservations::ReserveBudget;
use super::writeback::{FileWriteBehind, WriteBehind, WriteBehindRing, WriteBehindStats};
use super::{FileId, LentFile, Storage, StorageFile};
use crate::task_wakers::once_per_wake;
use bytes::Bytes;
use glommio::io::{BufferedFile, DmaFile, OpenOptions};
use laminar_sys::files::FileStat;
use laminar_sys::memory::DIRECT_IO_ALIGN;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

/// How segment files are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// Through the page cache (`BufferedFile`): reads of recent data hit memory.
    #[default]
    Buffered,
    /// O_DIRECT (`DmaFile`): bypasses the page cache; the partial last block is kept in memory
    /// and rewritten by the next append (read-modify-write without the read).
    Direct,
}

impl WriteMode {
    /// The names `laminar.storage.write_mode` takes.
    pub const NAMES: &'static [&'static str] = &["buffered", "direct"];

    /// The `laminar.storage.write_mode` value naming this mode.
    pub fn name(self) -> &'static str {
        match self {
            WriteMode::Buffered => "buffered",
            WriteMode::Direct => "direct",
        }
    }

    pub fn parse(name: &str) -> Option<WriteMode> {
        match name.trim() {
            "buffered" => Some(WriteMode::Buffered),
            "direct" => Some(WriteMode::Direct),
            _ => None,
        }
    }

    /// Descriptors one open file holds.
    fn descriptors_per_file(self) -> u64 {
        match self {
            WriteMode::Buffered => 1,
            WriteMode::Direct => 2, // the O_DIRECT one and the buffered one for reads
        }
    }
}

/// Slots for the fdatasyncs (and directory syncs) one shard has in io_uring at once, shared by
/// the shard's storage and every file it opened. Owned by one shard; not Send.
///
/// io_uring runs an fdatasync on the thread's io-wq, and every io_uring cancel walks io-wq's
/// queue of work not yet started: glommio submits one each time it replaces its preemption
/// timer (a `TIMEOUT` it submits and cancels around its runs of task queues). A file cache
/// giving back descriptors (parking hundreds of dirty files, each fdatasynced before its close)
/// queued thousands: each cancel then cost ~100 µs and, in a produce into 10 000 partitions,
/// 17 % of the broker's CPU went into those walks, halving the run's throughput
/// (docs/decisions/0021, file cache and descriptor budget). Past [`SYNCS_IN_FLIGHT_MAX`] they wait here
/// instead.
#[derive(Clone)]
struct SyncSlots(Rc<glommio::sync::Semaphore>);

/// fdatasyncs a shard has in io_uring at once. Enough that many partitions' syncs overlap (8
/// doubled the time a broker over its descriptor budget took to park files, and ran it short of
/// descriptors: `tests/tests/open_files_limit.rs`); few enough that a cancel's walk stays
/// around a microsecond.
const SYNCS_IN_FLIGHT_MAX: usize = 64;

impl SyncSlots {
    fn new(slots: usize) -> Self {
        SyncSlots(Rc::new(glommio::sync::Semaphore::new(slots.max(1) as u64)))
    }

    /// Runs `sync` once a slot is free, holding the slot until it completes.
    async fn run<F: Future>(&self, sync: F) -> io::Result<F::Output> {
        // The semaphore is never closed, so this only fails on a bug in it.
        let _slot = self
            .0
            .acquire_permit(1)
            .await
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(sync.await)
    }
}

impl Default for SyncSlots {
    fn default() -> Self {
        Self::new(SYNCS_IN_FLIGHT_MAX)
    }
}

/// Directory fsyncs a shard runs at once, each holding the directory's descriptor outside the
/// descriptor budget: the broker keeps this many per shard out of the budget's pool. Outside
/// it, a burst of new partitions' first syncs (two directory fsyncs each) waits here instead of
/// parking the partitions' files to make room (docs/decisions/0023, partition files made at first write).
pub const DIR_SYNCS_IN_FLIGHT_MAX: usize = 4;

impl std::fmt::Debug for SyncSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SyncSlots({} free)", self.0.available())
    }
}

/// Opens files on the local file system through glommio. Owned by one shard; not Send.
#[derive(Debug, Clone)]
pub struct GlommioStorage {
    mode: WriteMode,
    /// This shard's fdatasync slots.
    sync_slots: SyncSlots,
    /// This shard's directory fsync slots ([`DIR_SYNCS_IN_FLIGHT_MAX`]).
    dir_sync_slots: SyncSlots,
    /// This shard's write-behind (buffered mode only; see [`super::writeback`]).
    write_behind: Option<Rc<WriteBehindRing>>,
    /// This shard's account on the budget open files take their descriptors from; `None`: no
    /// bound but the kernel's.
    descriptors: Option<Rc<ShardDescriptors>>,
    /// The log dir's budget of blocks reserved ahead of appends; `None`: no bound.
    reservations: Option<Arc<ReserveBudget>>,
    /// Small appends to segment `.log` files go through a mapping (buffered mode; see
    /// [`super::mapped_appends`]); `None`: every append is a `pwritev`.
    mapped_appends: Option<Rc<ShardMappedAppends>>,
    /// The blocks ahead of segment `.log` files' appends are pre-written (see
    /// [`super::prewrite`]); `None`: reserved with `fallocate`, as other files' are.
    prewrite: Option<Rc<PrewriteRing>>,
    /// O_DIRECT mode: the ring segment `.log` files' appends are written on (see
    /// [`super::direct_appends`]), made at the first open of one.
    direct_ring: Rc<RefCell<Option<Rc<DirectRing>>>>,
    /// O_DIRECT mode: bytes of recent writes the shard keeps for reads (see
    /// [`super::recent_writes`]).
    recent_writes_bytes: u64,
}

impl GlommioStorage {
    /// Without write-behind.
    pub fn new(mode: WriteMode) -> Self {
        GlommioStorage {
            mode,
            sync_slots: SyncSlots::default(),
            dir_sync_slots: SyncSlots::new(DIR_SYNCS_IN_FLIGHT_MAX),
            write_behind: None,
            descriptors: None,
            reservations: None,
            mapped_appends: (mode == WriteMode::Buffered).then(Rc::default),
            prewrite: None,
            direct_ring: Rc::default(),
            recent_writes_bytes: 0,
        }
    }

    /// O_DIRECT mode: the shard keeps up to `bytes` of what it wrote for reads of recent data
    /// (none by default). Set before the first file opens.
    pub fn with_recent_writes(mut self, bytes: u64) -> Self {
        self.recent_writes_bytes = bytes;
        self
    }

    /// This shard's O_DIRECT append counters; `None` before the first segment file opened in
    /// that mode.
    pub fn direct_append_stats(&self) -> Option<DirectAppendStats> {
        self.direct_ring.borrow().as_ref().map(|ring| ring.stats())
    }

    fn direct_ring(&self) -> io::Result<Rc<DirectRing>> {
        let mut ring = self.direct_ring.borrow_mut();
        if let Some(ring) = &*ring {
            return Ok(ring.clone());
        }
        let made = DirectRing::new(self.recent_writes_bytes)?;
        *ring = Some(made.clone());
        Ok(made)
    }

    /// Turns pre-written segment files on or off (off by default). Fails when the shard's
    /// pre-write ring cannot be created.
    pub fn with_prewrite(mut self, on: bool) -> io::Result<Self> {
        self.prewrite = if on {
            Some(PrewriteRing::new(self.mode == WriteMode::Direct)?)
        } else {
            None
        };
        Ok(self)
    }

    /// This shard's pre-write counters; `None` when pre-writing is off.
    pub fn prewrite_stats(&self) -> Option<PrewriteStats> {
        self.prewrite.as_ref().map(|ring| ring.stats())
    }

    /// Turns mapped appends on (the default in buffered mode) or off: then every append is a
    /// `pwritev`.
    pub fn with_mapped_appends(mut self, on: bool) -> Self {
        self.mapped_appends = (on && self.mode == WriteMode::Buffered).then(Rc::default);
        self
    }

    /// Blocks reserved ahead of appends in files opened from now on come out of `budget`
    /// (see [`super::reservations`]).
    pub fn with_reserve_budget(mut self, budget: Arc<ReserveBudget>) -> Self {
        self.reservations = Some(budget);
        self
    }

    /// Every file opened from now on holds its descriptors in `shard`'s account, and an open
    /// past the budget fails with EMFILE (see [`super::descriptors`]).
    pub fn with_descriptor_budget(mut self, shard: Rc<ShardDescriptors>) -> Self {
        self.descriptors = Some(shard);
        self
    }

    /// With write-behind as `settings` say (ignored in O_DIRECT mode, which leaves no dirty
    /// pages). Fails when the shard's write-behind ring cannot be created.
    pub fn with_write_behind(mode: WriteMode, settings: WriteBehind) -> io::Result<Self> {
        let write_behind = if settings.is_enabled() && mode == WriteMode::Buffered {
            Some(WriteBehindRing::new(settings)?)
        } else {
            None
        };
        Ok(GlommioStorage {
            write_behind,
            ..GlommioStorage::new(mode)
        })
    }

    /// This shard's write-behind counters; `None` when write-behind is off.
    pub fn write_behind_stats(&self) -> Option<WriteBehindStats> {
        self.write_behind.as_ref().map(|ring| ring.stats())
    }
}

enum Handle {
    Buffered(Rc<BufferedFile>),
    /// O_DIRECT for writes; a buffered handle for reads (glommio's DMA reads fail with
    /// EOPNOTSUPP on some devices; the kernel keeps the page cache coherent with direct writes).
    Direct(Rc<DmaFile>, Rc<BufferedFile>),
}

impl Clone for Handle {
    fn clone(&self) -> Self {
        match self {
            Handle::Buffered(f) => Handle::Buffered(f.clone()),
            Handle::Direct(f, r) => Handle::Direct(f.clone(), r.clone()),
        }
    }
}

/// An open glommio file. Owned by one shard; not Send.
pub struct GlommioFile {
    handle: RefCell<Option<Handle>>,
    /// The descriptor of a `Handle::Buffered`, read at open (-1 in Direct mode). Valid while
    /// `handle` is `Some`: `close` takes the handle before the descriptor closes. Writes read
    /// it here rather than through the handle's `Rc`, a cache miss per write when many files
    /// take small appends (decision 0026, per-batch cost across many partitions).
    buffered_fd: std::os::fd::RawFd,
    id: FileId,
    len: Cell<u64>,
    /// Direct mode: bytes of the block holding the end of file, `[align_down(len), len)`
    /// (segment `.log` files: `appends` has them; this is filled from it for an overwrite).
    tail_block: RefCell<Vec<u8>>,
    /// Direct mode, segment `.log` files: their appends, staged and written on the shard's ring.
    appends: Option<Rc<FileAppends>>,
    writeback: FileWriteBehind,
    /// The descriptor this file holds, when the storage has a budget; given back at close, or
    /// when the file is dropped. (Duplicates lent to sends hold their own.)
    descriptors: RefCell<Option<DescriptorSlots>>,
    /// Blocks are reserved up to here (0: none past the length).
    reserved_to: Cell<u64>,
    /// Bytes of the reserve budget this file holds: what it reserved past its length.
    reserve_held: Cell<u64>,
    reservations: Option<Arc<ReserveBudget>>,
    /// The shard's fdatasync slots.
    sync_slots: SyncSlots,
    /// Segment `.log` files in buffered mode: the shard's mapped appends and this file's
    /// mapped end. While mapped, the file's length may lie past `len` (see
    /// [`super::mapped_appends`]): every length change and the close cut it back first.
    mapped: Option<(Rc<ShardMappedAppends>, RefCell<MappedEnd>)>,
    /// Segment `.log` files, when the storage pre-writes: the blocks ahead of the appends. The
    /// file's length may then lie past `len`, as with a mapping; the two never meet in one
    /// file (a mapped file reserves with `fallocate`; a pre-written one is not mapped).
    prewrite: FilePrewrite,
}

fn closed() -> io::Error {
    io::Error::other("file already closed")
}

impl GlommioFile {
    /// The file's write-behind marks, for tests that feed it a descriptor of their own.
    #[cfg(test)]
    pub(crate) fn write_behind(&self) -> &FileWriteBehind {
        &self.writeback
    }

    fn handle(&self) -> io::Result<Handle> {
        self.handle.borrow().clone().ok_or_else(closed)
    }

    /// Gives back the part of the reserve budget that appends have since filled (or a
    /// truncate freed): the file then holds only what lies reserved past its length.
    fn settle_reservation(&self) {
        let ahead = self.reserved_to.get().saturating_sub(self.len.get());
        let held = self.reserve_held.get();
        if held > ahead {
            if let Some(budget) = &self.reservations {
                budget.give_back(held - ahead);
            }
            self.reserve_held.set(ahead);
        }
    }

    /// Blocks are reserved past the length (a truncate to it gives them back).
    fn reserves_ahead(&self) -> bool {
        self.reserved_to.get() > self.len.get()
    }

    /// The descriptor reads go through (the page-cache one in Direct mode too).
    fn read_fd(&self) -> io::Result<std::os::fd::RawFd> {
        Ok(match self.handle()? {
            Handle::Buffered(f) => f.as_raw_fd(),
            Handle::Direct(_, r) => r.as_raw_fd(),
        })
    }
}

impl GlommioFile {
    /// Writes a small append through the file's mapped end; `None` when it is `pwritev`'s.
    fn write_mapped(&self, fd: std::os::fd::RawFd, pos: u64, parts: &[&[u8]]) -> Option<u64> {
        let (shard, end) = self.mapped.as_ref()?;
        if self.prewrite.is_past(self.len.get()) {
            return None;
        }
        let file = (fd, self.id.device, self.len.get());
        end.borrow_mut().write(shard, file, pos, parts)
    }

    /// Drops the mapped end before the file's length changes or it closes; returns whether
    /// the length lies past the data (the caller cuts it back).
    fn unmap_end(&self) -> bool {
        self.mapped
            .as_ref()
            .is_some_and(|(_, end)| end.borrow_mut().unmap(self.len.get()))
    }
}

impl Drop for GlommioFile {
    /// A file dropped unclosed gives back its share of the reserve budget (its blocks, if any,
    /// stay reserved until its segment's file is next truncated, or is removed), and its length
    /// set past the data for a mapping.
    fn drop(&mut self) {
        if self.unmap_end() {
            if let Ok(fd) = self.read_fd() {
                if let Err(error) = laminar_sys::files::set_len(fd, self.len.get()) {
                    tracing::warn!(%error, "cannot cut a dropped file back to its data: the next open verifies its tail");
                }
            }
        }
        if let Some(budget) = &self.reservations {
            budget.give_back(self.reserve_held.get());
        }
    }
}

impl StorageFile for GlommioFile {
    /// Level 0 is where a mapped append at `pos` would copy to.
    fn prefetch_append(&self, level: u8, pos: u64) {
        if let (0, Some((_, end))) = (level, &self.mapped) {
            if let Ok(end) = end.try_borrow() {
                end.prefetch_write(pos);
            }
        }
    }

    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        let len = len.min(self.len.get().saturating_sub(pos) as usize);
        if len == 0 {
            return Ok(Bytes::new());
        }
        // Bytes in the page cache are read on this thread, straight into the buffer returned
        // (no io_uring round trip, no second copy); the others through io_uring, as glommio
        // reads, and copied once (its ReadResult is Rc-backed; Bytes needs Send).
        let out = match self.handle()? {
            Handle::Buffered(f) => match laminar_sys::page_cache::read_cached(f.as_raw_fd(), pos, len)? {
                Some(cached) => cached,
                None => Bytes::copy_from_slice(&once_per_wake(f.read_at(pos, len)).await?),
            },
            Handle::Direct(_, r) => {
                if let Some(appends) = &self.appends {
                    if let Some(cached) = appends.cached(pos, len) {
                        return Ok(cached);
                    }
                    appends.drain_to(pos + len as u64).await?;
                }
                Bytes::copy_from_slice(&once_per_wake(r.read_at(pos, len)).await?)
            }
        };
        Ok(out)
    }

    async fn write_at(&self, pos: u64, parts: &[&[u8]]) -> io::Result<()> {
        self.writeback.check()?;
        if self.prewrite.is_on() {
            let end = pos + parts.iter().map(|p| p.len() as u64).sum::<u64>();
            // Whole blocks: an O_DIRECT write rewrites the blocks it touches.
            self.prewrite
                .wait_clear(pos & !4095, end.next_multiple_of(4096))
                .await;
        }
        let buffered = match &*self.handle.borrow() {
            None => return Err(closed()),
            Some(handle) => matches!(handle, Handle::Buffered(_)),
        };
        if buffered {
            // A plain pwrite into the page cache, on this shard's thread: ext4 does not take
            // buffered writes without blocking (RWF_NOWAIT), so io_uring would hand each one
            // to an io-wq kernel thread, and that hop (context switches, wake-ups across
            // cores) cost more than the copy itself (docs/decisions/0003). The bytes go
            // straight from the request buffer; nothing is copied in user space.
            let fd = self.buffered_fd;
            let written = match self.write_mapped(fd, pos, parts) {
                Some(written) => written,
                None => laminar_sys::files::pwritev_all(fd, parts, pos)?,
            };
            self.writeback.written(fd, pos, written);
            self.len.set(self.len.get().max(pos + written));
            self.settle_reservation();
            return Ok(());
        }
        match self.handle()? {
            Handle::Direct(f, r) => self.write_direct_file(&f, &r, pos, parts).await,
            Handle::Buffered(_) => unreachable!("buffered writes return above"),
        }
    }

    async fn fdatasync(&self) -> io::Result<()> {
        self.writeback.check()?;
        match self.handle()? {
            Handle::Buffered(f) => self.sync_slots.run(once_per_wake(f.fdatasync())).await??,
            Handle::Direct(f, _) => {
                // O_DIRECT writes whole blocks: the file ends with the zero padding of its last
                // block, which a close cuts off, and recovery after a crash cuts as any torn
                // tail. Cutting it before each sync cost a metadata change per sync, and
                // (measured) doubled the bytes the disk wrote.
                self.drain_appends().await?;
                self.sync_slots.run(once_per_wake(f.fdatasync())).await??
            }
        }
        Ok(())
    }

    async fn wait_written(&self) -> io::Result<()> {
        self.drain_appends().await
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        self.unmap_end(); // the truncate below sets the length anyway
        self.prewrite.settle_and_forget(len).await;
        match self.handle()? {
            Handle::Buffered(f) => once_per_wake(f.truncate(len)).await?,
            Handle::Direct(f, r) => {
                self.drain_appends().await?;
                once_per_wake(f.truncate(len)).await?;
                *self.tail_block.borrow_mut() = read_tail(&r, len, f.alignment()).await?;
                if let Some(appends) = &self.appends {
                    appends.reset(len, &read_tail(&r, len, DIRECT_IO_ALIGN as u64).await?);
                    appends.cut_cached(len);
                }
            }
        }
        self.len.set(len);
        self.writeback.truncated(len);
        // The blocks past the new length are free again.
        self.reserved_to.set(0);
        self.settle_reservation();
        Ok(())
    }

    /// O_DIRECT: the length goes to 0 and the blocks stay, old bytes and all; appends overwrite
    /// them whole blocks at a time (the last one padded with zeros), reads stop at the length,
    /// and a close cuts what lies past it. After a crash, recovery stops at the first byte
    /// that does not continue the segment: zeros, or an old batch, whose offsets lie below
    /// the segment's base.
    async fn reuse_blocks(&self) -> io::Result<()> {
        if !matches!(self.handle()?, Handle::Direct(..)) {
            return self.truncate(0).await;
        }
        self.prewrite.settle_and_forget(0).await;
        self.drain_appends().await?;
        if let Some(appends) = &self.appends {
            appends.reset(0, &[]);
            appends.cut_cached(0);
        }
        self.len.set(0);
        self.tail_block.borrow_mut().clear();
        self.reserved_to.set(0);
        self.settle_reservation();
        Ok(())
    }

    /// Reserves what the budget grants of `[max(length, reserved end), end)`: pre-written for
    /// a segment `.log` file when the storage pre-writes (one region in flight per file: a
    /// call meanwhile reserves nothing, the next one goes on from there), else with
    /// `fallocate` (buffered files only: O_DIRECT ones write whole blocks of their own).
    fn reserve(&self, end: u64) {
        let Ok(handle) = self.handle() else {
            return;
        };
        let (fd, buffered) = match &handle {
            Handle::Buffered(f) => (f.as_raw_fd(), true),
            Handle::Direct(f, _) => (f.as_raw_fd(), false),
        };
        let mapped = self
            .mapped
            .as_ref()
            .is_some_and(|(_, end)| end.borrow().is_mapped());
        let prewrite = self.prewrite.is_on() && !mapped;
        if (!prewrite && !buffered) || (prewrite && self.prewrite.is_past(end)) {
            return;
        }
        self.settle_reservation();
        let from = self.len.get().max(self.reserved_to.get());
        if end <= from {
            return;
        }
        let granted = match &self.reservations {
            Some(budget) => budget.take_up_to(end - from),
            None => end - from,
        };
        if granted == 0 {
            return; // the log dir's budget is spent: appends allocate as they go
        }
        let reserved = if prewrite {
            self.prewrite.request(fd, from, from + granted)
        } else {
            None
        };
        let reserved = match reserved {
            Some(reserved_to) => Ok(reserved_to),
            None if buffered => {
                laminar_sys::files::reserve_blocks(fd, from, granted).map(|()| from + granted)
            }
            None => Err(io::Error::other("no pre-write slot")),
        };
        match reserved {
            Ok(reserved_to) => {
                self.reserved_to.set(reserved_to);
                if self.reservations.is_some() {
                    self.reserve_held.set(self.reserve_held.get() + granted);
                }
            }
            Err(error) => {
                if let Some(budget) = &self.reservations {
                    budget.give_back(granted);
                }
                tracing::debug!(%error, "cannot reserve blocks ahead of appends; they allocate as they go");
            }
        }
    }

    fn reserved_bytes(&self) -> u64 {
        self.reserved_to.get().saturating_sub(self.len.get())
    }

    /// A duplicate descriptor for one send, lent by the budget (none when it has none to lend:
    /// the bytes then go through memory). The file may close while a send holds it.
    fn sendable(&self) -> io::Result<Option<LentFile>> {
        if self.appends.is_some() {
            // Another thread's read through the page cache could meet a block while an
            // O_DIRECT write of it is in flight, and leave a stale copy of it cached: every
            // read of these files goes through `read_at`, which waits for such writes.
            return Ok(None);
        }
        let fd = self.read_fd()?;
        let slot = match self.descriptors.borrow().as_ref() {
            Some(slots) => match slots.budget().lend() {
                Some(slot) => Some(slot),
                None => return Ok(None),
            },
            None => None,
        };
        match laminar_sys::files::duplicate(fd) {
            Ok(duplicate) => Ok(Some(LentFile::new(std::fs::File::from(duplicate), slot))),
            Err(error) if super::is_out_of_descriptors(&error) => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn is_cached(&self, pos: u64, len: u64) -> io::Result<bool> {
        if self.appends.is_some() {
            return Ok(false); // sent from memory (see `sendable`)
        }
        let fd = self.read_fd()?;
        // Every page counts: reclaim takes pages here and there (DAMON's proactive reclaim took
        // the last few pages of one segment in ten, 5–20 s after they were written), and a
        // sendfile that meets one blocks the shard on the disk (decision 0028, ranges the host's reclaim
        // thinned).
        if let Some(cached) = laminar_sys::page_cache::range_cached(fd, pos, len)? {
            return Ok(cached);
        }
        // A kernel without cachestat: the batch lookup has usually just read the first page,
        // and eviction is roughly oldest first, so the middle and last pages are the telling ones.
        let probes = [pos + len / 2, pos + len.saturating_sub(1), pos];
        for probe in probes {
            if !laminar_sys::page_cache::is_cached(fd, probe)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn uncached_runs(&self, pos: u64, len: u64, runs_max: usize) -> io::Result<Option<Vec<Range<u64>>>> {
        if self.appends.is_some() {
            return Ok(None); // sent from memory (see `sendable`)
        }
        laminar_sys::page_cache::uncached_runs(self.read_fd()?, pos, len, runs_max)
    }

    fn len(&self) -> u64 {
        self.len.get()
    }

    fn id(&self) -> FileId {
        self.id
    }

    async fn close(&self) -> io::Result<()> {
        if self.handle.borrow().is_some() {
            self.drain_appends().await?;
        }
        if let Some(appends) = &self.appends {
            appends.cut_cached(0);
        }
        let Some(handle) = self.handle.borrow_mut().take() else {
            return Ok(());
        };
        self.writeback.closed();
        let past_data = self.unmap_end();
        self.prewrite.settle_and_forget(self.len.get()).await;
        // Given back once the descriptors are closed below (when this returns), so that no
        // other open takes them while they are still open; one still used by an operation in
        // flight closes as soon as that operation ends.
        let _descriptors = self.descriptors.borrow_mut().take();
        match handle {
            Handle::Buffered(f) => {
                if self.reserves_ahead() || past_data {
                    // A closed file keeps no blocks ahead: nothing would give them back.
                    once_per_wake(f.truncate(self.len.get())).await?;
                    self.reserved_to.set(0);
                    self.settle_reservation();
                }
                if let Ok(f) = Rc::try_unwrap(f) {
                    once_per_wake(f.close()).await?;
                }
            }
            Handle::Direct(f, r) => {
                once_per_wake(f.truncate(self.len.get())).await?;
                if let Ok(f) = Rc::try_unwrap(f) {
                    once_per_wake(f.close()).await?;
                }
                if let Ok(r) = Rc::try_unwrap(r) {
                    once_per_wake(r.close()).await?;
                }
            }
        }
        Ok(())
    }
}

/// Opens (or creates) a file read+write with a plain `open(2)` on this thread, and `fstat`s it:
/// for a file that exists, the kernel finds it in the dentry cache in microseconds, and a new
/// one is an inode allocated in memory (as `create_dir_all` allocates the partition's
/// directory), where io_uring would hand the open to an io-wq worker and back (about 90 µs
/// here, 2.6 µs plain), and glommio's open adds a statx that goes the same way. Files a shard's
/// cache closed while idle reopen this way.
///
/// Reads leave the access time alone (`O_NOATIME`, what Kafka's operators get from mounting
/// with `noatime`): a file's first read after a write otherwise dirties its inode, 5 % of the
/// broker's CPU in a consume of 10 000 partitions just written (decision 0027, fetches over thousands of
/// partitions).
/// The kernel refuses the flag (EPERM) on a file this process neither owns nor has
/// CAP_FOWNER over; such a file opens without it.
fn open_plain(path: &Path, create: bool) -> io::Result<(BufferedFile, FileStat)> {
    use std::os::unix::fs::OpenOptionsExt;
    let open = |flags| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .custom_flags(flags)
            .open(path)
    };
    let file = match open(libc::O_NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(0)?,
        opened => opened?,
    };
    let stat = laminar_sys::files::file_stat(file.as_raw_fd())?;
    Ok((laminar_sys::glommio::buffered_file(file), stat))
}

impl Storage for GlommioStorage {
    type File = GlommioFile;

    /// O_DIRECT appends into written blocks inside the file's size are plain overwrites, which
    /// the kernel issues without blocking and whose sync writes no metadata; buffered appends
    /// into blocks not in the page cache would read each partial page first (decision 0048).
    fn recycles_segments(&self) -> bool {
        self.mode == WriteMode::Direct
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    async fn file_len(&self, path: &Path) -> io::Result<u64> {
        // A stat of a file whose dentry is cached: microseconds on this thread, as `list_dir`.
        Ok(std::fs::metadata(path)?.len())
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    async fn open(&self, path: &Path, create: bool) -> io::Result<Rc<GlommioFile>> {
        let descriptors = match &self.descriptors {
            Some(budget) => Some(budget.take(self.mode.descriptors_per_file())?),
            None => None,
        };
        let (handle, stat, writeback) = match self.mode {
            WriteMode::Buffered => {
                let (f, stat) = open_plain(path, create)?;
                let writeback = match &self.write_behind {
                    Some(ring) => FileWriteBehind::new(ring.clone(), stat.len),
                    None => FileWriteBehind::off(),
                };
                (Handle::Buffered(Rc::new(f)), stat, writeback)
            }
            WriteMode::Direct => {
                let mut opts = OpenOptions::new();
                opts.read(true).write(true).create(create);
                let f = once_per_wake(opts.dma_open(path)).await?;
                let r = once_per_wake(OpenOptions::new().read(true).buffered_open(path)).await?;
                let stat = laminar_sys::files::file_stat(f.as_raw_fd())?;
                let handle = Handle::Direct(Rc::new(f), Rc::new(r));
                (handle, stat, FileWriteBehind::off())
            }
        };
        let len = stat.len;
        let tail = match &handle {
            Handle::Direct(f, r) => read_tail(r, len, f.alignment()).await?,
            Handle::Buffered(_) => Vec::new(),
        };
        let appends = match &handle {
            Handle::Direct(f, r) if is_segment_data(path) => {
                let tail = read_tail(r, len, DIRECT_IO_ALIGN as u64).await?;
                let file = (f.as_raw_fd(), FileId::of(&stat));
                Some(FileAppends::new(self.direct_ring()?, file, len, &tail))
            }
            _ => None,
        };
        let buffered_fd = match &handle {
            Handle::Buffered(f) => f.as_raw_fd(),
            Handle::Direct(..) => -1,
        };
        let file = GlommioFile {
            handle: RefCell::new(Some(handle.clone())),
            buffered_fd,
            id: FileId::of(&stat),
            len: Cell::new(len),
            tail_block: RefCell::new(tail),
            appends,
            writeback,
            descriptors: RefCell::new(descriptors),
            reserved_to: Cell::new(0),
            reserve_held: Cell::new(0),
            reservations: self.reservations.clone(),
            sync_slots: self.sync_slots.clone(),
            mapped: self
                .mapped_appends
                .clone()
                .filter(|_| is_segment_data(path))
                .map(|shard| (shard, RefCell::default())),
            prewrite: match &self.prewrite {
                Some(ring) if is_segment_data(path) => FilePrewrite::new(ring.clone()),
                _ => FilePrewrite::off(),
            },
        };
        Ok(Rc::new(file))
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    async fn exists(&self, path: &Path) -> io::Result<bool> {
        path.try_exists()
    }

    /// The directory's descriptor is one of the shard's [`DIR_SYNCS_IN_FLIGHT_MAX`], kept out
    /// of the budget: a directory fsync never parks files to make room.
    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let sync = async {
            let dir = once_per_wake(glommio::io::Directory::open(path)).await?;
            let synced = self.sync_slots.run(once_per_wake(dir.sync())).await;
            let closed = once_per_wake(dir.close()).await;
            synced??;
            Ok::<(), io::Error>(closed?)
        };
        self.dir_sync_slots.run(sync).await?
    }
}

/// Segment data files (`<base offset>.log`) take their small appends through a mapping and are
/// pre-written ahead of their appends; index files, whose entries are written many at a time,
/// and every other file are not.
fn is_segment_data(path: &Path) -> bool {
    path.extension().is_some_and(|extension| extension == "log")
}

#[path = "glommio_direct_writes.rs"]
mod direct_writes;
use direct_writes::read_tail;

#[cfg(test)]
#[path = "glommio_storage_tests.rs"]
mod tests;
