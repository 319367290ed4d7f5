//! Kafka framing: every request and response is a 4-byte big-endian size followed by that many
//! bytes. The reader keeps partial input across reads and tells "need more bytes" (wait for the
//! socket) from "bad bytes" (a negative or oversized length: close the connection).

use std::os::fd::AsRawFd;

use bytes::{Buf, Bytes, BytesMut};
use laminar_sys::sockets::{recv_into, Wait};

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
/// `buffer` holds the bytes received that do not yet form a frame. Reads land in its spare
/// capacity without zeroing it first (see [`Receive`]), so each received byte is written once.
#[derive(Debug)]
pub struct FrameReader {
    buffer: BytesMut,
    frame_bytes_max: usize,
}

/// Bytes asked of the socket per read at least (many small responses arrive in one read).
const READ_BYTES_MIN: usize = 64 * 1024;
/// Bytes asked of the socket per read at most (bounds the memory reserved ahead of a huge frame).
const READ_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Room reserved ahead for a frame regardless of how much of it has arrived: a whole ordinary
/// produce request (Kafka clients' `max.request.size` is 1 MiB) lands in one buffer without
/// being copied as it grows. Beyond it, the buffer at most doubles per read.
const RESERVE_AHEAD_BYTES: usize = 2 * 1024 * 1024;

/// A byte source a [`FrameReader`] receives from, straight into its buffer's spare capacity.
pub trait Receive {
    /// Appends at most `max` bytes to `buffer`, which has room for them reserved, and returns
    /// how many; `Ok(0)` when the stream has ended.
    fn receive(&mut self, buffer: &mut BytesMut, max: usize) -> std::io::Result<usize>;
}

/// A blocking socket (the client's) waits in `recv` until bytes arrive.
impl Receive for std::net::TcpStream {
    fn receive(&mut self, buffer: &mut BytesMut, max: usize) -> std::io::Result<usize> {
        recv_into(self.as_raw_fd(), buffer, max, Wait::Block)
    }
}

impl FrameReader {
    /// A reader that rejects frames larger than `frame_bytes_max`.
    pub fn new(frame_bytes_max: usize) -> FrameReader {
        FrameReader {
            buffer: BytesMut::new(),
            frame_bytes_max,
        }
    }

    /// Bytes held that do not yet form a frame.
    pub fn buffered_len(&self) -> usize {
        self.buffer.len()
    }

    /// Frees the buffer when it holds nothing: a connection idle between requests then holds
    /// no receive memory (the next receive allocates again).
    pub fn release_if_empty(&mut self) {
        if self.buffer.is_empty() {
            self.buffer = BytesMut::new();
        }
    }

    /// Reserves room for `bytes` more and writes it once, so that frames up to that size land in
    /// memory already faulted in. A long-running reader reaches that state after its first large
    /// frame; a benchmark warms it before its clock starts, so that what it measures is the
    /// steady state rather than the kernel zero-filling its first buffer.
    pub fn warm(&mut self, bytes: usize) {
        let held = self.buffer.len();
        self.buffer.resize(held + bytes, 0);
        self.buffer.truncate(held);
    }

    /// Takes every byte held (whole frames not yet taken, then the frame in progress), leaving
    /// the reader empty: what a connection that moves to another thread carries there.
    pub fn take_buffered(&mut self) -> Bytes {
        std::mem::take(&mut self.buffer).freeze()
    }

    /// Appends bytes received from the peer.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// Bytes the next [`Self::receive_from`] asks for: what the frame in progress still needs,
    /// within the per-read bounds, and at most what is already buffered or
    /// `RESERVE_AHEAD_BYTES`, whichever is more. Past that, the buffer grows with what the peer
    /// has sent, not with what its size prefix announced: a peer that announces 100 MB and
    /// stalls holds about 2 MiB.
    pub fn receive_bytes_next(&self) -> usize {
        self.next_frame_missing()
            .unwrap_or_default()
            .clamp(READ_BYTES_MIN, READ_BYTES_MAX)
            .min(self.buffer.len().max(RESERVE_AHEAD_BYTES))
    }

    /// Receives once from `source`, asking for [`Self::receive_bytes_next`] bytes; returns the
    /// bytes received, 0 when the source has ended.
    pub fn receive_from<S: Receive + ?Sized>(&mut self, source: &mut S) -> std::io::Result<usize> {
        let want = self.receive_bytes_next();
        self.buffer.reserve(want);
        let held = self.buffer.len();
        let received = source.receive(&mut self.buffer, want)?;
        assert_eq!(
            self.buffer.len(),
            held + received,
            "a source appends what it reports"
        );
        assert!(received <= want, "a source appends at most what was asked");
        Ok(received)
    }

