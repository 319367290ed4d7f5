//! The replicated metadata records: what the controller's Raft log carries.
//!
//! Named and shaped after Kafka's KRaft metadata records (`RegisterBrokerRecord`,
//! `PartitionChangeRecord`, ...), trimmed to the fields Laminar uses. One log entry carries a
//! [`RecordBatch`]: the records one controller request produced, applied in order.
//!
//! Plain data, `Send`; built by the active controller's task and applied by every node's state
//! machine (`state_machine.rs`) on that node's controller runtime.

use laminar_model::{BrokerEpoch, LeaderEpoch, NodeId, PartitionEpoch, ProducerId};
use serde::{Deserialize, Serialize};

/// Kafka's 16-byte topic id (a UUID's bytes).
pub type TopicId = [u8; 16];

/// A broker's epoch is the log index of the entry that registered it, as in Kafka (the
/// record's offset); an index past `i64` (never reached) saturates.
pub fn broker_epoch_at(log_index: u64) -> BrokerEpoch {
    BrokerEpoch::new(i64::try_from(log_index).unwrap_or(i64::MAX))
}

/// `-1`: the partition has no leader (every in-sync replica is fenced).
pub const NO_LEADER: NodeId = NodeId::NONE;

/// One listener a broker exposes (`listeners`), e.g. `PLAINTEXT://10.0.0.1:9092`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerEndpoint {
    pub listener_name: String,
    pub host: String,
    pub port: u16,
}

/// A broker joins (or rejoins after a restart). Its broker epoch is the log index of the entry
/// that carries this record, as in Kafka (the record's offset), so it is not a field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterBrokerRecord {
    pub broker_id: NodeId,
    /// New on every broker process start: tells a restart from a duplicate registration.
    pub incarnation_id: [u8; 16],
    pub endpoints: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceBrokerRecord {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnfenceBrokerRecord {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    pub name: String,
    pub topic_id: TopicId,
}

/// A new partition with its full state (topic creation, CreatePartitions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    pub topic_id: TopicId,
    pub partition_id: i32,
    pub replicas: Vec<NodeId>,
    pub isr: Vec<NodeId>,
    pub leader: NodeId,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
}

/// A change to an existing partition; `None` keeps the field. The epochs are not fields: the
/// state machine bumps them (leader_epoch when the leader changes, partition_epoch on any
/// change), so no writer can get them wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionChangeRecord {
    pub topic_id: TopicId,
    pub partition_id: i32,
    pub replicas: Option<Vec<NodeId>>,
    pub isr: Option<Vec<NodeId>>,
    pub leader: Option<NodeId>,
}

/// A change that also sets a partition's reassignment: Kafka's PartitionChangeRecord with its
/// `AddingReplicas` and `RemovingReplicas` fields (tagged fields there). A record of its own
/// rather than two more fields of [`PartitionChangeRecord`]: bincode has no optional fields,
/// so entries written before reassignments existed would no longer decode. `None` keeps the
/// field; epochs are bumped by the state machine as for [`PartitionChangeRecord`] (and the
/// leader epoch also when a replica leaves the replica list, as KRaft does).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionReassignmentChangeRecord {
    pub change: PartitionChangeRecord,
    pub adding_replicas: Option<Vec<NodeId>>,
    pub removing_replicas: Option<Vec<NodeId>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigResourceType {
    Topic,
    /// `resource_name` is a broker id, or empty for the cluster-wide default.
    Broker,
}

/// Sets (`value: Some`) or removes (`None`) one config key of a topic or broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigRecord {
    pub resource_type: ConfigResourceType,
    pub resource_name: String,
    pub name: String,
    pub value: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveTopicRecord {
    pub topic_id: TopicId,
}

/// A block of producer ids handed to a broker: ids below `next_producer_id` are taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdsRecord {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
    pub next_producer_id: ProducerId,
}

/// The cluster's id, written once by the first active controller with the first entry it
/// writes (decision 0012): brokers answer it in Metadata and DescribeCluster and keep it in
/// `meta.properties`, so that a data dir of another cluster is refused at start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterIdRecord {
    /// Kafka's form: a random UUID in URL-safe base64 without padding (22 characters).
    pub cluster_id: String,
}

/// Kafka's cluster id form for 16 random bytes: URL-safe base64 without padding, as
/// `kafka-storage.sh random-uuid` prints (`Uuid.toString()`).
pub fn cluster_id_text(bytes: [u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits: u32 = 0;
    let mut held = 0;
    let mut out = String::with_capacity(22);
    for byte in bytes {
        bits = (bits << 8) | u32::from(byte);
        held += 8;
        while held >= 6 {
            held -= 6;
            out.push(char::from(ALPHABET[((bits >> held) & 63) as usize]));
        }
    }
    if held > 0 {
        out.push(char::from(ALPHABET[((bits << (6 - held)) & 63) as usize]));
    }
    out
}

/// Kafka's ScramMechanism type of SCRAM-SHA-256 in [`UserScramCredentialRecord`].
pub const SCRAM_SHA_256: i8 = 1;
/// Kafka's ScramMechanism type of SCRAM-SHA-512.
pub const SCRAM_SHA_512: i8 = 2;

/// A SCRAM user's credential for one mechanism, added or replaced (Kafka's
/// UserScramCredentialRecord): what the server checks a proof against, derived from the
/// salted password the client computed. No password is ever in the log.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserScramCredentialRecord {
    pub name: String,
    /// [`SCRAM_SHA_256`] or [`SCRAM_SHA_512`].
    pub mechanism: i8,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl std::fmt::Debug for UserScramCredentialRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys are not passwords, but a log line has no use for them.
        f.debug_struct("UserScramCredentialRecord")
            .field("name", &self.name)
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// A SCRAM user's credential for one mechanism, removed (Kafka's
/// RemoveUserScramCredentialRecord).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveUserScramCredentialRecord {
    pub name: String,
    pub mechanism: i8,
}

