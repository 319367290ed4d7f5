//! io_uring operations queued by hand (io-uring's `push` is unsafe: the kernel uses the
//! entry's buffers until the operation completes): a `sync_file_range`, which has no buffer,
//! and reads and writes of whole blocks through [`BlockRing`], which owns its buffers and
//! never frees one the kernel may still use.

use std::io;
use std::os::fd::RawFd;

use io_uring::squeue::PushError;
use io_uring::{opcode, types, IoUring};

use crate::memory::AlignedBuffer;

/// Queues (does not submit) an `IORING_OP_SYNC_FILE_RANGE` of `[offset, offset + len)` of the
/// open file `fd` with `flags` on `ring`, tagged `user_data`. `Err` when the submission queue
/// is full. The caller keeps `fd` open until the op's completion is reaped: a descriptor closed
/// earlier makes the op fail or sync whichever file reuses the number.
pub fn push_sync_file_range(
    ring: &mut IoUring,
    fd: RawFd,
    (offset, len): (u64, u32),
    flags: u32,
    user_data: u64,
) -> Result<(), PushError> {
    let entry = opcode::SyncFileRange::new(types::Fd(fd), len)
        .offset(offset)
        .flags(flags)
        .build()
        .user_data(user_data);
    // SAFETY: `push` requires the entry's buffers to stay valid until the op completes; a
    // sync_file_range entry has none (a descriptor number and integers only), so the kernel
    // never touches memory of ours for it, whatever becomes of the descriptor meanwhile.
    unsafe { ring.submission().push(&entry) }
}

/// Bytes of zeros one [`push_write_zeros`] writes at most.
pub const ZEROS_BYTES: usize = 1 << 20;

/// Zeros, aligned for O_DIRECT, that write ops read from: static, so they outlive every op.
#[repr(C, align(4096))]
struct Zeros([u8; ZEROS_BYTES]);
static ZEROS: Zeros = Zeros([0; ZEROS_BYTES]);

/// How an op queued by hand relates to the next one queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chain {
    /// The next op starts only once this one succeeded (`IOSQE_IO_LINK`); a failure or a short
    /// transfer cancels the rest of the chain (their completions say `-ECANCELED`).
    LinkNext,
    /// The last op of a chain, or a lone op.
    End,
}

fn chained(entry: io_uring::squeue::Entry, chain: Chain) -> io_uring::squeue::Entry {
    match chain {
        Chain::LinkNext => entry.flags(io_uring::squeue::Flags::IO_LINK),
        Chain::End => entry,
    }
}

/// Queues (does not submit) a write of `len` zero bytes (at most [`ZEROS_BYTES`]) at `offset`
/// of the open file `fd`, tagged `user_data`. The bytes come from a static, aligned buffer, so
/// `fd` may be an O_DIRECT descriptor when `offset` and `len` are multiples of its block size.
/// The caller keeps `fd` open until the op's completion is reaped. `Err` when the submission
/// queue is full.
pub fn push_write_zeros(
    ring: &mut IoUring,
    fd: RawFd,
    (offset, len): (u64, u32),
    chain: Chain,
    user_data: u64,
) -> Result<(), PushError> {
    assert!(
        len as usize <= ZEROS_BYTES,
        "a zero write of {len} bytes, past the buffer"
    );
    let entry = opcode::Write::new(types::Fd(fd), ZEROS.0.as_ptr(), len)
        .offset(offset)
        .build()
        .user_data(user_data);
    // SAFETY: the entry's buffer is `ZEROS`, a static the kernel only reads, valid for the
    // whole life of the process, so it outlives the op whatever becomes of the ring; `len` is
    // within it (asserted above).
    unsafe { ring.submission().push(&chained(entry, chain)) }
}

/// Queues (does not submit) an fdatasync of the open file `fd` (`IORING_OP_FSYNC` with
/// `IORING_FSYNC_DATASYNC`), tagged `user_data`; as [`push_write_zeros`] for the rest.
pub fn push_fdatasync(ring: &mut IoUring, fd: RawFd, chain: Chain, user_data: u64) -> Result<(), PushError> {
    let entry = opcode::Fsync::new(types::Fd(fd))
        .flags(types::FsyncFlags::DATASYNC)
        .build()
        .user_data(user_data);
    // SAFETY: an fsync entry refers to no memory of ours (a descriptor number and flags), so
    // the kernel never touches our memory for it.
    unsafe { ring.submission().push(&chained(entry, chain)) }
}