    /// Bytes still missing for the frame in progress (its prefix first); `None` with a whole
    /// frame or a bad prefix buffered.
    fn next_frame_missing(&self) -> Option<usize> {
        let held = self.buffer.len();
        if held < FRAME_HEADER_BYTES {
            return Some(FRAME_HEADER_BYTES - held);
        }
        let size = frame_size(&self.buffer[..FRAME_HEADER_BYTES], self.frame_bytes_max).ok()?;
        (FRAME_HEADER_BYTES + size).checked_sub(held).filter(|m| *m > 0)
    }

    /// Whether [`Self::next_frame`] has something to return without receiving more: a whole
    /// frame, or a bad prefix to report.
    pub fn frame_ready(&self) -> bool {
        self.buffer.len() >= FRAME_HEADER_BYTES && self.next_frame_missing().is_none()
    }

    /// Takes the next whole frame, if the buffer holds one.
    pub fn next_frame(&mut self) -> Result<FrameStatus, FrameError> {
        let held = self.buffer.len();
        if held < FRAME_HEADER_BYTES {
            return Ok(FrameStatus::NeedMore {
                missing: FRAME_HEADER_BYTES - held,
            });
        }
        let size = frame_size(&self.buffer[..FRAME_HEADER_BYTES], self.frame_bytes_max)?;
        let total = FRAME_HEADER_BYTES + size;
        if held < total {
            return Ok(FrameStatus::NeedMore {
                missing: total - held,
            });
        }
        self.buffer.advance(FRAME_HEADER_BYTES);
        Ok(FrameStatus::Ready(self.buffer.split_to(size).freeze()))
    }

