//! O_DIRECT appends to segment `.log` files from the shard's own aligned buffers, written on the
//! shard's own io_uring (docs/decisions/0049). Owned by one shard; not Send.
//!
//! Why: glommio's `DmaFile` write allocates a buffer per append and the partition waits for
//! each write before its next append, so one write per partition was ever in flight and every
//! append paid the disk's latency (decision 0048). Here an append is a copy into the file's
//! staging buffer, and the write goes to the kernel without the partition waiting for it; the
//! partition waits only where it must: a sync, a read of bytes not yet written, a truncate, a
//! close.
//!
//! How it works:
//! - A file's staging buffer holds its bytes from the start of the block holding the first byte
//!   not yet written (`dirty_from`) to its end. A write covers the staged bytes from that block
//!   up to the end rounded up to a block, the partial last block padded with zeros; the
//!   staging buffer keeps that last block's bytes, and the next write rewrites the block whole.
//! - Two writes of one file never cover the same block at once: the kernel may complete them
//!   in any order, and an older, shorter copy of a block landing last would lose bytes. So a
//!   file's next write waits (staged, the partition not waiting) until no write in flight
//!   reaches its first block; appends meanwhile gather and go as one larger write.
//! - Completions are taken by peeking the ring (no system call): by a task the shard runs while
//!   writes are in flight, and by anything waiting for a file. A completion dispatches what its
//!   file staged meanwhile, and hands the slot it frees to the files waiting for one, in order.
//! - A failed or short write fails the file: every later call returns the error, and the log
//!   fails its directory as for any write error.
//! - Bounds: [`WRITES_IN_FLIGHT_MAX`] writes per shard; staging buffers of [`STAGING_BYTES`],
//!   at most [`BUFFERS_OUT_MAX`] out per shard, staging or in flight (an append that finds none,
//!   or more than what is left of its file's, is copied in parts, each waiting for room); at
//!   most [`POOLED_BUFFERS_MAX`] free ones kept. A file whose bytes are all handed to writes
//!   holds no buffer, only its partial last block (under 4 KiB).
//!
//! What a crash leaves: what was staged and not written is lost, as unsynced data is; acks=all
//! answers only after the sync, which writes everything staged first.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::RawFd;
use std::rc::{Rc, Weak};
use std::time::Duration;

use bytes::Bytes;
use laminar_sys::memory::{AlignedBuffer, DIRECT_IO_ALIGN};
use laminar_sys::uring::WriteRing;

use super::recent_writes::RecentWrites;
use super::FileId;

/// Writes one shard has in flight at most; a file whose write finds none free stays staged
/// until one completes.
pub const WRITES_IN_FLIGHT_MAX: usize = 64;
/// Bytes of one file's staging buffer, and so the most one write carries.
pub const STAGING_BYTES: usize = 1 << 20;
/// Free staging buffers a shard keeps for the next writes.
pub const POOLED_BUFFERS_MAX: usize = 16;
/// Staging buffers a shard has out at once, staging or in flight: its appends' memory is at
/// most this many times [`STAGING_BYTES`]. An append that finds none waits for one.
pub const BUFFERS_OUT_MAX: usize = 2 * WRITES_IN_FLIGHT_MAX;
/// How long a wait for writes sleeps between looks at the ring.
const WAIT_POLL: Duration = Duration::from_micros(50);

const ALIGN: u64 = DIRECT_IO_ALIGN as u64;

/// One shard's counters. Plain data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectAppendStats {
    pub writes: u64,
    pub bytes_written: u64,
    /// Times a sync, read, truncate or close waited for writes.
    pub waits: u64,
    /// Reads served from the shard's recent writes, and reads that went to the disk.
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// Bytes the recent writes hold now.
    pub cache_bytes: u64,
    /// Staging buffers out now, staging or in flight (at most [`BUFFERS_OUT_MAX`]).
    pub buffers_out: u64,
}

/// A write in flight: the file it writes, where it starts and where it ends (a block
/// boundary), and the bytes it writes for the first time, `[new_from, data_end)`.
struct InFlight {
    file: Rc<FileAppends>,
    start: u64,
    end: u64,
    new_from: u64,
    data_end: u64,
}