/// Which way a block operation moves data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Read the file into the buffer.
    Read,
    /// Write the buffer to the file.
    Write,
}

/// A finished operation of a [`BlockRing`]: its buffer's slot, free again, and the kernel's
/// result (bytes moved, or a negated errno).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The slot of the buffer the operation used.
    pub slot: usize,
    /// Bytes read or written, or `-errno`.
    pub result: i32,
}

/// An io_uring with a buffer per slot, each the size of a block, and at most one read or write
/// in flight per buffer: disk probes keep a queue depth of `slots` sequential operations. The
/// ring owns the buffers, so none is touched or freed while the kernel may use it: a ring
/// dropped with operations in flight leaks their buffers rather than free them.
pub struct BlockRing {
    ring: IoUring,
    buffers: Vec<AlignedBuffer>,
    busy: Vec<bool>,
    in_flight: usize,
}

impl BlockRing {
    /// A ring for `buffers`, at least one and all of the same length (their contents are what
    /// writes write), with an entry per buffer.
    pub fn new(buffers: Vec<AlignedBuffer>) -> io::Result<BlockRing> {
        assert!(!buffers.is_empty(), "at least one buffer");
        let block = buffers[0].len();
        assert!(buffers.iter().all(|b| b.len() == block), "equal buffers");
        let entries = u32::try_from(buffers.len().next_power_of_two()).expect("a queue depth that fits u32");
        Ok(BlockRing {
            ring: IoUring::new(entries)?,
            busy: vec![false; buffers.len()],
            buffers,
            in_flight: 0,
        })
    }

    /// The bytes each operation moves: a buffer's length.
    pub fn block_bytes(&self) -> usize {
        self.buffers[0].len()
    }

    /// The buffers, one operation in flight per buffer at most.
    pub fn slots(&self) -> usize {
        self.buffers.len()
    }

    /// Whether `slot`'s buffer has an operation queued or in flight.
    pub fn is_busy(&self, slot: usize) -> bool {
        self.busy[slot]
    }

    /// Operations queued or in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Queues (does not submit) a read into or a write from the whole of `slot`'s buffer at
    /// `offset` of the open file `fd`, which the caller keeps open until its completion. The
    /// slot must be free.
    pub fn queue(&mut self, slot: usize, fd: RawFd, offset: u64, direction: Direction) -> io::Result<()> {
        assert!(!self.busy[slot], "slot {slot} has an operation in flight");
        let buffer = &mut self.buffers[slot];
        let len = u32::try_from(buffer.len()).expect("block sizes fit in u32");
        let entry = match direction {
            Direction::Read => opcode::Read::new(types::Fd(fd), buffer.as_mut_ptr(), len)
                .offset(offset)
                .build(),
            Direction::Write => opcode::Write::new(types::Fd(fd), buffer.as_mut_ptr(), len)
                .offset(offset)
                .build(),
        }
        .user_data(slot as u64);
        // SAFETY: the entry refers to `slot`'s buffer, which the ring owns and neither lends
        // nor frees until the completion for this slot is reaped in `submit_and_wait` (and
        // leaks if the ring is dropped first); the slot is marked busy below so that no other
        // operation uses it meanwhile.
        unsafe { self.ring.submission().push(&entry) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        self.busy[slot] = true;
        self.in_flight += 1;
        Ok(())
    }

    /// Submits what was queued, waits for at least one completion, and returns every completion
    /// there is, their slots free again. An interrupted wait is `ErrorKind::Interrupted`.
    pub fn submit_and_wait(&mut self) -> io::Result<Vec<Completion>> {
        self.ring.submit_and_wait(1)?;
        let completions: Vec<Completion> = self
            .ring
            .completion()
            .map(|entry| Completion {
                slot: entry.user_data() as usize,
                result: entry.result(),
            })
            .collect();
        for completion in &completions {
            self.busy[completion.slot] = false;
            self.in_flight -= 1;
        }
        Ok(completions)
    }
}

impl Drop for BlockRing {
    fn drop(&mut self) {
        if self.in_flight > 0 {
            // The kernel may still read or write these buffers: never free them.
            std::mem::forget(std::mem::take(&mut self.buffers));
        }
    }
}

/// A finished write of a [`WriteRing`]: its tag, the kernel's result (bytes written, or a
/// negated errno), and the buffer, the caller's again.
#[derive(Debug)]
pub struct WriteDone {
    pub tag: u64,
    pub result: i32,
    pub buffer: AlignedBuffer,
}

/// An io_uring for writes from aligned buffers it holds while the kernel uses them: a write
/// queued takes its buffer, and its completion gives it back, so no buffer is touched or freed
/// while the kernel may read it (a ring dropped with writes in flight leaks their buffers
/// rather than free them). At most `slots` writes in flight. Owned by one thread.
pub struct WriteRing {
    ring: IoUring,
    /// Per slot: the tag and buffer of the write in flight there.
    slots: Vec<Option<(u64, AlignedBuffer)>>,
    free: Vec<usize>,
}

impl WriteRing {
    /// A ring with room for `slots` writes in flight (at least one).
    pub fn new(slots: usize) -> io::Result<WriteRing> {
        let slots = slots.max(1);
        let entries = u32::try_from(slots.next_power_of_two()).expect("a queue depth that fits u32");
        Ok(WriteRing {
            ring: IoUring::new(entries)?,
            slots: (0..slots).map(|_| None).collect(),
            free: (0..slots).rev().collect(),
        })
    }

