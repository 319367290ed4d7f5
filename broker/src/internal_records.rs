//! Field encodings of the records Laminar writes to its internal topics in Kafka's own schemas
//! (`__consumer_offsets`, `__transaction_state`): big-endian integers; `string` is an i16
//! length then UTF-8 bytes, -1 for a null one; `bytes` is an i32 length then the bytes; arrays
//! are an i32 count then the elements, -1 for a null one. Everything read is checked against
//! what is left of the buffer before use: these records come from files.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Why stored bytes are not a record of the expected schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    #[error("record truncated")]
    Truncated,
    #[error("string is not UTF-8")]
    BadString,
    #[error("negative length {0}")]
    NegativeLength(i32),
}

pub fn put_string(out: &mut BytesMut, s: &str) {
    out.put_i16(s.len() as i16);
    out.put_slice(s.as_bytes());
}

pub fn put_nullable_string(out: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_string(out, s),
        None => out.put_i16(-1),
    }
}

pub fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    out.put_i32(b.len() as i32);
    out.put_slice(b);
}

fn need(buf: &Bytes, n: usize) -> Result<(), FieldError> {
    if buf.remaining() < n {
        return Err(FieldError::Truncated);
    }
    Ok(())
}

pub fn get_i8(buf: &mut Bytes) -> Result<i8, FieldError> {
    need(buf, 1)?;
    Ok(buf.get_i8())
}

pub fn get_i16(buf: &mut Bytes) -> Result<i16, FieldError> {
    need(buf, 2)?;
    Ok(buf.get_i16())
}

pub fn get_i32(buf: &mut Bytes) -> Result<i32, FieldError> {
    need(buf, 4)?;
    Ok(buf.get_i32())
}

pub fn get_i64(buf: &mut Bytes) -> Result<i64, FieldError> {
    need(buf, 8)?;
    Ok(buf.get_i64())
}

pub fn get_nullable_string(buf: &mut Bytes) -> Result<Option<String>, FieldError> {
    let len = get_i16(buf)?;
    if len < 0 {
        return Ok(None);
    }
    need(buf, len as usize)?;
    let raw = buf.split_to(len as usize);
    String::from_utf8(raw.to_vec())
        .map(Some)
        .map_err(|_| FieldError::BadString)
}

pub fn get_string(buf: &mut Bytes) -> Result<String, FieldError> {
    Ok(get_nullable_string(buf)?.unwrap_or_default())
}

/// `bytes` where a negative length (null) reads as empty.
pub fn get_nullable_bytes(buf: &mut Bytes) -> Result<Bytes, FieldError> {
    let len = get_i32(buf)?;
    if len < 0 {
        return Ok(Bytes::new());
    }
    need(buf, len as usize)?;
    Ok(buf.split_to(len as usize))
}

/// An array's element count, checked against the bytes left (each element takes at least
/// `element_bytes_min`), so a corrupt count cannot size an allocation. -1 is a null array.
pub fn get_array_len(buf: &mut Bytes, element_bytes_min: usize) -> Result<Option<usize>, FieldError> {
    let count = get_i32(buf)?;
    if count == -1 {
        return Ok(None);
    }
    let count = usize::try_from(count).map_err(|_| FieldError::NegativeLength(count))?;
    need(buf, count.saturating_mul(element_bytes_min))?;
    Ok(Some(count))
}
