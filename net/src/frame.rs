//! Kafka framing: every request and response is a 4-byte big-endian size followed by that many
//! bytes. The reader keeps partial input across reads and tells "need more bytes" (wait for the
//! socket) from "bad bytes" (a negative or oversized length: close the connection).

use bytes::{Buf, Bytes, BytesMut};

/// Bytes in the size prefix.
pub const FRAME_HEADER_BYTES: usize = 4;

/// A size prefix that can never be valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The prefix is negative.
    #[error("negative frame size {0}")]
    NegativeSize(i32),
    /// The prefix exceeds the configured maximum.
    #[error("frame size {size} exceeds the maximum {max}")]
    TooLarge {
        /// The size announced.
        size: usize,
        /// The configured maximum.
        max: usize,
    },
}

/// The outcome of looking for a frame in what was read so far.
#[derive(Debug, PartialEq, Eq)]
pub enum FrameStatus {
    /// A whole frame (without its size prefix).
    Ready(Bytes),
    /// The buffer holds part of a frame; at least `missing` more bytes are needed.
    NeedMore {
        /// Bytes still missing for the frame (or its prefix) to be complete.
        missing: usize,
    },
}

/// Splits a byte stream into frames. Owned by one connection; not shared.
///
/// `buffer[..filled]` holds received bytes; `buffer[filled..]` is zeroed room for the next read,
/// kept initialised so reads need no `unsafe` and each byte of room is zeroed once, not per read.
#[derive(Debug)]
pub struct FrameReader {
    buffer: BytesMut,
    filled: usize,
    frame_bytes_max: usize,
}

/// Bytes asked of the socket per read at least (many small responses arrive in one read).
const READ_BYTES_MIN: usize = 64 * 1024;
/// Bytes asked of the socket per read at most (bounds the room zeroed ahead of a huge frame).
const READ_BYTES_MAX: usize = 4 * 1024 * 1024;

impl FrameReader {
    /// A reader that rejects frames larger than `frame_bytes_max`.
    pub fn new(frame_bytes_max: usize) -> FrameReader {
        FrameReader {
            buffer: BytesMut::new(),
            filled: 0,
            frame_bytes_max,
        }
    }

    /// Bytes held that do not yet form a frame.
    pub fn buffered_len(&self) -> usize {
        self.filled
    }

    /// Appends bytes received from the peer.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.make_room(bytes.len());
        self.buffer[self.filled..self.filled + bytes.len()].copy_from_slice(bytes);
        self.filled += bytes.len();
    }

    /// Zeroed room for the next read of the socket, sized for the frame in progress; bytes
    /// read into it count once passed to [`FrameReader::commit_read`]. The room is zeroed once
    /// and reused, so a large frame arriving in many reads is not zeroed again on each read.
    pub fn room_for_read(&mut self) -> &mut [u8] {
        let missing = self.next_frame_missing().unwrap_or_default();
        self.make_room(missing.clamp(READ_BYTES_MIN, READ_BYTES_MAX));
        &mut self.buffer[self.filled..]
    }

    /// Counts `read` bytes written into the room from [`FrameReader::room_for_read`].
    pub fn commit_read(&mut self, read: usize) {
        assert!(
            self.filled + read <= self.buffer.len(),
            "read past the room given"
        );
        self.filled += read;
    }

    /// Bytes still missing for the frame in progress (its prefix first); `None` with a whole
    /// frame or a bad prefix buffered.
    fn next_frame_missing(&self) -> Option<usize> {
        if self.filled < FRAME_HEADER_BYTES {
            return Some(FRAME_HEADER_BYTES - self.filled);
        }
        let size = frame_size(&self.buffer[..FRAME_HEADER_BYTES], self.frame_bytes_max).ok()?;
        (FRAME_HEADER_BYTES + size)
            .checked_sub(self.filled)
            .filter(|m| *m > 0)
    }

    fn make_room(&mut self, room: usize) {
        if self.buffer.len() < self.filled + room {
            self.buffer.resize(self.filled + room, 0);
        }
    }

    /// Takes the next whole frame, if the buffer holds one.
    pub fn next_frame(&mut self) -> Result<FrameStatus, FrameError> {
        if self.filled < FRAME_HEADER_BYTES {
            return Ok(FrameStatus::NeedMore {
                missing: FRAME_HEADER_BYTES - self.filled,
            });
        }
        let size = frame_size(&self.buffer[..FRAME_HEADER_BYTES], self.frame_bytes_max)?;
        let total = FRAME_HEADER_BYTES + size;
        if self.filled < total {
            return Ok(FrameStatus::NeedMore {
                missing: total - self.filled,
            });
        }
        self.buffer.advance(FRAME_HEADER_BYTES);
        self.filled -= total;
        Ok(FrameStatus::Ready(self.buffer.split_to(size).freeze()))
    }

    /// Reads from `source` until a whole frame is buffered, then returns it. `Ok(None)` when the
    /// source ends cleanly between frames.
    pub fn read_frame<R: std::io::Read>(&mut self, source: &mut R) -> Result<Option<Bytes>, ReadFrameError> {
        loop {
            let missing = match self.next_frame()? {
                FrameStatus::Ready(frame) => return Ok(Some(frame)),
                FrameStatus::NeedMore { missing } => missing,
            };
            self.make_room(missing.clamp(READ_BYTES_MIN, READ_BYTES_MAX));
            let start = self.filled;
            let read = match source.read(&mut self.buffer[start..]) {
                Ok(read) => read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(ReadFrameError::Io(error)),
            };
            self.filled += read;
            if read == 0 {
                return if start == 0 {
                    Ok(None)
                } else {
                    Err(ReadFrameError::Io(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("stream ended inside a frame ({start} bytes buffered)"),
                    )))
                };
            }
        }
    }
}

