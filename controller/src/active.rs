//! The active-controller loop: one task per node on the controller runtime (tokio thread)
//! that serves controller requests one at a time. On the Raft leader it decides
//! (`decide`) from the applied metadata and writes the records; elsewhere it forwards the
//! request once to the leader's controller listener (a forwarded request that lands on a
//! non-leader is answered NOT_CONTROLLER with the leader it knows). The leader also keeps the
//! brokers' sessions (in memory, as Kafka's active controller does) and fences brokers whose
//! heartbeats stopped for `broker.session.timeout.ms`.

use laminar_model::NodeId;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use openraft::{BasicNode, Raft};
use tokio::sync::{mpsc, watch};

use crate::api::{ControllerRequest, ControllerResponse, ElectionType};
use crate::command::Command;
use crate::config::{duration_ms, ControllerConfig};
use crate::decide::{decide, fence_broker, leaders_to_rebalance, DecisionContext};
use crate::metadata::MetadataImage;
use crate::network::{PeerClient, RpcRequest, RpcResponse};
use crate::records::{broker_epoch_at, cluster_id_text, ClusterIdRecord, MetadataRecord, RecordBatch};
use crate::refusal::Refusal;
use crate::TypeConfig;

pub struct ActiveController {
    node_id: u64,
    config: ControllerConfig,
    raft: Raft<TypeConfig>,
    images: watch::Receiver<Arc<MetadataImage>>,
    members: BTreeMap<u64, BasicNode>,
    /// Last heartbeat per broker; only meaningful while this node leads. At most one entry
    /// per registered broker.
    sessions: HashMap<NodeId, Instant>,
    leading: bool,
    /// Idle forwarding connections per other voter (at most `FORWARD_IDLE_MAX` each).
    peers: ForwardPool,
    /// A write that outlived its request's timeout: openraft may still commit it. Nothing is
    /// decided until it is applied or known lost, so that every decision is made on a state
    /// holding every earlier one, and every record written applies (`state_machine.rs`).
    unresolved: Option<tokio::task::JoinHandle<WriteResult>>,
}

type WriteResult = Result<
    openraft::raft::ClientWriteResponse<TypeConfig>,
    openraft::error::RaftError<u64, openraft::error::ClientWriteError<u64, BasicNode>>,
>;

/// Idle connections kept per voter for forwarding: forwards run beside the loop, each on a
/// connection of its own, so one stuck on a frozen leader holds up neither the loop nor the
/// forwards that follow once another leader is elected.
const FORWARD_IDLE_MAX: usize = 4;

type ForwardPool = Arc<std::sync::Mutex<HashMap<u64, Vec<PeerClient>>>>;

enum Written {
    Applied(u64),
    NotLeader(Option<u64>),
    Failed(Refusal),
}

impl ActiveController {
    pub fn new(
        node_id: u64,
        config: &ControllerConfig,
        raft: Raft<TypeConfig>,
        images: watch::Receiver<Arc<MetadataImage>>,
        members: BTreeMap<u64, BasicNode>,
    ) -> Self {
        ActiveController {
            node_id,
            config: config.clone(),
            raft,
            images,
            members,
            sessions: HashMap::new(),
            leading: false,
            peers: ForwardPool::default(),
            unresolved: None,
        }
    }

