//! What the active controller decides for each request: the records to replicate and the
//! answer, from the current metadata. Pure functions (no I/O), run by the active controller's
//! task on its runtime, one request at a time, on a state that holds every earlier decision
//! (`active.rs`), so every record decided applies; the state machine checks each again and
//! stops the node on one that does not (a bug).
//!
//! - this module: the dispatch, what a decision is, and what the decisions share;
//! - [`brokers`]: registration, heartbeats, fencing, controlled shutdown, producer ids;
//! - [`topics`]: CreateTopics, CreatePartitions, DeleteTopics, AlterPartition, ElectLeaders and
//!   the auto leader rebalance;
//! - [`reassignment`]: AlterPartitionReassignments and its completion;
//! - [`users`]: AlterUserScramCredentials (SCRAM users);
//! - [`acls`]: CreateAcls and DeleteAcls;
//! - [`quotas`]: client quotas (AlterClientQuotas);
//! - [`configs`]: topic configs (AlterConfigs, IncrementalAlterConfigs).

use laminar_model::NodeId;
use std::collections::BTreeSet;

use laminar_model::{LeaderEpoch, PartitionEpoch};

use crate::api::*;
use crate::metadata::ClusterMetadata;
use crate::placement::PlacementBroker;
use crate::records::*;
use crate::refusal::Refusal;

pub mod acls;
pub mod brokers;
pub mod configs;
pub mod quotas;
pub mod reassignment;
pub mod topics;
pub mod users;

use brokers::{allocate_producer_ids, controlled_shutdown, heartbeat, register_broker};
pub use brokers::{fence_broker, leave_partitions};
pub use topics::{
    alter_partition, create_partitions, create_topics, delete_topics, elect_leaders, leaders_to_rebalance,
    preferred_leader_imbalance,
};

/// Kafka's per-topic (and cluster default) switch for electing an out-of-sync replica.
pub const UNCLEAN_LEADER_ELECTION_KEY: &str = "unclean.leader.election.enable";
/// Kafka's limit on topic names (they name partition directories).
const TOPIC_NAME_LEN_MAX: usize = 249;
/// Partitions one CreateTopics or CreatePartitions may add, all topics together: bounds one
/// log entry (about 100 bytes a partition, under `disk_format::ENTRY_PAYLOAD_LEN_MAX`).
pub const PARTITIONS_PER_REQUEST_MAX: i64 = 10_000;

/// The records to write and the answer to give once they are committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub records: Vec<MetadataRecord>,
    pub response: ControllerResponse,
}

impl Decision {
    /// An answer that writes nothing.
    pub(crate) fn answer(response: ControllerResponse) -> Self {
        Decision {
            records: Vec::new(),
            response,
        }
    }
}

/// What the controller knows besides the metadata.
pub struct DecisionContext {
    /// Whether the broker's session is still alive (heartbeats within the session timeout).
    pub session_alive: Box<dyn Fn(NodeId) -> bool + Send>,
    /// The cluster default for `unclean.leader.election.enable`.
    pub unclean_leader_election_default: bool,
    /// Seeds placement and topic ids.
    pub seed: u64,
}

