//! [`ControllerHandle`]: how other threads (the broker's shards, its main thread) use a
//! controller node. `Clone + Send + Sync`; its async functions await tokio channels, which work
//! from any executor (glommio included), so callers need no tokio runtime.

use laminar_model::{BrokerEpoch, NodeId, ProducerId};
use std::net::SocketAddr;
use std::sync::Arc;

use openraft::{BasicNode, RaftMetrics, ServerState};
use tokio::sync::{mpsc, oneshot, watch};

use crate::api::*;
use crate::command::Command;
use crate::metadata::MetadataImage;
use crate::records::BrokerEndpoint;
use crate::refusal::Refusal;

#[derive(Clone)]
pub struct ControllerHandle {
    node_id: u64,
    listen_addr: SocketAddr,
    commands: mpsc::Sender<Command>,
    images: watch::Receiver<Arc<MetadataImage>>,
    metrics: watch::Receiver<RaftMetrics<u64, BasicNode>>,
}

/// One voter's replication progress, as the leader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoterStatus {
    pub node_id: u64,
    pub matched_index: Option<u64>,
    /// The leader's last log index minus `matched_index`.
    pub lag: Option<u64>,
}

/// The quorum as this node sees it (from openraft's metrics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumStatus {
    pub node_id: u64,
    pub leader_id: Option<u64>,
    pub term: u64,
    /// "Leader", "Follower", "Candidate", "Learner" or "Shutdown".
    pub role: String,
    pub last_log_index: Option<u64>,
    pub last_applied_index: Option<u64>,
    pub snapshot_index: Option<u64>,
    /// Filled only on the leader.
    pub voters: Vec<VoterStatus>,
}

impl ControllerHandle {
    pub(crate) fn new(
        node_id: u64,
        listen_addr: SocketAddr,
        commands: mpsc::Sender<Command>,
        images: watch::Receiver<Arc<MetadataImage>>,
        metrics: watch::Receiver<RaftMetrics<u64, BasicNode>>,
    ) -> Self {
        ControllerHandle {
            node_id,
            listen_addr,
            commands,
            images,
            metrics,
        }
    }

    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// The bound address of the controller listener.
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen_addr
    }

    /// The latest applied metadata and its version (the applied log index).
    pub fn metadata(&self) -> Arc<MetadataImage> {
        self.images.borrow().clone()
    }

    /// A receiver that wakes on every applied change (`changed().await`).
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.images.clone()
    }

    pub fn quorum_status(&self) -> QuorumStatus {
        let m = self.metrics.borrow();
        let last_log_index = m.last_log_index;
        let voters = m.replication.as_ref().map_or_else(Vec::new, |replication| {
            let each = replication.iter().map(|(node_id, matched)| {
                let matched_index = matched.map(|id| id.index);
                let lag = last_log_index.map(|last| last.saturating_sub(matched_index.unwrap_or(0)));
                VoterStatus {
                    node_id: *node_id,
                    matched_index,
                    lag,
                }
            });
            each.collect()
        });
        let role = match m.state {
            ServerState::Leader => "Leader",
            ServerState::Follower => "Follower",
            ServerState::Candidate => "Candidate",
            ServerState::Learner => "Learner",
            ServerState::Shutdown => "Shutdown",
        };
        QuorumStatus {
            node_id: self.node_id,
            leader_id: m.current_leader,
            term: m.current_term,
            role: role.to_string(),
            last_log_index,
            last_applied_index: m.last_applied.map(|id| id.index),
            snapshot_index: m.snapshot.map(|id| id.index),
            voters,
        }
    }

    /// Sends any request (served by the active controller, forwarded there if this node is
    /// not it) and waits for the answer.
    pub async fn request(&self, request: ControllerRequest) -> ControllerResponse {
        let (reply, answer) = oneshot::channel();
        let command = Command {
            request,
            forwarded: false,
            reply,
        };
        if self.commands.send(command).await.is_err() {
            return ControllerResponse::not_controller(None);
        }
        answer.await.unwrap_or(ControllerResponse::not_controller(None))
    }
}

/// The refusal of a request answered as a whole (not the controller, not committed, ...), or
/// with an answer of another kind than it asks for.
fn whole_refusal(response: ControllerResponse) -> Refusal {
    match response {
        ControllerResponse::Refused(refusal) => refusal,
        other => Refusal::UnexpectedAnswer(format!("{other:?}")),
    }
}