    /// Receives from `source` until a whole frame is buffered, then returns it. `Ok(None)` when
    /// the source ends cleanly between frames.
    pub fn read_frame<S: Receive + ?Sized>(
        &mut self,
        source: &mut S,
    ) -> Result<Option<Bytes>, ReadFrameError> {
        loop {
            if let FrameStatus::Ready(frame) = self.next_frame()? {
                return Ok(Some(frame));
            }
            let held = self.buffer.len();
            let received = match self.receive_from(source) {
                Ok(received) => received,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(ReadFrameError::Io(error)),
            };
            if received == 0 {
                return if held == 0 {
                    Ok(None)
                } else {
                    Err(ReadFrameError::Io(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("stream ended inside a frame ({held} bytes buffered)"),
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
    fn a_warmed_reader_keeps_what_it_holds_and_receives_into_the_memory_it_warmed() {
        let mut reader = FrameReader::new(1 << 20);
        reader.extend(&[0, 0]);
        reader.warm(256 * 1024);
        assert_eq!(reader.buffered_len(), 2);
        assert!(reader.buffer.capacity() - reader.buffer.len() >= 256 * 1024);
        let warmed = reader.buffer.as_ptr();
        reader.extend(&[0x03, 0xe8]);
        reader.extend(&[7u8; 1000]);
        let FrameStatus::Ready(frame) = reader.next_frame().expect("a valid prefix") else {
            panic!("a whole frame is buffered");
        };
        assert_eq!(frame.len(), 1000);
        assert_eq!(frame.as_ptr(), warmed.wrapping_add(FRAME_HEADER_BYTES));
    }

    #[test]
    fn frame_ready_says_whether_a_frame_or_a_bad_prefix_waits_in_the_buffer() {
        let mut reader = FrameReader::new(1024);
        assert!(!reader.frame_ready());
        reader.extend(&[0, 0, 0]);
        assert!(!reader.frame_ready());
        reader.extend(&[2, b'a']);
        assert!(!reader.frame_ready());
        reader.extend(&[b'b', 0, 0]);
        assert!(reader.frame_ready(), "one whole frame and part of a prefix");
        assert!(matches!(reader.next_frame(), Ok(FrameStatus::Ready(_))));
        assert!(!reader.frame_ready());
        reader.extend(&[0xff, 0xff]);
        assert!(reader.frame_ready(), "a negative size is reported by next_frame");
    }

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
    fn an_empty_reader_gives_its_buffer_back_and_a_partial_frame_keeps_it() {
        let mut reader = FrameReader::new(1024);
        reader
            .receive_from(&mut TrickleReader(&[0, 0, 0, 2, b'h', b'i'], 6))
            .expect("receive");
        assert!(matches!(reader.next_frame(), Ok(FrameStatus::Ready(_))));
        reader.release_if_empty();
        assert_eq!(reader.buffer.capacity(), 0);
        reader
            .receive_from(&mut TrickleReader(&[0, 0, 0, 2, b'h'], 5))
            .expect("receive");
        reader.release_if_empty();
        assert_eq!(reader.buffered_len(), 5, "a partial frame stays");
        assert!(reader.buffer.capacity() >= 5);
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
        let error = reader
            .read_frame(&mut TrickleReader(&stream, usize::MAX))
            .unwrap_err();
        assert!(matches!(error, ReadFrameError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof));
    }

    /// Hands out at most `.1` bytes per receive (and at most what the reader asks for).
    struct TrickleReader<'a>(&'a [u8], usize);

    impl Receive for TrickleReader<'_> {
        fn receive(&mut self, buffer: &mut BytesMut, max: usize) -> std::io::Result<usize> {
            let n = self.0.len().min(self.1).min(max);
            buffer.extend_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_frame_received_in_pieces_comes_out_whole() {
        let mut reader = FrameReader::new(1 << 20);
        let body = vec![7u8; 300_000];
        let mut wire = (body.len() as i32).to_be_bytes().to_vec();
        wire.extend_from_slice(&body);
        let mut source = AskedFor(TrickleReader(&wire, 50_000), Vec::new());
        while matches!(reader.next_frame(), Ok(FrameStatus::NeedMore { .. })) {
            assert!(reader.receive_from(&mut source).expect("receive") > 0);
        }
        assert_eq!(reader.buffered_len(), 0);
        // the reader asks for what the frame still needs, within the per-read bounds
        assert_eq!(source.1[..2], [READ_BYTES_MIN, wire.len() - 50_000]);
        assert!(source.1.iter().all(|asked| *asked >= READ_BYTES_MIN.min(50_000)));
    }

    #[test]
    fn a_huge_frame_grows_the_buffer_with_what_arrived_not_with_its_prefix() {
        let body = vec![1u8; 12 << 20];
        let mut wire = (body.len() as i32).to_be_bytes().to_vec();
        wire.extend_from_slice(&body);
        let mut reader = FrameReader::new(16 << 20);
        let mut source = AskedFor(TrickleReader(&wire, usize::MAX), Vec::new());
        let mut held_before = Vec::new();
        while matches!(reader.next_frame(), Ok(FrameStatus::NeedMore { .. })) {
            held_before.push(reader.buffered_len());
            assert!(reader.receive_from(&mut source).expect("receive") > 0);
        }
        assert_eq!(source.1[..2], [READ_BYTES_MIN, RESERVE_AHEAD_BYTES]);
        for (asked, held) in source.1.iter().zip(&held_before) {
            assert!(
                *asked <= (*held).max(RESERVE_AHEAD_BYTES),
                "asked {asked} holding {held}"
            );
        }
    }

    #[test]
    fn a_frame_over_a_socket_comes_out_whole_and_its_tail_stays_for_the_next() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut sender = std::net::TcpStream::connect(listener.local_addr().unwrap()).expect("connect");
        let (mut receiver, _) = listener.accept().expect("accept");
        let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            for _ in 0..2 {
                sender.write_all(&(body.len() as i32).to_be_bytes()).unwrap();
                sender.write_all(&body).unwrap();
            }
            body
        });
        let mut reader = FrameReader::new(1 << 20);
        let first = reader.read_frame(&mut receiver).expect("first").expect("a frame");
        let second = reader
            .read_frame(&mut receiver)
            .expect("second")
            .expect("a frame");
        let body = writer.join().unwrap();
        assert_eq!((&first[..], &second[..]), (&body[..], &body[..]));
        assert!(reader.read_frame(&mut receiver).expect("clean end").is_none());
    }

    /// Records what the reader asked for on each receive.
    struct AskedFor<'a>(TrickleReader<'a>, Vec<usize>);

    impl Receive for AskedFor<'_> {
        fn receive(&mut self, buffer: &mut BytesMut, max: usize) -> std::io::Result<usize> {
            self.1.push(max);
            self.0.receive(buffer, max)
        }
    }
}