pub fn decide(md: &ClusterMetadata, request: ControllerRequest, ctx: &DecisionContext) -> Decision {
    match request {
        ControllerRequest::RegisterBroker {
            broker_id,
            incarnation_id,
            endpoints,
            rack,
        } => {
            let record = RegisterBrokerRecord {
                broker_id,
                incarnation_id,
                endpoints,
                rack,
            };
            register_broker(md, record, ctx)
        }
        ControllerRequest::BrokerHeartbeat {
            broker_id,
            broker_epoch,
        } => heartbeat(md, broker_id, broker_epoch),
        ControllerRequest::CreateTopics { topics } => create_topics(md, &topics, ctx.seed),
        ControllerRequest::CreatePartitions { topics } => create_partitions(md, &topics, ctx.seed),
        ControllerRequest::DeleteTopics { names } => delete_topics(md, &names),
        ControllerRequest::AlterPartition(change) => alter_partition(md, &change),
        ControllerRequest::ElectLeaders {
            election_type,
            partitions,
        } => elect_leaders(md, election_type, partitions.as_deref()),
        ControllerRequest::ControlledShutdown {
            broker_id,
            broker_epoch,
        } => controlled_shutdown(md, broker_id, broker_epoch, ctx.unclean_leader_election_default),
        ControllerRequest::AllocateProducerIds {
            broker_id,
            broker_epoch,
        } => allocate_producer_ids(md, broker_id, broker_epoch),
        ControllerRequest::AlterPartitionReassignments {
            partitions,
            replication_factor_change,
        } => reassignment::alter_partition_reassignments(md, &partitions, replication_factor_change),
        ControllerRequest::AlterUserScramCredentials {
            upsertions,
            deletions,
        } => users::alter_user_scram_credentials(md, &upsertions, &deletions),
        ControllerRequest::CreateAcls { entries } => acls::create_acls(md, &entries),
        ControllerRequest::DeleteAcls { entries } => acls::delete_acls(md, &entries),
        ControllerRequest::AlterClientQuotas { entries } => quotas::alter_client_quotas(md, &entries),
        ControllerRequest::AlterTopicConfigs { changes } => configs::alter_topic_configs(md, &changes),
        ControllerRequest::AlterBrokerConfigs { changes } => configs::alter_broker_configs(md, &changes),
        // Answered from Raft's state before any decision (`active.rs`): not a metadata change.
        ControllerRequest::UnregisterBroker { broker_id } => brokers::unregister_broker(md, broker_id),
        ControllerRequest::DescribeQuorum
        | ControllerRequest::AddObserver { .. }
        | ControllerRequest::AddVoter { .. }
        | ControllerRequest::RemoveVoter { .. } => Decision::answer(ControllerResponse::Refused(
            Refusal::UnexpectedAnswer("quorum requests are not decided on the metadata".into()),
        )),
    }
}

/// Kafka's topic name rule: 1..=249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn topic_name_error(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > TOPIC_NAME_LEN_MAX {
        return Some("length must be 1 to 249");
    }
    if name == "." || name == ".." {
        return Some("'.' and '..' are not allowed");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Some("only ASCII letters, digits, '.', '_' and '-'");
    }
    None
}

pub(crate) fn unfenced_brokers(md: &ClusterMetadata) -> Vec<PlacementBroker> {
    let unfenced = md.brokers.values().filter(|b| !b.fenced);
    unfenced
        .map(|b| PlacementBroker {
            broker_id: b.broker_id,
            rack: b.rack.clone(),
        })
        .collect()
}

pub(crate) fn seed_for(name: &str, seed: u64) -> u64 {
    name.bytes()
        .fold(seed, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3))
}

pub(crate) fn topic_refused(name: &str, refusal: Refusal) -> TopicResult {
    TopicResult {
        name: name.to_string(),
        result: Err(refusal),
    }
}

/// A new partition: its unfenced replicas are the ISR (placement uses unfenced brokers only;
/// a manual assignment may name fenced ones), the first of them leads.
pub(crate) fn new_partition(
    md: &ClusterMetadata,
    topic_id: TopicId,
    partition_id: i32,
    replicas: Vec<NodeId>,
) -> MetadataRecord {
    let isr: Vec<NodeId> = replicas.iter().copied().filter(|b| md.is_unfenced(*b)).collect();
    let leader = isr.first().copied().unwrap_or(NO_LEADER);
    MetadataRecord::Partition(PartitionRecord {
        topic_id,
        partition_id,
        isr,
        replicas,
        leader,
        leader_epoch: LeaderEpoch::new(0),
        partition_epoch: PartitionEpoch::new(0),
    })
}

pub(crate) fn distinct_names<'a>(names: impl Iterator<Item = &'a String>) -> BTreeSet<&'a String> {
    let mut seen = BTreeSet::new();
    let mut duplicates = BTreeSet::new();
    for name in names {
        if !seen.insert(name) {
            duplicates.insert(name);
        }
    }
    duplicates
}