impl ControllerHandle {
    /// Registers (or re-registers) a broker; returns its broker epoch. The broker starts
    /// fenced; its first heartbeat unfences it.
    pub async fn register_broker(
        &self,
        broker_id: NodeId,
        incarnation_id: [u8; 16],
        endpoints: Vec<BrokerEndpoint>,
        rack: Option<String>,
    ) -> Result<BrokerEpoch, Refusal> {
        let request = ControllerRequest::RegisterBroker {
            broker_id,
            incarnation_id,
            endpoints,
            rack,
        };
        match self.request(request).await {
            ControllerResponse::RegisterBroker { broker_epoch } => broker_epoch,
            other => Err(whole_refusal(other)),
        }
    }

    /// Keeps the broker's session; returns whether it is fenced afterwards, and the metadata
    /// version the answer was decided at.
    pub async fn broker_heartbeat(
        &self,
        broker_id: NodeId,
        broker_epoch: BrokerEpoch,
    ) -> Result<(bool, u64), Refusal> {
        match self
            .request(ControllerRequest::BrokerHeartbeat {
                broker_id,
                broker_epoch,
            })
            .await
        {
            ControllerResponse::BrokerHeartbeat {
                is_fenced,
                metadata_version,
            } => is_fenced.map(|fenced| (fenced, metadata_version)),
            other => Err(whole_refusal(other)),
        }
    }

    /// Adds or replaces the `upsertions` and removes the `deletions` (`(name, mechanism)`):
    /// one result per user named.
    pub async fn alter_user_scram_credentials(
        &self,
        upsertions: Vec<crate::records::UserScramCredentialRecord>,
        deletions: Vec<(String, i8)>,
    ) -> Result<Vec<(String, Result<(), Refusal>)>, Refusal> {
        let request = ControllerRequest::AlterUserScramCredentials {
            upsertions,
            deletions,
        };
        match self.request(request).await {
            ControllerResponse::UserScramCredentials(results) => Ok(results),
            other => Err(whole_refusal(other)),
        }
    }

    /// Adds `entries` to the cluster's ACLs.
    pub async fn create_acls(
        &self,
        entries: Vec<crate::records::AccessControlEntryRecord>,
    ) -> Result<(), Refusal> {
        match self.request(ControllerRequest::CreateAcls { entries }).await {
            ControllerResponse::AclsCreated => Ok(()),
            other => Err(whole_refusal(other)),
        }
    }

    /// Removes `entries` from the cluster's ACLs; answers those that were held.
    pub async fn delete_acls(
        &self,
        entries: Vec<crate::records::AccessControlEntryRecord>,
    ) -> Result<Vec<crate::records::AccessControlEntryRecord>, Refusal> {
        match self.request(ControllerRequest::DeleteAcls { entries }).await {
            ControllerResponse::AclsDeleted(removed) => Ok(removed),
            other => Err(whole_refusal(other)),
        }
    }

    /// Sets and removes client quotas, entity by entity: one result per entity, in request
    /// order; a refused entity changes nothing, the others are written.
    pub async fn alter_client_quotas(
        &self,
        entries: Vec<ClientQuotaAlteration>,
    ) -> Result<Vec<Result<(), Refusal>>, Refusal> {
        match self
            .request(ControllerRequest::AlterClientQuotas { entries })
            .await
        {
            ControllerResponse::ClientQuotas(results) => Ok(results),
            other => Err(whole_refusal(other)),
        }
    }

    /// Replaces topics' config overrides, each only if it still holds its `expected` ones
    /// (else `Refusal::InvalidUpdateVersion`): one result per topic, in request order.
    pub async fn alter_topic_configs(
        &self,
        changes: Vec<crate::api::TopicConfigChange>,
    ) -> Result<Vec<TopicResult>, Refusal> {
        self.topic_results(ControllerRequest::AlterTopicConfigs { changes })
            .await
    }

    /// Replaces dynamic broker configs (per broker or the default), each only if unchanged
    /// since its `expected`: one result per change.
    pub async fn alter_broker_configs(
        &self,
        changes: Vec<crate::api::BrokerConfigChange>,
    ) -> Result<Vec<Result<(), Refusal>>, Refusal> {
        match self
            .request(ControllerRequest::AlterBrokerConfigs { changes })
            .await
        {
            ControllerResponse::BrokerConfigs(results) => Ok(results),
            other => Err(whole_refusal(other)),
        }
    }

    /// Makes observer `node_id` a voter of the quorum (AddRaftVoter).
    pub async fn add_voter(&self, node_id: NodeId) -> Result<(), Refusal> {
        self.quorum_change(ControllerRequest::AddVoter { node_id }).await
    }

