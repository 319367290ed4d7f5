//! The records Kafka 4.x's group coordinator writes to `__consumer_offsets` for KIP-848
//! ("consumer" protocol) groups, in Kafka's own schemas, so that Kafka tools can read what
//! Laminar writes and Laminar can replay what either wrote.
//!
//! Framing: the key is an i16 record type followed by the key's fields in the non-flexible
//! encoding (`string` = i16 length then UTF-8). The value is an i16 value version followed by the
//! fields in the flexible encoding: `cstring` = unsigned varint (length + 1) then UTF-8, with 0
//! for null; `carray` = unsigned varint (count + 1) then the elements; `uuid` = 16 bytes, most
//! significant half first; every struct (the value itself and each array element that is a
//! struct) ends with a tagged-field section `tags` = unsigned varint count, then per field an
//! unsigned varint tag, an unsigned varint size and the bytes. Laminar writes no tagged fields
//! (a single 0 byte) and skips every tagged field it reads. Integers are big-endian. A null value
//! is a tombstone: the entity was deleted. Every value here has version 0, the only one the
//! schemas define and the one Kafka 4.1 writes.
//!
//! ```text
//! type 3, group epoch (ConsumerGroupMetadata):
//!   key:   i16 3 | string group
//!   value: i16 0 | i32 epoch | tags (Kafka 4.1: tag 0 = i64 metadata hash, default 0)
//! type 4, subscribed topics' metadata (ConsumerGroupPartitionMetadata; Kafka 4.0, not 4.1+):
//!   key:   i16 4 | string group
//!   value: i16 0 | carray topics: (uuid topic id | cstring name | i32 partition count
//!            | carray partitions: (i32 partition | carray of cstring racks | tags) | tags)
//!          | tags
//! type 5, member (ConsumerGroupMemberMetadata):
//!   key:   i16 5 | string group | string member id
//!   value: i16 0 | cstring? instance id | cstring? rack id | cstring client id
//!          | cstring client host | carray of cstring subscribed topic names
//!          | cstring? subscribed topic regex | i32 rebalance timeout ms
//!          | cstring? server assignor
//!          | tags (tag 0 = classic member metadata, present only for classic-protocol members)
//! type 6, target assignment epoch (ConsumerGroupTargetAssignmentMetadata):
//!   key:   i16 6 | string group
//!   value: i16 0 | i32 assignment epoch | tags
//! type 7, a member's target assignment (ConsumerGroupTargetAssignmentMember):
//!   key:   i16 7 | string group | string member id
//!   value: i16 0 | carray topics: (uuid topic id | carray of i32 partitions | tags) | tags
//! type 8, a member's current assignment (ConsumerGroupCurrentMemberAssignment):
//!   key:   i16 8 | string group | string member id
//!   value: i16 0 | i32 member epoch | i32 previous member epoch | i8 state
//!          | carray assigned: (uuid topic id | carray of i32 partitions | tags)
//!          | carray pending revocation: (same) | tags
//! type 16, a resolved subscription regex (ConsumerGroupRegularExpression):
//!   key:   i16 16 | string group | string regex
//!   value: i16 0 | carray of cstring topics | i64 version | i64 timestamp ms | tags
//! ```
//! (`cstring?` is a nullable one.) Member states are 0 stable, 1 unrevoked partitions,
//! 2 unreleased partitions; Kafka reads any other byte as unknown and writes unknown as 127.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use crate::internal_records::RecordError;
use crate::internal_records::{
    get_compact_array_count, get_compact_nullable_string, get_compact_string, get_i16, get_i32, get_i64,
    get_i8, get_string, get_uuid, put_compact_array_len, put_compact_nullable_string, put_compact_string,
    put_string, put_tagged_fields, put_uuid, skip_tagged_fields,
};

/// Partitions by topic id.
pub type TopicPartitions = BTreeMap<Uuid, BTreeSet<i32>>;

