//! The one place the protocol layer calls the OS directly.

use std::io::{self, IoSlice};
use std::os::fd::RawFd;

/// Sends as much of `chunks` as the socket takes now, in one `sendmsg`; `WouldBlock` when the
/// socket buffer is full. glommio's streams have no vectored write, and one call per answer
/// (instead of one per chunk) matters for fetch answers made of many shared batches.
pub fn send_vectored_now(fd: RawFd, chunks: &[IoSlice<'_>]) -> io::Result<usize> {
    // The kernel reads at most IOV_MAX entries per call; the rest goes in the next one.
    let count = chunks.len().min(IOV_MAX);
    // SAFETY: `IoSlice` is ABI-compatible with `struct iovec` on Unix (std guarantees it), and
    // the slices outlive the call; `msghdr` is zeroed (no name, no control data) and then points
    // at `count` of them. MSG_DONTWAIT makes the call non-blocking on glommio's socket, and
    // MSG_NOSIGNAL turns a closed peer into EPIPE instead of SIGPIPE.
    let sent = unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = chunks.as_ptr() as *mut libc::iovec;
        message.msg_iovlen = count as _;
        libc::sendmsg(fd, &message, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

const IOV_MAX: usize = 1024;