/// Why [`FrameReader::read_frame`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReadFrameError {
    /// The size prefix was invalid.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The source failed or ended inside a frame.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Validates a 4-byte big-endian size prefix.
pub fn frame_size(prefix: &[u8], frame_bytes_max: usize) -> Result<usize, FrameError> {
    assert_eq!(prefix.len(), FRAME_HEADER_BYTES, "a size prefix is 4 bytes");
    let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    if size < 0 {
        return Err(FrameError::NegativeSize(size));
    }
    let size = size as usize;
    if size > frame_bytes_max {
        return Err(FrameError::TooLarge {
            size,
            max: frame_bytes_max,
        });
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_prefix_and_body_need_more() {
        let mut reader = FrameReader::new(1024);
        assert_eq!(reader.next_frame(), Ok(FrameStatus::NeedMore { missing: 4 }));
        reader.extend(&[0, 0]);
        assert_eq!(reader.next_frame(), Ok(FrameStatus::NeedMore { missing: 2 }));
        reader.extend(&[0, 3, b'a']);
        assert_eq!(reader.next_frame(), Ok(FrameStatus::NeedMore { missing: 2 }));
        reader.extend(&[b'b', b'c', 0, 0]);
        assert_eq!(
            reader.next_frame(),
            Ok(FrameStatus::Ready(Bytes::from_static(b"abc")))
        );
        // The two bytes of the next prefix stay buffered.
        assert_eq!(reader.buffered_len(), 2);
    }

    #[test]
    fn bad_sizes_are_errors_not_waits() {
        let mut reader = FrameReader::new(1024);
        reader.extend(&(-1i32).to_be_bytes());
        assert_eq!(reader.next_frame(), Err(FrameError::NegativeSize(-1)));
        let mut reader = FrameReader::new(1024);
        reader.extend(&1025i32.to_be_bytes());
        assert_eq!(
            reader.next_frame(),
            Err(FrameError::TooLarge {
                size: 1025,
                max: 1024
            })
        );
    }

    #[test]
    fn read_frame_reassembles_across_reads_and_sees_clean_eof() {
        // Two frames ("hi", empty) delivered through a reader that hands out 3 bytes at a time.
        let stream: Vec<u8> = [&2i32.to_be_bytes()[..], b"hi", &0i32.to_be_bytes()[..]].concat();
        let mut source = TrickleReader(&stream, 3);
        let mut reader = FrameReader::new(16);
        assert_eq!(
            reader.read_frame(&mut source).expect("frame"),
            Some(Bytes::from_static(b"hi"))
        );
        assert_eq!(reader.read_frame(&mut source).expect("frame"), Some(Bytes::new()));
        assert!(reader.read_frame(&mut source).expect("eof").is_none());
    }

    #[test]
    fn eof_inside_a_frame_is_an_error() {
        let stream: Vec<u8> = [&5i32.to_be_bytes()[..], b"ab"].concat();
        let mut reader = FrameReader::new(16);
        let error = reader.read_frame(&mut &stream[..]).unwrap_err();
        assert!(matches!(error, ReadFrameError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof));
    }

    struct TrickleReader<'a>(&'a [u8], usize);

    impl std::io::Read for TrickleReader<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.len().min(self.1).min(out.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_frame_read_in_pieces_through_the_room_comes_out_whole() {
        let mut reader = FrameReader::new(1 << 20);
        let body = vec![7u8; 300_000];
        let mut wire = (body.len() as i32).to_be_bytes().to_vec();
        wire.extend_from_slice(&body);
        let mut sent = 0;
        while sent < wire.len() {
            assert!(matches!(reader.next_frame(), Ok(FrameStatus::NeedMore { .. })));
            let room = reader.room_for_read();
            // the room covers what the frame still needs (within the per-read bounds)
            assert!(room.len() >= (wire.len() - sent).min(READ_BYTES_MIN));
            let piece = room.len().min(50_000).min(wire.len() - sent);
            room[..piece].copy_from_slice(&wire[sent..sent + piece]);
            reader.commit_read(piece);
            sent += piece;
        }
        assert_eq!(reader.next_frame(), Ok(FrameStatus::Ready(Bytes::from(body))));
        assert_eq!(reader.buffered_len(), 0);
    }
}
