//! Kafka RecordBatch v2 (magic 2): a zero-copy view, validation and header patching.
//!
//! A batch on the wire is the batch on disk (docs/ARCHITECTURE.md invariant 3). Its 61-byte header, all
//! integers big endian:
//!
//! ```text
//! off len field
//!   0   8 baseOffset            (patched by the broker on append)
//!   8   4 batchLength           (bytes after this field: total length = 12 + batchLength)
//!  12   4 partitionLeaderEpoch  (patched by the broker on append)
//!  16   1 magic                 (2)
//!  17   4 crc                   (CRC-32C of bytes 21..end)
//!  21   2 attributes            (bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control)
//!  23   4 lastOffsetDelta
//!  27   8 baseTimestamp
//!  35   8 maxTimestamp
//!  43   8 producerId
//!  51   2 producerEpoch
//!  53   4 baseSequence
//!  57   4 recordCount
//!  61   … records (possibly compressed; never decoded here)
//! ```
//!
//! The base offset and leader epoch sit before the CRC'd range, so patching them needs no new
//! CRC; switching to LogAppendTime touches attributes and maxTimestamp, which are covered.

#[cfg(any(test, feature = "testing"))]
pub mod testing;

/// Length of the fixed RecordBatch v2 header.
pub const HEADER_LEN: usize = 61;
/// Bytes before the batchLength-counted part (baseOffset + batchLength).
pub const LOG_OVERHEAD: usize = 12;
/// Magic byte of RecordBatch v2.
pub const MAGIC_V2: i8 = 2;
/// Kafka's "no timestamp".
pub const NO_TIMESTAMP: i64 = -1;

const BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORD_COUNT_AT: usize = 57;

const CODEC_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
/// Attributes bit of a batch that belongs to a transaction.
pub const TRANSACTIONAL_BIT: i16 = 0x10;
/// Attributes bit of a control batch (a transaction marker).
pub const CONTROL_BIT: i16 = 0x20;

/// Compression codec named by the attributes. Records stay compressed in the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// Which clock a batch's timestamps come from (topic config `message.timestamp.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampType {
    #[default]
    CreateTime,
    LogAppendTime,
}

/// Why bytes are not an acceptable RecordBatch. See [`BatchError::kind`] for the Kafka mapping.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("need {needed} bytes, have {available}")]
    NeedMore { needed: usize, available: usize },
    #[error("batch length {batch_length} is shorter than the header")]
    LengthTooSmall { batch_length: i32 },
    #[error("batch of {size} bytes exceeds the limit of {max}")]
    TooLarge { size: usize, max: usize },
    #[error("unsupported magic {magic}")]
    BadMagic { magic: i8 },
    #[error("CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("record count {record_count} inconsistent with last offset delta {last_offset_delta}")]
    InvalidRecordCount {
        record_count: i32,
        last_offset_delta: i32,
    },
    #[error("invalid timestamps: base {base}, max {max}")]
    InvalidTimestamp { base: i64, max: i64 },
    #[error("unknown compression codec {codec}")]
    UnknownCompression { codec: u8 },
    #[error("record at byte {at} of the records section is malformed")]
    BadRecord { at: usize },
    #[error("a compacted topic refuses records without a key")]
    MissingKey,
    #[error("clients may not produce control batches")]
    ControlFromClient,
    #[error("a transactional batch needs a producer id")]
    TransactionalWithoutProducer,
}

/// How the protocol layer reports a [`BatchError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchErrorKind {
    /// CORRUPT_MESSAGE: the bytes are damaged or truncated.
    Corrupt,
    /// INVALID_RECORD: well-formed bytes that break a RecordBatch rule.
    InvalidRecord,
    /// MESSAGE_TOO_LARGE.
    TooLarge,
}

