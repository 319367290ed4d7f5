//! [`ControllerHandle`]: how other threads (the broker's shards, its main thread) use a
//! controller node. `Clone + Send + Sync`; its async functions await tokio channels, which work
//! from any executor (glommio included), so callers need no tokio runtime.

use std::net::SocketAddr;
use std::sync::Arc;

use openraft::{BasicNode, RaftMetrics, ServerState};
use tokio::sync::{mpsc, oneshot, watch};

use crate::api::error_code::{NONE, NOT_CONTROLLER, UNKNOWN_SERVER_ERROR};
use crate::api::*;
use crate::command::Command;
use crate::metadata::MetadataImage;
use crate::records::BrokerEndpoint;

#[derive(Clone)]
pub struct ControllerHandle {
    node_id: u64,
    listen_addr: SocketAddr,
    commands: mpsc::Sender<Command>,
    images: watch::Receiver<Arc<MetadataImage>>,
    metrics: watch::Receiver<RaftMetrics<u64, BasicNode>>,
}

/// A failed controller request: Kafka's error code, and the active controller when the code
/// is NOT_CONTROLLER and it is known (the caller may retry there).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("controller error {error_code}: {message}")]
pub struct RequestError {
    pub error_code: i16,
    pub message: String,
    pub leader_id: Option<u64>,
}

impl RequestError {
    pub fn new(error_code: i16, message: impl Into<String>) -> Self {
        RequestError {
            error_code,
            message: message.into(),
            leader_id: None,
        }
    }
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
            return ControllerResponse::NotController { leader_id: None };
        }
        answer
            .await
            .unwrap_or(ControllerResponse::NotController { leader_id: None })
    }
}

/// Turns the answers every request may get (NOT_CONTROLLER, a whole-request error) into errors.
fn common_error(response: ControllerResponse) -> RequestError {
    match response {
        ControllerResponse::NotController { leader_id } => RequestError {
            error_code: NOT_CONTROLLER,
            message: "no active controller reachable".into(),
            leader_id,
        },
        ControllerResponse::Error { error_code, message } => RequestError::new(error_code, message),
        other => RequestError::new(UNKNOWN_SERVER_ERROR, format!("unexpected answer {other:?}")),
    }
}

fn check(error_code: i16) -> Result<(), RequestError> {
    if error_code == NONE {
        Ok(())
    } else {
        Err(RequestError::new(error_code, "refused"))
    }
}

impl ControllerHandle {
    /// Registers (or re-registers) a broker; returns its broker epoch. The broker starts
    /// fenced; its first heartbeat unfences it.
    pub async fn register_broker(
        &self,
        broker_id: i32,
        incarnation_id: [u8; 16],
        endpoints: Vec<BrokerEndpoint>,
        rack: Option<String>,
    ) -> Result<i64, RequestError> {
        let request = ControllerRequest::RegisterBroker {
            broker_id,
            incarnation_id,
            endpoints,
            rack,
        };
        match self.request(request).await {
            ControllerResponse::RegisterBroker {
                error_code,
                broker_epoch,
            } => check(error_code).map(|()| broker_epoch),
            other => Err(common_error(other)),
        }
    }

    /// Keeps the broker's session; returns whether it is fenced afterwards.
    pub async fn broker_heartbeat(&self, broker_id: i32, broker_epoch: i64) -> Result<bool, RequestError> {
        match self
            .request(ControllerRequest::BrokerHeartbeat {
                broker_id,
                broker_epoch,
            })
            .await
        {
            ControllerResponse::BrokerHeartbeat {
                error_code,
                is_fenced,
            } => check(error_code).map(|()| is_fenced),
            other => Err(common_error(other)),
        }
    }

    pub async fn create_topics(&self, topics: Vec<CreatableTopic>) -> Result<Vec<TopicResult>, RequestError> {
        self.topic_results(ControllerRequest::CreateTopics { topics })
            .await
    }

    /// Grows each `(topic, count)` to `count` partitions.
    pub async fn create_partitions(
        &self,
        topics: Vec<(String, i32)>,
    ) -> Result<Vec<TopicResult>, RequestError> {
        self.topic_results(ControllerRequest::CreatePartitions { topics })
            .await
    }

    pub async fn delete_topics(&self, names: Vec<String>) -> Result<Vec<TopicResult>, RequestError> {
        self.topic_results(ControllerRequest::DeleteTopics { names })
            .await
    }

    async fn topic_results(&self, request: ControllerRequest) -> Result<Vec<TopicResult>, RequestError> {
        match self.request(request).await {
            ControllerResponse::Topics(results) => Ok(results),
            other => Err(common_error(other)),
        }
    }

    /// An ISR change from a partition's leader (`ControllerRequest::AlterPartition`).
    pub async fn alter_partition(
        &self,
        request: ControllerRequest,
    ) -> Result<AlterPartitionResult, RequestError> {
        match self.request(request).await {
            ControllerResponse::AlterPartition(result) => check(result.error_code).map(|()| result),
            other => Err(common_error(other)),
        }
    }

    /// `partitions: None` means every partition.
    pub async fn elect_leaders(
        &self,
        election_type: ElectionType,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Result<Vec<PartitionResult>, RequestError> {
        match self
            .request(ControllerRequest::ElectLeaders {
                election_type,
                partitions,
            })
            .await
        {
            ControllerResponse::Partitions(results) => Ok(results),
            other => Err(common_error(other)),
        }
    }

    /// Starts, changes or cancels (`replicas: None`) partition reassignments; one result per
    /// partition, in request order.
    pub async fn alter_partition_reassignments(
        &self,
        partitions: Vec<PartitionReassignment>,
        replication_factor_change: ReplicationFactorChange,
    ) -> Result<Vec<ReassignmentResult>, RequestError> {
        match self
            .request(ControllerRequest::AlterPartitionReassignments {
                partitions,
                replication_factor_change,
            })
            .await
        {
            ControllerResponse::Reassignments(results) => Ok(results),
            other => Err(common_error(other)),
        }
    }

    /// Moves the broker's leaderships away and takes it out of ISRs where others remain, then
    /// fences it; returns the partitions left with no leader.
    pub async fn controlled_shutdown(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<Vec<TopicPartition>, RequestError> {
        match self
            .request(ControllerRequest::ControlledShutdown {
                broker_id,
                broker_epoch,
            })
            .await
        {
            ControllerResponse::ControlledShutdown {
                error_code,
                partitions_remaining,
            } => check(error_code).map(|()| partitions_remaining),
            other => Err(common_error(other)),
        }
    }

    /// A block of producer ids: `(first id, count)`.
    pub async fn allocate_producer_ids(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<(i64, i32), RequestError> {
        match self
            .request(ControllerRequest::AllocateProducerIds {
                broker_id,
                broker_epoch,
            })
            .await
        {
            ControllerResponse::AllocateProducerIds {
                error_code,
                producer_id_start,
                producer_id_len,
            } => check(error_code).map(|()| (producer_id_start, producer_id_len)),
            other => Err(common_error(other)),
        }
    }
}