/// One shard's ring for O_DIRECT appends and the writes it has in flight. Owned by one shard;
/// not Send.
pub struct DirectRing {
    ring: RefCell<WriteRing>,
    /// By tag.
    in_flight: RefCell<HashMap<u64, InFlight>>,
    next_tag: Cell<u64>,
    pool: RefCell<Vec<AlignedBuffer>>,
    /// Buffers out of the pool: staging, or held by a write in flight.
    buffers_out: Cell<usize>,
    /// Files whose staged bytes found every write slot taken, in the order they came (each
    /// once): a completion hands them the slot it frees.
    waiting_for_slot: RefCell<VecDeque<Weak<FileAppends>>>,
    /// Whether the task taking completions runs.
    reaping: Cell<bool>,
    stats: Cell<DirectAppendStats>,
    /// What completed writes carried, for reads of recent data.
    recent: RecentWrites,
}

impl std::fmt::Debug for DirectRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectRing")
            .field("stats", &self.stats.get())
            .finish()
    }
}

impl DirectRing {
    /// Keeps up to `cache_bytes` of what it wrote for reads. Fails when io_uring cannot be set
    /// up.
    pub fn new(cache_bytes: u64) -> io::Result<Rc<DirectRing>> {
        Ok(Rc::new(DirectRing {
            ring: RefCell::new(WriteRing::new(WRITES_IN_FLIGHT_MAX)?),
            in_flight: RefCell::new(HashMap::with_capacity(WRITES_IN_FLIGHT_MAX)),
            next_tag: Cell::new(0),
            pool: RefCell::new(Vec::new()),
            buffers_out: Cell::new(0),
            waiting_for_slot: RefCell::new(VecDeque::new()),
            reaping: Cell::new(false),
            stats: Cell::new(DirectAppendStats::default()),
            recent: RecentWrites::new(cache_bytes),
        }))
    }

    pub fn stats(&self) -> DirectAppendStats {
        DirectAppendStats {
            cache_bytes: self.recent.bytes(),
            buffers_out: self.buffers_out.get() as u64,
            ..self.stats.get()
        }
    }

    fn update(&self, change: impl FnOnce(&mut DirectAppendStats)) {
        super::own_ring::update(&self.stats, change);
    }

    /// A staging buffer, unless [`BUFFERS_OUT_MAX`] are out.
    fn take_buffer(&self) -> Option<AlignedBuffer> {
        if self.buffers_out.get() >= BUFFERS_OUT_MAX {
            return None;
        }
        self.buffers_out.set(self.buffers_out.get() + 1);
        let pooled = self.pool.borrow_mut().pop();
        Some(pooled.unwrap_or_else(|| AlignedBuffer::new(STAGING_BYTES)))
    }

    fn can_take_buffer(&self) -> bool {
        self.buffers_out.get() < BUFFERS_OUT_MAX
    }

    /// A buffer back: kept for the next write, up to the pool's bound, or freed.
    fn give_back(&self, buffer: AlignedBuffer) {
        self.buffers_out.set(self.buffers_out.get() - 1);
        let mut pool = self.pool.borrow_mut();
        if pool.len() < POOLED_BUFFERS_MAX {
            pool.push(buffer);
        }
    }

    /// Takes every completion there is, without waiting, and dispatches what each completed
    /// file staged meanwhile.
    fn reap(&self) {
        let done = self.ring.borrow_mut().take_completions();
        for write in done {
            let finished = self.in_flight.borrow_mut().remove(&write.tag);
            let finished = finished.expect("a completion of a write in flight");
            if finished.file.completed(&finished, write.result) && self.recent.is_on() {
                let from = (finished.new_from - finished.start) as usize;
                let upto = (finished.data_end - finished.start) as usize;
                let chunk = Bytes::copy_from_slice(&write.buffer.as_slice()[from..upto]);
                self.recent.insert(finished.file.id, finished.new_from, chunk);
            }
            self.give_back(write.buffer);
            finished.file.dispatch();
        }
        self.dispatch_waiting();
    }

