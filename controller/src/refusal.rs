//! [`Refusal`]: why the controller did not do what a request asked, in the controller's terms.
//! Decisions, the active-controller loop and [`crate::ControllerHandle`] all answer with it;
//! [`Refusal::response_error`] is the one place that names Kafka's error for each reason, and
//! its `Display` is the message a Kafka client gets with that error.
//!
//! Plain data, `Send`, serde: it crosses the network inside forwarded answers (bincode, between
//! controller nodes of one version). It is never written to the metadata log.

use kafka_protocol::error::ResponseError;
use serde::{Deserialize, Serialize};

use crate::placement::PlacementError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Refusal {
    // The request as a whole: where it went, whether its records committed.
    /// This node does not lead the quorum, and forwarding (if allowed) did not get an answer;
    /// `leader_id` is the active controller when known, where a retry may go.
    #[error("no active controller reachable")]
    NotController { leader_id: Option<u64> },
    /// No answer within the request's timeout (its records not known committed, or no word from
    /// the controller at all): the request may still take effect.
    #[error("no answer in time; the request may still take effect")]
    RequestTimedOut,
    #[error("the records were not written: {0}")]
    WriteFailed(String),
    /// An answer of another kind than the request asks for (a bug).
    #[error("unexpected answer {0}")]
    UnexpectedAnswer(String),

    // Brokers.
    #[error("negative broker id")]
    NegativeBrokerId,
    #[error("the broker id is not registered")]
    BrokerIdNotRegistered,
    #[error("the broker epoch is not the registered broker's")]
    StaleBrokerEpoch,
    /// Another incarnation holds the id, with a live session.
    #[error("another live incarnation holds the broker id")]
    DuplicateBrokerRegistration,
    #[error("no producer ids are left")]
    ProducerIdsExhausted,

    // Topics and partitions (CreateTopics, CreatePartitions, DeleteTopics).
    #[error("named twice in the request")]
    TopicNamedTwice,
    #[error("{reason}")]
    InvalidTopicName { reason: String },
    #[error("topic already exists")]
    TopicAlreadyExists,
    #[error("unknown topic")]
    UnknownTopic,
    /// Over `decide::PARTITIONS_PER_REQUEST_MAX` in one request: one request is one log entry.
    #[error("too many partitions in one request")]
    TooManyPartitions,
    #[error("partition count must be positive")]
    PartitionCountNotPositive,
    #[error("topic has {current} partitions")]
    PartitionCountNotIncreased { current: usize },
    /// No placement of the replicas over the unfenced brokers.
    #[error(transparent)]
    Placement(#[from] PlacementError),
    #[error("with a manual assignment, numPartitions and replicationFactor must be -1")]
    CountsWithManualAssignment,
    #[error("{reason}")]
    InvalidReplicaAssignment { reason: String },
    #[error("the topic id is zero or taken")]
    TopicIdUnusable,

    // A partition's state (AlterPartition, ElectLeaders, AlterPartitionReassignments).
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("unknown topic id")]
    UnknownTopicId,
    /// The sender is not the leader at the partition's current leader epoch.
    #[error("not the leader at the current leader epoch")]
    FencedLeaderEpoch,
    /// The sender's partition epoch is not the current one.
    #[error("not the current partition epoch")]
    InvalidUpdateVersion,
    #[error("the new ISR must hold the leader and replicas only")]
    IsrNotOfReplicas,
    #[error("the new ISR names a fenced broker")]
    IneligibleReplica,
    #[error("the wanted leader already leads")]
    ElectionNotNeeded,
    #[error("the preferred replica is not in the ISR or is fenced")]
    PreferredLeaderNotAvailable,
    #[error("no unfenced replica can lead")]
    EligibleLeadersNotAvailable,
    #[error("partition named twice in the request")]
    PartitionNamedTwice,
    /// KIP-860's `allowReplicationFactorChange` is false and the target's size differs.
    #[error("the replication factor would change from {from} to {to}")]
    ReplicationFactorWouldChange { from: usize, to: usize },
    #[error("no reassignment in progress")]
    NoReassignmentInProgress,

    // SCRAM users (AlterUserScramCredentials).
    #[error("A user credential cannot be altered twice in the same request")]
    UserNamedTwice,
    #[error("Attempt to delete a user credential that does not exist")]
    ScramCredentialNotFound,
    #[error("{reason}")]
    UnacceptableCredential { reason: String },

    // ACLs (CreateAcls).
    #[error("{reason}")]
    InvalidAcl { reason: String },

    // Client quotas (AlterClientQuotas): Kafka answers INVALID_REQUEST for every reason.
    #[error("{reason}")]
    InvalidQuota { reason: String },

    // Topic configs (AlterConfigs, IncrementalAlterConfigs). A change computed from overrides
    // the topic no longer holds is refused with `InvalidUpdateVersion`.
    #[error("{reason}")]
    InvalidConfig { reason: String },

    // UnregisterBroker.
    #[error("broker {broker_id} still holds {count} replicas: move them to other brokers first")]
    BrokerHoldsReplicas { broker_id: i32, count: usize },

    // The quorum's membership (observers, voters).
    #[error("{reason}")]
    QuorumChangeRefused { reason: String },
    #[error("the node is a voter already")]
    DuplicateVoter,
    #[error("the node is not a voter")]
    VoterNotFound,
}

