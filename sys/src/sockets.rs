//! Socket calls std and glommio have no form of: receiving into a buffer's uninitialised spare
//! capacity (`recv`), one vectored send of many chunks (`sendmsg`), `sendfile`, and a
//! descriptor's status flags (`fcntl`).

use std::io::{self, IoSlice};
use std::os::fd::RawFd;

use bytes::BytesMut;

use crate::files::IOV_MAX;

/// Whether [`recv_into`] waits for bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Block until bytes arrive (a blocking socket, such as the client's).
    Block,
    /// `WouldBlock` when no bytes are waiting (glommio's sockets: the caller awaits readiness).
    No,
}

/// Receives at most `max` bytes into the spare capacity of `buffer` and appends them to it.
/// The capacity is not zeroed first: zeroing it cost a full pass over every produce request
/// (3 % of both cores at 1 GB/s), only for `recv` to overwrite it. `Ok(0)` at end of stream.
pub fn recv_into(fd: RawFd, buffer: &mut BytesMut, max: usize, wait: Wait) -> io::Result<usize> {
    let spare = buffer.spare_capacity_mut();
    let len = spare.len().min(max);
    let flags = match wait {
        Wait::Block => 0,
        Wait::No => libc::MSG_DONTWAIT,
    };
    // SAFETY: `spare` is allocated, writable memory of at least `len` bytes owned by `buffer`
    // (possibly uninitialised, which `recv` never reads); `recv` writes at most `len` bytes there.
    let received = unsafe { libc::recv(fd, spare.as_mut_ptr().cast(), len, flags) };
    if received < 0 {
        return Err(io::Error::last_os_error());
    }
    let received = received as usize;
    assert!(received <= len, "recv wrote past the room it was given");
    // SAFETY: the first `received` bytes of the spare capacity were just written by `recv`.
    unsafe { buffer.set_len(buffer.len() + received) };
    Ok(received)
}

/// Sends as much of `chunks` as the socket takes now, in one `sendmsg`; `WouldBlock` when the
/// socket buffer is full. glommio's streams have no vectored write, and one call per answer
/// (instead of one per chunk) matters for fetch answers made of many shared batches. `more`
/// tells the kernel more of this frame follows at once (MSG_MORE), so a short header is not
/// sent as a packet of its own before the file bytes behind it.
pub fn send_vectored_now(fd: RawFd, chunks: &[IoSlice<'_>], more: bool) -> io::Result<usize> {
    // The kernel reads at most IOV_MAX entries per call; the rest goes in the next one.
    let count = chunks.len().min(IOV_MAX);
    let more = if more || count < chunks.len() {
        libc::MSG_MORE
    } else {
        0
    };
    // SAFETY: `IoSlice` is ABI-compatible with `struct iovec` on Unix (std guarantees it), and
    // the slices outlive the call; `msghdr` is zeroed (no name, no control data) and then points
    // at `count` of them. MSG_DONTWAIT makes the call non-blocking on glommio's socket, and
    // MSG_NOSIGNAL turns a closed peer into EPIPE instead of SIGPIPE.
    let sent = unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = chunks.as_ptr() as *mut libc::iovec;
        message.msg_iovlen = count as _;
        libc::sendmsg(fd, &message, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL | more)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

/// Sends up to `len` bytes of the open file `file` from `position` to `socket` with `sendfile`:
/// the kernel hands page-cache pages to the socket, nothing is copied here. Returns the bytes
/// sent; `Ok(0)` when the file ends before `position`. On a blocking socket it waits for room;
/// on a non-blocking one ([`set_status_flags`], since sendfile has no MSG_DONTWAIT) it sends as
/// many as the socket takes now, `WouldBlock` when its buffer is full.
pub fn send_file(socket: RawFd, file: RawFd, position: u64, len: usize) -> io::Result<usize> {
    let mut offset = crate::to_off_t(position, "file position")?;
    // SAFETY: sendfile reads at most `len` bytes from `file` at `offset` (a local the kernel
    // updates) into `socket`, and touches no user memory but `offset`.
    let sent = unsafe { libc::sendfile(socket, file, &mut offset, len) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

/// The descriptor's file status flags (`F_GETFL`).
pub fn status_flags(fd: RawFd) -> io::Result<libc::c_int> {
    // SAFETY: F_GETFL only reads the flags of a descriptor the caller keeps open.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(flags)
}

/// Sets the descriptor's file status flags (`F_SETFL`), e.g. O_NONBLOCK.
pub fn set_status_flags(fd: RawFd, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: F_SETFL only changes the status flags of a descriptor the caller keeps open.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    use std::os::unix::net::UnixStream;

    use super::*;

    #[test]
    fn recv_into_appends_what_arrived_and_tells_empty_from_ended() {
        let (mut sender, receiver) = UnixStream::pair().expect("socket pair");
        let mut buffer = BytesMut::from(&b"held"[..]);
        buffer.reserve(16);
        let empty = recv_into(receiver.as_raw_fd(), &mut buffer, 16, Wait::No).unwrap_err();
        assert_eq!(empty.kind(), io::ErrorKind::WouldBlock);

        sender.write_all(b"0123456789abcdefXYZ").unwrap();
        assert_eq!(
            recv_into(receiver.as_raw_fd(), &mut buffer, 10, Wait::No).unwrap(),
            10
        );
        assert_eq!(&buffer[..], b"held0123456789");
        buffer.reserve(64);
        assert_eq!(
            recv_into(receiver.as_raw_fd(), &mut buffer, 64, Wait::Block).unwrap(),
            9
        );
        assert_eq!(&buffer[..], b"held0123456789abcdefXYZ");

        drop(sender);
        assert_eq!(
            recv_into(receiver.as_raw_fd(), &mut buffer, 64, Wait::No).unwrap(),
            0
        );
        assert_eq!(buffer.len(), 23);
    }

    #[test]
    fn a_vectored_send_and_a_file_send_arrive_in_order() {
        let (sender, mut receiver) = UnixStream::pair().expect("socket pair");
        let file = tempfile::tempfile().unwrap();
        file.write_all_at(b"..file bytes", 0).unwrap();
        let chunks = [IoSlice::new(b"head"), IoSlice::new(b"er ")];
        assert_eq!(send_vectored_now(sender.as_raw_fd(), &chunks, true).unwrap(), 7);
        assert_eq!(
            send_file(sender.as_raw_fd(), file.as_raw_fd(), 2, 100).unwrap(),
            10
        );
        assert_eq!(
            send_file(sender.as_raw_fd(), file.as_raw_fd(), 50, 100).unwrap(),
            0
        );
        drop(sender);
        let mut received = String::new();
        receiver.read_to_string(&mut received).unwrap();
        assert_eq!(received, "header file bytes");
    }

    #[test]
    fn status_flags_set_are_read_back() {
        let (socket, _peer) = UnixStream::pair().expect("socket pair");
        let flags = status_flags(socket.as_raw_fd()).unwrap();
        assert_eq!(flags & libc::O_NONBLOCK, 0);
        set_status_flags(socket.as_raw_fd(), flags | libc::O_NONBLOCK).unwrap();
        assert_ne!(status_flags(socket.as_raw_fd()).unwrap() & libc::O_NONBLOCK, 0);
    }
}