impl BatchError {
    pub fn kind(&self) -> BatchErrorKind {
        match self {
            BatchError::NeedMore { .. }
            | BatchError::LengthTooSmall { .. }
            | BatchError::BadMagic { .. }
            | BatchError::CrcMismatch { .. }
            | BatchError::BadRecord { .. } => BatchErrorKind::Corrupt,
            BatchError::InvalidRecordCount { .. }
            | BatchError::MissingKey
            | BatchError::ControlFromClient
            | BatchError::TransactionalWithoutProducer
            | BatchError::InvalidTimestamp { .. }
            | BatchError::UnknownCompression { .. } => BatchErrorKind::InvalidRecord,
            BatchError::TooLarge { .. } => BatchErrorKind::TooLarge,
        }
    }

    pub fn is_corrupt(&self) -> bool {
        self.kind() == BatchErrorKind::Corrupt
    }
}

/// The headers of one append's batches. A producer sends one batch per partition per request,
/// so two fit inline and an append allocates no list for them (many partitions' small batches
/// made those allocations a visible share of the append: decision 0026, per-batch cost across many
/// partitions).
pub type BatchHeaders = smallvec::SmallVec<[BatchHeader; INLINE_BATCHES]>;

/// Batches an append lists without allocating.
pub const INLINE_BATCHES: usize = 2;

/// The decoded fixed header of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8-byte slice"))
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4-byte slice"))
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().expect("2-byte slice"))
}

impl BatchHeader {
    /// Parses the header at the start of `buf`. `NeedMore` when `buf` is shorter than the header;
    /// a length below the header size or a magic other than 2 is bad bytes. Neither the CRC nor
    /// the presence of the whole batch is checked here: see [`validate`].
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        if buf.len() < HEADER_LEN {
            // The length and magic fields may already tell bad bytes apart from a short read.
            if buf.len() >= LOG_OVERHEAD {
                let batch_length = be_i32(buf, BATCH_LENGTH_AT);
                if (batch_length as i64) < (HEADER_LEN - LOG_OVERHEAD) as i64 {
                    return Err(BatchError::LengthTooSmall { batch_length });
                }
            }
            if buf.len() > MAGIC_AT && buf[MAGIC_AT] as i8 != MAGIC_V2 {
                return Err(BatchError::BadMagic {
                    magic: buf[MAGIC_AT] as i8,
                });
            }
            return Err(BatchError::NeedMore {
                needed: HEADER_LEN,
                available: buf.len(),
            });
        }
        let header = BatchHeader {
            base_offset: be_i64(buf, BASE_OFFSET_AT),
            batch_length: be_i32(buf, BATCH_LENGTH_AT),
            partition_leader_epoch: be_i32(buf, LEADER_EPOCH_AT),
            magic: buf[MAGIC_AT] as i8,
            crc: be_i32(buf, CRC_AT) as u32,
            attributes: be_i16(buf, ATTRIBUTES_AT),
            last_offset_delta: be_i32(buf, LAST_OFFSET_DELTA_AT),
            base_timestamp: be_i64(buf, BASE_TIMESTAMP_AT),
            max_timestamp: be_i64(buf, MAX_TIMESTAMP_AT),
            producer_id: be_i64(buf, PRODUCER_ID_AT),
            producer_epoch: be_i16(buf, PRODUCER_EPOCH_AT),
            base_sequence: be_i32(buf, BASE_SEQUENCE_AT),
            record_count: be_i32(buf, RECORD_COUNT_AT),
        };
        if (header.batch_length as i64) < (HEADER_LEN - LOG_OVERHEAD) as i64 {
            return Err(BatchError::LengthTooSmall {
                batch_length: header.batch_length,
            });
        }
        if header.magic != MAGIC_V2 {
            return Err(BatchError::BadMagic { magic: header.magic });
        }
        Ok(header)
    }

    /// Bytes of the whole batch, header included.
    pub fn total_len(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }

    /// Offset after this batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    pub fn compression(&self) -> Result<Compression, BatchError> {
        match self.attributes & CODEC_MASK {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            codec => Err(BatchError::UnknownCompression { codec: codec as u8 }),
        }
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }
}

