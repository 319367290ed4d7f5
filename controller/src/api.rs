//! The controller's own requests and answers (besides Raft's), with Kafka's error codes.
//!
//! Plain data, `Send`: built on any thread, carried to the controller runtime by a
//! [`crate::ControllerHandle`], and over the network (bincode) when forwarded to the active
//! controller.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::records::{BrokerEndpoint, TopicId};

/// Kafka's error codes the controller answers with.
pub mod error_code {
    pub const NONE: i16 = 0;
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const INVALID_PARTITIONS: i16 = 37;
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
    pub const NOT_CONTROLLER: i16 = 41;
    pub const INVALID_REQUEST: i16 = 42;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const STALE_BROKER_EPOCH: i16 = 77;
    pub const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
    pub const ELIGIBLE_LEADERS_NOT_AVAILABLE: i16 = 83;
    pub const ELECTION_NOT_NEEDED: i16 = 84;
    pub const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;
    pub const INVALID_UPDATE_VERSION: i16 = 95;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    pub const DUPLICATE_BROKER_REGISTRATION: i16 = 101;
    pub const BROKER_ID_NOT_REGISTERED: i16 = 102;
    pub const INELIGIBLE_REPLICA: i16 = 107;
}

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
    pub assignments: Vec<Vec<i32>>,
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

/// One partition of an AlterPartitionReassignments request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionReassignment {
    pub topic: String,
    pub partition: i32,
    /// The target replicas, preferred leader first; `None` cancels the reassignment.
    pub replicas: Option<Vec<i32>>,
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
    pub error_code: i16,
    pub error_message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerRequest {
    RegisterBroker {
        broker_id: i32,
        incarnation_id: [u8; 16],
        endpoints: Vec<BrokerEndpoint>,
        rack: Option<String>,
    },
    BrokerHeartbeat {
        broker_id: i32,
        broker_epoch: i64,
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
    AlterPartition {
        broker_id: i32,
        broker_epoch: i64,
        topic_id: TopicId,
        partition: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        new_isr: Vec<i32>,
    },
    /// `None`: every partition.
    ElectLeaders {
        election_type: ElectionType,
        partitions: Option<Vec<TopicPartition>>,
    },
    ControlledShutdown {
        broker_id: i32,
        broker_epoch: i64,
    },
    AllocateProducerIds {
        broker_id: i32,
        broker_epoch: i64,
    },
    /// Appended last: forwarded requests are bincode, which numbers variants.
    AlterPartitionReassignments {
        partitions: Vec<PartitionReassignment>,
        replication_factor_change: ReplicationFactorChange,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicResult {
    pub name: String,
    pub error_code: i16,
    pub error_message: Option<String>,
    /// The new topic's id (CreateTopics), else zeros.
    pub topic_id: TopicId,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionResult {
    pub topic: String,
    pub partition: i32,
    pub error_code: i16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlterPartitionResult {
    pub error_code: i16,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub isr: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerResponse {
    RegisterBroker {
        error_code: i16,
        broker_epoch: i64,
    },
    BrokerHeartbeat {
        error_code: i16,
        is_fenced: bool,
    },
    Topics(Vec<TopicResult>),
    Partitions(Vec<PartitionResult>),
    AlterPartition(AlterPartitionResult),
    ControlledShutdown {
        error_code: i16,
        partitions_remaining: Vec<TopicPartition>,
    },
    AllocateProducerIds {
        error_code: i16,
        producer_id_start: i64,
        producer_id_len: i32,
    },
    /// The request could not be served here; `leader_id` is the active controller if known.
    NotController {
        leader_id: Option<u64>,
    },
    /// Anything else the whole request failed with (a Kafka error code).
    Error {
        error_code: i16,
        message: String,
    },
    /// Appended last, as requests are.
    Reassignments(Vec<ReassignmentResult>),
}
