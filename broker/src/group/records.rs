//! The records the group coordinator writes to `__consumer_offsets`, in Kafka's own schemas so
//! that Kafka tools can read the topic. Each is one record of a RecordBatch v2 (uncompressed),
//! appended through the partition log like any produced batch. All integers are big-endian;
//! `string` is an i16 length then UTF-8 bytes; `nullable string` uses length -1 for null;
//! `bytes` is an i32 length then the bytes; arrays are an i32 count then the elements.
//!
//! Offset commit (key version 1; Kafka's OffsetCommitKey):
//! ```text
//! key:   i16 version = 1 | string group | string topic | i32 partition
//! value: i16 version = 3 | i64 offset | i32 leader epoch (-1 = none) | string metadata
//!        | i64 commit timestamp (ms)
//! ```
//! Group metadata (key version 2; Kafka's GroupMetadataKey / GroupMetadataValue v3):
//! ```text
//! key:   i16 version = 2 | string group
//! value: i16 version = 3 | string protocol type | i32 generation | nullable string protocol
//!        | nullable string leader | i64 state timestamp (ms)
//!        | array of members: string member id | nullable string group instance id
//!          | string client id | string client host | i32 rebalance timeout ms
//!          | i32 session timeout ms | bytes subscription | bytes assignment
//! ```
//! A record with a null value is a tombstone: the offset, or the whole group, was deleted.
//! Replay applies records in log order; the last record for a key wins.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder};

use laminar_engine::log::batch::BatchHeader;
use laminar_engine::partition::TxnResult;
use laminar_protocol::records::{self as client_records, plain_record};

use super::consumer::records::ConsumerGroupRecord;
pub use crate::internal_records::RecordError;
use crate::internal_records::{
    get_i16, get_i32, get_i64, get_nullable_bytes, get_nullable_string, get_string, put_bytes,
    put_nullable_string, put_string,
};

const OFFSET_KEY_VERSION: i16 = 1;
const OFFSET_KEY_VERSION_LEGACY: i16 = 0;
const GROUP_KEY_VERSION: i16 = 2;
const OFFSET_VALUE_VERSION: i16 = 3;
const GROUP_VALUE_VERSION: i16 = 3;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OffsetKey {
    pub group: String,
    pub topic: String,
    pub partition: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRecord {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation_id: i32,
    pub protocol_name: Option<String>,
    pub leader_id: Option<String>,
    pub state_timestamp_ms: i64,
    pub members: Vec<MemberRecord>,
}

/// One decoded `__consumer_offsets` record; `None` values are tombstones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupRecord {
    Offset(OffsetKey, Option<OffsetValue>),
    Group(String, Option<GroupValue>),
    /// A record of a consumer group (KIP-848), in [`super::consumer::records`]' formats.
    Consumer(ConsumerGroupRecord),
}

impl GroupRecord {
    pub fn key(&self) -> Bytes {
        let mut out = BytesMut::new();
        match self {
            GroupRecord::Consumer(record) => return record.key(),
            GroupRecord::Offset(key, _) => {
                out.put_i16(OFFSET_KEY_VERSION);
                put_string(&mut out, &key.group);
                put_string(&mut out, &key.topic);
                out.put_i32(key.partition);
            }
            GroupRecord::Group(group, _) => {
                out.put_i16(GROUP_KEY_VERSION);
                put_string(&mut out, group);
            }
        }
        out.freeze()
    }

