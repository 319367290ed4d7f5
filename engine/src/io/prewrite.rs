//! Pre-written segment files: the blocks ahead of a `.log` file's appends are written (zeros)
//! and made durable in the background, so that an fdatasync after appends into them commits
//! nothing but data (docs/decisions/0048).
//!
//! Why: an append past a file's end, or into blocks reserved with `fallocate` (unwritten
//! extents), changes the file's metadata (its size, its extents' state), and the fdatasync that
//! makes the append durable must write that metadata too (a journal commit, or on ext4 without a
//! journal the inode's and block map's buffers, one by one). Into blocks already written
//! within the file's size, an append changes no metadata that fdatasync needs, and the sync is
//! the data and a cache flush. On this machine, 256 KiB appends each followed by fdatasync: 363–469
//! MB/s into a new file, 669–901 MB/s into a pre-written one; the sync's median 0.45–0.59 ms
//! against 0.23–0.31 ms (the decision record has the table).
//!
//! How it works:
//! - Each shard owns one [`PrewriteRing`]: a small private io_uring beside glommio's, as the
//!   write-behind ring (`writeback.rs`). A request for `[from, to)` queues a chain of zero
//!   writes from a static buffer ([`laminar_sys::uring::push_write_zeros`], 1 MiB each) linked
//!   to an fdatasync, and submits it. Buffered files are pre-written through the page cache
//!   (io_uring hands the writes to an io-wq worker, off the shard's thread): the pages stay
//!   cached and up to date, so an append that fills part of one does not read it from the disk
//!   first (a pre-write with O_DIRECT, which leaves no page cached, made each append wait
//!   70–130 µs for that read). O_DIRECT files are pre-written with O_DIRECT.
//! - Completions are reaped by peeking the ring (no syscall) whenever the file is used. A file
//!   has at most one chain in flight; its region is `[start, end)`. An append, truncate or
//!   close that would touch the region waits for the chain first (a zero write landing after
//!   an append would erase it; a truncate followed by a zero write would make the file long
//!   again); appends ask for the next region well ahead of them, so they rarely wait.
//! - The ops use a descriptor of their own (a second open file description, opened through
//!   `/proc/self/fd`), held by the in-flight state until every completion of its chain is
//!   reaped; at most [`CHAINS_IN_FLIGHT_MAX`] per shard, outside the descriptor budget, inside
//!   what it keeps for the rest.
//! - A pre-write is a hint: a chain that fails (a full disk, an I/O error) leaves the blocks as
//!   appends would have found them anyway; the appends' own writes and syncs report errors.
//!
//! What it leaves on disk: the file is longer than its data, zeros past it. A close, a truncate
//! or the roll's `sync_all` cut it back; after a crash, recovery scans past the clean length, a
//! zero batch length is invalid, and the file is cut there, as any torn tail is.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::time::Duration;

use io_uring::IoUring;
use laminar_sys::uring::{self, Chain, ZEROS_BYTES};

/// Chains (one per file) a shard has in flight at most: each holds a descriptor and its
/// region's pages being written; more files asking wait for a later append.
pub const CHAINS_IN_FLIGHT_MAX: usize = 8;
/// Ops one chain holds at most: zero writes of 1 MiB and the fdatasync; a region is at most
/// this many MiB less one.
const OPS_PER_CHAIN_MAX: usize = 17;
/// The most one request pre-writes.
pub const REGION_BYTES_MAX: u64 = (OPS_PER_CHAIN_MAX as u64 - 1) * ZEROS_BYTES as u64;
/// Regions start and end on these (O_DIRECT's block and the page size).
const ALIGN: u64 = 4096;
/// How long a wait for a chain sleeps between looks at the ring.
const WAIT_POLL: Duration = Duration::from_micros(50);

/// One shard's counters. Plain data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrewriteStats {
    pub chains_submitted: u64,
    pub chains_completed: u64,
    pub chains_failed: u64,
    pub bytes_prewritten: u64,
    /// Requests not submitted: every chain slot busy.
    pub requests_deferred: u64,
    /// Times an append, truncate or close waited for a chain.
    pub waits: u64,
}

