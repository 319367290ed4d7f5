//! Kafka's framing: every request and response is a 4-byte big-endian size, then that many bytes.
//!
//! The reader tells "need more bytes" (`Ok(None)`) from "bad bytes" (`Err`): a negative size or
//! one above `socket.request.max.bytes` is refused before anything is allocated for it.

use bytes::{Buf, Bytes, BytesMut};

pub const SIZE_PREFIX_LEN: usize = 4;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("negative frame size {0}")]
    NegativeSize(i32),
    #[error("frame size {size} exceeds socket.request.max.bytes ({size_max})")]
    TooLarge { size: usize, size_max: usize },
}

/// Splits one complete frame (without its size prefix) off the front of `buf`.
///
/// Returns `Ok(None)` while the frame is incomplete. Reserves room for the rest of an announced
/// frame only after its size passed the bound.
pub fn split_frame(buf: &mut BytesMut, size_max: usize) -> Result<Option<Bytes>, FrameError> {
    if buf.len() < SIZE_PREFIX_LEN {
        return Ok(None);
    }
    let size = i32::from_be_bytes(buf[..SIZE_PREFIX_LEN].try_into().expect("four bytes"));
    if size < 0 {
        return Err(FrameError::NegativeSize(size));
    }
    let size = size as usize;
    if size > size_max {
        return Err(FrameError::TooLarge { size, size_max });
    }
    let frame_len = SIZE_PREFIX_LEN + size;
    if buf.len() < frame_len {
        buf.reserve(frame_len - buf.len());
        return Ok(None);
    }
    buf.advance(SIZE_PREFIX_LEN);
    Ok(Some(buf.split_to(size).freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incomplete_prefix_and_body_need_more_bytes() {
        let mut buf = BytesMut::from(&[0u8, 0][..]);
        assert_eq!(split_frame(&mut buf, 100), Ok(None));
        let mut buf = BytesMut::from(&[0u8, 0, 0, 3, b'a', b'b'][..]);
        assert_eq!(split_frame(&mut buf, 100), Ok(None));
        buf.extend_from_slice(b"c");
        assert_eq!(split_frame(&mut buf, 100), Ok(Some(Bytes::from_static(b"abc"))));
        assert!(buf.is_empty());
    }

    #[test]
    fn two_frames_in_one_read_come_out_one_at_a_time() {
        let mut buf = BytesMut::from(&[0u8, 0, 0, 1, b'x', 0, 0, 0, 0][..]);
        assert_eq!(split_frame(&mut buf, 100), Ok(Some(Bytes::from_static(b"x"))));
        assert_eq!(split_frame(&mut buf, 100), Ok(Some(Bytes::new())));
        assert_eq!(split_frame(&mut buf, 100), Ok(None));
    }

    #[test]
    fn negative_and_oversized_sizes_are_bad_bytes() {
        let mut buf = BytesMut::from(&[0xffu8, 0xff, 0xff, 0xfe][..]);
        assert_eq!(split_frame(&mut buf, 100), Err(FrameError::NegativeSize(-2)));
        let mut buf = BytesMut::from(&[0x7fu8, 0xff, 0xff, 0xff][..]);
        assert_eq!(
            split_frame(&mut buf, 100),
            Err(FrameError::TooLarge {
                size: i32::MAX as usize,
                size_max: 100
            })
        );
        assert!(buf.capacity() < 1024, "nothing was reserved for a refused frame");
    }
}
