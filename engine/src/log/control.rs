//! Control batches: the COMMIT and ABORT markers that end a producer's transaction in a
//! partition (KIP-98). Written by the partition leader, copied by followers, never produced by
//! clients.
//!
//! A marker is one RecordBatch v2 (see `batch.rs`) with attributes control | transactional,
//! the producer's id and epoch, base sequence -1, both timestamps the broker's clock, and one
//! uncompressed record (see `records.rs`) with offset and timestamp delta 0, no headers, and:
//!
//! ```text
//! key   (4 bytes): int16 version (0), int16 type (0 = ABORT, 1 = COMMIT)
//! value (6 bytes): int16 version (0), int32 coordinator epoch
//! ```
//!
//! Other control types (KRaft's leader-change records, type 2 and up) are not transaction
//! markers: [`parse_marker`] answers `None` for them, as for unreadable bytes.

use super::batch::{
    BatchHeader, Compression, CONTROL_BIT, HEADER_LEN, LOG_OVERHEAD, MAGIC_V2, TRANSACTIONAL_BIT,
};
use super::checksum::crc32c;
use super::records::parse_record;

/// How a transaction ended: the type of its control record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnResult {
    Abort,
    Commit,
}

/// What a marker says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub result: TxnResult,
    pub coordinator_epoch: i32,
}

const CONTROL_VERSION: i16 = 0;
const TYPE_ABORT: i16 = 0;
const TYPE_COMMIT: i16 = 1;
/// The marker record: length varint (1 byte), then 16 bytes: attributes, timestamp delta,
/// offset delta, key length, 4 key bytes, value length, 6 value bytes, header count.
const RECORD_LEN: usize = 17;

/// The bytes of one marker batch at base offset 0 (the log assigns its offset on append).
pub fn marker_batch(producer: (i64, i16), marker: Marker, now_ms: i64) -> Vec<u8> {
    let kind = match marker.result {
        TxnResult::Abort => TYPE_ABORT,
        TxnResult::Commit => TYPE_COMMIT,
    };
    let mut b = Vec::with_capacity(HEADER_LEN + RECORD_LEN);
    b.extend_from_slice(&0i64.to_be_bytes()); // base offset
    b.extend_from_slice(&((HEADER_LEN - LOG_OVERHEAD + RECORD_LEN) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch, set on append
    b.push(MAGIC_V2 as u8);
    b.extend_from_slice(&[0; 4]); // CRC, set below
    b.extend_from_slice(&(CONTROL_BIT | TRANSACTIONAL_BIT).to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    b.extend_from_slice(&now_ms.to_be_bytes()); // base timestamp
    b.extend_from_slice(&now_ms.to_be_bytes()); // max timestamp
    b.extend_from_slice(&producer.0.to_be_bytes());
    b.extend_from_slice(&producer.1.to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    b.extend_from_slice(&1i32.to_be_bytes()); // record count
                                              // Zigzag varints: 16 bytes follow the length, 0 is 0, 4 is 8, 6 is 12.
    b.extend_from_slice(&[32, 0, 0, 0, 8]);
    b.extend_from_slice(&CONTROL_VERSION.to_be_bytes());
    b.extend_from_slice(&kind.to_be_bytes());
    b.push(12);
    b.extend_from_slice(&CONTROL_VERSION.to_be_bytes());
    b.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    b.push(0); // no headers
    debug_assert_eq!(b.len(), HEADER_LEN + RECORD_LEN);
    let crc = crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// The marker a whole control batch holds, `None` when it is another kind of control record
/// or its bytes do not read as one (they come from disk or a leader: never trusted).
pub fn parse_marker(batch: &[u8], header: &BatchHeader) -> Option<Marker> {
    if !header.is_control() || header.compression() != Ok(Compression::None) {
        return None;
    }
    let body = batch.get(HEADER_LEN..header.total_len())?;
    let record = parse_record(body, 0)?;
    let key = record.key?;
    let value = record.value?;
    let field = |bytes: &[u8], at: usize| Some(i16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?));
    let result = match (field(key, 0)?, field(key, 2)?) {
        (CONTROL_VERSION, TYPE_ABORT) => TxnResult::Abort,
        (CONTROL_VERSION, TYPE_COMMIT) => TxnResult::Commit,
        _ => return None,
    };
    let coordinator_epoch = i32::from_be_bytes(value.get(2..6)?.try_into().ok()?);
    Some(Marker {
        result,
        coordinator_epoch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::{self, testing::BatchBuilder};

    #[test]
    fn a_marker_batch_is_the_kafka_control_batch_byte_for_byte() {
        let marker = Marker {
            result: TxnResult::Commit,
            coordinator_epoch: 7,
        };
        let bytes = marker_batch((258, 3), marker, 1_000);
        let expected = BatchBuilder::new(1_000)
            .attributes(0x30)
            .producer(258, 3, -1)
            .record(Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 0, 7]), 0)
            .build();
        assert_eq!(bytes, expected);
        let header = batch::validate_for_append(&bytes, usize::MAX).unwrap();
        assert!(header.is_control() && header.is_transactional());
        assert_eq!(parse_marker(&bytes, &header), Some(marker));
        let abort = Marker {
            result: TxnResult::Abort,
            coordinator_epoch: -1,
        };
        let bytes = marker_batch((258, 3), abort, 1_000);
        assert_eq!(&bytes[HEADER_LEN + 5..HEADER_LEN + 9], &[0, 0, 0, 0]);
        assert_eq!(
            parse_marker(&bytes, &BatchHeader::parse(&bytes).unwrap()),
            Some(abort)
        );
    }

    #[test]
    fn other_control_records_and_bad_bytes_are_no_marker() {
        let leader_change = BatchBuilder::new(5)
            .attributes(0x20)
            .record(Some(&[0, 0, 0, 2]), Some(&[0, 0, 0, 0, 0, 1]), 0)
            .build();
        let header = BatchHeader::parse(&leader_change).unwrap();
        assert_eq!(parse_marker(&leader_change, &header), None);
        let short_value = BatchBuilder::new(5)
            .attributes(0x30)
            .record(Some(&[0, 0, 0, 0]), Some(&[0, 0]), 0)
            .build();
        let header = BatchHeader::parse(&short_value).unwrap();
        assert_eq!(parse_marker(&short_value, &header), None);
        let data = BatchBuilder::new(5)
            .record(Some(&[0, 0, 0, 0]), Some(&[0; 6]), 0)
            .build();
        assert_eq!(parse_marker(&data, &BatchHeader::parse(&data).unwrap()), None);
    }
}