    pub fn value(&self) -> Option<Bytes> {
        let mut out = BytesMut::new();
        match self {
            GroupRecord::Consumer(record) => return record.value(),
            GroupRecord::Offset(_, None) | GroupRecord::Group(_, None) => return None,
            GroupRecord::Offset(_, Some(v)) => {
                out.put_i16(OFFSET_VALUE_VERSION);
                out.put_i64(v.offset);
                out.put_i32(v.leader_epoch);
                put_string(&mut out, &v.metadata);
                out.put_i64(v.commit_timestamp_ms);
            }
            GroupRecord::Group(_, Some(v)) => {
                out.put_i16(GROUP_VALUE_VERSION);
                put_string(&mut out, &v.protocol_type);
                out.put_i32(v.generation_id);
                put_nullable_string(&mut out, v.protocol_name.as_deref());
                put_nullable_string(&mut out, v.leader_id.as_deref());
                out.put_i64(v.state_timestamp_ms);
                out.put_i32(v.members.len() as i32);
                for m in &v.members {
                    put_string(&mut out, &m.member_id);
                    put_nullable_string(&mut out, m.group_instance_id.as_deref());
                    put_string(&mut out, &m.client_id);
                    put_string(&mut out, &m.client_host);
                    out.put_i32(m.rebalance_timeout_ms);
                    out.put_i32(m.session_timeout_ms);
                    put_bytes(&mut out, &m.subscription);
                    put_bytes(&mut out, &m.assignment);
                }
            }
        }
        Some(out.freeze())
    }

    pub fn decode(mut key: Bytes, value: Option<Bytes>) -> Result<GroupRecord, RecordError> {
        let whole_key = key.clone();
        let version = get_i16(&mut key)?;
        match version {
            version if ConsumerGroupRecord::is_consumer_key_type(version) => {
                ConsumerGroupRecord::decode(whole_key, value).map(GroupRecord::Consumer)
            }
            OFFSET_KEY_VERSION | OFFSET_KEY_VERSION_LEGACY => {
                let offset_key = OffsetKey {
                    group: get_string(&mut key)?,
                    topic: get_string(&mut key)?,
                    partition: get_i32(&mut key)?,
                };
                let value = value.map(decode_offset_value).transpose()?;
                Ok(GroupRecord::Offset(offset_key, value))
            }
            GROUP_KEY_VERSION => {
                let group = get_string(&mut key)?;
                let value = value.map(decode_group_value).transpose()?;
                Ok(GroupRecord::Group(group, value))
            }
            version => Err(RecordError::UnknownVersion { what: "key", version }),
        }
    }
}

fn decode_offset_value(mut buf: Bytes) -> Result<OffsetValue, RecordError> {
    match get_i16(&mut buf)? {
        OFFSET_VALUE_VERSION => Ok(OffsetValue {
            offset: get_i64(&mut buf)?,
            leader_epoch: get_i32(&mut buf)?,
            metadata: get_string(&mut buf)?,
            commit_timestamp_ms: get_i64(&mut buf)?,
        }),
        version => Err(RecordError::UnknownVersion {
            what: "offset commit value",
            version,
        }),
    }
}

fn decode_group_value(mut buf: Bytes) -> Result<GroupValue, RecordError> {
    let version = get_i16(&mut buf)?;
    if version != GROUP_VALUE_VERSION {
        return Err(RecordError::UnknownVersion {
            what: "group metadata value",
            version,
        });
    }
    let protocol_type = get_string(&mut buf)?;
    let generation_id = get_i32(&mut buf)?;
    let protocol_name = get_nullable_string(&mut buf)?;
    let leader_id = get_nullable_string(&mut buf)?;
    let state_timestamp_ms = get_i64(&mut buf)?;
    let count = get_i32(&mut buf)?.max(0) as usize;
    let mut members = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        members.push(MemberRecord {
            member_id: get_string(&mut buf)?,
            group_instance_id: get_nullable_string(&mut buf)?,
            client_id: get_string(&mut buf)?,
            client_host: get_string(&mut buf)?,
            rebalance_timeout_ms: get_i32(&mut buf)?,
            session_timeout_ms: get_i32(&mut buf)?,
            subscription: get_nullable_bytes(&mut buf)?,
            assignment: get_nullable_bytes(&mut buf)?,
        });
    }
    Ok(GroupValue {
        protocol_type,
        generation_id,
        protocol_name,
        leader_id,
        state_timestamp_ms,
        members,
    })
}