const TYPE_METADATA: i16 = 3;
const TYPE_PARTITION_METADATA: i16 = 4;
const TYPE_MEMBER: i16 = 5;
const TYPE_TARGET_METADATA: i16 = 6;
const TYPE_TARGET_MEMBER: i16 = 7;
const TYPE_CURRENT_ASSIGNMENT: i16 = 8;
const TYPE_REGULAR_EXPRESSION: i16 = 16;

/// The only value version the schemas define; Kafka 4.1 writes it for every record here.
const VALUE_VERSION: i16 = 0;

/// Smallest encodings, used to bound counts read from files before allocating: a compact string
/// is at least its length byte; a topic-partitions element is a uuid, a count byte and a tags
/// byte; a topic-metadata element (type 4) a uuid, a name byte, an i32, a count byte and tags.
const CSTRING_MIN: usize = 1;
const TOPIC_PARTITIONS_MIN: usize = 16 + 1 + 1;
const TOPIC_METADATA_MIN: usize = 16 + 1 + 4 + 1 + 1;
const PARTITION_RACKS_MIN: usize = 4 + 1 + 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadata {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub rebalance_timeout_ms: i32,
}

/// Kafka's member reconciliation states, by the byte its records store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    UnrevokedPartitions,
    UnreleasedPartitions,
    Unknown,
}

