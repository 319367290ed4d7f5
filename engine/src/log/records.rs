//! The records inside an uncompressed RecordBatch v2, read only where the broker must look at
//! keys: compaction and the keyed-records rule of compacted topics. The produce and fetch
//! paths never decode records (docs/ARCHITECTURE.md invariant 3).
//!
//! Each record, after the batch header (varints are zigzag LEB128, as in protobuf):
//!
//! ```text
//! varint  length          bytes of the record after this field
//! int8    attributes      (unused, 0)
//! varlong timestampDelta  from the batch base timestamp
//! varint  offsetDelta     from the batch base offset
//! varint  keyLength       -1 = null key
//! bytes   key
//! varint  valueLength     -1 = null value (a tombstone)
//! bytes   value
//! varint  headerCount     then the headers (not read here: `length` skips them)
//! ```

use super::batch::{BatchError, BatchHeader, Compression, HEADER_LEN};

/// One record of a batch, borrowed from the batch bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// The whole record, its length prefix included (copied as-is when a batch is rewritten).
    pub bytes: &'a [u8],
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    /// None: a tombstone on a compacted topic.
    pub value: Option<&'a [u8]>,
}

/// True when the broker can read this batch's records: uncompressed data, not a control batch.
pub fn readable(header: &BatchHeader) -> bool {
    !header.is_control() && header.compression() == Ok(Compression::None)
}

/// The records of one whole, CRC-checked, uncompressed batch. Bad bytes are `BadRecord` with
/// the position inside the records section.
pub fn records<'a>(batch: &'a [u8], header: &BatchHeader) -> Result<Vec<RecordView<'a>>, BatchError> {
    assert!(readable(header), "records() of a compressed or control batch");
    let body = &batch[HEADER_LEN..header.total_len()];
    let mut out = Vec::with_capacity(header.record_count.max(0) as usize);
    let mut at = 0;
    for _ in 0..header.record_count {
        let record = parse_record(body, at).ok_or(BatchError::BadRecord { at })?;
        at += record.bytes.len();
        out.push(record);
    }
    if at != body.len() {
        return Err(BatchError::BadRecord { at });
    }
    Ok(out)
}

/// The compacted-topic rule at produce time (Kafka answers INVALID_RECORD): every record of a
/// readable batch has a key. Compressed batches are not decoded, so not checked.
pub fn check_keyed(batch: &[u8], header: &BatchHeader) -> Result<(), BatchError> {
    if !readable(header) {
        return Ok(());
    }
    match records(batch, header)?.iter().all(|r| r.key.is_some()) {
        true => Ok(()),
        false => Err(BatchError::MissingKey),
    }
}

pub(super) fn parse_record(body: &[u8], start: usize) -> Option<RecordView<'_>> {
    let mut cursor = Cursor { buf: body, at: start };
    let length = usize::try_from(cursor.varint()?).ok()?;
    let end = cursor.at.checked_add(length).filter(|&e| e <= body.len())?;
    let mut inner = Cursor {
        buf: &body[..end],
        at: cursor.at,
    };
    inner.take(1)?; // attributes
    let timestamp_delta = inner.varint()?;
    let offset_delta = i32::try_from(inner.varint()?).ok()?;
    let key = inner.nullable_bytes()?;
    let value = inner.nullable_bytes()?;
    Some(RecordView {
        bytes: &body[start..end],
        timestamp_delta,
        offset_delta,
        key,
        value,
    })
}

struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.buf.len())?;
        let bytes = &self.buf[self.at..end];
        self.at = end;
        Some(bytes)
    }

    /// A zigzag varint or varlong (at most 10 bytes).
    fn varint(&mut self) -> Option<i64> {
        let mut raw: u64 = 0;
        for i in 0..10 {
            let byte = *self.buf.get(self.at)?;
            self.at += 1;
            raw |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
            }
        }
        None
    }

    fn nullable_bytes(&mut self) -> Option<Option<&'a [u8]>> {
        match self.varint()? {
            -1 => Some(None),
            n if n >= 0 => self.take(usize::try_from(n).ok()?).map(Some),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::testing::BatchBuilder;

    #[test]
    fn golden_record_bytes() {
        let batch = BatchBuilder::new(1_000)
            .record(Some(b"k"), Some(b"v"), 0)
            .record(Some(b"key"), None, 300)
            .build();
        let header = BatchHeader::parse(&batch).unwrap();
        let records = records(&batch, &header).unwrap();
        assert_eq!(
            records[0].bytes,
            &[
                16, // length 8 (zigzag)
                0,  // attributes
                0,  // timestampDelta 0
                0,  // offsetDelta 0
                2, b'k', // key length 1, "k"
                2, b'v', // value length 1, "v"
                0,    // no headers
            ]
        );
        assert_eq!(
            records[1].bytes,
            &[
                20, // length 10
                0,  // attributes
                0xd8, 0x04, // timestampDelta 300 (zigzag 600, two bytes)
                2,    // offsetDelta 1
                6, b'k', b'e', b'y', // key length 3
                1,    // value length -1: null
                0,    // no headers
            ]
        );
        assert_eq!((records[1].timestamp_delta, records[1].offset_delta), (300, 1));
        assert_eq!(records[1].key, Some(&b"key"[..]));
        assert_eq!((records[0].value, records[1].value), (Some(&b"v"[..]), None));
    }

    #[test]
    fn bad_records_and_missing_keys_are_refused() {
        let keyless = BatchBuilder::new(0)
            .record(Some(b"a"), Some(b"1"), 0)
            .record(None, Some(b"2"), 0)
            .build();
        let header = BatchHeader::parse(&keyless).unwrap();
        assert_eq!(check_keyed(&keyless, &header), Err(BatchError::MissingKey));
        let keyed = BatchBuilder::new(0).record(Some(b"a"), None, 0).build();
        assert_eq!(check_keyed(&keyed, &BatchHeader::parse(&keyed).unwrap()), Ok(()));
        // One record more than the bytes hold.
        let short = BatchBuilder::new(0)
            .record(Some(b"a"), Some(b"1"), 0)
            .record_count(2)
            .build();
        let header = BatchHeader::parse(&short).unwrap();
        assert!(matches!(
            records(&short, &header),
            Err(BatchError::BadRecord { at: 9 })
        ));
        // A record length pointing past the end.
        let mut long = keyed.clone();
        long[HEADER_LEN] = 100;
        let header = BatchHeader::parse(&long).unwrap();
        assert!(matches!(
            records(&long, &header),
            Err(BatchError::BadRecord { at: 0 })
        ));
    }
}