    /// Hands free write slots to the files waiting for one, first come first served.
    fn dispatch_waiting(&self) {
        while self.ring.borrow().has_room() {
            let Some(file) = self.waiting_for_slot.borrow_mut().pop_front() else {
                return;
            };
            if let Some(file) = file.upgrade() {
                file.staged.borrow_mut().waiting_for_slot = false;
                file.dispatch();
            }
        }
    }

    /// Queues and submits a write of `buffer`'s first `len` bytes for `file`.
    fn submit(
        &self,
        file: &Rc<FileAppends>,
        buffer: AlignedBuffer,
        (start, len): (u64, usize),
        (new_from, data_end): (u64, u64),
    ) {
        let tag = self.next_tag.get();
        self.next_tag.set(tag + 1);
        let mut ring = self.ring.borrow_mut();
        let queued = ring.queue(file.fd, start, (buffer, len), tag);
        assert!(queued.is_ok(), "a write is queued only where the ring has room");
        if let Err(error) = ring.submit() {
            // Queued still: the next look at the ring submits it again.
            tracing::debug!(%error, "io_uring submit failed; retried at the next reap");
        }
        drop(ring);
        let end = start + len as u64;
        let write = InFlight {
            file: file.clone(),
            start,
            end,
            new_from,
            data_end,
        };
        self.in_flight.borrow_mut().insert(tag, write);
        self.update(|s| {
            s.writes += 1;
            s.bytes_written += len as u64;
        });
    }

    /// Starts the task that takes completions while writes are in flight, unless it runs.
    fn keep_reaping(self: &Rc<Self>) {
        if self.reaping.replace(true) {
            return;
        }
        let ring = self.clone();
        glommio::spawn_local(async move {
            loop {
                ring.reap();
                if ring.in_flight.borrow().is_empty() && ring.waiting_for_slot.borrow().is_empty() {
                    break;
                }
                glommio::timer::sleep(WAIT_POLL).await;
            }
            ring.reaping.set(false);
        })
        .detach();
    }
}

/// A file's staged bytes and its writes in flight.
struct Staged {
    /// The file offset of the staged bytes: a block boundary.
    from: u64,
    /// The staged bytes while appends are staged; `None` when all are handed to writes, the
    /// partial last block's bytes then in `tail` (an idle file holds no staging buffer).
    buffer: Option<AlignedBuffer>,
    tail: Vec<u8>,
    /// Bytes staged from `from`: the file ends at `from + filled`.
    filled: usize,
    /// The first byte not yet handed to a write; in the block at `from`.
    dirty_from: u64,
    /// `(start, end)` of this file's writes in flight, in the order submitted.
    in_flight: VecDeque<(u64, u64)>,
    /// In the shard's queue of files waiting for a write slot.
    waiting_for_slot: bool,
    failed: Option<i32>,
}

impl Staged {
    fn end(&self) -> u64 {
        self.from + self.filled as u64
    }
}

/// One `.log` file's O_DIRECT appends. Owned by one shard; not Send.
pub struct FileAppends {
    ring: Rc<DirectRing>,
    id: FileId,
    /// The file's O_DIRECT descriptor; its owner keeps it open until [`FileAppends::drain`]
    /// returned (the kernel holds the file of a write in flight anyway).
    fd: RawFd,
    staged: RefCell<Staged>,
}

impl FileAppends {
    /// For a file of `len` bytes whose last partial block holds `tail` (`len % 4096` bytes).
    pub fn new(ring: Rc<DirectRing>, (fd, id): (RawFd, FileId), len: u64, tail: &[u8]) -> Rc<FileAppends> {
        let file = Rc::new(FileAppends {
            ring,
            id,
            fd,
            staged: RefCell::new(Staged {
                from: 0,
                buffer: None,
                tail: Vec::new(),
                filled: 0,
                dirty_from: 0,
                in_flight: VecDeque::new(),
                waiting_for_slot: false,
                failed: None,
            }),
        });
        file.reset(len, tail);
        file
    }