    pub async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        // Sessions are checked four times per timeout, so a fence comes at most a quarter late.
        let period = duration_ms((self.config.session_timeout_ms / 4).max(10));
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut rebalance =
            tokio::time::interval(duration_ms(self.config.leader_imbalance_check_interval_ms.max(1)));
        rebalance.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let rebalancing = self.config.auto_leader_rebalance_enable;
        loop {
            tokio::select! {
                command = commands.recv() => {
                    let Some(command) = command else { return };
                    self.serve(command).await;
                }
                _ = ticks.tick() => self.fence_expired_sessions().await,
                _ = rebalance.tick(), if rebalancing => self.rebalance_leaders().await,
            }
        }
    }

    fn current_leader(&self) -> Option<u64> {
        self.raft.metrics().borrow().current_leader
    }

    /// Whether this node leads, once any earlier write is resolved (see `unresolved`).
    async fn lead(&mut self) -> bool {
        if let Some(writing) = self.unresolved.take() {
            let _ = writing.await;
        }
        self.refresh_leadership()
    }

    /// Tracks leadership changes: a new leader gives every broker a fresh session, as
    /// Kafka's new active controller does, so none is fenced for the election's gap.
    fn refresh_leadership(&mut self) -> bool {
        let leading = self.current_leader() == Some(self.node_id);
        if leading && !self.leading {
            let now = Instant::now();
            self.sessions = self
                .images
                .borrow()
                .metadata
                .brokers
                .keys()
                .map(|id| (*id, now))
                .collect();
        }
        if !leading {
            self.sessions.clear();
        }
        self.leading = leading;
        leading
    }

    /// Serves a command here when this node leads; else forwards it to the leader from a task
    /// of its own (the loop goes on), or answers NOT_CONTROLLER.
    async fn serve(&mut self, command: Command) {
        if self.lead().await {
            let response = self.serve_as_leader(command.request).await;
            let _ = command.reply.send(response);
            return;
        }
        let leader_id = self.current_leader();
        let address = leader_id.and_then(|id| self.address_of(id));
        match (leader_id, address) {
            (Some(leader), Some(address)) if !command.forwarded => {
                let forward = Forward {
                    leader,
                    address,
                    timeout: duration_ms(self.config.request_timeout_ms),
                    pool: self.peers.clone(),
                    security: self.config.transport_security.clone(),
                    metrics: self.raft.metrics(),
                };
                tokio::spawn(async move {
                    let response = forward.call(command.request).await;
                    let _ = command.reply.send(response);
                });
            }
            _ => {
                let _ = command.reply.send(ControllerResponse::not_controller(leader_id));
            }
        }
    }

    /// Where node `id`'s controller listener is: as the quorum's membership records it (voters
    /// and observers, as they change), else as `controller.quorum.voters` says.
    fn address_of(&self, id: u64) -> Option<String> {
        let metrics = self.raft.metrics();
        let recorded = metrics
            .borrow()
            .membership_config
            .membership()
            .get_node(&id)
            .cloned();
        recorded
            .or_else(|| self.members.get(&id).cloned())
            .map(|node| node.addr)
    }

    /// The auto leader rebalance, on the active controller only (as in Kafka): a preferred
    /// election of the partitions `leaders_to_rebalance` picks, served like a request.
    async fn rebalance_leaders(&mut self) {
        if !self.lead().await {
            return;
        }
        let image = self.images.borrow().clone();
        let partitions = leaders_to_rebalance(
            &image.metadata,
            self.config.leader_imbalance_per_broker_percentage,
        );
        if partitions.is_empty() {
            return;
        }
        let count = partitions.len();
        let request = ControllerRequest::ElectLeaders {
            election_type: ElectionType::Preferred,
            partitions: Some(partitions),
        };
        match self.serve_as_leader(request).await {
            ControllerResponse::Partitions(results) => {
                let moved = results.iter().filter(|r| r.result.is_ok()).count();
                tracing::info!(
                    candidates = count,
                    moved,
                    "controller: leaders moved back to their preferred replicas"
                );
            }
            other => tracing::debug!(?other, "controller: leader rebalance not done"),
        }
    }

    async fn serve_as_leader(&mut self, request: ControllerRequest) -> ControllerResponse {
        // Decide on everything committed so far (a new leader may not have applied it yet).
        if self.raft.ensure_linearizable().await.is_err() {
            return ControllerResponse::not_controller(self.current_leader());
        }
        match request {
            ControllerRequest::AddObserver { node_id, address } => {
                return crate::observers::add(&self.raft, node_id, address).await
            }
            ControllerRequest::AddVoter { node_id } => {
                return crate::observers::add_voter(&self.raft, node_id).await
            }
            ControllerRequest::RemoveVoter { node_id } => {
                return crate::observers::remove_voter(&self.raft, node_id).await
            }
            _ => {}
        }
        if matches!(request, ControllerRequest::DescribeQuorum) {
            let described = crate::quorum_description::describe(&self.raft.metrics().borrow());
            return match described {
                Some(description) => ControllerResponse::Quorum(description),
                None => ControllerResponse::not_controller(self.current_leader()),
            };
        }
        let session_broker = match &request {
            ControllerRequest::RegisterBroker { broker_id, .. }
            | ControllerRequest::BrokerHeartbeat { broker_id, .. } => Some(*broker_id),
            _ => None,
        };
        let decision = {
            let image = self.images.borrow().clone();
            let timeout = duration_ms(self.config.session_timeout_ms);
            let sessions = self.sessions.clone();
            let ctx = DecisionContext {
                session_alive: Box::new(move |id| sessions.get(&id).is_some_and(|t| t.elapsed() < timeout)),
                unclean_leader_election_default: self.config.unclean_leader_election_enable,
                seed: rand::random(),
            };
            decide(&image.metadata, request, &ctx)
        };
        let mut response = decision.response;
        let mut records = decision.records;
        if !records.is_empty() && self.images.borrow().metadata.cluster_id.is_none() {
            // The first entry an active controller of this quorum writes names the cluster.
            // With it, the users the cluster was formatted with.
            let formatted = self.config.formatted_cluster_id.clone();
            let cluster_id = formatted.unwrap_or_else(|| cluster_id_text(rand::random()));
            let users = self.config.bootstrap_records.iter().cloned();
            let first = std::iter::once(MetadataRecord::ClusterId(ClusterIdRecord { cluster_id }))
                .chain(users.map(MetadataRecord::UserScramCredential));
            records.splice(0..0, first);
        }
        match self.write(records).await {
            Written::Applied(log_index) => match &mut response {
                ControllerResponse::RegisterBroker {
                    broker_epoch: Ok(broker_epoch),
                } => *broker_epoch = broker_epoch_at(log_index),
                ControllerResponse::BrokerHeartbeat { metadata_version, .. } => *metadata_version = log_index,
                _ => {}
            },
            Written::NotLeader(leader_id) => return ControllerResponse::not_controller(leader_id),
            Written::Failed(refusal) => return ControllerResponse::Refused(refusal),
        }
        if let Some(broker_id) = session_broker.filter(|_| response_ok(&response)) {
            self.sessions.insert(broker_id, Instant::now());
        }
        response
    }

    /// Replicates `records` as one entry and waits until it is applied here.
    async fn write(&mut self, records: Vec<MetadataRecord>) -> Written {
        if records.is_empty() {
            return Written::Applied(self.images.borrow().version);
        }
        let timeout = duration_ms(self.config.request_timeout_ms);
        let raft = self.raft.clone();
        let mut writing = tokio::spawn(async move { raft.client_write(RecordBatch { records }).await });
        let written = match tokio::time::timeout(timeout, &mut writing).await {
            Err(_) => {
                self.unresolved = Some(writing);
                return Written::Failed(Refusal::RequestTimedOut);
            }
            Ok(Err(gone)) => return Written::Failed(Refusal::WriteFailed(gone.to_string())),
            Ok(Ok(written)) => written,
        };
        match written {
            Ok(answer) => Written::Applied(answer.data.log_index),
            Err(e) => match e.forward_to_leader() {
                Some(forward) => Written::NotLeader(forward.leader_id),
                None => Written::Failed(Refusal::WriteFailed(e.to_string())),
            },
        }
    }

    /// Fences (and moves the leaderships of) every unfenced broker whose session expired.
    async fn fence_expired_sessions(&mut self) {
        // Decide on everything committed so far, as `serve_as_leader` does.
        if !self.lead().await || self.raft.ensure_linearizable().await.is_err() {
            return;
        }
        let image = self.images.borrow().clone();
        let timeout = duration_ms(self.config.session_timeout_ms);
        let now = Instant::now();
        for broker in image.metadata.brokers.values().filter(|b| !b.fenced) {
            let last = *self.sessions.entry(broker.broker_id).or_insert(now);
            if now.duration_since(last) < timeout {
                continue;
            }
            tracing::info!(
                broker_id = broker.broker_id.get(),
                "controller: session expired, fencing the broker"
            );
            let image = self.images.borrow().clone();
            let records = fence_broker(
                &image.metadata,
                broker.broker_id,
                self.config.unclean_leader_election_enable,
            );
            if let Written::Failed(refusal) = self.write(records).await {
                tracing::warn!(
                    broker_id = broker.broker_id.get(),
                    %refusal,
                    "controller: fencing failed"
                );
            }
        }
    }
}