impl Refusal {
    /// Whether the request may still take effect: no decision answered it (no answer in
    /// time, a forward that got none, a write whose outcome openraft did not report). Every
    /// other refusal is a decision made on everything committed, which wrote nothing.
    pub fn may_have_taken_effect(&self) -> bool {
        matches!(
            self,
            Refusal::NotController { .. }
                | Refusal::RequestTimedOut
                | Refusal::WriteFailed(_)
                | Refusal::UnexpectedAnswer(_)
        )
    }

    /// The error Kafka answers for this reason (KRaft's `ReplicationControlManager`,
    /// `ClusterControlManager` and `QuorumController` where Kafka has the same check).
    pub fn response_error(&self) -> ResponseError {
        match self {
            Refusal::NotController { .. } => ResponseError::NotController,
            Refusal::RequestTimedOut => ResponseError::RequestTimedOut,
            Refusal::WriteFailed(_) | Refusal::UnexpectedAnswer(_) | Refusal::ProducerIdsExhausted => {
                ResponseError::UnknownServerError
            }
            Refusal::NegativeBrokerId
            | Refusal::TopicNamedTwice
            | Refusal::CountsWithManualAssignment
            | Refusal::TopicIdUnusable
            | Refusal::IsrNotOfReplicas
            | Refusal::PartitionNamedTwice => ResponseError::InvalidRequest,
            Refusal::BrokerIdNotRegistered => ResponseError::BrokerIdNotRegistered,
            Refusal::StaleBrokerEpoch => ResponseError::StaleBrokerEpoch,
            Refusal::DuplicateBrokerRegistration => ResponseError::DuplicateBrokerRegistration,
            Refusal::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
            Refusal::TopicAlreadyExists => ResponseError::TopicAlreadyExists,
            Refusal::UnknownTopic | Refusal::UnknownTopicOrPartition => {
                ResponseError::UnknownTopicOrPartition
            }
            Refusal::TooManyPartitions
            | Refusal::PartitionCountNotPositive
            | Refusal::PartitionCountNotIncreased { .. } => ResponseError::InvalidPartitions,
            Refusal::Placement(_) | Refusal::ReplicationFactorWouldChange { .. } => {
                ResponseError::InvalidReplicationFactor
            }
            Refusal::InvalidReplicaAssignment { .. } => ResponseError::InvalidReplicaAssignment,
            Refusal::UnknownTopicId => ResponseError::UnknownTopicId,
            Refusal::FencedLeaderEpoch => ResponseError::FencedLeaderEpoch,
            Refusal::InvalidUpdateVersion => ResponseError::InvalidUpdateVersion,
            Refusal::IneligibleReplica => ResponseError::IneligibleReplica,
            Refusal::ElectionNotNeeded => ResponseError::ElectionNotNeeded,
            Refusal::PreferredLeaderNotAvailable => ResponseError::PreferredLeaderNotAvailable,
            Refusal::EligibleLeadersNotAvailable => ResponseError::EligibleLeadersNotAvailable,
            Refusal::NoReassignmentInProgress => ResponseError::NoReassignmentInProgress,
            Refusal::UserNamedTwice => ResponseError::DuplicateResource,
            Refusal::ScramCredentialNotFound => ResponseError::ResourceNotFound,
            Refusal::UnacceptableCredential { .. } => ResponseError::UnacceptableCredential,
            Refusal::InvalidAcl { .. } | Refusal::InvalidQuota { .. } => ResponseError::InvalidRequest,
            Refusal::InvalidConfig { .. } => ResponseError::InvalidConfig,
            Refusal::BrokerHoldsReplicas { .. } | Refusal::QuorumChangeRefused { .. } => {
                ResponseError::InvalidRequest
            }
            Refusal::DuplicateVoter => ResponseError::DuplicateVoter,
            Refusal::VoterNotFound => ResponseError::VoterNotFound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's code for each reason, written out from Kafka's protocol error table
    /// (`Errors.java`) rather than read from [`ResponseError`], so a wrong variant there shows.
    /// Exhaustive: a new reason does not compile until it has its code here.
    fn kafka_code(refusal: &Refusal) -> i16 {
        match refusal {
            Refusal::WriteFailed(_) | Refusal::UnexpectedAnswer(_) | Refusal::ProducerIdsExhausted => -1,
            Refusal::UnknownTopic | Refusal::UnknownTopicOrPartition => 3,
            Refusal::RequestTimedOut => 7,
            Refusal::InvalidTopicName { .. } => 17,
            Refusal::TopicAlreadyExists => 36,
            Refusal::TooManyPartitions
            | Refusal::PartitionCountNotPositive
            | Refusal::PartitionCountNotIncreased { .. } => 37,
            Refusal::Placement(_) | Refusal::ReplicationFactorWouldChange { .. } => 38,
            Refusal::InvalidReplicaAssignment { .. } => 39,
            Refusal::InvalidConfig { .. } => 40,
            Refusal::NotController { .. } => 41,
            Refusal::NegativeBrokerId
            | Refusal::TopicNamedTwice
            | Refusal::CountsWithManualAssignment
            | Refusal::TopicIdUnusable
            | Refusal::IsrNotOfReplicas
            | Refusal::PartitionNamedTwice
            | Refusal::InvalidAcl { .. }
            | Refusal::InvalidQuota { .. }
            | Refusal::BrokerHoldsReplicas { .. }
            | Refusal::QuorumChangeRefused { .. } => 42,
            Refusal::FencedLeaderEpoch => 74,
            Refusal::StaleBrokerEpoch => 77,
            Refusal::PreferredLeaderNotAvailable => 80,
            Refusal::EligibleLeadersNotAvailable => 83,
            Refusal::ElectionNotNeeded => 84,
            Refusal::NoReassignmentInProgress => 85,
            Refusal::InvalidUpdateVersion => 95,
            Refusal::UnknownTopicId => 100,
            Refusal::DuplicateBrokerRegistration => 101,
            Refusal::BrokerIdNotRegistered => 102,
            Refusal::DuplicateVoter => 126,
            Refusal::VoterNotFound => 127,
            Refusal::ScramCredentialNotFound => 91,
            Refusal::UserNamedTwice => 92,
            Refusal::UnacceptableCredential { .. } => 93,
            Refusal::IneligibleReplica => 107,
        }
    }

    /// One of each reason.
    fn every_refusal() -> Vec<Refusal> {
        let reason = || "why".to_string();
        vec![
            Refusal::NotController { leader_id: Some(2) },
            Refusal::RequestTimedOut,
            Refusal::WriteFailed(reason()),
            Refusal::UnexpectedAnswer(reason()),
            Refusal::NegativeBrokerId,
            Refusal::BrokerIdNotRegistered,
            Refusal::StaleBrokerEpoch,
            Refusal::DuplicateBrokerRegistration,
            Refusal::ProducerIdsExhausted,
            Refusal::TopicNamedTwice,
            Refusal::InvalidTopicName { reason: reason() },
            Refusal::TopicAlreadyExists,
            Refusal::UnknownTopic,
            Refusal::TooManyPartitions,
            Refusal::PartitionCountNotPositive,
            Refusal::PartitionCountNotIncreased { current: 3 },
            Refusal::Placement(PlacementError::ZeroReplicationFactor),
            Refusal::CountsWithManualAssignment,
            Refusal::InvalidReplicaAssignment { reason: reason() },
            Refusal::TopicIdUnusable,
            Refusal::UnknownTopicOrPartition,
            Refusal::UnknownTopicId,
            Refusal::FencedLeaderEpoch,
            Refusal::InvalidUpdateVersion,
            Refusal::IsrNotOfReplicas,
            Refusal::IneligibleReplica,
            Refusal::ElectionNotNeeded,
            Refusal::PreferredLeaderNotAvailable,
            Refusal::EligibleLeadersNotAvailable,
            Refusal::PartitionNamedTwice,
            Refusal::ReplicationFactorWouldChange { from: 3, to: 2 },
            Refusal::NoReassignmentInProgress,
            Refusal::UserNamedTwice,
            Refusal::ScramCredentialNotFound,
            Refusal::UnacceptableCredential { reason: reason() },
            Refusal::InvalidAcl { reason: reason() },
            Refusal::InvalidQuota { reason: reason() },
            Refusal::InvalidConfig { reason: reason() },
            Refusal::BrokerHoldsReplicas {
                broker_id: 3,
                count: 2,
            },
            Refusal::QuorumChangeRefused { reason: reason() },
            Refusal::DuplicateVoter,
            Refusal::VoterNotFound,
        ]
    }

    #[test]
    fn every_refusal_answers_kafkas_code() {
        for refusal in every_refusal() {
            assert_eq!(
                refusal.response_error().code(),
                kafka_code(&refusal),
                "{refusal:?}"
            );
        }
    }

    #[test]
    fn a_refusal_crosses_the_network_whole() {
        for refusal in every_refusal() {
            let bytes = bincode::serialize(&refusal).unwrap();
            let back: Refusal = crate::disk_format::decode_body(&bytes).unwrap();
            assert_eq!(back, refusal);
        }
    }
}