/// A file's state shared with its chain in flight. Owned by one shard; not Send.
#[derive(Default)]
struct FileState {
    /// The descriptor the chain writes through; held until its last completion is reaped.
    fd: RefCell<Option<File>>,
    /// Bytes below this are written and durable (0: none pre-written).
    prewritten_to: Cell<u64>,
    /// The region of the chain in flight.
    in_flight: Cell<Option<(u64, u64)>>,
}

struct InFlight {
    file: Rc<FileState>,
    start: u64,
    end: u64,
    ops_left: usize,
    failed: Option<i32>,
}

/// One shard's pre-write ring and its chains in flight. Owned by one shard; not Send.
pub struct PrewriteRing {
    ring: RefCell<IoUring>,
    /// [`CHAINS_IN_FLIGHT_MAX`] slots; an op's `user_data` is its slot index.
    slots: RefCell<Vec<Option<InFlight>>>,
    stats: Cell<PrewriteStats>,
    /// Whether files are pre-written with O_DIRECT (the storage's write mode).
    direct: bool,
}

impl fmt::Debug for PrewriteRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrewriteRing")
            .field("direct", &self.direct)
            .field("stats", &self.stats.get())
            .finish()
    }
}

impl PrewriteRing {
    /// Fails when io_uring cannot be set up (old kernel, locked-memory limit).
    pub fn new(direct: bool) -> io::Result<Rc<PrewriteRing>> {
        let entries = (CHAINS_IN_FLIGHT_MAX * OPS_PER_CHAIN_MAX).next_power_of_two() as u32;
        Ok(Rc::new(PrewriteRing {
            ring: RefCell::new(IoUring::new(entries)?),
            slots: RefCell::new((0..CHAINS_IN_FLIGHT_MAX).map(|_| None).collect()),
            stats: Cell::new(PrewriteStats::default()),
            direct,
        }))
    }

    /// The counters, after reaping what has completed.
    pub fn stats(&self) -> PrewriteStats {
        self.reap();
        self.stats.get()
    }

    fn update(&self, change: impl FnOnce(&mut PrewriteStats)) {
        super::own_ring::update(&self.stats, change);
    }

    /// Takes every available completion, without waiting.
    fn reap(&self) {
        for (slot, result) in super::own_ring::take_completions(&self.ring) {
            self.complete_op(slot as usize, result);
        }
    }

    fn complete_op(&self, slot: usize, result: i32) {
        let mut slots = self.slots.borrow_mut();
        let op = slots[slot]
            .as_mut()
            .expect("a completion names a chain in flight");
        op.ops_left -= 1;
        if result < 0 && op.failed.is_none() {
            op.failed = Some(-result);
        }
        if op.ops_left > 0 {
            return;
        }
        let op = slots[slot].take().expect("the chain just completed");
        drop(slots);
        op.file.in_flight.set(None);
        *op.file.fd.borrow_mut() = None;
        match op.failed {
            None => {
                op.file.prewritten_to.set(op.end);
                self.update(|s| {
                    s.chains_completed += 1;
                    s.bytes_prewritten += op.end - op.start;
                });
            }
            Some(errno) => {
                let error = io::Error::from_raw_os_error(errno);
                tracing::debug!(%error, start = op.start, end = op.end, "a pre-write failed; appends allocate as they go");
                self.update(|s| s.chains_failed += 1);
            }
        }
    }