    /// Makes voter `node_id` an observer (RemoveRaftVoter).
    pub async fn remove_voter(&self, node_id: NodeId) -> Result<(), Refusal> {
        self.quorum_change(ControllerRequest::RemoveVoter { node_id })
            .await
    }

    async fn quorum_change(&self, request: ControllerRequest) -> Result<(), Refusal> {
        match self.request(request).await {
            ControllerResponse::QuorumChanged(result) => result,
            other => Err(whole_refusal(other)),
        }
    }

    /// Removes broker `broker_id`'s registration; refused while it holds replicas.
    pub async fn unregister_broker(&self, broker_id: NodeId) -> Result<(), Refusal> {
        match self
            .request(ControllerRequest::UnregisterBroker { broker_id })
            .await
        {
            ControllerResponse::BrokerUnregistered(result) => result,
            other => Err(whole_refusal(other)),
        }
    }

    /// The quorum as its leader sees it.
    pub async fn describe_quorum(&self) -> Result<crate::quorum_description::QuorumDescription, Refusal> {
        match self.request(ControllerRequest::DescribeQuorum).await {
            ControllerResponse::Quorum(description) => Ok(description),
            other => Err(whole_refusal(other)),
        }
    }

    pub async fn create_topics(&self, topics: Vec<CreatableTopic>) -> Result<Vec<TopicResult>, Refusal> {
        self.topic_results(ControllerRequest::CreateTopics { topics })
            .await
    }

    /// Grows each `(topic, count)` to `count` partitions.
    pub async fn create_partitions(&self, topics: Vec<(String, i32)>) -> Result<Vec<TopicResult>, Refusal> {
        self.topic_results(ControllerRequest::CreatePartitions { topics })
            .await
    }

    pub async fn delete_topics(&self, names: Vec<String>) -> Result<Vec<TopicResult>, Refusal> {
        self.topic_results(ControllerRequest::DeleteTopics { names })
            .await
    }

    async fn topic_results(&self, request: ControllerRequest) -> Result<Vec<TopicResult>, Refusal> {
        match self.request(request).await {
            ControllerResponse::Topics(results) => Ok(results),
            other => Err(whole_refusal(other)),
        }
    }

    /// An ISR change from a partition's leader.
    pub async fn alter_partition(
        &self,
        change: AlterPartitionRequest,
    ) -> Result<AlterPartitionResult, Refusal> {
        match self.request(ControllerRequest::AlterPartition(change)).await {
            ControllerResponse::AlterPartition(result) => result,
            other => Err(whole_refusal(other)),
        }
    }

    /// `partitions: None` means every partition.
    pub async fn elect_leaders(
        &self,
        election_type: ElectionType,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Result<Vec<PartitionResult>, Refusal> {
        match self
            .request(ControllerRequest::ElectLeaders {
                election_type,
                partitions,
            })
            .await
        {
            ControllerResponse::Partitions(results) => Ok(results),
            other => Err(whole_refusal(other)),
        }
    }

    /// Starts, changes or cancels (`replicas: None`) partition reassignments; one result per
    /// partition, in request order.
    pub async fn alter_partition_reassignments(
        &self,
        partitions: Vec<PartitionReassignment>,
        replication_factor_change: ReplicationFactorChange,
    ) -> Result<Vec<ReassignmentResult>, Refusal> {
        match self
            .request(ControllerRequest::AlterPartitionReassignments {
                partitions,
                replication_factor_change,
            })
            .await
        {
            ControllerResponse::Reassignments(results) => Ok(results),
            other => Err(whole_refusal(other)),
        }
    }

    /// Moves the broker's leaderships away and takes it out of ISRs where others remain, then
    /// fences it; returns the partitions left with no leader.
    pub async fn controlled_shutdown(
        &self,
        broker_id: NodeId,
        broker_epoch: BrokerEpoch,
    ) -> Result<Vec<TopicPartition>, Refusal> {
        match self
            .request(ControllerRequest::ControlledShutdown {
                broker_id,
                broker_epoch,
            })
            .await
        {
            ControllerResponse::ControlledShutdown { partitions_remaining } => partitions_remaining,
            other => Err(whole_refusal(other)),
        }
    }

    /// A block of producer ids: `(first id, count)`.
    pub async fn allocate_producer_ids(
        &self,
        broker_id: NodeId,
        broker_epoch: BrokerEpoch,
    ) -> Result<(ProducerId, i32), Refusal> {
        match self
            .request(ControllerRequest::AllocateProducerIds {
                broker_id,
                broker_epoch,
            })
            .await
        {
            ControllerResponse::AllocateProducerIds { producer_ids } => producer_ids,
            other => Err(whole_refusal(other)),
        }
    }
}
