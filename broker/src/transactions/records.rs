//! The records the transaction coordinator writes to `__transaction_state`, in Kafka's own
//! schemas (TransactionLogKey v0, TransactionLogValue v0) so Kafka tools can read the topic.
//! Each is one record of an uncompressed RecordBatch v2; field encodings as in
//! [`crate::internal_records`].
//!
//! ```text
//! key:   i16 version = 0 | string transactional id
//! value: i16 version = 0 | i64 producer id | i16 producer epoch | i32 transaction timeout ms
//!        | i8 state | nullable array of topics: string topic | array of i32 partition
//!        | i64 last update timestamp ms | i64 transaction start timestamp ms
//! ```
//! A null value is a tombstone: the transactional id expired. Replay applies records in log
//! order; the last record for a key wins.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder};
use laminar_protocol::records::{self as client_records, plain_record};

use crate::internal_records::{
    get_array_len, get_i16, get_i32, get_i64, get_i8, get_string, put_string, FieldError,
};

const KEY_VERSION: i16 = 0;
const VALUE_VERSION: i16 = 0;

/// A transaction's state, with Kafka's numbering (TransactionState's ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    Empty = 0,
    Ongoing = 1,
    PrepareCommit = 2,
    PrepareAbort = 3,
    CompleteCommit = 4,
    CompleteAbort = 5,
    Dead = 6,
    PrepareEpochFence = 7,
}

impl TxnState {
    pub fn from_id(id: i8) -> Option<TxnState> {
        use TxnState::*;
        [
            Empty,
            Ongoing,
            PrepareCommit,
            PrepareAbort,
            CompleteCommit,
            CompleteAbort,
            Dead,
            PrepareEpochFence,
        ]
        .into_iter()
        .find(|s| *s as i8 == id)
    }

    /// Kafka's names, as DescribeTransactions and ListTransactions give them.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }
}

/// The partitions of a transaction, by topic.
pub type TxnPartitions = BTreeMap<String, BTreeSet<i32>>;

/// What `__transaction_state` holds for one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnValue {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: TxnPartitions,
    pub last_update_ms: i64,
    pub start_ms: i64,
}

