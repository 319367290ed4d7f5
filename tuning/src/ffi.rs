//! Every `unsafe` of this crate: resource limits, page-aligned buffers for O_DIRECT, and
//! queueing io_uring operations whose buffers must outlive the kernel's use of them.
#![allow(unsafe_code)]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, types, IoUring};

/// The soft `RLIMIT_MEMLOCK` in bytes; `None` means unlimited.
pub fn memlock_limit_bytes() -> io::Result<Option<u64>> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for the duration of the call.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur))
}

/// Asks the kernel to drop a file's cached pages, so that a buffered read measures the disk.
pub fn drop_page_cache(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor the caller owns; no memory is passed.
    let rc = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// A zero-filled buffer aligned for O_DIRECT (4096 bytes covers every logical block size in
/// use). Owned by one thread.
pub struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

impl AlignedBuf {
    pub const ALIGN: usize = 4096;

    pub fn new(len: usize) -> AlignedBuf {
        assert!(
            len > 0 && len.is_multiple_of(Self::ALIGN),
            "O_DIRECT buffer length {len}"
        );
        let layout = Layout::from_size_align(len, Self::ALIGN).expect("valid layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, layout }
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` points at `len` initialised (zeroed) bytes that we own exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout, freed once.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// Which way a queued operation moves data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Read,
    Write,
}

/// Queues a read or write of the whole of `buf` at `offset` of `fd`, tagged `user_data`.
///
/// The caller keeps `buf` alive and untouched until the completion with `user_data` is reaped
/// (the `uring` driver in `iotune` owns its buffers for the ring's whole life and only reuses a
/// slot after its completion).
pub fn queue_rw(
    ring: &mut IoUring,
    fd: RawFd,
    buf: &mut AlignedBuf,
    offset: u64,
    direction: Direction,
    user_data: u64,
) -> io::Result<()> {
    let len = u32::try_from(buf.len()).expect("block sizes fit in u32");
    let entry = match direction {
        Direction::Read => opcode::Read::new(types::Fd(fd), buf.ptr, len)
            .offset(offset)
            .build(),
        Direction::Write => opcode::Write::new(types::Fd(fd), buf.ptr, len)
            .offset(offset)
            .build(),
    }
    .user_data(user_data);
    // SAFETY: the entry refers to `buf`, which the caller keeps alive and unaliased until its
    // completion is reaped (see above), and to `fd`, which stays open as long as the ring.
    unsafe { ring.submission().push(&entry) }.map_err(|_| io::Error::other("io_uring submission queue full"))
}
