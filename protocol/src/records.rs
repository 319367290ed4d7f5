//! Record batches (RecordBatch v2, magic 2) as clients and the broker's own writers make them: encoding with the
//! `kafka-protocol` crate's encoder, and cheap walks over fetched bytes that read batch headers
//! (and, for uncompressed batches, record values) without building a `Record` per record.
//!
//! Batch header layout (big-endian), 61 bytes before the records:
//!
//! | offset | size | field                                           |
//! |-------:|-----:|-------------------------------------------------|
//! |      0 |    8 | base offset                                     |
//! |      8 |    4 | batch length (bytes after this field)           |
//! |     12 |    4 | partition leader epoch                          |
//! |     16 |    1 | magic (2)                                       |
//! |     17 |    4 | CRC-32C of everything from attributes to the end |
//! |     21 |    2 | attributes (bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control) |
//! |     23 |    4 | last offset delta                               |
//! |     27 |    8 | base timestamp                                  |
//! |     35 |    8 | max timestamp                                   |
//! |     43 |    8 | producer id                                     |
//! |     51 |    2 | producer epoch                                  |
//! |     53 |    4 | base sequence                                   |
//! |     57 |    4 | record count                                    |
//!
//! Each record: length (zig-zag varint), attributes (i8), timestamp delta (varlong), offset delta
//! (varint), key length (varint, -1 = null) and key, value length and value, header count and
//! headers.

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
};

/// A record batch that cannot be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RecordsError(pub String);

/// Bytes of a v2 batch header, up to the first record.
pub const BATCH_HEADER_BYTES: usize = 61;
/// Bytes before the batch length field's end: base offset + batch length.
const LOG_OVERHEAD_BYTES: usize = 12;

/// A record to produce with no producer id, sequence or headers (a plain, non-idempotent
/// producer). `offset` is the offset delta within the batch (0, 1, 2, …).
///
/// The crate's encoder starts a new batch whenever `offset - sequence` changes between records
/// and derives the batch's base sequence from the first record, so the sequence runs one
/// behind the offset: the records share one batch and its base sequence is -1 (none).
pub fn plain_record(offset: i64, timestamp_ms: i64, key: Option<Bytes>, value: Option<Bytes>) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
        producer_id: NO_PRODUCER_ID,
        producer_epoch: NO_PRODUCER_EPOCH,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: (offset as i32).wrapping_add(NO_SEQUENCE),
        timestamp: timestamp_ms,
        key,
        value,
        headers: IndexMap::new(),
    }
}

/// Appends `records` to `out` as one v2 batch per run of compatible records (plain records make
/// exactly one batch), compressed with `compression`.
pub fn encode_batch(
    out: &mut BytesMut,
    records: &[Record],
    compression: Compression,
) -> Result<(), RecordsError> {
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(out, records, &options)
        .map_err(|error| RecordsError(format!("encode: {error}")))
}

