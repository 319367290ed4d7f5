//! The controller's own requests and answers (besides Raft's). A refused request, or part of
//! one, answers a [`Refusal`] in place of its result.
//!
//! Plain data, `Send`: built on any thread, carried to the controller runtime by a
//! [`crate::ControllerHandle`], and over the network (bincode) when forwarded to the active
//! controller.

use std::collections::BTreeMap;

pub use laminar_model::TopicPartition;
use laminar_model::{BrokerEpoch, LeaderEpoch, NodeId, PartitionEpoch, ProducerId};
use serde::{Deserialize, Serialize};

use crate::records::{
    AccessControlEntryRecord, BrokerEndpoint, QuotaEntityPart, TopicId, UserScramCredentialRecord,
};
use crate::refusal::Refusal;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatableTopic {
    pub name: String,
    /// Ignored when `assignments` is given (Kafka asks for -1 then).
    pub num_partitions: i32,
    /// Ignored when `assignments` is given.
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
    /// Kafka's manual assignment: partition `i`'s replicas, the preferred leader first. Empty:
    /// the controller places the replicas (`placement.rs`).
    pub assignments: Vec<Vec<NodeId>>,
    /// The id the topic keeps: a single-node topic migrating into the quorum keeps the id its
    /// partitions' `partition.metadata` names. `None`: the controller picks one. Not from
    /// clients (Kafka's CreateTopics has no id).
    #[serde(default)]
    pub topic_id: Option<crate::records::TopicId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionType {
    /// The first replica, when it is in the ISR and unfenced.
    Preferred,
    /// Any unfenced replica when no ISR member can lead (may lose acknowledged data).
    Unclean,
}

/// One partition of an AlterPartitionReassignments request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionReassignment {
    pub topic: String,
    pub partition: i32,
    /// The target replicas, preferred leader first; `None` cancels the reassignment.
    pub replicas: Option<Vec<NodeId>>,
}

/// Whether a reassignment may change the number of replicas (KIP-860; Kafka's default: yes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReplicationFactorChange {
    Allowed,
    Refused,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReassignmentResult {
    pub topic: String,
    pub partition: i32,
    pub result: Result<(), Refusal>,
}

/// An ISR change from a partition's leader (Kafka's AlterPartition, one partition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlterPartitionRequest {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
    pub topic_id: TopicId,
    pub partition: i32,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
    pub new_isr: Vec<NodeId>,
}

/// One entity of an AlterClientQuotas request (Kafka's `EntryData`): its quotas set or removed.
///
/// The values are doubles, as in Kafka, so it is compared by their bits (`Eq` for
/// [`ControllerRequest`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientQuotaAlteration {
    /// The parts naming the entity (Kafka's `Entity`), in any order.
    pub entity: Vec<QuotaEntityPart>,
    /// Kafka's `Ops`: `(key, Some(value))` sets the quota `key`, `(key, None)` removes it.
    pub ops: Vec<(String, Option<f64>)>,
}

impl PartialEq for ClientQuotaAlteration {
    fn eq(&self, other: &Self) -> bool {
        let bits = |ops: &[(String, Option<f64>)]| -> Vec<(String, Option<u64>)> {
            let each = ops
                .iter()
                .map(|(key, value)| (key.clone(), value.map(f64::to_bits)));
            each.collect()
        };
        self.entity == other.entity && bits(&self.ops) == bits(&other.ops)
    }
}

