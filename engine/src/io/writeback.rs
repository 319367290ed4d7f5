//! Write-behind: the kernel writes a file's appended bytes to disk in the background, one
//! `write_batch_bytes` range at a time, instead of letting dirty pages pile up until the next
//! fdatasync (acks=all: each sync then has much to write) or until the kernel's own writeback
//! (acks=1: producers can stall in dirty-page throttling). RocksDB's `bytes_per_sync` and
//! Redpanda's appender write-behind do the same; see docs/decisions/0005-write-behind.md.
//!
//! How it works:
//! - Each shard owns one [`WriteBehindRing`]: a small private io_uring (at most
//!   [`WriteBehind::IO_DEPTH_MAX`] entries) beside glommio's. For every completed range of
//!   appended bytes the shard submits `IORING_OP_SYNC_FILE_RANGE` with `WAIT_BEFORE | WRITE |
//!   WAIT_AFTER`; io_uring always runs that op in an io-wq worker thread, so the shard never
//!   waits for the disk. Completions are reaped by peeking the completion ring (no syscall) on
//!   each append, on close and when the counters are read; nothing ever waits for them, except
//!   the ring's `Drop` at shard teardown (see below).
//! - Each open file has a [`FileWriteBehind`] holding two marks: `written_to` (end of the bytes
//!   appended) and `submitted_to` (end of the bytes handed to a write-behind op). Once at least
//!   one batch lies between them, `[submitted_to, submitted_to + k * batch)` is submitted and
//!   `submitted_to` moves. Bytes rewritten below `submitted_to` (not an append) are left to
//!   fdatasync.
//!
//! In-flight accounting: at most `io_depth` ops are in flight per shard; each has a slot (its
//! index is the op's `user_data`) holding the file and range. When every slot is taken, nothing
//! is submitted and `submitted_to` stays put, so the range is not dropped: the file's next
//! append submits everything up to its last whole batch as one op (counted as deferred). A file
//! that gets no further append leaves its deferred bytes to fdatasync or to the kernel.
//!
//! Descriptor lifetime: the ops use a descriptor of their own, a second open file description
//! of the same inode (opened through `/proc/self/fd`, lazily, when an op is submitted while the
//! file has none), never the one glommio owns and closes. io_uring may look a descriptor up only
//! when the io-wq worker runs the op, so that descriptor must stay open until the completion is
//! reaped: every slot holds an `Rc` of the file's state, and the descriptor is closed once none
//! of the file's ops is in flight (or when the last `Rc` goes). So a shard holds at most
//! `io_depth` of these descriptors, whatever the number of files it writes: they are outside
//! the storage's descriptor budget, inside what it keeps for the rest. A truncation while ops are in
//! flight is harmless: syncing a range past the end of file writes nothing. At shard teardown
//! the ring's `Drop` waits for the ops still in flight (at most `io_depth`) before the
//! descriptors close.
//!
//! Errors: a failed op (EIO, …) is recorded in the file's state and returned by that file's
//! next append or fdatasync, so the log fails as for any disk error (`Log::fail`). The separate
//! open file description matters here: `sync_file_range` consumes the page-cache error for the
//! description it runs on (errseq), and a shared (dup'd) one would hide it from the next
//! fdatasync; a separate one leaves fdatasync seeing the error too.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;

use io_uring::{opcode, IoUring, Probe};

use laminar_sys::uring;

/// The write-behind settings of every shard. 0 `write_batch_bytes` turns it off (appends then
/// stay in the page cache until fdatasync or the kernel's writeback). Plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteBehind {
    /// Bytes of appended data per write-behind op (0: off).
    pub write_batch_bytes: u64,
    /// Write-behind ops in flight per shard, at most.
    pub io_depth: u32,
}

impl WriteBehind {
    /// The ring is sized for this many ops (its memory is locked: keep it tiny).
    pub const IO_DEPTH_MAX: u32 = 32;
    /// Smaller batches would cost a syscall and a worker hop per page.
    pub const WRITE_BATCH_BYTES_MIN: u64 = 4096;