/// Appends one uncompressed v2 batch of plain records (no producer id, no headers), record `i`
/// with key `keys[i]`, `value`, and every record at `timestamp_ms`. Written directly, without
/// the crate's per-record `Record`s: it is the benchmark's hot path. Equal, byte for byte, to
/// what [`encode_batch`] writes for the same [`plain_record`]s (a test checks it).
pub fn encode_plain_batch(out: &mut BytesMut, keys: &[&[u8]], value: &[u8], timestamp_ms: i64) {
    use bytes::BufMut;
    assert!(!keys.is_empty(), "a batch holds at least one record");
    let start = out.len();
    out.put_i64(0); // base offset: the broker assigns it
    out.put_i32(0); // batch length, patched below
    out.put_i32(NO_PARTITION_LEADER_EPOCH);
    out.put_i8(2); // magic
    out.put_u32(0); // CRC-32C, patched below
    out.put_i16(0); // attributes: no compression, CreateTime
    out.put_i32(keys.len() as i32 - 1); // last offset delta
    out.put_i64(timestamp_ms); // base timestamp
    out.put_i64(timestamp_ms); // max timestamp
    out.put_i64(NO_PRODUCER_ID);
    out.put_i16(NO_PRODUCER_EPOCH);
    out.put_i32(NO_SEQUENCE);
    out.put_i32(keys.len() as i32);
    for (delta, key) in keys.iter().enumerate() {
        let body_len = 1 // attributes
            + 1 // timestamp delta 0
            + varint_len(delta as i64)
            + varint_len(key.len() as i64)
            + key.len()
            + varint_len(value.len() as i64)
            + value.len()
            + 1; // header count 0
        put_varint(out, body_len as i64);
        out.put_i8(0);
        put_varint(out, 0);
        put_varint(out, delta as i64);
        put_varint(out, key.len() as i64);
        out.put_slice(key);
        put_varint(out, value.len() as i64);
        out.put_slice(value);
        put_varint(out, 0);
    }
    let batch = &mut out[start..];
    let batch_length = (batch.len() - LOG_OVERHEAD_BYTES) as i32;
    batch[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let crc = laminar_engine::log::checksum::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Zig-zag varint, as record fields use.
fn put_varint(out: &mut BytesMut, value: i64) {
    use bytes::BufMut;
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.put_u8(zigzag as u8 | 0x80);
        zigzag >>= 7;
    }
    out.put_u8(zigzag as u8);
}

fn varint_len(value: i64) -> usize {
    let zigzag = ((value << 1) ^ (value >> 63)) as u64;
    (64 - zigzag.max(1).leading_zeros() as usize).div_ceil(7)
}

/// Decodes every whole batch in `records` (a trailing partial batch, which a fetch may return,
/// is ignored), decompressing as needed. Allocates per record: use [`batches`] or
/// [`for_each_record`] on hot paths.
pub fn decode_records(records: &Bytes) -> Result<Vec<Record>, RecordsError> {
    let whole = records.slice(..whole_batches_len(records)?);
    let mut buf = whole;
    let mut decoded = Vec::new();
    while !buf.is_empty() {
        let set =
            RecordBatchDecoder::decode(&mut buf).map_err(|error| RecordsError(format!("decode: {error}")))?;
        decoded.extend(set.records);
    }
    Ok(decoded)
}

/// A view of one whole batch inside fetched bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchView<'a> {
    /// The whole batch, header included.
    pub bytes: &'a [u8],
}

impl<'a> BatchView<'a> {
    fn i64_at(&self, at: usize) -> i64 {
        i64::from_be_bytes(self.bytes[at..at + 8].try_into().expect("8 bytes"))
    }
    fn i32_at(&self, at: usize) -> i32 {
        i32::from_be_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes"))
    }
    /// Offset of the first record.
    pub fn base_offset(&self) -> i64 {
        self.i64_at(0)
    }
    /// Offset of the last record.
    pub fn last_offset(&self) -> i64 {
        self.base_offset() + i64::from(self.i32_at(23))
    }
    /// Records in the batch, as the header says.
    pub fn record_count(&self) -> i32 {
        self.i32_at(57)
    }
    /// Timestamp of the first record (ms).
    pub fn base_timestamp(&self) -> i64 {
        self.i64_at(27)
    }
    /// The compression codec bits of the attributes.
    pub fn compression(&self) -> Result<Compression, RecordsError> {
        Ok(match self.bytes[22] & 0x7 {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => return Err(RecordsError(format!("unknown codec {other}"))),
        })
    }
    /// Whether the CRC-32C in the header matches the batch.
    pub fn crc_is_valid(&self) -> bool {
        let stored = u32::from_be_bytes(self.bytes[17..21].try_into().expect("4 bytes"));
        laminar_engine::log::checksum::crc32c(&self.bytes[21..]) == stored
    }
    /// The record bytes after the header (compressed if the batch is).
    pub fn records(&self) -> &'a [u8] {
        &self.bytes[BATCH_HEADER_BYTES..]
    }
}

/// Iterates the whole v2 batches at the start of `records`; stops before a trailing partial
/// batch. A batch with an impossible length or magic is an error ("bad bytes"), a short tail is
/// not ("need more bytes").
pub fn batches(records: &[u8]) -> Batches<'_> {
    Batches { rest: records }
}

