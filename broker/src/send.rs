//! Writing one response frame given as chunks: bytes in memory (fields, and batches shared with
//! the engine's reads) and ranges of segment files, which go to the socket with sendfile so that
//! fetched record bytes are never copied in user space (docs/decisions/0005).

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;

use futures::AsyncWriteExt;
use glommio::net::TcpStream;
use laminar_engine::io::FileRange;
use laminar_sys::sockets;

use laminar_protocol::chunk::Chunk;

use crate::metrics::shard::FetchPaths;

/// When the socket is full in the middle of a file range, this much of it is read and written
/// the ordinary way: glommio can wait for room in the socket only inside its own write.
const COPY_WHEN_FULL_BYTES: usize = 64 * 1024;

/// Writes every chunk, in order; tells how the file ranges went (for the metrics).
pub async fn write_frame(stream: &mut TcpStream, chunks: &[Chunk]) -> io::Result<FetchPaths> {
    let mut socket = FrameSocket::new(stream.as_raw_fd());
    let mut paths = FetchPaths::default();
    let (mut index, mut offset) = (0, 0);
    while index < chunks.len() {
        let mut sent = match &chunks[index] {
            Chunk::Memory(_) => send_memory(stream, &mut socket, &chunks[index..], offset).await?,
            Chunk::File(range) => {
                let (sent, copied) = send_file(stream, &mut socket, range, offset).await?;
                let path = if copied {
                    &mut paths.copied
                } else {
                    &mut paths.sendfile
                };
                *path += sent as u64;
                sent
            }
        };
        while index < chunks.len() && sent >= chunks[index].len() - offset {
            sent -= chunks[index].len() - offset;
            (index, offset) = (index + 1, 0);
        }
        offset += sent;
    }
    socket.finish()?;
    Ok(paths)
}

/// The connection's socket while this task writes one frame. Owned by the connection's task,
/// the only user of the socket meanwhile.
///
/// sendfile has no MSG_DONTWAIT, so the socket is non-blocking while the task calls the kernel
/// itself, and blocking again before every await: glommio's own io_uring operations on a
/// non-blocking socket would fail with EAGAIN instead of waiting. The mode changes once per run
/// of calls between awaits, not once per file range (three fcntl each, 2 % of the broker's CPU
/// consuming 10 000 partitions).
struct FrameSocket {
    socket: RawFd,
    /// The flags glommio set (blocking), read at the first call that needs non-blocking mode:
    /// a frame all in memory never changes the mode.
    blocking_flags: Option<libc::c_int>,
    nonblocking_now: bool,
}

impl FrameSocket {
    fn new(socket: RawFd) -> FrameSocket {
        FrameSocket {
            socket,
            blocking_flags: None,
            nonblocking_now: false,
        }
    }

    /// Makes the socket non-blocking for calls that must not wait.
    fn for_calls(&mut self) -> io::Result<RawFd> {
        if !self.nonblocking_now {
            let flags = match self.blocking_flags {
                Some(flags) => flags,
                None => *self.blocking_flags.insert(sockets::status_flags(self.socket)?),
            };
            if flags & libc::O_NONBLOCK == 0 {
                sockets::set_status_flags(self.socket, flags | libc::O_NONBLOCK)?;
            }
            self.nonblocking_now = true;
        }
        Ok(self.socket)
    }

    /// Puts glommio's flags back; called before every await on the stream.
    fn for_await(&mut self) -> io::Result<()> {
        if let (true, Some(flags)) = (self.nonblocking_now, self.blocking_flags) {
            if flags & libc::O_NONBLOCK == 0 {
                sockets::set_status_flags(self.socket, flags)?;
            }
            self.nonblocking_now = false;
        }
        Ok(())
    }

    /// Flags back: the frame is written.
    fn finish(mut self) -> io::Result<()> {
        self.for_await()
    }
}

impl Drop for FrameSocket {
    /// A frame cut short by an error: the connection closes after it, but the socket is left as
    /// glommio expects in any case. Errors here have nowhere to go and change nothing.
    fn drop(&mut self) {
        let _ = self.for_await();
    }
}

/// Sends the leading run of in-memory chunks (the first from `offset`) in one vectored send,
/// or, when the socket is full, waits for room and sends part of the first.
async fn send_memory(
    stream: &mut TcpStream,
    socket: &mut FrameSocket,
    chunks: &[Chunk],
    offset: usize,
) -> io::Result<usize> {
    let run = chunks
        .iter()
        .take_while(|c| matches!(c, Chunk::Memory(_)))
        .count();
    let slices: Vec<IoSlice<'_>> = chunks[..run]
        .iter()
        .enumerate()
        .map(|(i, chunk)| match chunk {
            Chunk::Memory(bytes) => IoSlice::new(&bytes[if i == 0 { offset } else { 0 }..]),
            Chunk::File(_) => unreachable!("the run holds memory chunks only"),
        })
        .collect();
    let file_follows = run < chunks.len();
    match sockets::send_vectored_now(socket.socket, &slices, file_follows) {
        Ok(0) if slices.iter().any(|s| !s.is_empty()) => Err(io::ErrorKind::WriteZero.into()),
        Ok(sent) => Ok(sent),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            socket.for_await()?;
            stream.write(&slices[0]).await
        }
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        Err(e) => Err(e),
    }
}

/// Sends what the socket takes now of `range` from `offset` with sendfile; when the socket is
/// full (or sendfile refuses this file), copies a little through user space instead. Returns
/// the bytes sent and whether they were copied.
async fn send_file(
    stream: &mut TcpStream,
    socket: &mut FrameSocket,
    range: &FileRange,
    offset: usize,
) -> io::Result<(usize, bool)> {
    let remaining = range.len as usize - offset;
    let position = range.position + offset as u64;
    let fd = socket.for_calls()?;
    match sockets::send_file(fd, range.file.as_raw_fd(), position, remaining) {
        Ok(0) if remaining > 0 => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "a segment file ended before the range read from it",
        )),
        Ok(sent) => Ok((sent, false)),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok((0, false)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock || sendfile_refused(&e) => {
            let mut copy = vec![0u8; remaining.min(COPY_WHEN_FULL_BYTES)];
            range.file.read_exact_at(&mut copy, position)?;
            socket.for_await()?;
            stream.write_all(&copy).await?;
            Ok((copy.len(), true))
        }
        Err(e) => Err(e),
    }
}

/// sendfile's answers for a file or socket it cannot work with (the copy path still can).
fn sendfile_refused(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)
    )
}