    fn check(&self) -> io::Result<()> {
        match self.staged.borrow().failed {
            Some(errno) => Err(io::Error::from_raw_os_error(errno)),
            None => Ok(()),
        }
    }

    fn is_written_below(&self, end: u64) -> bool {
        let staged = self.staged.borrow();
        staged.dirty_from >= end && staged.in_flight.iter().all(|w| w.0 >= end)
    }

    /// The file's end, staged bytes included.
    pub fn end(&self) -> u64 {
        self.staged.borrow().end()
    }

    /// Appends `parts` at the file's end (`pos`); returns once they are staged (or, past what
    /// staging holds, once the first parts are written).
    pub async fn append(self: &Rc<Self>, pos: u64, parts: &[&[u8]]) -> io::Result<()> {
        self.check()?;
        assert_eq!(pos, self.end(), "direct appends go at the end of the file");
        for part in parts {
            let mut rest = *part;
            while !rest.is_empty() {
                let copied = self.copy_in(rest);
                rest = &rest[copied..];
                if !rest.is_empty() {
                    self.wait_for_room().await?;
                }
            }
        }
        self.dispatch();
        Ok(())
    }

    /// Copies what fits of `bytes` into the staging buffer (taking one, with the partial last
    /// block's bytes, if the file has none); returns how much.
    fn copy_in(&self, bytes: &[u8]) -> usize {
        let mut staged = self.staged.borrow_mut();
        let staged = &mut *staged;
        if staged.buffer.is_none() {
            let Some(mut buffer) = self.ring.take_buffer() else {
                return 0;
            };
            buffer.as_mut_slice()[..staged.tail.len()].copy_from_slice(&staged.tail);
            staged.tail.clear();
            staged.buffer = Some(buffer);
        }
        let filled = staged.filled;
        let buffer = staged.buffer.as_mut().expect("taken above");
        let n = bytes.len().min(buffer.len() - filled);
        buffer.as_mut_slice()[filled..filled + n].copy_from_slice(&bytes[..n]);
        staged.filled += n;
        n
    }

    /// Whether an append can copy something in now.
    fn has_room(&self) -> bool {
        let staged = self.staged.borrow();
        match staged.buffer {
            Some(_) => staged.filled < STAGING_BYTES,
            None => self.ring.can_take_buffer(),
        }
    }

    /// Waits until the staging buffer has room past its last block, or the shard a buffer.
    async fn wait_for_room(self: &Rc<Self>) -> io::Result<()> {
        loop {
            self.ring.reap();
            self.check()?;
            self.dispatch();
            if self.has_room() {
                return Ok(());
            }
            self.ring.update(|s| s.waits += 1);
            glommio::timer::sleep(WAIT_POLL).await;
        }
    }

    /// Hands the staged bytes not yet written to the ring, unless a write in flight reaches
    /// their first block or the ring is full (then a completion dispatches them).
    fn dispatch(self: &Rc<Self>) {
        let mut staged = self.staged.borrow_mut();
        let end = staged.end();
        if staged.dirty_from == end || staged.failed.is_some() {
            return;
        }
        let from = staged.from;
        if staged.in_flight.iter().any(|w| w.1 > from) {
            self.ring.keep_reaping(); // its completion dispatches these
            return;
        }
        if !self.ring.ring.borrow().has_room() {
            if !std::mem::replace(&mut staged.waiting_for_slot, true) {
                self.ring
                    .waiting_for_slot
                    .borrow_mut()
                    .push_back(Rc::downgrade(self));
            }
            self.ring.keep_reaping();
            return;
        }
        let filled = staged.filled;
        let aligned = filled.next_multiple_of(DIRECT_IO_ALIGN);
        let tail_at = filled - filled % DIRECT_IO_ALIGN;
        let mut buffer = staged.buffer.take().expect("staged bytes have a buffer");
        let bytes = buffer.as_mut_slice();
        bytes[filled..aligned].fill(0);
        staged.tail.clear();
        staged.tail.extend_from_slice(&bytes[tail_at..filled]);
        let new_from = staged.dirty_from;
        staged.in_flight.push_back((from, from + aligned as u64));
        staged.from = from + tail_at as u64;
        staged.filled = filled - tail_at;
        staged.dirty_from = end;
        drop(staged);
        self.ring.submit(self, buffer, (from, aligned), (new_from, end));
        self.ring.keep_reaping();
    }

