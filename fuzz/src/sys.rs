//! The one place the fuzzer calls the OS directly or shares memory by hand: the board file,
//! mapped shared by the in-process supervisor and its worker (see [`crate::board`]).

use std::cell::UnsafeCell;
use std::fs::File;
use std::os::fd::AsRawFd;

use std::sync::atomic::AtomicU64;

use anyhow::{bail, Result};

use crate::mutate::FRAME_BYTES_MAX;
use crate::report::{OUTCOMES, SLOTS};

/// Types that any bytes (a zeroed new file included) are a valid value of, so they may live in
/// a shared mapping: atomics, byte arrays, and structs of them.
///
/// # Safety
/// Implement only for `#[repr(C)]` types whose every field is valid for any bit pattern.
pub unsafe trait AnyBytes: Sync {}

/// The board's layout (its use is `crate::board`'s): here beside the shared mapping it lives in,
/// because what makes it valid for any bytes is the same claim as `AnyBytes`.
#[repr(C)]
pub struct Board {
    /// Milliseconds since the epoch at the worker's last sign of life.
    pub heartbeat_ms: AtomicU64,
    /// Index of the frame being handled, and 1 + the last index handled to the end.
    pub index: AtomicU64,
    pub done: AtomicU64,
    pub peak_rss_kib: AtomicU64,
    pub(crate) frame_len: AtomicU64,
    pub(crate) counts: [[AtomicU64; OUTCOMES]; SLOTS],
    pub(crate) frame: FrameBytes<FRAME_BYTES_MAX>,
}

// SAFETY: Board is `#[repr(C)]` of atomics and a `FrameBytes`, each valid for any bytes.
unsafe impl AnyBytes for Board {}

/// Maps `file`, which holds exactly `size_of::<T>()` bytes, shared and for the rest of the
/// process.
pub fn map_shared<T: AnyBytes>(file: &File) -> Result<&'static T> {
    let len = std::mem::size_of::<T>();
    if file.metadata()?.len() != len as u64 {
        bail!("the file holds {} bytes, not {len}", file.metadata()?.len());
    }
    // SAFETY: a shared read-write mapping of a file of exactly `len` bytes; the result is checked
    // against MAP_FAILED before use.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if at == libc::MAP_FAILED {
        bail!("mmap: {}", std::io::Error::last_os_error());
    }
    // SAFETY: the mapping is page-aligned, `len` bytes long and never unmapped, and `T` is
    // valid for any bytes (`AnyBytes`), so a `'static` shared reference to it is sound.
    Ok(unsafe { &*(at as *const T) })
}

/// A frame's bytes in shared memory: written by one process (the worker, one frame at a time)
/// and read by the other only once the writer has stopped.
#[repr(C)]
pub struct FrameBytes<const N: usize>(UnsafeCell<[u8; N]>);

// SAFETY: the single-writer discipline above: the worker writes, the supervisor reads only after
// the worker has died or been killed, so no read overlaps a write.
unsafe impl<const N: usize> Sync for FrameBytes<N> {}

impl<const N: usize> FrameBytes<N> {
    /// Copies in at most `N` bytes of `frame`; returns how many. Call from the writer only.
    pub fn write(&self, frame: &[u8]) -> usize {
        let len = frame.len().min(N);
        // SAFETY: only the writer calls this, one frame at a time (see the type's comment).
        unsafe { (&mut *self.0.get())[..len].copy_from_slice(&frame[..len]) };
        len
    }

    /// The first `len` bytes. Call only while the writer is stopped.
    pub fn read(&self, len: usize) -> Vec<u8> {
        // SAFETY: the writer has stopped (see the type's comment).
        unsafe { (&*self.0.get())[..len.min(N)].to_vec() }
    }
}