    pub const fn disabled() -> WriteBehind {
        WriteBehind {
            write_batch_bytes: 0,
            io_depth: 0,
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.write_batch_bytes > 0
    }

    /// Why these settings cannot be used, if they cannot (the config layer checks first).
    pub fn invalid_reason(&self) -> Option<String> {
        if !self.is_enabled() {
            return None;
        }
        if self.write_batch_bytes < Self::WRITE_BATCH_BYTES_MIN {
            return Some(format!(
                "write batch of {} bytes is below the {} minimum",
                self.write_batch_bytes,
                Self::WRITE_BATCH_BYTES_MIN
            ));
        }
        if !(1..=Self::IO_DEPTH_MAX).contains(&self.io_depth) {
            return Some(format!(
                "io depth {} is outside 1..={}",
                self.io_depth,
                Self::IO_DEPTH_MAX
            ));
        }
        None
    }
}

/// What one shard's write-behind did. Plain data: moves between shards.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteBehindStats {
    /// Ops handed to the kernel.
    pub ranges_submitted: u64,
    /// Ops whose completion was reaped, failed ones included.
    pub ranges_completed: u64,
    /// Completed ops that reported an error (the file's log then fails).
    pub ranges_failed: u64,
    /// Bytes covered by the submitted ops.
    pub bytes_submitted: u64,
    /// Bytes covered by ops that completed without error.
    pub bytes_written_back: u64,
    /// Times a range was ready while `io_depth` ops were in flight (it waits for the next
    /// append of its file, merged with what follows).
    pub ranges_deferred: u64,
    /// Files left without write-behind because no descriptor could be opened for them.
    pub files_without_descriptor: u64,
    pub in_flight: u64,
    /// Most ops ever in flight at once (never above `io_depth`).
    pub in_flight_max: u64,
}

/// Write-behind state of one file. Owned by one shard; not Send.
struct FileState {
    written_to: Cell<u64>,
    submitted_to: Cell<u64>,
    /// The ops' own descriptor (see the module doc); `None` while none of them is in flight
    /// (once reaped).
    fd: RefCell<Option<File>>,
    /// Opening `fd` failed: this file goes without write-behind.
    no_descriptor: Cell<bool>,
    in_flight: Cell<u32>,
    /// The first failed op: (errno, range start, range end).
    failure: Cell<Option<(i32, u64, u64)>>,
}

impl FileState {
    /// Closes the ops' descriptor once none of them is in flight (the next op opens another).
    fn release_descriptor_if_idle(&self) {
        if self.in_flight.get() == 0 {
            self.fd.borrow_mut().take();
        }
    }
}

/// One op in flight: its file (kept alive, descriptor included, until it is reaped) and range.
struct InFlight {
    file: Rc<FileState>,
    start: u64,
    len: u64,
}

/// One shard's write-behind ring and its ops in flight. Owned by one shard; not Send.
pub struct WriteBehindRing {
    settings: WriteBehind,
    ring: RefCell<IoUring>,
    /// `io_depth` slots; an op's `user_data` is its slot index.
    slots: RefCell<Vec<Option<InFlight>>>,
    stats: Cell<WriteBehindStats>,
}

impl fmt::Debug for WriteBehindRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteBehindRing")
            .field("settings", &self.settings)
            .field("stats", &self.stats.get())
            .finish()
    }
}

const SYNC_FLAGS: u32 =
    libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;