/// One ACL (Kafka's AccessControlEntryRecord, without its id: an ACL is its own identity, as
/// Kafka's AclBinding is). Codes are Kafka's wire codes (resource type, pattern type,
/// operation, permission type); the brokers' `laminar-security` gives them meaning.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AccessControlEntryRecord {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    /// `kind:name`.
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission_type: i8,
}

/// An ACL removed (Kafka's RemoveAccessControlEntryRecord, by the ACL rather than its id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveAccessControlEntryRecord {
    pub entry: AccessControlEntryRecord,
}

/// Kafka's client quota entity types (`ClientQuotaEntity.USER`, `CLIENT_ID`, `IP`).
pub const QUOTA_ENTITY_USER: &str = "user";
pub const QUOTA_ENTITY_CLIENT_ID: &str = "client-id";
pub const QUOTA_ENTITY_IP: &str = "ip";

/// One part of a client quota's entity (Kafka's ClientQuotaRecord `EntityData`): a type and
/// the name of that type's entity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct QuotaEntityPart {
    /// Kafka's `EntityType`: [`QUOTA_ENTITY_USER`], [`QUOTA_ENTITY_CLIENT_ID`] or
    /// [`QUOTA_ENTITY_IP`].
    pub entity_type: String,
    /// Kafka's `EntityName`: the user's principal name, the client id or the IP address.
    /// `None` (Kafka's null) is the type's default entity, which `kafka-configs.sh` names
    /// `<default>`.
    pub entity_name: Option<String>,
}

/// One quota of a client entity set or removed (Kafka's ClientQuotaRecord).
///
/// `value` is a double, as in Kafka, so the record is compared by the value's bits (`Eq` for
/// [`MetadataRecord`]): the same bits are the same record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientQuotaRecord {
    /// Kafka's `Entity`: the parts naming the entity, at most one of each type. The controller
    /// writes them sorted by type ([`crate::QuotaEntity`]'s order).
    pub entity: Vec<QuotaEntityPart>,
    /// Kafka's `Key`: the quota's name (`producer_byte_rate`, `consumer_byte_rate`,
    /// `request_percentage`, `controller_mutation_rate`, `connection_creation_rate`).
    pub key: String,
    /// Kafka's `Value`: the quota; ignored when `remove`.
    pub value: f64,
    /// Kafka's `Remove`: the key is removed from the entity rather than set to `value`.
    pub remove: bool,
}

impl PartialEq for ClientQuotaRecord {
    fn eq(&self, other: &Self) -> bool {
        self.entity == other.entity
            && self.key == other.key
            && self.value.to_bits() == other.value.to_bits()
            && self.remove == other.remove
    }
}

impl Eq for ClientQuotaRecord {}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataRecord {
    RegisterBroker(RegisterBrokerRecord),
    FenceBroker(FenceBrokerRecord),
    UnfenceBroker(UnfenceBrokerRecord),
    Topic(TopicRecord),
    Partition(PartitionRecord),
    PartitionChange(PartitionChangeRecord),
    Config(ConfigRecord),
    RemoveTopic(RemoveTopicRecord),
    ProducerIds(ProducerIdsRecord),
    ClusterId(ClusterIdRecord),
    /// Appended last: bincode numbers variants, so earlier entries keep their meaning.
    PartitionReassignmentChange(PartitionReassignmentChangeRecord),
    UserScramCredential(UserScramCredentialRecord),
    RemoveUserScramCredential(RemoveUserScramCredentialRecord),
    AccessControlEntry(AccessControlEntryRecord),
    RemoveAccessControlEntry(RemoveAccessControlEntryRecord),
    ClientQuota(ClientQuotaRecord),
    UnregisterBroker(UnregisterBrokerRecord),
}

/// A broker removed from the cluster (Kafka's UnregisterBrokerRecord). It holds no replica:
/// the controller refuses to remove one that does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnregisterBrokerRecord {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
}

/// The application data of one Raft entry: the records of one controller decision, applied in
/// order. A record that does not fit the state is skipped (and counted), never a panic.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordBatch {
    pub records: Vec<MetadataRecord>,
}

impl std::fmt::Display for RecordBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RecordBatch({} records)", self.records.len())
    }
}

/// What applying one entry did: its log index (a broker epoch when it registered a broker).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyOutcome {
    pub log_index: u64,
}