    /// Queues and submits the chain pre-writing `[start, end)` of `file` through `fd`.
    fn submit(&self, file: &Rc<FileState>, fd: RawFd, (start, end): (u64, u64)) -> bool {
        let Some(slot) = self.slots.borrow().iter().position(Option::is_none) else {
            self.update(|s| s.requests_deferred += 1);
            return false;
        };
        let mut ring = self.ring.borrow_mut();
        let mut ops = 0;
        let mut at = start;
        while at < end {
            let len = (end - at).min(ZEROS_BYTES as u64) as u32;
            let pushed = uring::push_write_zeros(&mut ring, fd, (at, len), Chain::LinkNext, slot as u64);
            pushed.expect("the submission queue has room for every chain");
            at += u64::from(len);
            ops += 1;
        }
        let pushed = uring::push_fdatasync(&mut ring, fd, Chain::End, slot as u64);
        pushed.expect("the submission queue has room for every chain");
        if let Err(error) = ring.submit() {
            tracing::warn!(%error, "pre-write: io_uring_enter failed; will retry");
        }
        drop(ring);
        self.slots.borrow_mut()[slot] = Some(InFlight {
            file: file.clone(),
            start,
            end,
            ops_left: ops + 1,
            failed: None,
        });
        file.in_flight.set(Some((start, end)));
        self.update(|s| s.chains_submitted += 1);
        true
    }
}

impl Drop for PrewriteRing {
    /// Waits for the chains still in flight, so that no descriptor closes under a running op.
    fn drop(&mut self) {
        while self.slots.borrow().iter().any(Option::is_some) {
            if let Err(error) = self.ring.borrow_mut().submit_and_wait(1) {
                if error.kind() != io::ErrorKind::Interrupted {
                    // Leak the descriptors rather than close them under the kernel.
                    for slot in self.slots.borrow_mut().iter_mut() {
                        if let Some(op) = slot.take() {
                            std::mem::forget(op.file.fd.borrow_mut().take());
                        }
                    }
                    return;
                }
            }
            self.reap();
        }
    }
}

/// One file's pre-writes. Owned by one shard; not Send.
#[derive(Default)]
pub struct FilePrewrite {
    ring: Option<Rc<PrewriteRing>>,
    state: Rc<FileState>,
}

impl FilePrewrite {
    /// A file that is never pre-written.
    pub fn off() -> FilePrewrite {
        FilePrewrite::default()
    }

    pub fn new(ring: Rc<PrewriteRing>) -> FilePrewrite {
        FilePrewrite {
            ring: Some(ring),
            state: Rc::default(),
        }
    }

    pub fn is_on(&self) -> bool {
        self.ring.is_some()
    }

    /// Whether any block past `len` is pre-written, or being pre-written.
    pub fn is_past(&self, len: u64) -> bool {
        self.reap();
        self.state.prewritten_to.get() > len || self.state.in_flight.get().is_some()
    }

    /// The end of the pre-written blocks (0: none).
    pub fn prewritten_to(&self) -> u64 {
        self.reap();
        self.state.prewritten_to.get()
    }

    fn reap(&self) {
        if let (Some(ring), Some(_)) = (&self.ring, self.state.in_flight.get()) {
            ring.reap();
        }
    }

    /// Starts pre-writing the blocks of `[from, to)` (widened to whole blocks, capped at
    /// [`REGION_BYTES_MAX`]) of the file `fd` opens, whose data ends at or before `from`.
    /// Returns the end of the region submitted; `None` when the file has a chain in flight, the
    /// blocks are written already, every slot is busy or no descriptor could be opened.
    pub fn request(&self, fd: RawFd, from: u64, to: u64) -> Option<u64> {
        let ring = self.ring.as_ref()?;
        self.reap();
        let start = from.max(self.state.prewritten_to.get()).next_multiple_of(ALIGN);
        let end = to.min(start + REGION_BYTES_MAX).next_multiple_of(ALIGN);
        if end <= start || self.state.in_flight.get().is_some() {
            return None;
        }
        let own = match open_own(fd, ring.direct) {
            Ok(own) => own,
            Err(error) => {
                tracing::debug!(%error, "pre-write: cannot open a descriptor");
                return None;
            }
        };
        let raw = own.as_raw_fd();
        *self.state.fd.borrow_mut() = Some(own);
        if !ring.submit(&self.state, raw, (start, end)) {
            *self.state.fd.borrow_mut() = None;
            return None;
        }
        Some(end)
    }