impl WriteBehindRing {
    /// Creates the ring for `settings` (which must be enabled and valid). Fails when io_uring
    /// cannot be set up (old kernel, locked-memory limit) or lacks `SYNC_FILE_RANGE`.
    pub fn new(settings: WriteBehind) -> io::Result<Rc<WriteBehindRing>> {
        assert!(settings.is_enabled(), "a write-behind ring for disabled settings");
        if let Some(reason) = settings.invalid_reason() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, reason));
        }
        let ring = IoUring::new(settings.io_depth.next_power_of_two())?;
        let mut probe = Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        if !probe.is_supported(opcode::SyncFileRange::CODE) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel's io_uring has no IORING_OP_SYNC_FILE_RANGE",
            ));
        }
        Ok(Rc::new(WriteBehindRing {
            settings,
            ring: RefCell::new(ring),
            slots: RefCell::new((0..settings.io_depth).map(|_| None).collect()),
            stats: Cell::new(WriteBehindStats::default()),
        }))
    }

    pub fn settings(&self) -> WriteBehind {
        self.settings
    }

    /// The counters, after reaping what has completed.
    pub fn stats(&self) -> WriteBehindStats {
        self.reap();
        self.stats.get()
    }

    fn update(&self, change: impl FnOnce(&mut WriteBehindStats)) {
        super::own_ring::update(&self.stats, change);
    }

    /// Takes every available completion, without waiting, and resubmits what an interrupted
    /// `io_uring_enter` left in the submission queue.
    fn reap(&self) {
        let done = super::own_ring::take_completions(&self.ring);
        for (slot, result) in done {
            let taken = self.slots.borrow_mut()[slot as usize].take();
            let op = taken.expect("a completion names a slot in flight");
            op.file.in_flight.set(op.file.in_flight.get() - 1);
            let failed = result < 0;
            if failed && op.file.failure.get().is_none() {
                let end = op.start + op.len;
                tracing::error!(start = op.start, end, errno = -result, "write-behind failed");
                op.file.failure.set(Some((-result, op.start, end)));
            }
            self.update(|s| {
                s.in_flight -= 1;
                s.ranges_completed += 1;
                if failed {
                    s.ranges_failed += 1;
                } else {
                    s.bytes_written_back += op.len;
                }
            });
            op.file.release_descriptor_if_idle();
        }
    }

    /// Submits the whole batches of `file` between its marks, if a slot is free. `fd` is the
    /// descriptor the file was written through, reopened for the first op.
    fn submit_ready(&self, file: &Rc<FileState>, fd: RawFd) {
        let batch = self.settings.write_batch_bytes;
        let pending = file.written_to.get() - file.submitted_to.get();
        if pending < batch || file.no_descriptor.get() {
            return;
        }
        let Some(slot) = self.slots.borrow().iter().position(Option::is_none) else {
            self.update(|s| s.ranges_deferred += 1);
            return;
        };
        let Some(own_fd) = self.descriptor(file, fd) else {
            return;
        };
        // One op covers at most u32::MAX bytes; whole batches only, the rest waits.
        let len = (pending / batch).min(u64::from(u32::MAX) / batch) * batch;
        let start = file.submitted_to.get();
        let mut ring = self.ring.borrow_mut();
        // The descriptor stays open until the completion is reaped: the slot filled below holds
        // the file state owning it.
        let pushed =
            uring::push_sync_file_range(&mut ring, own_fd, (start, len as u32), SYNC_FLAGS, slot as u64);
        pushed.expect("the submission queue has room for io_depth ops");
        if let Err(e) = ring.submit() {
            // The entry stays queued; `reap` submits it again.
            tracing::warn!(error = %e, "write-behind: io_uring_enter failed; will retry");
        }
        drop(ring);
        self.slots.borrow_mut()[slot] = Some(InFlight {
            file: file.clone(),
            start,
            len,
        });
        file.submitted_to.set(start + len);
        file.in_flight.set(file.in_flight.get() + 1);
        self.update(|s| {
            s.ranges_submitted += 1;
            s.bytes_submitted += len;
            s.in_flight += 1;
            s.in_flight_max = s.in_flight_max.max(s.in_flight);
        });
        assert!(
            self.stats.get().in_flight <= u64::from(self.settings.io_depth),
            "write-behind ops in flight beyond io_depth"
        );
    }

    /// The file's own descriptor, opened now if it has none yet.
    fn descriptor(&self, file: &FileState, fd: RawFd) -> Option<RawFd> {
        if let Some(own) = file.fd.borrow().as_ref() {
            return Some(own.as_raw_fd());
        }
        match File::open(format!("/proc/self/fd/{fd}")) {
            Ok(own) => {
                let raw = own.as_raw_fd();
                *file.fd.borrow_mut() = Some(own);
                Some(raw)
            }
            Err(e) => {
                // An optimisation lost, not data: fdatasync and the kernel still write it.
                tracing::warn!(error = %e, "write-behind: cannot open a descriptor; file goes without");
                file.no_descriptor.set(true);
                self.update(|s| s.files_without_descriptor += 1);
                None
            }
        }
    }
}