/// One record: a transactional id and its value, or its tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnRecord {
    pub transactional_id: String,
    pub value: Option<TxnValue>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnRecordError {
    #[error(transparent)]
    Field(#[from] FieldError),
    #[error("unknown key version {0}")]
    KeyVersion(i16),
    #[error("unknown value version {0}")]
    ValueVersion(i16),
    #[error("unknown transaction state {0}")]
    State(i8),
    #[error("record without a key")]
    NoKey,
    #[error("batch: {0}")]
    Batch(String),
}

impl TxnRecord {
    pub fn key(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(4 + self.transactional_id.len());
        out.put_i16(KEY_VERSION);
        put_string(&mut out, &self.transactional_id);
        out.freeze()
    }

    pub fn value(&self) -> Option<Bytes> {
        let v = self.value.as_ref()?;
        let mut out = BytesMut::with_capacity(64);
        out.put_i16(VALUE_VERSION);
        out.put_i64(v.producer_id);
        out.put_i16(v.producer_epoch);
        out.put_i32(v.timeout_ms);
        out.put_i8(v.state as i8);
        out.put_i32(v.partitions.len() as i32);
        for (topic, partitions) in &v.partitions {
            put_string(&mut out, topic);
            out.put_i32(partitions.len() as i32);
            partitions.iter().for_each(|p| out.put_i32(*p));
        }
        out.put_i64(v.last_update_ms);
        out.put_i64(v.start_ms);
        Some(out.freeze())
    }

    pub fn decode(mut key: Bytes, value: Option<Bytes>) -> Result<TxnRecord, TxnRecordError> {
        let version = get_i16(&mut key)?;
        if version != KEY_VERSION {
            return Err(TxnRecordError::KeyVersion(version));
        }
        let transactional_id = get_string(&mut key)?;
        let value = value.map(decode_value).transpose()?;
        Ok(TxnRecord {
            transactional_id,
            value,
        })
    }
}

fn decode_value(mut buf: Bytes) -> Result<TxnValue, TxnRecordError> {
    let version = get_i16(&mut buf)?;
    if version != VALUE_VERSION {
        return Err(TxnRecordError::ValueVersion(version));
    }
    let producer_id = get_i64(&mut buf)?;
    let producer_epoch = get_i16(&mut buf)?;
    let timeout_ms = get_i32(&mut buf)?;
    let state_id = get_i8(&mut buf)?;
    let state = TxnState::from_id(state_id).ok_or(TxnRecordError::State(state_id))?;
    let mut partitions = TxnPartitions::new();
    // A topic takes at least its string length and its array count: 6 bytes.
    for _ in 0..get_array_len(&mut buf, 6)?.unwrap_or(0) {
        let topic = get_string(&mut buf)?;
        let ids = get_array_len(&mut buf, 4)?.unwrap_or(0);
        let set = partitions.entry(topic).or_default();
        for _ in 0..ids {
            set.insert(get_i32(&mut buf)?);
        }
    }
    Ok(TxnValue {
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        last_update_ms: get_i64(&mut buf)?,
        start_ms: get_i64(&mut buf)?,
    })
}

/// One uncompressed RecordBatch v2 holding `record`.
pub fn encode_batch(record: &TxnRecord, now_ms: i64) -> Result<Bytes, TxnRecordError> {
    let encoded = [plain_record(0, now_ms, Some(record.key()), record.value())];
    let mut out = BytesMut::new();
    client_records::encode_batch(&mut out, &encoded, Compression::None)
        .map_err(|e| TxnRecordError::Batch(e.to_string()))?;
    Ok(out.freeze())
}

/// The transaction records of one stored batch.
pub fn decode_batch(mut batch: Bytes) -> Result<Vec<TxnRecord>, TxnRecordError> {
    let set = RecordBatchDecoder::decode(&mut batch).map_err(|e| TxnRecordError::Batch(e.to_string()))?;
    set.records
        .into_iter()
        .filter(|r: &Record| !r.control)
        .map(|r| TxnRecord::decode(r.key.ok_or(TxnRecordError::NoKey)?, r.value))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TxnRecord {
        TxnRecord {
            transactional_id: "tx".into(),
            value: Some(TxnValue {
                producer_id: 7,
                producer_epoch: 2,
                timeout_ms: 60_000,
                state: TxnState::Ongoing,
                partitions: TxnPartitions::from([("t".to_string(), BTreeSet::from([0, 3]))]),
                last_update_ms: 1_000,
                start_ms: 900,
            }),
        }
    }

    #[test]
    fn transaction_records_have_kafkas_bytes() {
        let record = sample();
        assert_eq!(&record.key()[..], &[0, 0, 0, 2, b't', b'x']);
        let value = record.value().unwrap();
        let expected: Vec<u8> = [
            &[0u8, 0][..],            // version
            &7i64.to_be_bytes(),      // producer id
            &2i16.to_be_bytes(),      // epoch
            &60_000i32.to_be_bytes(), // timeout
            &[1],                     // Ongoing
            &1i32.to_be_bytes(),      // one topic
            &[0, 1, b't'],            // "t"
            &2i32.to_be_bytes(),      // two partitions
            &0i32.to_be_bytes(),
            &3i32.to_be_bytes(),
            &1_000i64.to_be_bytes(),
            &900i64.to_be_bytes(),
        ]
        .concat();
        assert_eq!(&value[..], &expected[..]);
        assert_eq!(TxnRecord::decode(record.key(), Some(value)).unwrap(), record);
    }

    #[test]
    fn truncated_and_corrupt_values_are_refused() {
        let record = sample();
        let value = record.value().unwrap();
        for cut in 0..value.len() {
            assert!(TxnRecord::decode(record.key(), Some(value.slice(..cut))).is_err());
        }
        let mut huge = BytesMut::from(&value[..]);
        huge[17..21].copy_from_slice(&i32::MAX.to_be_bytes()); // the topic count
        assert!(TxnRecord::decode(record.key(), Some(huge.freeze())).is_err());
        let tombstone = TxnRecord::decode(record.key(), None).unwrap();
        assert_eq!(tombstone.value, None);
    }

    #[test]
    fn a_batch_round_trips() {
        let batch = encode_batch(&sample(), 5).unwrap();
        assert_eq!(decode_batch(batch).unwrap(), vec![sample()]);
    }
}