    /// Whether the write succeeded.
    fn completed(&self, write: &InFlight, result: i32) -> bool {
        let mut staged = self.staged.borrow_mut();
        let at = staged
            .in_flight
            .iter()
            .position(|w| *w == (write.start, write.end));
        staged
            .in_flight
            .remove(at.expect("a completed write was in flight"));
        let len = write.end - write.start;
        if result < 0 {
            staged.failed.get_or_insert(-result);
        } else if result as u64 != len {
            staged.failed.get_or_insert(libc::EIO); // a short O_DIRECT write: the disk is full
        }
        staged.failed.is_none()
    }

    /// `[pos, pos + len)` from the shard's recent writes, if they hold all of it.
    pub fn cached(&self, pos: u64, len: usize) -> Option<Bytes> {
        let read = self.ring.recent.read(self.id, pos, len);
        self.ring.update(|s| match read {
            Some(_) => s.cache_hits += 1,
            None => s.cache_misses += 1,
        });
        read
    }

    /// The file is cut to `len`: the recent writes drop what lay past it.
    pub fn cut_cached(&self, len: u64) {
        self.ring.recent.cut(self.id, len);
    }

    /// Waits until every byte below `end` is written and no write in flight starts below it
    /// (a buffered read of a block while an O_DIRECT write of it is in flight could leave a
    /// stale copy of the block in the page cache); fails if a write failed.
    pub async fn drain_to(self: &Rc<Self>, end: u64) -> io::Result<()> {
        let mut waited = false;
        loop {
            self.ring.reap();
            self.check()?;
            self.dispatch();
            if self.is_written_below(end.min(self.end())) {
                return Ok(());
            }
            if !waited {
                self.ring.update(|s| s.waits += 1);
                waited = true;
            }
            glommio::timer::sleep(WAIT_POLL).await;
        }
    }

    /// [`FileAppends::drain_to`] the end.
    pub async fn drain(self: &Rc<Self>) -> io::Result<()> {
        self.drain_to(self.end()).await
    }

    /// Starts again from a file of `len` bytes whose last partial block holds `tail`, after
    /// the file changed by other means (a truncate, an overwrite); nothing may be in flight.
    pub fn reset(&self, len: u64, tail: &[u8]) {
        let mut staged = self.staged.borrow_mut();
        assert!(staged.in_flight.is_empty(), "reset with writes in flight");
        assert_eq!(
            tail.len() as u64,
            len % ALIGN,
            "the tail is the last partial block of {len}"
        );
        staged.from = len - len % ALIGN;
        staged.filled = tail.len();
        staged.dirty_from = len;
        staged.tail = tail.to_vec();
        if let Some(buffer) = staged.buffer.take() {
            self.ring.give_back(buffer);
        }
    }
}

impl Drop for FileAppends {
    /// Its staging buffer goes back to the shard (what it staged is lost, as unsynced data
    /// is), and another file may take its inode once it is gone: nothing of it stays cached.
    fn drop(&mut self) {
        if let Some(buffer) = self.staged.get_mut().buffer.take() {
            self.ring.give_back(buffer);
        }
        self.ring.recent.forget(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_hands_out_at_most_its_bound_of_staging_buffers() {
        let ring = DirectRing::new(0).unwrap();
        let taken: Vec<_> = (0..BUFFERS_OUT_MAX)
            .map(|_| ring.take_buffer().unwrap())
            .collect();
        assert!(ring.take_buffer().is_none(), "past the bound");
        assert!(!ring.can_take_buffer());
        for buffer in taken {
            ring.give_back(buffer);
        }
        assert_eq!(ring.stats().buffers_out, 0);
        assert_eq!(ring.pool.borrow().len(), POOLED_BUFFERS_MAX, "the rest freed");
        assert!(ring.take_buffer().is_some());
    }
}