/// See [`batches`].
#[derive(Debug, Clone)]
pub struct Batches<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Batches<'a> {
    type Item = Result<BatchView<'a>, RecordsError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.len() < LOG_OVERHEAD_BYTES {
            return None;
        }
        let length = i32::from_be_bytes(self.rest[8..12].try_into().expect("4 bytes"));
        let body_min = (BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32;
        if length < body_min {
            self.rest = &[];
            return Some(Err(RecordsError(format!(
                "batch length {length} is below the header size {body_min}"
            ))));
        }
        let total = LOG_OVERHEAD_BYTES + length as usize;
        if self.rest.len() < total {
            return None;
        }
        let (batch, rest) = self.rest.split_at(total);
        self.rest = rest;
        if batch[16] != 2 {
            self.rest = &[];
            return Some(Err(RecordsError(format!("batch magic {} is not 2", batch[16]))));
        }
        Some(Ok(BatchView { bytes: batch }))
    }
}

/// The length of the whole v2 batches at the start of `records` (a trailing partial one is left
/// out); an error for bytes that are no batch at all.
pub fn whole_batches_len(records: &[u8]) -> Result<usize, RecordsError> {
    let mut len = 0;
    for batch in batches(records) {
        len += batch?.bytes.len();
    }
    Ok(len)
}

/// One record seen by [`for_each_record`], borrowing from the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// Absolute offset.
    pub offset: i64,
    /// Absolute timestamp (ms).
    pub timestamp_ms: i64,
    /// Key bytes (None: null key).
    pub key: Option<&'a [u8]>,
    /// Value bytes (None: null value, a tombstone).
    pub value: Option<&'a [u8]>,
}

/// Calls `visit` for each record of `batch`. Uncompressed batches are walked in place without
/// allocating; compressed ones are decoded with the crate's decoder first.
pub fn for_each_record(
    batch: BatchView<'_>,
    mut visit: impl FnMut(RecordRef<'_>),
) -> Result<(), RecordsError> {
    if batch.compression()? != Compression::None {
        let mut bytes = Bytes::copy_from_slice(batch.bytes);
        let set = RecordBatchDecoder::decode(&mut bytes)
            .map_err(|error| RecordsError(format!("decode: {error}")))?;
        for record in &set.records {
            visit(RecordRef {
                offset: record.offset,
                timestamp_ms: record.timestamp,
                key: record.key.as_deref(),
                value: record.value.as_deref(),
            });
        }
        return Ok(());
    }
    let mut rest = batch.records();
    for _ in 0..batch.record_count() {
        let length = read_varint(&mut rest)?;
        let length =
            usize::try_from(length).map_err(|_| RecordsError(format!("negative record length {length}")))?;
        if rest.len() < length || length == 0 {
            return Err(RecordsError("record overruns its batch".into()));
        }
        let (record, after) = rest.split_at(length);
        rest = after;
        let mut fields = &record[1..]; // after the attributes byte
        let timestamp_delta = read_varint(&mut fields)?;
        let offset_delta = read_varint(&mut fields)?;
        let key = read_bytes(&mut fields)?;
        let value = read_bytes(&mut fields)?;
        visit(RecordRef {
            offset: batch.base_offset() + offset_delta,
            timestamp_ms: batch.base_timestamp() + timestamp_delta,
            key,
            value,
        });
    }
    Ok(())
}

fn read_varint(buf: &mut &[u8]) -> Result<i64, RecordsError> {
    let mut raw: u64 = 0;
    for (index, byte) in buf.iter().enumerate().take(10) {
        raw |= u64::from(byte & 0x7f) << (7 * index);
        if byte & 0x80 == 0 {
            *buf = &buf[index + 1..];
            return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    Err(RecordsError("truncated or overlong varint".into()))
}

fn read_bytes<'a>(buf: &mut &'a [u8]) -> Result<Option<&'a [u8]>, RecordsError> {
    let length = read_varint(buf)?;
    if length < 0 {
        return Ok(None);
    }
    let length = length as usize;
    if buf.len() < length {
        return Err(RecordsError("field overruns its record".into()));
    }
    let (bytes, rest) = buf.split_at(length);
    *buf = rest;
    Ok(Some(bytes))
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
