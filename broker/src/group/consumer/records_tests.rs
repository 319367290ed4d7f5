//! Golden bytes, round trips and refused garbage for the consumer group records.

use super::*;
use crate::internal_records::FieldError;

fn topic_a() -> Uuid {
    Uuid::from_bytes([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16])
}

fn topic_b() -> Uuid {
    Uuid::from_bytes([17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32])
}

fn parts(list: &[(Uuid, &[i32])]) -> TopicPartitions {
    list.iter()
        .map(|(t, p)| (*t, p.iter().copied().collect()))
        .collect()
}

fn member() -> ConsumerGroupRecord {
    ConsumerGroupRecord::Member {
        group: "g".into(),
        member_id: "m".into(),
        value: Some(MemberMetadata {
            instance_id: None,
            rack_id: Some("r".into()),
            client_id: "c".into(),
            client_host: "h".into(),
            subscribed_topic_names: vec!["t".into()],
            subscribed_topic_regex: None,
            server_assignor: Some("uniform".into()),
            rebalance_timeout_ms: 30_000,
        }),
    }
}

fn current() -> ConsumerGroupRecord {
    ConsumerGroupRecord::CurrentAssignment {
        group: "g".into(),
        member_id: "m".into(),
        value: Some(CurrentAssignment {
            member_epoch: 5,
            previous_member_epoch: 4,
            state: MemberState::UnrevokedPartitions,
            assigned: parts(&[(topic_a(), &[0, 1])]),
            pending_revocation: parts(&[(topic_b(), &[2])]),
        }),
    }
}

fn target_member() -> ConsumerGroupRecord {
    ConsumerGroupRecord::TargetAssignmentMember {
        group: "g".into(),
        member_id: "m".into(),
        partitions: Some(parts(&[(topic_a(), &[3])])),
    }
}

fn regex() -> ConsumerGroupRecord {
    ConsumerGroupRecord::RegularExpression {
        group: "g".into(),
        regex: "a.*".into(),
        value: Some(RegexTopics {
            topics: vec!["ab".into()],
            version: 3,
            timestamp_ms: 9,
        }),
    }
}

/// Every variant with a value, then every variant as a tombstone.
fn samples() -> Vec<ConsumerGroupRecord> {
    let mut all = vec![
        ConsumerGroupRecord::Metadata {
            group: "grp".into(),
            epoch: Some(7),
        },
        ConsumerGroupRecord::PartitionMetadata {
            group: "grp".into(),
            present: true,
        },
        member(),
        ConsumerGroupRecord::TargetAssignmentMetadata {
            group: "grp".into(),
            assignment_epoch: Some(-1),
        },
        target_member(),
        current(),
        regex(),
        ConsumerGroupRecord::Member {
            group: "".into(),
            member_id: "".into(),
            value: Some(MemberMetadata {
                instance_id: Some("i".into()),
                rack_id: None,
                client_id: "".into(),
                client_host: "".into(),
                subscribed_topic_names: vec![],
                subscribed_topic_regex: Some("x|y".into()),
                server_assignor: None,
                rebalance_timeout_ms: -1,
            }),
        },
        ConsumerGroupRecord::CurrentAssignment {
            group: "g".into(),
            member_id: "m".into(),
            value: Some(CurrentAssignment {
                member_epoch: 0,
                previous_member_epoch: -1,
                state: MemberState::Unknown,
                assigned: parts(&[(topic_a(), &[]), (topic_b(), &[0, 7, 300])]),
                pending_revocation: TopicPartitions::new(),
            }),
        },
    ];
    let tombstones: Vec<_> = all.iter().map(as_tombstone).collect();
    all.extend(tombstones);
    all
}

fn as_tombstone(r: &ConsumerGroupRecord) -> ConsumerGroupRecord {
    let mut r = r.clone();
    match &mut r {
        ConsumerGroupRecord::Metadata { epoch, .. } => *epoch = None,
        ConsumerGroupRecord::PartitionMetadata { present, .. } => *present = false,
        ConsumerGroupRecord::Member { value, .. } => *value = None,
        ConsumerGroupRecord::TargetAssignmentMetadata { assignment_epoch, .. } => *assignment_epoch = None,
        ConsumerGroupRecord::TargetAssignmentMember { partitions, .. } => *partitions = None,
        ConsumerGroupRecord::CurrentAssignment { value, .. } => *value = None,
        ConsumerGroupRecord::RegularExpression { value, .. } => *value = None,
    }
    r
}