/// Checks one whole batch at the start of `buf` as stored on disk: length within `buf` and
/// `max_len`, magic, CRC-32C, record count, timestamps, codec. A compacted batch may hold fewer
/// records than its offset span, so `record_count <= lastOffsetDelta + 1` is accepted here; see
/// [`validate_for_append`] for what a producer may send.
pub fn validate(buf: &[u8], max_len: usize) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    let total = header.total_len();
    if total > max_len {
        return Err(BatchError::TooLarge {
            size: total,
            max: max_len,
        });
    }
    if total > buf.len() {
        return Err(BatchError::NeedMore {
            needed: total,
            available: buf.len(),
        });
    }
    let computed = crate::log::checksum::crc32c(&buf[ATTRIBUTES_AT..total]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    header.compression()?;
    let count_ok = header.record_count >= 0
        && header.last_offset_delta >= 0
        && header.record_count as i64 <= header.last_offset_delta as i64 + 1;
    if !count_ok {
        return Err(BatchError::InvalidRecordCount {
            record_count: header.record_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    let (base, max) = (header.base_timestamp, header.max_timestamp);
    let timestamps_ok = base >= NO_TIMESTAMP && max >= NO_TIMESTAMP;
    if !timestamps_ok {
        return Err(BatchError::InvalidTimestamp { base, max });
    }
    Ok(header)
}

/// [`validate`] plus the rules for a batch a producer sends: at least one record and exactly
/// `lastOffsetDelta + 1` of them (Kafka's LogValidator rule), and a max timestamp not below
/// the base timestamp.
pub fn validate_for_append(buf: &[u8], max_len: usize) -> Result<BatchHeader, BatchError> {
    let header = validate(buf, max_len)?;
    if header.record_count < 1 || header.record_count != header.last_offset_delta + 1 {
        return Err(BatchError::InvalidRecordCount {
            record_count: header.record_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    let (base, max) = (header.base_timestamp, header.max_timestamp);
    if base != NO_TIMESTAMP && max < base {
        return Err(BatchError::InvalidTimestamp { base, max });
    }
    Ok(header)
}

/// Overwrites the base offset (outside the CRC'd range).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Overwrites the partition leader epoch (outside the CRC'd range).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Marks the batch LogAppendTime with max timestamp `ts` and recomputes the CRC. As Kafka does,
/// the base timestamp and record deltas stay as produced: readers of a LogAppendTime batch use
/// the max timestamp for every record. `batch` must be exactly one whole, valid batch.
pub fn set_log_append_time(batch: &mut [u8], ts: i64) {
    let header = BatchHeader::parse(batch).expect("set_log_append_time on a validated batch");
    assert_eq!(header.total_len(), batch.len(), "one whole batch");
    let attributes = header.attributes | TIMESTAMP_TYPE_BIT;
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&ts.to_be_bytes());
    let crc = crate::log::checksum::crc32c(&batch[ATTRIBUTES_AT..]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// A copy of the whole batch `original` holding only `records` (`record_count` whole records,
/// each still carrying its offset and timestamp deltas from the original base), with the given
/// max timestamp and a new CRC. Base offset, lastOffsetDelta, base timestamp, producer id,
/// epoch and base sequence stay as they were: offsets never move, and the producer state read
/// from a header keeps its sequence range (compaction, see `compaction.rs`).
pub fn with_records(original: &[u8], record_count: i32, max_timestamp: i64, records: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + records.len());
    out.extend_from_slice(&original[..HEADER_LEN]);
    out.extend_from_slice(records);
    let batch_length = (out.len() - LOG_OVERHEAD) as i32;
    out[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&batch_length.to_be_bytes());
    out[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    out[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&record_count.to_be_bytes());
    let crc = crate::log::checksum::crc32c(&out[ATTRIBUTES_AT..]);
    out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Checks a follower's copy of its leader's batches before it is appended unchanged: each
/// batch whole and valid as stored ([`validate`]: length, magic 2, CRC-32C, counts), and each
/// starting where the previous one ends, the first at `log_end`. Returns their headers.
/// Bytes that end inside a batch are refused (the fetcher drops a partial last batch).
pub fn validate_replica_batches(
    records: &[u8],
    log_end: i64,
) -> Result<Vec<BatchHeader>, crate::log::LogError> {
    let mut headers: Vec<BatchHeader> = Vec::new();
    let (mut position, mut next) = (0, log_end);
    while let Some(rest) = records.get(position..).filter(|r| !r.is_empty()) {
        let header = validate(rest, usize::MAX)?;
        if header.base_offset != next {
            return Err(crate::log::LogError::UnexpectedOffset {
                expected: next,
                got: header.base_offset,
            });
        }
        next = header.next_offset();
        position += header.total_len();
        headers.push(header);
    }
    if headers.is_empty() {
        return Err(BatchError::NeedMore {
            needed: HEADER_LEN,
            available: 0,
        }
        .into());
    }
    Ok(headers)
}

/// Splits a buffer of concatenated batches (a produce payload), validating each for append.
/// Yields `(range, header)`; after the first error it yields nothing more.
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
    max_len: usize,
    failed: bool,
}

impl<'a> BatchIter<'a> {
    pub fn new(buf: &'a [u8], max_len: usize) -> Self {
        BatchIter {
            buf,
            pos: 0,
            max_len,
            failed: false,
        }
    }
}

impl Iterator for BatchIter<'_> {
    type Item = Result<(std::ops::Range<usize>, BatchHeader), BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        match validate_for_append(&self.buf[self.pos..], self.max_len) {
            Ok(header) => {
                let range = self.pos..self.pos + header.total_len();
                self.pos = range.end;
                Some(Ok((range, header)))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::BatchBuilder;
    use super::*;

    /// One record, key "k", value "v", built by hand.
    fn golden() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&7i64.to_be_bytes()); // baseOffset 7
        b.extend_from_slice(&58i32.to_be_bytes()); // batchLength: 49 header bytes + 9 record
        b.extend_from_slice(&3i32.to_be_bytes()); // partitionLeaderEpoch 3
        b.push(2); // magic 2
        b.extend_from_slice(&[0, 0, 0, 0]); // crc, filled below
        b.extend_from_slice(&0i16.to_be_bytes()); // attributes: none, CreateTime
        b.extend_from_slice(&0i32.to_be_bytes()); // lastOffsetDelta 0
        b.extend_from_slice(&1_000i64.to_be_bytes()); // baseTimestamp 1000
        b.extend_from_slice(&1_000i64.to_be_bytes()); // maxTimestamp 1000
        b.extend_from_slice(&(-1i64).to_be_bytes()); // producerId -1
        b.extend_from_slice(&(-1i16).to_be_bytes()); // producerEpoch -1
        b.extend_from_slice(&(-1i32).to_be_bytes()); // baseSequence -1
        b.extend_from_slice(&1i32.to_be_bytes()); // recordCount 1
                                                  // record: length 8 (zigzag 16), attributes 0, tsDelta 0, offsetDelta 0,
                                                  // keyLen 1 (zigzag 2) "k", valueLen 1 (zigzag 2) "v", headers 0
        b.extend_from_slice(&[16, 0, 0, 0, 2, b'k', 2, b'v', 0]);
        let crc = crate::log::checksum::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn golden_header_parses_field_by_field() {
        let b = golden();
        let h = validate(&b, usize::MAX).unwrap();
        assert_eq!(h.base_offset, 7);
        assert_eq!(h.batch_length, 58);
        assert_eq!(h.total_len(), 70);
        assert_eq!(h.partition_leader_epoch, 3);
        assert_eq!(h.magic, 2);
        assert_eq!(h.crc, crate::log::checksum::crc32c(&b[21..]));
        assert_eq!(h.last_offset(), 7);
        assert_eq!((h.base_timestamp, h.max_timestamp), (1_000, 1_000));
        assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (-1, -1, -1));
        assert_eq!(h.record_count, 1);
        assert_eq!(h.compression().unwrap(), Compression::None);
        assert_eq!(h.timestamp_type(), TimestampType::CreateTime);
        assert!(!h.is_transactional() && !h.is_control());
    }

    #[test]
    fn crc32c_known_vector() {
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(crate::log::checksum::crc32c(&[0u8; 32]), 0x8A91_36AA);
    }

    #[test]
    fn builder_matches_hand_encoding() {
        let built = BatchBuilder::new(1_000)
            .base_offset(7)
            .leader_epoch(3)
            .record(Some(b"k"), Some(b"v"), 0)
            .build();
        let hand = golden();
        assert_eq!(built, hand);
    }

    #[test]
    fn need_more_is_not_bad_bytes() {
        let b = golden();
        for cut in 0..b.len() {
            let err = validate(&b[..cut], usize::MAX).unwrap_err();
            assert!(matches!(err, BatchError::NeedMore { .. }), "cut {cut}: {err:?}");
        }
    }

    #[test]
    fn each_failure_has_its_error() {
        let good = golden();
        let mut b = good.clone();
        b[16] = 1;
        assert_eq!(validate(&b, usize::MAX), Err(BatchError::BadMagic { magic: 1 }));
        let mut b = good.clone();
        b[8..12].copy_from_slice(&10i32.to_be_bytes());
        assert_eq!(
            validate(&b, usize::MAX),
            Err(BatchError::LengthTooSmall { batch_length: 10 })
        );
        let mut b = good.clone();
        b[69] ^= 1;
        assert!(matches!(
            validate(&b, usize::MAX),
            Err(BatchError::CrcMismatch { .. })
        ));
        assert_eq!(
            validate(&good, 69),
            Err(BatchError::TooLarge { size: 70, max: 69 })
        );
        let too_many = BatchBuilder::new(0)
            .record(None, Some(b"a"), 0)
            .record_count(2)
            .build();
        let e = validate(&too_many, usize::MAX).unwrap_err();
        assert_eq!(e.kind(), BatchErrorKind::InvalidRecord);
        let none = BatchBuilder::new(0).record_count(0).build();
        assert!(
            validate(&none, usize::MAX).is_ok(),
            "an emptied batch may sit on disk"
        );
        assert!(
            validate_for_append(&none, usize::MAX).is_err(),
            "but may not be produced"
        );
        let bad_ts = BatchBuilder::new(-5).record(None, None, 0).build();
        assert!(matches!(
            validate(&bad_ts, usize::MAX),
            Err(BatchError::InvalidTimestamp { .. })
        ));
        let codec = BatchBuilder::new(0).record(None, None, 0).attributes(7).build();
        assert_eq!(
            validate(&codec, usize::MAX),
            Err(BatchError::UnknownCompression { codec: 7 })
        );
        assert!(BatchError::CrcMismatch {
            stored: 0,
            computed: 1
        }
        .is_corrupt());
    }

    #[test]
    fn patching_keeps_crc_valid() {
        let mut b = golden();
        set_base_offset(&mut b, 1 << 40);
        set_partition_leader_epoch(&mut b, 9);
        let h = validate(&b, usize::MAX).unwrap();
        assert_eq!((h.base_offset, h.partition_leader_epoch), (1 << 40, 9));
        set_log_append_time(&mut b, 5_000);
        let h = validate(&b, usize::MAX).unwrap();
        assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!((h.base_timestamp, h.max_timestamp), (1_000, 5_000));
    }

    #[test]
    fn iterator_splits_and_stops_at_error() {
        let a = BatchBuilder::new(0).record(None, Some(b"x"), 0).build();
        let b = BatchBuilder::new(0)
            .record(None, Some(b"y"), 0)
            .record(None, None, 1)
            .build();
        let mut buf = [a.clone(), b.clone()].concat();
        let got: Vec<_> = BatchIter::new(&buf, usize::MAX).map(|r| r.unwrap().0).collect();
        assert_eq!(got, vec![0..a.len(), a.len()..a.len() + b.len()]);
        buf.truncate(buf.len() - 1);
        let got: Vec<_> = BatchIter::new(&buf, usize::MAX).collect();
        assert_eq!(got.len(), 2);
        assert!(matches!(got[1], Err(BatchError::NeedMore { .. })));
    }
}