fn response_ok(response: &ControllerResponse) -> bool {
    match response {
        ControllerResponse::RegisterBroker { broker_epoch } => broker_epoch.is_ok(),
        ControllerResponse::BrokerHeartbeat { is_fenced, .. } => is_fenced.is_ok(),
        _ => false,
    }
}

/// One request on its way to the active controller.
struct Forward {
    leader: u64,
    address: String,
    timeout: std::time::Duration,
    pool: ForwardPool,
    security: Arc<dyn crate::transport::TransportSecurity>,
    /// Raft's view: a forward to a leader that lost its place (frozen, partitioned) gives up
    /// as soon as another is elected, and the caller asks again there.
    metrics: watch::Receiver<openraft::RaftMetrics<u64, BasicNode>>,
}

impl Forward {
    async fn call(self, request: ControllerRequest) -> ControllerResponse {
        let idle = self.lock_pool().get_mut(&self.leader).and_then(Vec::pop);
        let mut client = idle.unwrap_or_else(|| PeerClient::new(self.address.clone(), self.security.clone()));
        let leader = self.leader;
        let mut metrics = self.metrics.clone();
        let replaced = async move {
            while metrics.changed().await.is_ok() {
                let now = metrics.borrow().current_leader;
                if now.is_some() && now != Some(leader) {
                    return now;
                }
            }
            None
        };
        let request = RpcRequest::Controller(request);
        let answered = tokio::select! {
            answered = client.call(&request, self.timeout) => answered,
            leader_id = replaced => return ControllerResponse::not_controller(leader_id),
        };
        match answered {
            Ok(RpcResponse::Controller(response)) => {
                let mut pool = self.lock_pool();
                let idle = pool.entry(self.leader).or_default();
                if idle.len() < FORWARD_IDLE_MAX {
                    idle.push(client);
                }
                response
            }
            Ok(_) | Err(_) => ControllerResponse::not_controller(Some(self.leader)),
        }
    }

    fn lock_pool(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Vec<PeerClient>>> {
        // A panic while holding it leaves plain data behind: use it.
        self.pool.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