    /// Writes queued or in flight.
    pub fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether another write can be queued now.
    pub fn has_room(&self) -> bool {
        !self.free.is_empty()
    }

    /// Queues (does not submit) a write of the first `len` bytes of `buffer` at `offset` of
    /// `fd`, tagged `tag`; the caller keeps `fd` open until its completion is taken. Gives the
    /// buffer back when every slot is taken.
    pub fn queue(
        &mut self,
        fd: RawFd,
        offset: u64,
        (mut buffer, len): (AlignedBuffer, usize),
        tag: u64,
    ) -> Result<(), AlignedBuffer> {
        assert!(
            len > 0 && len <= buffer.len(),
            "a write of {len} bytes from a buffer of {}",
            buffer.len()
        );
        let Some(slot) = self.free.pop() else {
            return Err(buffer);
        };
        let len32 = u32::try_from(len).expect("a write fits u32");
        let entry = opcode::Write::new(types::Fd(fd), buffer.as_mut_ptr(), len32)
            .offset(offset)
            .build()
            .user_data(slot as u64);
        // SAFETY: the entry reads `len` bytes (within the buffer, asserted above) from
        // `buffer`'s heap allocation, which is moved into `slots[slot]` below and stays there,
        // unmoved in memory (only the owning handle moves) and unfreed, until this slot's
        // completion is taken in `take_completions`, or forever if the ring is dropped first.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        if pushed.is_err() {
            // The queue has an entry per slot, so it is never full while a slot is free.
            self.free.push(slot);
            return Err(buffer);
        }
        self.slots[slot] = Some((tag, buffer));
        Ok(())
    }

    /// Submits what was queued, without waiting. An interrupted submit leaves the writes queued
    /// for the next call.
    pub fn submit(&mut self) -> io::Result<()> {
        match self.ring.submit() {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => Ok(()),
            other => other.map(drop),
        }
    }