impl MemberState {
    /// Kafka writes these bytes; it reads any byte it does not know as `Unknown`.
    fn to_byte(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => 127,
        }
    }

    fn from_byte(byte: i8) -> MemberState {
        match byte {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentAssignment {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: TopicPartitions,
    pub pending_revocation: TopicPartitions,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexTopics {
    pub topics: Vec<String>,
    pub version: i64,
    pub timestamp_ms: i64,
}

/// One KIP-848 record; `None` values are tombstones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerGroupRecord {
    /// type 3: the group epoch.
    Metadata { group: String, epoch: Option<i32> },
    /// type 4 (written by Kafka 4.0, deprecated later): decoded and kept only as a marker;
    /// Laminar never writes it except as a tombstone.
    PartitionMetadata { group: String, present: bool },
    /// type 5
    Member {
        group: String,
        member_id: String,
        value: Option<MemberMetadata>,
    },
    /// type 6: the target assignment's epoch.
    TargetAssignmentMetadata {
        group: String,
        assignment_epoch: Option<i32>,
    },
    /// type 7
    TargetAssignmentMember {
        group: String,
        member_id: String,
        partitions: Option<TopicPartitions>,
    },
    /// type 8
    CurrentAssignment {
        group: String,
        member_id: String,
        value: Option<CurrentAssignment>,
    },
    /// type 16
    RegularExpression {
        group: String,
        regex: String,
        value: Option<RegexTopics>,
    },
}

impl ConsumerGroupRecord {
    /// The record types this module reads (the i16 at the start of a key).
    pub fn is_consumer_key_type(key_type: i16) -> bool {
        matches!(
            key_type,
            TYPE_METADATA
                | TYPE_PARTITION_METADATA
                | TYPE_MEMBER
                | TYPE_TARGET_METADATA
                | TYPE_TARGET_MEMBER
                | TYPE_CURRENT_ASSIGNMENT
                | TYPE_REGULAR_EXPRESSION
        )
    }

    pub fn group(&self) -> &str {
        match self {
            ConsumerGroupRecord::Metadata { group, .. }
            | ConsumerGroupRecord::PartitionMetadata { group, .. }
            | ConsumerGroupRecord::Member { group, .. }
            | ConsumerGroupRecord::TargetAssignmentMetadata { group, .. }
            | ConsumerGroupRecord::TargetAssignmentMember { group, .. }
            | ConsumerGroupRecord::CurrentAssignment { group, .. }
            | ConsumerGroupRecord::RegularExpression { group, .. } => group,
        }
    }

    /// The record type and the second key field, if the key has one.
    fn key_parts(&self) -> (i16, Option<&str>) {
        match self {
            ConsumerGroupRecord::Metadata { .. } => (TYPE_METADATA, None),
            ConsumerGroupRecord::PartitionMetadata { .. } => (TYPE_PARTITION_METADATA, None),
            ConsumerGroupRecord::Member { member_id, .. } => (TYPE_MEMBER, Some(member_id)),
            ConsumerGroupRecord::TargetAssignmentMetadata { .. } => (TYPE_TARGET_METADATA, None),
            ConsumerGroupRecord::TargetAssignmentMember { member_id, .. } => {
                (TYPE_TARGET_MEMBER, Some(member_id))
            }
            ConsumerGroupRecord::CurrentAssignment { member_id, .. } => {
                (TYPE_CURRENT_ASSIGNMENT, Some(member_id))
            }
            ConsumerGroupRecord::RegularExpression { regex, .. } => (TYPE_REGULAR_EXPRESSION, Some(regex)),
        }
    }

    pub fn key(&self) -> Bytes {
        let (key_type, second) = self.key_parts();
        let mut out = BytesMut::new();
        out.put_i16(key_type);
        put_string(&mut out, self.group());
        if let Some(second) = second {
            put_string(&mut out, second);
        }
        out.freeze()
    }

    /// `None` for a tombstone. Fields Kafka has and this type does not carry are left at
    /// Kafka's defaults: tagged fields are omitted, type 4 is written with no topics.
    pub fn value(&self) -> Option<Bytes> {
        let mut out = BytesMut::new();
        out.put_i16(VALUE_VERSION);
        match self {
            ConsumerGroupRecord::Metadata { epoch, .. } => out.put_i32((*epoch)?),
            ConsumerGroupRecord::PartitionMetadata { present, .. } => {
                if !present {
                    return None;
                }
                put_compact_array_len(&mut out, 0);
            }
            ConsumerGroupRecord::Member { value, .. } => put_member(&mut out, value.as_ref()?),
            ConsumerGroupRecord::TargetAssignmentMetadata { assignment_epoch, .. } => {
                out.put_i32((*assignment_epoch)?)
            }
            ConsumerGroupRecord::TargetAssignmentMember { partitions, .. } => {
                put_topic_partitions(&mut out, partitions.as_ref()?)
            }
            ConsumerGroupRecord::CurrentAssignment { value, .. } => put_current(&mut out, value.as_ref()?),
            ConsumerGroupRecord::RegularExpression { value, .. } => put_regex(&mut out, value.as_ref()?),
        }
        put_tagged_fields(&mut out, &[]);
        Some(out.freeze())
    }

    /// `key` with its leading i16 type still in it.
    pub fn decode(mut key: Bytes, value: Option<Bytes>) -> Result<ConsumerGroupRecord, RecordError> {
        let key_type = get_i16(&mut key)?;
        if !Self::is_consumer_key_type(key_type) {
            return Err(RecordError::UnknownVersion {
                what: "consumer group record type",
                version: key_type,
            });
        }
        let group = get_string(&mut key)?;
        let second = match key_type {
            TYPE_METADATA | TYPE_PARTITION_METADATA | TYPE_TARGET_METADATA => String::new(),
            _ => get_string(&mut key)?,
        };
        let Some(mut value) = value else {
            return Ok(tombstone(key_type, group, second));
        };
        let version = get_i16(&mut value)?;
        if version != VALUE_VERSION {
            return Err(RecordError::UnknownVersion {
                what: value_name(key_type),
                version,
            });
        }
        let record = decode_value(key_type, group, second, &mut value)?;
        skip_tagged_fields(&mut value)?;
        Ok(record)
    }
}

/// Kafka's name for a record type's value, for errors.
fn value_name(key_type: i16) -> &'static str {
    match key_type {
        TYPE_METADATA => "ConsumerGroupMetadataValue",
        TYPE_PARTITION_METADATA => "ConsumerGroupPartitionMetadataValue",
        TYPE_MEMBER => "ConsumerGroupMemberMetadataValue",
        TYPE_TARGET_METADATA => "ConsumerGroupTargetAssignmentMetadataValue",
        TYPE_TARGET_MEMBER => "ConsumerGroupTargetAssignmentMemberValue",
        TYPE_CURRENT_ASSIGNMENT => "ConsumerGroupCurrentMemberAssignmentValue",
        _ => "ConsumerGroupRegularExpressionValue",
    }
}

/// The deletion record of a key; `key_type` is one `is_consumer_key_type` accepted.
fn tombstone(key_type: i16, group: String, second: String) -> ConsumerGroupRecord {
    match key_type {
        TYPE_METADATA => ConsumerGroupRecord::Metadata { group, epoch: None },
        TYPE_PARTITION_METADATA => ConsumerGroupRecord::PartitionMetadata {
            group,
            present: false,
        },
        TYPE_MEMBER => ConsumerGroupRecord::Member {
            group,
            member_id: second,
            value: None,
        },
        TYPE_TARGET_METADATA => ConsumerGroupRecord::TargetAssignmentMetadata {
            group,
            assignment_epoch: None,
        },
        TYPE_TARGET_MEMBER => ConsumerGroupRecord::TargetAssignmentMember {
            group,
            member_id: second,
            partitions: None,
        },
        TYPE_CURRENT_ASSIGNMENT => ConsumerGroupRecord::CurrentAssignment {
            group,
            member_id: second,
            value: None,
        },
        _ => ConsumerGroupRecord::RegularExpression {
            group,
            regex: second,
            value: None,
        },
    }
}

/// Reads a version-0 value's fields, up to (not including) its closing tagged-field section.
fn decode_value(
    key_type: i16,
    group: String,
    second: String,
    buf: &mut Bytes,
) -> Result<ConsumerGroupRecord, RecordError> {
    Ok(match key_type {
        TYPE_METADATA => ConsumerGroupRecord::Metadata {
            group,
            epoch: Some(get_i32(buf)?),
        },
        TYPE_PARTITION_METADATA => {
            skip_partition_metadata(buf)?;
            ConsumerGroupRecord::PartitionMetadata { group, present: true }
        }
        TYPE_MEMBER => ConsumerGroupRecord::Member {
            group,
            member_id: second,
            value: Some(get_member(buf)?),
        },
        TYPE_TARGET_METADATA => ConsumerGroupRecord::TargetAssignmentMetadata {
            group,
            assignment_epoch: Some(get_i32(buf)?),
        },
        TYPE_TARGET_MEMBER => ConsumerGroupRecord::TargetAssignmentMember {
            group,
            member_id: second,
            partitions: Some(get_topic_partitions(buf)?),
        },
        TYPE_CURRENT_ASSIGNMENT => ConsumerGroupRecord::CurrentAssignment {
            group,
            member_id: second,
            value: Some(get_current(buf)?),
        },
        _ => ConsumerGroupRecord::RegularExpression {
            group,
            regex: second,
            value: Some(get_regex(buf)?),
        },
    })
}

fn put_compact_strings(out: &mut BytesMut, strings: &[String]) {
    put_compact_array_len(out, strings.len());
    for s in strings {
        put_compact_string(out, s);
    }
}

fn get_compact_strings(buf: &mut Bytes) -> Result<Vec<String>, RecordError> {
    let count = get_compact_array_count(buf, CSTRING_MIN)?;
    let mut strings = Vec::with_capacity(count);
    for _ in 0..count {
        strings.push(get_compact_string(buf)?);
    }
    Ok(strings)
}

fn put_member(out: &mut BytesMut, m: &MemberMetadata) {
    put_compact_nullable_string(out, m.instance_id.as_deref());
    put_compact_nullable_string(out, m.rack_id.as_deref());
    put_compact_string(out, &m.client_id);
    put_compact_string(out, &m.client_host);
    put_compact_strings(out, &m.subscribed_topic_names);
    put_compact_nullable_string(out, m.subscribed_topic_regex.as_deref());
    out.put_i32(m.rebalance_timeout_ms);
    put_compact_nullable_string(out, m.server_assignor.as_deref());
}

fn get_member(buf: &mut Bytes) -> Result<MemberMetadata, RecordError> {
    Ok(MemberMetadata {
        instance_id: get_compact_nullable_string(buf)?,
        rack_id: get_compact_nullable_string(buf)?,
        client_id: get_compact_string(buf)?,
        client_host: get_compact_string(buf)?,
        subscribed_topic_names: get_compact_strings(buf)?,
        subscribed_topic_regex: get_compact_nullable_string(buf)?,
        rebalance_timeout_ms: get_i32(buf)?,
        server_assignor: get_compact_nullable_string(buf)?,
    })
}

/// Topics in uuid order and partitions ascending; Kafka's own order is its hash maps', which
/// readers do not depend on.
fn put_topic_partitions(out: &mut BytesMut, topics: &TopicPartitions) {
    put_compact_array_len(out, topics.len());
    for (topic_id, partitions) in topics {
        put_uuid(out, topic_id);
        put_compact_array_len(out, partitions.len());
        for p in partitions {
            out.put_i32(*p);
        }
        put_tagged_fields(out, &[]);
    }
}

/// A topic listed twice has its partitions merged, as Kafka's replay does when it builds its
/// map of partitions by topic.
fn get_topic_partitions(buf: &mut Bytes) -> Result<TopicPartitions, RecordError> {
    let topics = get_compact_array_count(buf, TOPIC_PARTITIONS_MIN)?;
    let mut out = TopicPartitions::new();
    for _ in 0..topics {
        let topic_id = get_uuid(buf)?;
        let count = get_compact_array_count(buf, 4)?;
        let partitions = out.entry(topic_id).or_default();
        for _ in 0..count {
            partitions.insert(get_i32(buf)?);
        }
        skip_tagged_fields(buf)?;
    }
    Ok(out)
}

fn put_current(out: &mut BytesMut, c: &CurrentAssignment) {
    out.put_i32(c.member_epoch);
    out.put_i32(c.previous_member_epoch);
    out.put_i8(c.state.to_byte());
    put_topic_partitions(out, &c.assigned);
    put_topic_partitions(out, &c.pending_revocation);
}

fn get_current(buf: &mut Bytes) -> Result<CurrentAssignment, RecordError> {
    Ok(CurrentAssignment {
        member_epoch: get_i32(buf)?,
        previous_member_epoch: get_i32(buf)?,
        state: MemberState::from_byte(get_i8(buf)?),
        assigned: get_topic_partitions(buf)?,
        pending_revocation: get_topic_partitions(buf)?,
    })
}

fn put_regex(out: &mut BytesMut, r: &RegexTopics) {
    put_compact_strings(out, &r.topics);
    out.put_i64(r.version);
    out.put_i64(r.timestamp_ms);
}

fn get_regex(buf: &mut Bytes) -> Result<RegexTopics, RecordError> {
    Ok(RegexTopics {
        topics: get_compact_strings(buf)?,
        version: get_i64(buf)?,
        timestamp_ms: get_i64(buf)?,
    })
}

/// Walks a type-4 value's topics without keeping them: Laminar only needs to know the record
/// is well formed, and reads nothing else from it.
fn skip_partition_metadata(buf: &mut Bytes) -> Result<(), RecordError> {
    let topics = get_compact_array_count(buf, TOPIC_METADATA_MIN)?;
    for _ in 0..topics {
        get_uuid(buf)?;
        get_compact_string(buf)?;
        get_i32(buf)?;
        let partitions = get_compact_array_count(buf, PARTITION_RACKS_MIN)?;
        for _ in 0..partitions {
            get_i32(buf)?;
            let racks = get_compact_array_count(buf, CSTRING_MIN)?;
            for _ in 0..racks {
                get_compact_string(buf)?;
            }
            skip_tagged_fields(buf)?;
        }
        skip_tagged_fields(buf)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