impl Eq for ClientQuotaAlteration {}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerRequest {
    RegisterBroker {
        broker_id: NodeId,
        incarnation_id: [u8; 16],
        endpoints: Vec<BrokerEndpoint>,
        rack: Option<String>,
    },
    BrokerHeartbeat {
        broker_id: NodeId,
        broker_epoch: BrokerEpoch,
    },
    CreateTopics {
        topics: Vec<CreatableTopic>,
    },
    /// Grows each named topic to `count` partitions.
    CreatePartitions {
        topics: Vec<(String, i32)>,
    },
    DeleteTopics {
        names: Vec<String>,
    },
    AlterPartition(AlterPartitionRequest),
    /// `None`: every partition.
    ElectLeaders {
        election_type: ElectionType,
        partitions: Option<Vec<TopicPartition>>,
    },
    ControlledShutdown {
        broker_id: NodeId,
        broker_epoch: BrokerEpoch,
    },
    AllocateProducerIds {
        broker_id: NodeId,
        broker_epoch: BrokerEpoch,
    },
    /// Appended last: forwarded requests are bincode, which numbers variants.
    AlterPartitionReassignments {
        partitions: Vec<PartitionReassignment>,
        replication_factor_change: ReplicationFactorChange,
    },
    /// SCRAM users added or replaced, and `(name, mechanism)` credentials removed.
    AlterUserScramCredentials {
        upsertions: Vec<UserScramCredentialRecord>,
        deletions: Vec<(String, i8)>,
    },
    /// ACLs added (those held already stay, as Kafka's CreateAcls leaves them).
    CreateAcls {
        entries: Vec<AccessControlEntryRecord>,
    },
    /// ACLs removed: those of `entries` still held.
    DeleteAcls {
        entries: Vec<AccessControlEntryRecord>,
    },
    /// Client quotas set and removed, entity by entity (Kafka's AlterClientQuotas).
    AlterClientQuotas {
        entries: Vec<ClientQuotaAlteration>,
    },
    /// Topics' config overrides replaced, each only if it still holds what its broker computed
    /// the change from (AlterConfigs and IncrementalAlterConfigs of topics).
    AlterTopicConfigs {
        changes: Vec<TopicConfigChange>,
    },
    /// The quorum as its leader sees it (DescribeQuorum): answered from Raft's state, not the
    /// metadata, and writes nothing.
    DescribeQuorum,
    /// Removes a broker's registration (UnregisterBroker); refused while it holds replicas.
    UnregisterBroker {
        broker_id: NodeId,
    },
    /// Dynamic broker configs replaced, each only if it still holds what its broker computed the
    /// change from (AlterConfigs and IncrementalAlterConfigs of brokers).
    AlterBrokerConfigs {
        changes: Vec<BrokerConfigChange>,
    },
    /// A broker-only node asks to follow the metadata log as an observer (a Raft learner the
    /// leader replicates to at `address`, its controller listener). Answered from Raft's
    /// membership, not decided on the metadata.
    AddObserver {
        node_id: NodeId,
        address: String,
    },
    /// Makes an observer that has caught up a voter (AddRaftVoter).
    AddVoter {
        node_id: NodeId,
    },
    /// Makes a voter an observer (RemoveRaftVoter).
    RemoveVoter {
        node_id: NodeId,
    },
}

/// One broker's dynamic configs (`broker: Some(id)`), or every broker's default (`None`, Kafka's
/// `--entity-default`), computed and checked by a broker from what it saw (`expected`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerConfigChange {
    pub broker: Option<NodeId>,
    pub expected: BTreeMap<String, String>,
    pub configs: BTreeMap<String, String>,
}

impl BrokerConfigChange {
    /// The resource name of the change in the metadata (`ConfigRecord`): the id, or empty for
    /// the default.
    pub fn resource_name(&self) -> String {
        self.broker.map(|id| id.to_string()).unwrap_or_default()
    }
}

/// One topic's new config overrides, computed (and checked against Kafka's topic configs) by a
/// broker from the overrides it saw: `expected`. Written only if the topic still holds those.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicConfigChange {
    pub name: String,
    pub expected: BTreeMap<String, String>,
    pub configs: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicResult {
    pub name: String,
    /// The topic's id (CreateTopics: the new topic's).
    pub result: Result<TopicId, Refusal>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionResult {
    pub topic: String,
    pub partition: i32,
    pub result: Result<(), Refusal>,
}

/// The partition's state once the ISR change applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlterPartitionResult {
    pub leader: NodeId,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
    pub isr: Vec<NodeId>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerResponse {
    RegisterBroker {
        broker_epoch: Result<BrokerEpoch, Refusal>,
    },
    BrokerHeartbeat {
        is_fenced: Result<bool, Refusal>,
        /// The metadata log index the answer was decided at (after the unfencing it wrote, if
        /// any): a broker that has applied that much knows every leadership moved away from it
        /// meanwhile.
        metadata_version: u64,
    },
    Topics(Vec<TopicResult>),
    Partitions(Vec<PartitionResult>),
    AlterPartition(Result<AlterPartitionResult, Refusal>),
    ControlledShutdown {
        partitions_remaining: Result<Vec<TopicPartition>, Refusal>,
    },
    AllocateProducerIds {
        /// The first id and the count.
        producer_ids: Result<(ProducerId, i32), Refusal>,
    },
    /// The whole request: not served here (`Refusal::NotController`), not committed, ...
    Refused(Refusal),
    /// Appended last, as requests are.
    Reassignments(Vec<ReassignmentResult>),
    /// One result per user named, in name order.
    UserScramCredentials(Vec<(String, Result<(), Refusal>)>),
    /// CreateAcls: every entry was written (or held already).
    AclsCreated,
    /// DeleteAcls: the entries removed.
    AclsDeleted(Vec<AccessControlEntryRecord>),
    /// AlterClientQuotas: one result per entity, in request order (a refused entity wrote
    /// nothing).
    ClientQuotas(Vec<Result<(), Refusal>>),
    /// DescribeQuorum.
    Quorum(crate::quorum_description::QuorumDescription),
    /// UnregisterBroker.
    BrokerUnregistered(Result<(), Refusal>),
    /// AlterBrokerConfigs: one result per change, in request order.
    BrokerConfigs(Vec<Result<(), Refusal>>),
    /// AddObserver, and the quorum's membership changes.
    QuorumChanged(Result<(), Refusal>),
}

impl ControllerResponse {
    /// This node cannot serve the request; `leader_id` is the active controller if known.
    pub fn not_controller(leader_id: Option<u64>) -> Self {
        ControllerResponse::Refused(Refusal::NotController { leader_id })
    }
}