    /// Every write completed so far, without waiting (what is still queued is submitted
    /// first), their slots free again.
    pub fn take_completions(&mut self) -> Vec<WriteDone> {
        if !self.ring.submission().is_empty() {
            let _ = self.submit();
        }
        let finished: Vec<(u64, i32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        let mut done = Vec::with_capacity(finished.len());
        for (slot, result) in finished {
            let slot = slot as usize;
            let (tag, buffer) = self.slots[slot]
                .take()
                .expect("a completion for a write in flight");
            self.free.push(slot);
            done.push(WriteDone { tag, result, buffer });
        }
        done
    }
}

impl Drop for WriteRing {
    fn drop(&mut self) {
        if self.in_flight() > 0 {
            // The kernel may still read these buffers: never free them.
            std::mem::forget(std::mem::take(&mut self.slots));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::DIRECT_IO_ALIGN;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_write_ring_writes_its_buffers_and_gives_them_back() {
        let file = tempfile::tempfile().unwrap();
        let mut ring = WriteRing::new(2).unwrap();
        for (at, byte) in [(0u64, 1u8), (4096, 2), (8192, 3)] {
            let mut buffer = AlignedBuffer::new(DIRECT_IO_ALIGN);
            buffer.as_mut_slice().fill(byte);
            let mut queued = ring.queue(file.as_raw_fd(), at, (buffer, DIRECT_IO_ALIGN), at);
            while let Err(back) = queued {
                assert_eq!(ring.in_flight(), 2, "only a full ring gives a buffer back");
                let mut done = Vec::new();
                while done.is_empty() {
                    done = ring.take_completions();
                }
                queued = ring.queue(file.as_raw_fd(), at, (back, DIRECT_IO_ALIGN), at);
            }
            ring.submit().unwrap();
        }
        let mut tags = Vec::new();
        while ring.in_flight() > 0 {
            for done in ring.take_completions() {
                assert_eq!(done.result, DIRECT_IO_ALIGN as i32);
                assert_eq!(done.buffer.len(), DIRECT_IO_ALIGN);
                tags.push(done.tag);
            }
        }
        assert!(tags.contains(&8192));
        let written = std::fs::read(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap();
        assert_eq!(written.len(), 3 * DIRECT_IO_ALIGN);
        for (block, byte) in written.chunks(DIRECT_IO_ALIGN).zip([1u8, 2, 3]) {
            assert!(block.iter().all(|b| *b == byte));
        }
    }

    #[test]
    fn chained_zero_writes_and_fdatasync_complete_in_order_and_write_zeros() {
        let file = tempfile::tempfile().unwrap();
        std::fs::write(format!("/proc/self/fd/{}", file.as_raw_fd()), [7u8; 10]).unwrap();
        let mut ring = IoUring::new(8).unwrap();
        let fd = file.as_raw_fd();
        push_write_zeros(&mut ring, fd, (4096, ZEROS_BYTES as u32), Chain::LinkNext, 1).unwrap();
        push_write_zeros(
            &mut ring,
            fd,
            (4096 + ZEROS_BYTES as u64, 4096),
            Chain::LinkNext,
            2,
        )
        .unwrap();
        push_fdatasync(&mut ring, fd, Chain::End, 3).unwrap();
        ring.submit_and_wait(3).unwrap();
        let done: Vec<(u64, i32)> = ring.completion().map(|c| (c.user_data(), c.result())).collect();
        assert_eq!(done, vec![(1, ZEROS_BYTES as i32), (2, 4096), (3, 0)]);
        let back = std::fs::read(format!("/proc/self/fd/{fd}")).unwrap();
        assert_eq!(back.len(), 8192 + ZEROS_BYTES, "the writes extended the file");
        assert_eq!(&back[..10], &[7u8; 10], "bytes before the zeros kept");
        assert!(back[10..].iter().all(|&b| b == 0));
    }

    #[test]
    fn a_failed_link_cancels_the_rest_of_its_chain() {
        let mut ring = IoUring::new(4).unwrap();
        push_write_zeros(&mut ring, -1, (0, 4096), Chain::LinkNext, 1).unwrap();
        push_fdatasync(&mut ring, -1, Chain::End, 2).unwrap();
        ring.submit_and_wait(2).unwrap();
        let done: Vec<(u64, i32)> = ring.completion().map(|c| (c.user_data(), c.result())).collect();
        assert_eq!(done, vec![(1, -libc::EBADF), (2, -libc::ECANCELED)]);
    }

    #[test]
    fn blocks_queued_on_the_ring_are_written_at_their_offsets() {
        let file = tempfile::tempfile().unwrap();
        let buffers = (0..2u8)
            .map(|slot| {
                let mut buffer = AlignedBuffer::new(DIRECT_IO_ALIGN);
                buffer.as_mut_slice().fill(slot + 1);
                buffer
            })
            .collect();
        let mut ring = BlockRing::new(buffers).unwrap();
        assert_eq!((ring.slots(), ring.block_bytes()), (2, DIRECT_IO_ALIGN));
        for slot in 0..2 {
            ring.queue(
                slot,
                file.as_raw_fd(),
                (slot * DIRECT_IO_ALIGN) as u64,
                Direction::Write,
            )
            .unwrap();
        }
        assert!(ring.is_busy(0) && ring.in_flight() == 2);
        while ring.in_flight() > 0 {
            for completion in ring.submit_and_wait().unwrap() {
                assert_eq!(completion.result, DIRECT_IO_ALIGN as i32);
            }
        }
        let back = std::fs::read(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap();
        assert_eq!(back.len(), 2 * DIRECT_IO_ALIGN);
        assert!(back[..DIRECT_IO_ALIGN].iter().all(|&b| b == 1));
        assert!(back[DIRECT_IO_ALIGN..].iter().all(|&b| b == 2));
    }
}
