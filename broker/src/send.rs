//! Writing one response frame given as chunks: bytes in memory (fields, and batches shared with
//! the engine's reads) and ranges of segment files, which go to the socket with sendfile so that
//! fetched record bytes are never copied in user space (docs/decisions/0005).

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;

use futures::AsyncWriteExt;
use glommio::net::TcpStream;
use laminar_engine::io::FileRange;

use laminar_protocol::chunk::Chunk;

use crate::metrics::shard::FetchPaths;

/// When the socket is full in the middle of a file range, this much of it is read and written
/// the ordinary way: glommio can wait for room in the socket only inside its own write.
const COPY_WHEN_FULL_BYTES: usize = 64 * 1024;

/// Writes every chunk, in order; tells how the file ranges went (for the metrics).
pub async fn write_frame(stream: &mut TcpStream, chunks: &[Chunk]) -> io::Result<FetchPaths> {
    let socket = stream.as_raw_fd();
    let mut paths = FetchPaths::default();
    let (mut index, mut offset) = (0, 0);
    while index < chunks.len() {
        let mut sent = match &chunks[index] {
            Chunk::Memory(_) => send_memory(stream, socket, &chunks[index..], offset).await?,
            Chunk::File(range) => {
                let (sent, copied) = send_file(stream, socket, range, offset).await?;
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
    Ok(paths)
}

/// Sends the leading run of in-memory chunks (the first from `offset`) in one vectored send,
/// or, when the socket is full, waits for room and sends part of the first.
async fn send_memory(
    stream: &mut TcpStream,
    socket: RawFd,
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
    match crate::sys::send_vectored_now(socket, &slices, file_follows) {
        Ok(0) if slices.iter().any(|s| !s.is_empty()) => Err(io::ErrorKind::WriteZero.into()),
        Ok(sent) => Ok(sent),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => stream.write(&slices[0]).await,
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        Err(e) => Err(e),
    }
}

/// Sends what the socket takes now of `range` from `offset` with sendfile; when the socket is
/// full (or sendfile refuses this file), copies a little through user space instead. Returns
/// the bytes sent and whether they were copied.
async fn send_file(
    stream: &mut TcpStream,
    socket: RawFd,
    range: &FileRange,
    offset: usize,
) -> io::Result<(usize, bool)> {
    let remaining = range.len as usize - offset;
    let position = range.position + offset as u64;
    match crate::sys::send_file_now(socket, range.file.as_raw_fd(), position, remaining) {
        Ok(0) if remaining > 0 => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "a segment file ended before the range read from it",
        )),
        Ok(sent) => Ok((sent, false)),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok((0, false)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock || sendfile_refused(&e) => {
            let mut copy = vec![0u8; remaining.min(COPY_WHEN_FULL_BYTES)];
            range.file.read_exact_at(&mut copy, position)?;
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