/// One uncompressed RecordBatch v2 holding `records` (relative offsets 0..n, patched on append).
pub fn encode_batch(records: &[GroupRecord], now_ms: i64) -> Result<Bytes, RecordError> {
    let encoded: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, record)| plain_record(i as i64, now_ms, Some(record.key()), record.value()))
        .collect();
    let mut out = BytesMut::new();
    client_records::encode_batch(&mut out, &encoded, Compression::None)
        .map_err(|e| RecordError::Batch(e.to_string()))?;
    Ok(out.freeze())
}

/// One uncompressed transactional RecordBatch v2 of `producer` (id, epoch) holding `records`:
/// a coordinator's write carries no sequence (base sequence -1), as Kafka's does.
pub fn encode_txn_batch(
    records: &[GroupRecord],
    (producer_id, producer_epoch): (i64, i16),
    now_ms: i64,
) -> Result<Bytes, RecordError> {
    let encoded: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, record)| Record {
            transactional: true,
            producer_id,
            producer_epoch,
            ..plain_record(i as i64, now_ms, Some(record.key()), record.value())
        })
        .collect();
    let mut out = BytesMut::new();
    client_records::encode_batch(&mut out, &encoded, Compression::None)
        .map_err(|e| RecordError::Batch(e.to_string()))?;
    Ok(out.freeze())
}

/// Control record types (the key's second i16) that end a transaction.
const CONTROL_TYPE_ABORT: i16 = 0;
const CONTROL_TYPE_COMMIT: i16 = 1;

/// One stored batch of `__consumer_offsets` as a replay applies it (`header` is its header).
/// A control batch of another type than a transaction marker holds nothing to apply.
pub fn decode_replayed(header: &BatchHeader, batch: Bytes) -> Result<ReplayedBatch, RecordError> {
    let producer_id = header.producer_id;
    if !header.is_control() {
        let records = decode_batch(batch)?;
        return Ok(match header.is_transactional() {
            true => ReplayedBatch::Transactional { producer_id, records },
            false => ReplayedBatch::Plain(records),
        });
    }
    let mut batch = batch;
    let set = RecordBatchDecoder::decode(&mut batch).map_err(|e| RecordError::Batch(e.to_string()))?;
    let Some(mut key) = set.records.into_iter().next().and_then(|r| r.key) else {
        return Err(RecordError::NoKey);
    };
    let _version = get_i16(&mut key)?;
    Ok(match get_i16(&mut key)? {
        CONTROL_TYPE_ABORT => ReplayedBatch::Marker {
            producer_id,
            result: TxnResult::Abort,
        },
        CONTROL_TYPE_COMMIT => ReplayedBatch::Marker {
            producer_id,
            result: TxnResult::Commit,
        },
        _ => ReplayedBatch::Plain(Vec::new()),
    })
}

/// The group records of one stored batch.
pub fn decode_batch(mut batch: Bytes) -> Result<Vec<GroupRecord>, RecordError> {
    let set = RecordBatchDecoder::decode(&mut batch).map_err(|e| RecordError::Batch(e.to_string()))?;
    set.records
        .into_iter()
        .filter(|r| !r.control)
        .map(|r| GroupRecord::decode(r.key.ok_or(RecordError::NoKey)?, r.value))
        .collect()
}

/// One batch of `__consumer_offsets` as a replay sees it, on the shard that owns the partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayedBatch {
    /// Records that apply as they are read.
    Plain(Vec<GroupRecord>),
    /// Records a transaction of `producer_id` wrote: its offsets stay pending.
    Transactional {
        producer_id: i64,
        records: Vec<GroupRecord>,
    },
    /// A control batch ending `producer_id`'s transaction.
    Marker { producer_id: i64, result: TxnResult },
}

