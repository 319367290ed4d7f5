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

/// Why stored bytes are not a record of an internal topic.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    #[error(transparent)]
    Field(#[from] FieldError),
    #[error("unknown {what} version {version}")]
    UnknownVersion { what: &'static str, version: i16 },
    #[error("record without a key")]
    NoKey,
    #[error("bad record batch: {0}")]
    Batch(String),
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

// Flexible ("compact") encodings, used by the values of Kafka's KIP-848 records: an unsigned
// varint is 7 bits a byte, low bits first, the high bit set on every byte but the last (at most
// 5 bytes for the 32 bits Kafka reads); a compact string or array stores its length or count
// plus one as an unsigned varint, 0 meaning null; every struct ends with a tagged-field section:
// an unsigned varint count, then per field an unsigned varint tag, an unsigned varint size and
// that many bytes.

pub fn put_uvarint(out: &mut BytesMut, mut n: u32) {
    while n >= 0x80 {
        out.put_u8((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

/// Kafka's reader stops after 5 bytes; a longer varint is corrupt, reported as truncated because
/// `FieldError` has no variant for it.
pub fn get_uvarint(buf: &mut Bytes) -> Result<u32, FieldError> {
    let mut n: u32 = 0;
    for shift in [0u32, 7, 14, 21, 28] {
        need(buf, 1)?;
        let byte = buf.get_u8();
        n |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err(FieldError::Truncated)
}

/// The length a compact field announces, `None` for null; checked against the bytes left (each
/// element taking at least `element_bytes_min`) so a corrupt length cannot size an allocation.
fn get_compact_len(buf: &mut Bytes, element_bytes_min: usize) -> Result<Option<usize>, FieldError> {
    let raw = get_uvarint(buf)?;
    let Some(len) = raw.checked_sub(1) else {
        return Ok(None);
    };
    if len > i32::MAX as u32 {
        // Kafka reads the length into an i32, where it is negative.
        return Err(FieldError::NegativeLength(len as i32));
    }
    let len = len as usize;
    need(buf, len.saturating_mul(element_bytes_min))?;
    Ok(Some(len))
}

/// `None` is written as null (length byte 0), the way Kafka marks an absent optional string.
pub fn put_compact_nullable_string(out: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_compact_string(out, s),
        None => put_uvarint(out, 0),
    }
}

pub fn put_compact_string(out: &mut BytesMut, s: &str) {
    put_uvarint(out, s.len() as u32 + 1);
    out.put_slice(s.as_bytes());
}

pub fn get_compact_nullable_string(buf: &mut Bytes) -> Result<Option<String>, FieldError> {
    let Some(len) = get_compact_len(buf, 1)? else {
        return Ok(None);
    };
    let raw = buf.split_to(len);
    String::from_utf8(raw.to_vec())
        .map(Some)
        .map_err(|_| FieldError::BadString)
}

/// A string the schema says is never null: a null one is corrupt, as Kafka's reader also says.
pub fn get_compact_string(buf: &mut Bytes) -> Result<String, FieldError> {
    get_compact_nullable_string(buf)?.ok_or(FieldError::NegativeLength(-1))
}

pub fn put_compact_array_len(out: &mut BytesMut, count: usize) {
    put_uvarint(out, count as u32 + 1);
}

/// A compact array's element count, `None` for a null array; see `get_compact_len`.
pub fn get_compact_array_len(buf: &mut Bytes, element_bytes_min: usize) -> Result<Option<usize>, FieldError> {
    get_compact_len(buf, element_bytes_min)
}

/// The count of an array the schema says is never null: a null one is corrupt.
pub fn get_compact_array_count(buf: &mut Bytes, element_bytes_min: usize) -> Result<usize, FieldError> {
    get_compact_len(buf, element_bytes_min)?.ok_or(FieldError::NegativeLength(-1))
}

/// Writes a tagged-field section holding `fields` (tag, contents), which must be in ascending
/// tag order as Kafka writes them; an empty slice is the single byte 0.
pub fn put_tagged_fields(out: &mut BytesMut, fields: &[(u32, &[u8])]) {
    put_uvarint(out, fields.len() as u32);
    for (tag, data) in fields {
        put_uvarint(out, *tag);
        put_uvarint(out, data.len() as u32);
        out.put_slice(data);
    }
}

/// Reads a tagged-field section into (tag, contents) pairs. Each field takes at least two bytes
/// (tag and size), which bounds the count before anything is allocated.
pub fn get_tagged_fields(buf: &mut Bytes) -> Result<Vec<(u32, Bytes)>, FieldError> {
    let count = get_uvarint(buf)? as usize;
    need(buf, count.saturating_mul(2))?;
    let mut fields = Vec::with_capacity(count);
    for _ in 0..count {
        let tag = get_uvarint(buf)?;
        let size = get_uvarint(buf)? as usize;
        need(buf, size)?;
        fields.push((tag, buf.split_to(size)));
    }
    Ok(fields)
}

/// Skips a tagged-field section whose fields the reader does not keep, without allocating.
pub fn skip_tagged_fields(buf: &mut Bytes) -> Result<(), FieldError> {
    let count = get_uvarint(buf)? as usize;
    need(buf, count.saturating_mul(2))?;
    for _ in 0..count {
        get_uvarint(buf)?;
        let size = get_uvarint(buf)? as usize;
        need(buf, size)?;
        buf.advance(size);
    }
    Ok(())
}

/// A uuid as Kafka writes it: 16 bytes, the most significant 64 bits first.
pub fn put_uuid(out: &mut BytesMut, id: &uuid::Uuid) {
    out.put_slice(id.as_bytes());
}

pub fn get_uuid(buf: &mut Bytes) -> Result<uuid::Uuid, FieldError> {
    need(buf, 16)?;
    let mut raw = [0u8; 16];
    buf.copy_to_slice(&mut raw);
    Ok(uuid::Uuid::from_bytes(raw))
}