fn bytes_of(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn metadata_golden_bytes() {
    let r = ConsumerGroupRecord::Metadata {
        group: "grp".into(),
        epoch: Some(7),
    };
    let key: &[u8] = &[
        0, 3, // record type 3
        0, 3, b'g', b'r', b'p', // string group
    ];
    let value: &[u8] = &[
        0, 0, // value version 0
        0, 0, 0, 7, // i32 epoch
        0, // no tagged fields
    ];
    assert_eq!(r.key().as_ref(), key);
    assert_eq!(r.value().as_deref(), Some(value));
}

#[test]
fn member_golden_bytes() {
    let key: &[u8] = &[
        0, 5, // record type 5
        0, 1, b'g', // string group
        0, 1, b'm', // string member id
    ];
    let value = bytes_of(&[
        &[0, 0],             // value version 0
        &[0],                // instance id: null
        &[2, b'r'],          // rack id "r": length 1 + 1
        &[2, b'c'],          // client id "c"
        &[2, b'h'],          // client host "h"
        &[2, 2, b't'],       // subscribed topic names: 1 + 1 elements, "t"
        &[0],                // subscribed topic regex: null
        &[0, 0, 0x75, 0x30], // rebalance timeout 30000 ms
        &[8],                // server assignor: length 7 + 1
        b"uniform",
        &[0], // no tagged fields (no classic member metadata)
    ]);
    assert_eq!(member().key().as_ref(), key);
    assert_eq!(member().value().as_deref(), Some(value.as_slice()));
}

#[test]
fn current_assignment_golden_bytes() {
    let key: &[u8] = &[
        0, 8, // record type 8
        0, 1, b'g', // string group
        0, 1, b'm', // string member id
    ];
    let value = bytes_of(&[
        &[0, 0],       // value version 0
        &[0, 0, 0, 5], // member epoch 5
        &[0, 0, 0, 4], // previous member epoch 4
        &[1],          // state: unrevoked partitions
        &[2],          // assigned: 1 + 1 topics
        topic_a().as_bytes(),
        &[3, 0, 0, 0, 0, 0, 0, 0, 1], // partitions: 2 + 1, then 0 and 1
        &[0],                         // no tagged fields in the topic
        &[2],                         // pending revocation: 1 + 1 topics
        topic_b().as_bytes(),
        &[2, 0, 0, 0, 2], // partitions: 1 + 1, then 2
        &[0],             // no tagged fields in the topic
        &[0],             // no tagged fields in the value
    ]);
    assert_eq!(current().key().as_ref(), key);
    assert_eq!(current().value().as_deref(), Some(value.as_slice()));
}

#[test]
fn target_assignment_member_golden_bytes() {
    let key: &[u8] = &[
        0, 7, // record type 7
        0, 1, b'g', // string group
        0, 1, b'm', // string member id
    ];
    let value = bytes_of(&[
        &[0, 0], // value version 0
        &[2],    // topics: 1 + 1
        topic_a().as_bytes(),
        &[2, 0, 0, 0, 3], // partitions: 1 + 1, then 3
        &[0],             // no tagged fields in the topic
        &[0],             // no tagged fields in the value
    ]);
    assert_eq!(target_member().key().as_ref(), key);
    assert_eq!(target_member().value().as_deref(), Some(value.as_slice()));
}

#[test]
fn other_golden_bytes() {
    let value = bytes_of(&[
        &[0, 0],                   // value version 0
        &[2, 3, b'a', b'b'],       // topics: 1 + 1, "ab"
        &[0, 0, 0, 0, 0, 0, 0, 3], // version 3
        &[0, 0, 0, 0, 0, 0, 0, 9], // timestamp 9
        &[0],                      // no tagged fields
    ]);
    let key: &[u8] = &[0, 16, 0, 1, b'g', 0, 3, b'a', b'.', b'*'];
    assert_eq!(regex().key().as_ref(), key);
    assert_eq!(regex().value().as_deref(), Some(value.as_slice()));
    let target_epoch = ConsumerGroupRecord::TargetAssignmentMetadata {
        group: "g".into(),
        assignment_epoch: Some(2),
    };
    assert_eq!(target_epoch.key().as_ref(), &[0, 6, 0, 1, b'g']);
    assert_eq!(target_epoch.value().as_deref(), Some(&[0, 0, 0, 0, 0, 2, 0][..]));
    let partition_metadata = ConsumerGroupRecord::PartitionMetadata {
        group: "g".into(),
        present: true,
    };
    assert_eq!(partition_metadata.key().as_ref(), &[0, 4, 0, 1, b'g']);
    assert_eq!(partition_metadata.value().as_deref(), Some(&[0, 0, 1, 0][..]));
}

#[test]
fn every_variant_round_trips() {
    for r in samples() {
        let decoded = ConsumerGroupRecord::decode(r.key(), r.value());
        assert_eq!(decoded, Ok(r.clone()), "{r:?}");
    }
}

#[test]
fn tombstones_have_no_value() {
    for r in samples().iter().map(as_tombstone) {
        assert_eq!(r.value(), None, "{r:?}");
    }
}

#[test]
fn key_types() {
    for t in [3, 4, 5, 6, 7, 8, 16] {
        assert!(ConsumerGroupRecord::is_consumer_key_type(t));
    }
    for t in [-1, 0, 1, 2, 9, 10, 15, 17, 100] {
        assert!(!ConsumerGroupRecord::is_consumer_key_type(t));
    }
    assert_eq!(member().group(), "g");
    assert_eq!(samples()[0].group(), "grp");
}

#[test]
fn member_state_bytes() {
    for (state, byte) in [
        (MemberState::Stable, 0),
        (MemberState::UnrevokedPartitions, 1),
        (MemberState::UnreleasedPartitions, 2),
        (MemberState::Unknown, 127),
    ] {
        assert_eq!(state.to_byte(), byte);
        assert_eq!(MemberState::from_byte(byte), state);
    }
    assert_eq!(MemberState::from_byte(3), MemberState::Unknown);
    assert_eq!(MemberState::from_byte(-1), MemberState::Unknown);
}

/// Kafka 4.1 writes the metadata hash as tag 0 of the group epoch value.
#[test]
fn kafka_tagged_fields_are_skipped() {
    let key = Bytes::from_static(&[0, 3, 0, 1, b'g']);
    let value = Bytes::from_static(&[
        0, 0, // version 0
        0, 0, 0, 9, // epoch 9
        2, // two tagged fields
        0, 8, 1, 2, 3, 4, 5, 6, 7, 8, // tag 0 (metadata hash), 8 bytes
        1, 8, 0, 0, 1, 2, 3, 4, 5, 6, // tag 1 (creation time), 8 bytes
    ]);
    assert_eq!(
        ConsumerGroupRecord::decode(key, Some(value)),
        Ok(ConsumerGroupRecord::Metadata {
            group: "g".into(),
            epoch: Some(9),
        })
    );
    // A classic member's metadata (tag 0 of the member value) is skipped.
    let mut value = member().value().unwrap().to_vec();
    value.pop();
    value.extend_from_slice(&[1, 0, 6, 0, 0, 0x27, 0x10, 1, 0]);
    let decoded = ConsumerGroupRecord::decode(member().key(), Some(value.into()));
    assert_eq!(decoded, Ok(member()));
}

/// Later Kafka versions tag each topic of an assignment (assignment epochs, tag 0).
#[test]
fn nested_tagged_fields_are_skipped() {
    let value = bytes_of(&[
        &[0, 0, 2],
        topic_a().as_bytes(),
        &[2, 0, 0, 0, 3],
        &[1, 0, 6, 2, 0, 0, 0, 1, 0], // tag 0, 6 bytes: [1 epoch], no tags
        &[0],
    ]);
    let decoded = ConsumerGroupRecord::decode(target_member().key(), Some(value.into()));
    assert_eq!(decoded, Ok(target_member()));
}

#[test]
fn partition_metadata_from_kafka_is_read() {
    let value = bytes_of(&[
        &[0, 0, 2], // version 0, 1 + 1 topics
        topic_a().as_bytes(),
        &[2, b't'],          // name "t"
        &[0, 0, 0, 1],       // 1 partition
        &[2],                // 1 + 1 partition metadata
        &[0, 0, 0, 0],       // partition 0
        &[2, 3, b'r', b'1'], // racks: "r1"
        &[0, 0, 0],          // tags of the partition, of the topic, of the value
    ]);
    let key = Bytes::from_static(&[0, 4, 0, 1, b'g']);
    let decoded = ConsumerGroupRecord::decode(key, Some(value.into()));
    let expected = ConsumerGroupRecord::PartitionMetadata {
        group: "g".into(),
        present: true,
    };
    assert_eq!(decoded, Ok(expected));
}

#[test]
fn duplicate_topics_merge() {
    let value = bytes_of(&[
        &[0, 0, 3],
        topic_a().as_bytes(),
        &[2, 0, 0, 0, 1, 0],
        topic_a().as_bytes(),
        &[2, 0, 0, 0, 3, 0, 0],
    ]);
    let decoded = ConsumerGroupRecord::decode(target_member().key(), Some(value.into()));
    let expected = ConsumerGroupRecord::TargetAssignmentMember {
        group: "g".into(),
        member_id: "m".into(),
        partitions: Some(parts(&[(topic_a(), &[1, 3])])),
    };
    assert_eq!(decoded, Ok(expected));
}

#[test]
fn unknown_versions_and_types_are_refused() {
    let mut value = member().value().unwrap().to_vec();
    value[1] = 1;
    let decoded = ConsumerGroupRecord::decode(member().key(), Some(value.into()));
    assert_eq!(
        decoded,
        Err(RecordError::UnknownVersion {
            what: "ConsumerGroupMemberMetadataValue",
            version: 1
        })
    );
    for key_type in [0i16, 2, 9, 17] {
        let mut key = member().key().to_vec();
        key[..2].copy_from_slice(&key_type.to_be_bytes());
        let decoded = ConsumerGroupRecord::decode(key.into(), None);
        assert!(matches!(decoded, Err(RecordError::UnknownVersion { .. })));
    }
}

#[test]
fn truncated_keys_and_values_are_errors() {
    for r in samples() {
        let key = r.key();
        for len in 0..key.len() {
            let decoded = ConsumerGroupRecord::decode(key.slice(..len), r.value());
            assert!(decoded.is_err(), "{r:?} key cut at {len}");
        }
        let Some(value) = r.value() else { continue };
        for len in 0..value.len() {
            let decoded = ConsumerGroupRecord::decode(key.clone(), Some(value.slice(..len)));
            assert!(decoded.is_err(), "{r:?} value cut at {len}");
        }
    }
}

fn decode_value(key: &ConsumerGroupRecord, value: Vec<u8>) -> Result<(), RecordError> {
    ConsumerGroupRecord::decode(key.key(), Some(value.into())).map(|_| ())
}

#[test]
fn absurd_counts_are_errors() {
    let two_pow_31: &[u8] = &[0x80, 0x80, 0x80, 0x80, 0x08];
    let max_u32: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0x0f];
    let too_long: &[u8] = &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
    let truncated = Err(RecordError::Field(FieldError::Truncated));
    for count in [two_pow_31, max_u32, too_long] {
        // As the topic count, the partition count, a string length, a tag count, a tag size.
        let topics = bytes_of(&[&[0, 0], count]);
        assert!(decode_value(&target_member(), topics).is_err());
        let partitions = bytes_of(&[&[0, 0, 2], topic_a().as_bytes(), count, &[0, 0]]);
        assert!(decode_value(&target_member(), partitions).is_err());
        let string = bytes_of(&[&[0, 0, 0], count, b"abc"]);
        assert!(decode_value(&member(), string).is_err());
        let regex_topics = bytes_of(&[&[0, 0], count, &[0; 20]]);
        assert!(decode_value(&regex(), regex_topics).is_err());
        let metadata = ConsumerGroupRecord::PartitionMetadata {
            group: "g".into(),
            present: true,
        };
        assert!(decode_value(&metadata, bytes_of(&[&[0, 0], count])).is_err());
        let tags = bytes_of(&[&[0, 0, 0, 0, 0, 1], count, &[0, 0]]);
        assert!(decode_value(&samples()[0], tags).is_err());
        let tag_size = bytes_of(&[&[0, 0, 0, 0, 0, 1, 1, 0], count, &[0, 0]]);
        assert!(decode_value(&samples()[0], tag_size).is_err());
    }
    let topics = bytes_of(&[&[0, 0], two_pow_31, &[0; 64]]);
    assert_eq!(decode_value(&target_member(), topics), truncated);
    let topics = bytes_of(&[&[0, 0], max_u32, &[0; 64]]);
    assert_eq!(
        decode_value(&target_member(), topics),
        Err(RecordError::Field(FieldError::NegativeLength(-2)))
    );
    // A huge i16 string length in a key.
    let key = Bytes::from_static(&[0, 5, 0x7f, 0xff, 0]);
    let decoded = ConsumerGroupRecord::decode(key, None).map(|_| ());
    assert_eq!(decoded, truncated);
}

#[test]
fn nulls_where_the_schema_forbids_them_are_errors() {
    let null_topics = vec![0, 0, 0, 0];
    assert!(decode_value(&target_member(), null_topics).is_err());
    // Client id is not nullable.
    let null_client = vec![0, 0, 0, 0, 0, 2, b'h', 1, 0, 0, 0, 0, 0, 0, 0];
    assert!(decode_value(&member(), null_client).is_err());
}

/// Corrupting any byte of any record gives a record or an error, never a panic.
#[test]
fn corrupt_bytes_never_panic() {
    for r in samples() {
        let (key, value) = (r.key(), r.value());
        for i in 0..key.len() {
            for b in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                let mut k = key.to_vec();
                k[i] = b;
                let _ = ConsumerGroupRecord::decode(k.into(), value.clone());
            }
        }
        let Some(value) = value else { continue };
        for i in 0..value.len() {
            for b in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                let mut v = value.to_vec();
                v[i] = b;
                let _ = ConsumerGroupRecord::decode(key.clone(), Some(v.into()));
            }
        }
    }
}