impl ReplayedBatch {
    /// How many records it holds.
    pub fn len(&self) -> usize {
        match self {
            ReplayedBatch::Plain(records) | ReplayedBatch::Transactional { records, .. } => records.len(),
            ReplayedBatch::Marker { .. } => 1,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_commit_golden_bytes() {
        let record = GroupRecord::Offset(
            OffsetKey {
                group: "g".into(),
                topic: "t".into(),
                partition: 3,
            },
            Some(OffsetValue {
                offset: 42,
                leader_epoch: -1,
                metadata: "m".into(),
                commit_timestamp_ms: 7,
            }),
        );
        let key: &[u8] = &[
            0, 1, // key version 1
            0, 1, b'g', // group
            0, 1, b't', // topic
            0, 0, 0, 3, // partition
        ];
        let value: &[u8] = &[
            0, 3, // value version 3
            0, 0, 0, 0, 0, 0, 0, 42, // offset
            0xff, 0xff, 0xff, 0xff, // leader epoch -1
            0, 1, b'm', // metadata
            0, 0, 0, 0, 0, 0, 0, 7, // commit timestamp
        ];
        assert_eq!(&record.key()[..], key);
        assert_eq!(&record.value().unwrap()[..], value);
        let back = GroupRecord::decode(Bytes::from_static(key), Some(Bytes::from_static(value)));
        assert_eq!(back, Ok(record));
    }

    #[test]
    fn group_metadata_golden_bytes() {
        let record = GroupRecord::Group(
            "g".into(),
            Some(GroupValue {
                protocol_type: "consumer".into(),
                generation_id: 2,
                protocol_name: Some("range".into()),
                leader_id: None,
                state_timestamp_ms: 1,
                members: vec![MemberRecord {
                    member_id: "m".into(),
                    group_instance_id: None,
                    client_id: "c".into(),
                    client_host: "h".into(),
                    rebalance_timeout_ms: 5,
                    session_timeout_ms: 6,
                    subscription: Bytes::from_static(b"s"),
                    assignment: Bytes::new(),
                }],
            }),
        );
        let mut value = vec![
            0, 3, // value version 3
            0, 8, // protocol type
        ];
        value.extend_from_slice(b"consumer");
        value.extend_from_slice(&[0, 0, 0, 2]); // generation
        value.extend_from_slice(&[0, 5]); // protocol
        value.extend_from_slice(b"range");
        value.extend_from_slice(&[0xff, 0xff]); // leader: null
        value.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]); // state timestamp
        value.extend_from_slice(&[0, 0, 0, 1]); // one member
        value.extend_from_slice(&[0, 1, b'm']); // member id
        value.extend_from_slice(&[0xff, 0xff]); // group instance id: null
        value.extend_from_slice(&[0, 1, b'c', 0, 1, b'h']); // client id, client host
        value.extend_from_slice(&[0, 0, 0, 5, 0, 0, 0, 6]); // rebalance, session timeouts
        value.extend_from_slice(&[0, 0, 0, 1, b's']); // subscription
        value.extend_from_slice(&[0, 0, 0, 0]); // assignment: empty
        assert_eq!(&record.key()[..], &[0, 2, 0, 1, b'g']);
        assert_eq!(&record.value().unwrap()[..], &value[..]);
        assert_eq!(GroupRecord::decode(record.key(), record.value()), Ok(record));
    }

    #[test]
    fn batches_round_trip_with_tombstones_and_pass_validation() {
        let records = vec![
            GroupRecord::Group("g".into(), None),
            GroupRecord::Offset(
                OffsetKey {
                    group: "g".into(),
                    topic: "t".into(),
                    partition: 0,
                },
                None,
            ),
        ];
        let batch = encode_batch(&records, 1000).unwrap();
        let header = laminar_engine::log::batch::validate(&batch, 1 << 20).expect("a valid Kafka batch");
        assert_eq!(header.total_len(), batch.len(), "one batch holds every record");
        assert_eq!(decode_batch(batch).unwrap(), records);
    }

    #[test]
    fn truncated_and_unknown_records_are_errors() {
        assert_eq!(
            GroupRecord::decode(Bytes::from_static(&[0, 1, 0, 5, b'g']), None),
            Err(RecordError::Field(crate::internal_records::FieldError::Truncated))
        );
        assert!(matches!(
            GroupRecord::decode(Bytes::from_static(&[0, 9]), None),
            Err(RecordError::UnknownVersion { .. })
        ));
    }
}
