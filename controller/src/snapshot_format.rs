//! The bytes of a snapshot's state (`ClusterMetadata`), in the `snapshot` file and in Raft's
//! InstallSnapshot alike, and how the formats written before are still read.
//!
//! * **Format 4** (now): the 8 bytes `LMNMETA4`, then bincode of [`ClusterMetadata`].
//! * **Format 3** (before client quotas were in the metadata): `LMNMETA3`, then bincode of the
//!   same struct without its last field, `client_quotas`.
//! * **Format 2** (before SCRAM users and ACLs were in the metadata): `LMNMETA2`, then bincode
//!   of the same struct without its last fields, `scram_credentials` and `acls`.
//! * **Format 1** (before partitions had `adding_replicas`/`removing_replicas`): bincode of
//!   the same struct without those two fields, starting with the broker count as a u64. A
//!   count equal to the tag read as a u64 (about 3.6 × 10^18) cannot be, so the first 8 bytes
//!   tell the formats apart. bincode has no optional fields: a struct that grows needs a new
//!   format here (and a new variant for a log record, see `records.rs`).

use laminar_model::{LeaderEpoch, NodeId, PartitionEpoch, ProducerId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Deserialize;

use crate::disk_format::{decode_body, FormatError};
use crate::metadata::{BrokerRegistration, ClusterMetadata, PartitionState, TopicState};
use crate::records::{AccessControlEntryRecord, TopicId, UserScramCredentialRecord};

pub const STATE_TAG: [u8; 8] = *b"LMNMETA4";
const STATE_TAG_V3: [u8; 8] = *b"LMNMETA3";
const STATE_TAG_V2: [u8; 8] = *b"LMNMETA2";

pub fn encode_metadata(metadata: &ClusterMetadata) -> Result<Vec<u8>, FormatError> {
    let mut bytes = STATE_TAG.to_vec();
    bincode::serialize_into(&mut bytes, metadata).map_err(FormatError::Encode)?;
    Ok(bytes)
}

/// Decodes any format (bounded as every body read from disk or the network).
pub fn decode_metadata(bytes: &[u8]) -> Result<ClusterMetadata, FormatError> {
    if let Some(body) = bytes.strip_prefix(&STATE_TAG) {
        return decode_body(body);
    }
    if let Some(body) = bytes.strip_prefix(&STATE_TAG_V3) {
        return Ok(decode_body::<MetadataV3>(body)?.upgrade());
    }
    let v2 = match bytes.strip_prefix(&STATE_TAG_V2) {
        Some(body) => decode_body::<MetadataV2>(body)?,
        None => decode_body::<MetadataV1>(bytes)?.upgrade(),
    };
    Ok(v2.upgrade().upgrade())
}

/// Format 3's state: [`ClusterMetadata`] before `client_quotas`.
#[derive(Deserialize)]
struct MetadataV3 {
    brokers: BTreeMap<NodeId, BrokerRegistration>,
    topics: BTreeMap<TopicId, Arc<TopicState>>,
    topic_ids_by_name: BTreeMap<String, TopicId>,
    broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    next_producer_id: ProducerId,
    cluster_id: Option<String>,
    scram_credentials: BTreeMap<(String, i8), UserScramCredentialRecord>,
    acls: Arc<BTreeSet<AccessControlEntryRecord>>,
}

impl MetadataV3 {
    fn upgrade(self) -> ClusterMetadata {
        ClusterMetadata {
            brokers: self.brokers,
            topics: self.topics,
            topic_ids_by_name: self.topic_ids_by_name,
            broker_configs: self.broker_configs,
            next_producer_id: self.next_producer_id,
            cluster_id: self.cluster_id,
            scram_credentials: self.scram_credentials,
            acls: self.acls,
            client_quotas: Arc::default(),
        }
    }
}

/// Format 2's state: [`ClusterMetadata`] before `scram_credentials` and `acls`.
#[derive(Deserialize)]
struct MetadataV2 {
    brokers: BTreeMap<NodeId, BrokerRegistration>,
    topics: BTreeMap<TopicId, Arc<TopicState>>,
    topic_ids_by_name: BTreeMap<String, TopicId>,
    broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    next_producer_id: ProducerId,
    cluster_id: Option<String>,
}

impl MetadataV2 {
    fn upgrade(self) -> MetadataV3 {
        MetadataV3 {
            brokers: self.brokers,
            topics: self.topics,
            topic_ids_by_name: self.topic_ids_by_name,
            broker_configs: self.broker_configs,
            next_producer_id: self.next_producer_id,
            cluster_id: self.cluster_id,
            scram_credentials: BTreeMap::new(),
            acls: Arc::default(),
        }
    }
}

#[derive(Deserialize)]
struct PartitionV1 {
    replicas: Vec<NodeId>,
    isr: Vec<NodeId>,
    leader: NodeId,
    leader_epoch: LeaderEpoch,
    partition_epoch: PartitionEpoch,
}

#[derive(Deserialize)]
struct TopicV1 {
    name: String,
    topic_id: TopicId,
    configs: BTreeMap<String, String>,
    partitions: BTreeMap<i32, PartitionV1>,
}

#[derive(Deserialize)]
struct MetadataV1 {
    brokers: BTreeMap<NodeId, BrokerRegistration>,
    topics: BTreeMap<TopicId, TopicV1>,
    topic_ids_by_name: BTreeMap<String, TopicId>,
    broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    next_producer_id: ProducerId,
    cluster_id: Option<String>,
}

impl MetadataV1 {
    fn upgrade(self) -> MetadataV2 {
        let topics = self.topics.into_iter().map(|(id, t)| {
            let partitions = t.partitions.into_iter().map(|(index, p)| {
                let state = PartitionState {
                    replicas: p.replicas,
                    isr: p.isr,
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    adding_replicas: Vec::new(),
                    removing_replicas: Vec::new(),
                };
                (index, state)
            });
            let topic = TopicState {
                name: t.name,
                topic_id: t.topic_id,
                configs: t.configs,
                partitions: partitions.collect(),
            };
            (id, Arc::new(topic))
        });
        MetadataV2 {
            brokers: self.brokers,
            topics: topics.collect(),
            topic_ids_by_name: self.topic_ids_by_name,
            broker_configs: self.broker_configs,
            next_producer_id: self.next_producer_id,
            cluster_id: self.cluster_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{QuotaEntity, QuotaValue};
    use laminar_model::BrokerEpoch;
    use serde::Serialize;

    /// Format 1 as it was written: the structs before the reassignment fields.
    #[derive(Serialize)]
    struct OldPartition(Vec<i32>, Vec<i32>, i32, i32, i32);
    #[derive(Serialize)]
    struct OldTopic(
        String,
        TopicId,
        BTreeMap<String, String>,
        BTreeMap<i32, OldPartition>,
    );
    #[derive(Serialize)]
    struct OldMetadata(
        BTreeMap<NodeId, BrokerRegistration>,
        BTreeMap<TopicId, OldTopic>,
        BTreeMap<String, TopicId>,
        BTreeMap<String, BTreeMap<String, String>>,
        i64,
        Option<String>,
    );

    /// A format 1 snapshot (one broker, one topic of one partition), decoded.
    fn decoded_format_one() -> ClusterMetadata {
        let broker = BrokerRegistration {
            broker_id: NodeId::new(1),
            broker_epoch: BrokerEpoch::new(7),
            incarnation_id: [3; 16],
            endpoints: Vec::new(),
            rack: None,
            fenced: false,
        };
        let partition = OldPartition(vec![1], vec![1], 1, 4, 9);
        let topic = OldTopic(
            "t".into(),
            [5; 16],
            BTreeMap::new(),
            BTreeMap::from([(0, partition)]),
        );
        let old = OldMetadata(
            BTreeMap::from([(NodeId::new(1), broker)]),
            BTreeMap::from([([5; 16], topic)]),
            BTreeMap::from([("t".to_string(), [5; 16])]),
            BTreeMap::new(),
            2000,
            Some("cluster".into()),
        );
        decode_metadata(&bincode::serialize(&old).unwrap()).unwrap()
    }

    #[test]
    fn a_snapshot_written_before_reassignments_still_decodes() {
        let md = decoded_format_one();
        let p = md.partition_by_name("t", 0).unwrap();
        assert_eq!(
            (p.leader.get(), p.leader_epoch.get(), p.partition_epoch.get()),
            (1, 4, 9)
        );
        assert!(!p.is_reassigning());
        assert_eq!(md.next_producer_id, ProducerId::new(2000));
        assert_eq!(md.cluster_id.as_deref(), Some("cluster"));
    }

    #[test]
    fn format_two_decodes_without_users_acls_or_quotas() {
        let mut md = decoded_format_one();
        let topic = md.topics.get_mut(&[5; 16]).unwrap();
        let p = Arc::make_mut(topic).partitions.get_mut(&0).unwrap();
        p.adding_replicas = vec![NodeId::new(1)];
        let v2 = (
            &md.brokers,
            &md.topics,
            &md.topic_ids_by_name,
            &md.broker_configs,
            md.next_producer_id,
            &md.cluster_id,
        );
        let mut bytes = b"LMNMETA2".to_vec();
        bincode::serialize_into(&mut bytes, &v2).unwrap();
        assert_eq!(decode_metadata(&bytes).unwrap(), md);
    }

    /// The format 1 state with a reassignment, a SCRAM user and an ACL: what format 3 holds.
    fn with_users_and_acls() -> ClusterMetadata {
        let mut md = decoded_format_one();
        let topic = md.topics.get_mut(&[5; 16]).unwrap();
        let p = Arc::make_mut(topic).partitions.get_mut(&0).unwrap();
        p.adding_replicas = vec![NodeId::new(1)];
        let alice = UserScramCredentialRecord {
            name: "alice".into(),
            mechanism: crate::records::SCRAM_SHA_512,
            salt: vec![1; 16],
            stored_key: vec![2; 64],
            server_key: vec![3; 64],
            iterations: 4096,
        };
        md.scram_credentials
            .insert(("alice".into(), alice.mechanism), alice);
        let read = AccessControlEntryRecord {
            resource_type: 2,
            resource_name: "orders-".into(),
            pattern_type: 4,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: 3,
            permission_type: 3,
        };
        Arc::make_mut(&mut md.acls).insert(read);
        md
    }

    #[test]
    fn format_three_decodes_without_quotas() {
        let md = with_users_and_acls();
        let v3 = (
            &md.brokers,
            &md.topics,
            &md.topic_ids_by_name,
            &md.broker_configs,
            md.next_producer_id,
            &md.cluster_id,
            &md.scram_credentials,
            &md.acls,
        );
        let mut bytes = b"LMNMETA3".to_vec();
        bincode::serialize_into(&mut bytes, &v3).unwrap();
        let decoded = decode_metadata(&bytes).unwrap();
        assert!(decoded.client_quotas.is_empty());
        assert_eq!(decoded, md);
    }

    /// Format 3 bytes as written before quotas: an empty cluster with producer ids handed out
    /// up to 1000 and the cluster id `ab`.
    #[test]
    fn format_three_golden_bytes_decode() {
        let mut bytes = b"LMNMETA3".to_vec();
        bytes.extend([0; 8 * 4]); // brokers, topics, topic ids by name, broker configs
        bytes.extend(1000_i64.to_le_bytes()); // next producer id
        bytes.extend([1, 2, 0, 0, 0, 0, 0, 0, 0, b'a', b'b']); // Some("ab")
        bytes.extend([0; 8 * 2]); // SCRAM credentials, ACLs
        let decoded = decode_metadata(&bytes).unwrap();
        let expected = ClusterMetadata {
            next_producer_id: ProducerId::new(1000),
            cluster_id: Some("ab".into()),
            ..ClusterMetadata::default()
        };
        assert_eq!(decoded, expected);
        // The same state now encodes as format 4: format 3's bytes, then no quotas.
        let mut v4 = b"LMNMETA4".to_vec();
        v4.extend(&bytes[8..]);
        v4.extend([0; 8]);
        assert_eq!(encode_metadata(&expected).unwrap(), v4);
    }

    #[test]
    fn format_four_round_trips_with_users_acls_and_quotas() {
        let mut md = with_users_and_acls();
        let part = |entity_type: &str, name: Option<&str>| crate::records::QuotaEntityPart {
            entity_type: entity_type.into(),
            entity_name: name.map(str::to_string),
        };
        let alice_app = QuotaEntity::new(vec![part("client-id", Some("app")), part("user", Some("alice"))]);
        let default_ip = QuotaEntity::new(vec![part("ip", None)]);
        let quotas = Arc::make_mut(&mut md.client_quotas);
        quotas.insert(
            alice_app,
            BTreeMap::from([
                ("producer_byte_rate".to_string(), QuotaValue(1_048_576.0)),
                ("request_percentage".to_string(), QuotaValue(12.5)),
            ]),
        );
        quotas.insert(
            default_ip,
            BTreeMap::from([("connection_creation_rate".to_string(), QuotaValue(20.0))]),
        );
        let bytes = encode_metadata(&md).unwrap();
        assert_eq!(&bytes[..8], b"LMNMETA4");
        let decoded = decode_metadata(&bytes).unwrap();
        assert_eq!(decoded.client_quotas.len(), 2);
        assert_eq!(decoded, md);
    }
}