    /// Waits until no chain in flight touches `[from, to)`.
    pub async fn wait_clear(&self, from: u64, to: u64) {
        let overlaps = |state: &FileState| state.in_flight.get().is_some_and(|(s, e)| s < to && from < e);
        if !overlaps(&self.state) {
            return;
        }
        let Some(ring) = &self.ring else {
            return;
        };
        ring.update(|s| s.waits += 1);
        loop {
            ring.reap();
            if !overlaps(&self.state) {
                return;
            }
            glommio::timer::sleep(WAIT_POLL).await;
        }
    }

    /// Waits for the chain in flight, if any; then nothing past `len` counts as pre-written
    /// (the file is about to be cut to `len`).
    pub async fn settle_and_forget(&self, len: u64) {
        self.wait_clear(0, u64::MAX).await;
        let state = &self.state;
        state.prewritten_to.set(state.prewritten_to.get().min(len));
    }
}

/// A second open file description of the file `fd` opens, write-only, for the ring's ops.
fn open_own(fd: RawFd, direct: bool) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(if direct { libc::O_DIRECT } else { 0 })
        .open(format!("/proc/self/fd/{fd}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_tasks::on_executor;

    fn file_len(file: &File) -> u64 {
        file.metadata().unwrap().len()
    }

    #[test]
    fn a_request_prewrites_whole_blocks_past_the_data_and_keeps_the_data() {
        on_executor(|| async {
            for direct in [false, true] {
                let ring = PrewriteRing::new(direct).unwrap();
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("0.log");
                std::fs::write(&path, b"data").unwrap();
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .unwrap();
                let prewrite = FilePrewrite::new(ring.clone());
                assert_eq!(prewrite.request(file.as_raw_fd(), 4, 3 << 20), Some(3 << 20));
                assert!(
                    prewrite.request(file.as_raw_fd(), 4, 8 << 20).is_none(),
                    "one chain per file"
                );
                assert!(prewrite.is_past(4));
                prewrite.wait_clear(0, u64::MAX).await;
                assert_eq!(prewrite.prewritten_to(), 3 << 20);
                assert_eq!(file_len(&file), 3 << 20, "the file reaches the region's end");
                let bytes = std::fs::read(&path).unwrap();
                assert_eq!(&bytes[..4], b"data");
                assert!(bytes[4..].iter().all(|&b| b == 0));
                let stats = ring.stats();
                assert_eq!(
                    (stats.chains_completed, stats.bytes_prewritten),
                    (1, (3 << 20) - 4096)
                );
                assert!(
                    prewrite.request(file.as_raw_fd(), 4, 3 << 20).is_none(),
                    "blocks already written are not written again"
                );
                prewrite.settle_and_forget(4).await;
                assert_eq!(prewrite.prewritten_to(), 4);
            }
        });
    }

    #[test]
    fn regions_are_capped_and_slots_bounded() {
        on_executor(|| async {
            let ring = PrewriteRing::new(false).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let files: Vec<File> = (0..=CHAINS_IN_FLIGHT_MAX)
                .map(|i| File::create(dir.path().join(format!("{i}.log"))).unwrap())
                .collect();
            let prewrites: Vec<FilePrewrite> =
                files.iter().map(|_| FilePrewrite::new(ring.clone())).collect();
            let submitted = files
                .iter()
                .zip(&prewrites)
                .filter(|(file, prewrite)| prewrite.request(file.as_raw_fd(), 0, 64 << 10).is_some())
                .count();
            assert!(submitted <= CHAINS_IN_FLIGHT_MAX, "at most the slots at once");
            for prewrite in &prewrites {
                prewrite.wait_clear(0, u64::MAX).await;
            }
            let stats = ring.stats();
            assert_eq!(stats.chains_submitted as usize, submitted);
            assert_eq!(stats.chains_completed as usize, submitted);
            assert_eq!(stats.requests_deferred as usize, files.len() - submitted);
            let (file, prewrite) = (&files[0], &prewrites[0]);
            assert!(prewrite.request(file.as_raw_fd(), 64 << 10, 1 << 30).is_some());
            prewrite.wait_clear(0, u64::MAX).await;
            assert_eq!(
                prewrite.prewritten_to(),
                (64 << 10) + REGION_BYTES_MAX,
                "one region at most"
            );
        });
    }
}