impl Drop for WriteBehindRing {
    /// Waits for the ops still in flight, so that no descriptor closes under a running op.
    fn drop(&mut self) {
        while self.stats.get().in_flight > 0 {
            let waited = self.ring.borrow_mut().submit_and_wait(1);
            match waited {
                Ok(_) => self.reap(),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => {
                    // Cannot wait: leak the descriptors rather than close them under the ops.
                    tracing::error!(error = %e, "write-behind: cannot wait for ops at shutdown");
                    for op in self.slots.borrow_mut().iter_mut().filter_map(Option::take) {
                        if let Some(fd) = op.file.fd.borrow_mut().take() {
                            std::mem::forget(fd);
                        }
                    }
                    return;
                }
            }
        }
    }
}

/// Write-behind of one open file: its marks on the shard's ring, or nothing when write-behind is
/// off (or the file is O_DIRECT). Owned by one shard; not Send.
pub struct FileWriteBehind(Option<(Rc<WriteBehindRing>, Rc<FileState>)>);

impl FileWriteBehind {
    pub fn off() -> FileWriteBehind {
        FileWriteBehind(None)
    }

    /// For a file of `len` bytes just opened: bytes already there are not written behind.
    pub fn new(ring: Rc<WriteBehindRing>, len: u64) -> FileWriteBehind {
        let state = FileState {
            written_to: Cell::new(len),
            submitted_to: Cell::new(len),
            fd: RefCell::new(None),
            no_descriptor: Cell::new(false),
            in_flight: Cell::new(0),
            failure: Cell::new(None),
        };
        FileWriteBehind(Some((ring, Rc::new(state))))
    }

    /// After `len` bytes at `pos` reached the page cache through descriptor `fd`: reaps what
    /// completed, then submits whole batches if any are ready. Never waits.
    pub fn written(&self, fd: RawFd, pos: u64, len: u64) {
        let Some((ring, file)) = &self.0 else { return };
        ring.reap();
        file.written_to.set(file.written_to.get().max(pos + len));
        ring.submit_ready(file, fd);
    }

    /// The error of a failed write-behind op of this file, for every later append and fdatasync.
    pub fn check(&self) -> io::Result<()> {
        let Some((ring, file)) = &self.0 else {
            return Ok(());
        };
        ring.reap();
        match file.failure.get() {
            None => Ok(()),
            Some((errno, start, end)) => {
                let cause = io::Error::from_raw_os_error(errno);
                let message = format!("write-behind of bytes {start}..{end} failed: {cause}");
                Err(io::Error::new(cause.kind(), message))
            }
        }
    }

    /// After the file was truncated to `len`: later appends start there.
    pub fn truncated(&self, len: u64) {
        let Some((_, file)) = &self.0 else { return };
        file.written_to.set(file.written_to.get().min(len));
        file.submitted_to.set(file.submitted_to.get().min(len));
    }

    /// After the file was closed: its descriptor closes once its ops are reaped.
    pub fn closed(&self) {
        let Some((ring, file)) = &self.0 else { return };
        ring.reap();
        file.release_descriptor_if_idle();
    }

    /// Appended bytes not yet handed to a write-behind op.
    pub fn pending_bytes(&self) -> u64 {
        self.0
            .as_ref()
            .map_or(0, |(_, f)| f.written_to.get() - f.submitted_to.get())
    }
}

#[cfg(test)]
#[path = "writeback_tests.rs"]
mod tests;
