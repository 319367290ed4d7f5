//! A controller node: its thread, its tokio runtime, and what runs on it (openraft, the
//! listener, the active-controller loop). [`ControllerNode`] is owned by whoever started it
//! (the broker's main thread); dropping it stops the node and joins its thread.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, Config, Raft, SnapshotPolicy};
use tokio::sync::{mpsc, oneshot, watch};

use crate::active::ActiveController;
use crate::api::{ControllerRequest, ControllerResponse};
use crate::handle::ControllerHandle;
use crate::log_store::LogStore;
use crate::metadata::MetadataImage;
use crate::network::{NetworkFactory, MAX_PAYLOAD_ENTRIES, SNAPSHOT_CHUNK_LEN};
use crate::server::{serve, RpcHandler};
use crate::state_machine::MetadataStateMachine;
use crate::TypeConfig;

/// Requests queued for the active-controller loop, from handles and forwarding peers: past
/// this, senders wait (back-pressure), they are not dropped.
pub const COMMANDS_QUEUED_MAX: usize = 1024;

/// A controller node's settings, in Kafka's terms where Kafka has them.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// `node.id`.
    pub node_id: i32,
    /// Where the `CONTROLLER` listener binds (port 0: any; the handle reports the bound one).
    pub listen_addr: SocketAddr,
    /// `controller.quorum.voters`: node id → `host:port` of its controller listener.
    pub voters: BTreeMap<i32, String>,
    /// `<first log dir>/__cluster_metadata-0/`.
    pub metadata_dir: PathBuf,
    pub heartbeat_interval_ms: u64,
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// A snapshot is taken once this many entries were applied since the last one.
    pub entries_since_snapshot_max: u64,
    /// Entries kept before the snapshot when the log is purged, so a follower a little
    /// behind catches up from the log rather than a snapshot.
    pub entries_kept_after_snapshot: u64,
    /// `broker.session.timeout.ms`.
    pub session_timeout_ms: u64,
    /// The cluster default of `unclean.leader.election.enable`.
    pub unclean_leader_election_enable: bool,
    /// How long a request may wait for its records to commit.
    pub request_timeout_ms: u64,
    /// `auto.leader.rebalance.enable`: the active controller moves leaderships back to the
    /// preferred replicas every `leader_imbalance_check_interval_ms`.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds`, in ms.
    pub leader_imbalance_check_interval_ms: u64,
    /// `leader.imbalance.per.broker.percentage`.
    pub leader_imbalance_per_broker_percentage: u32,
}

impl ControllerConfig {
    /// Kafka's defaults (session 9 s, election 1–2 s) for everything not given.
    pub fn new(
        node_id: i32,
        listen_addr: SocketAddr,
        voters: BTreeMap<i32, String>,
        metadata_dir: PathBuf,
    ) -> Self {
        ControllerConfig {
            node_id,
            listen_addr,
            voters,
            metadata_dir,
            heartbeat_interval_ms: 100,
            election_timeout_min_ms: 1000,
            election_timeout_max_ms: 2000,
            entries_since_snapshot_max: 5000,
            entries_kept_after_snapshot: 500,
            session_timeout_ms: 9000,
            unclean_leader_election_enable: false,
            request_timeout_ms: 30_000,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_ms: 300_000,
            leader_imbalance_per_broker_percentage: 10,
        }
    }

    fn raft_config(&self) -> Result<Arc<Config>, ControllerError> {
        let config = Config {
            cluster_name: "laminar-controller".into(),
            heartbeat_interval: self.heartbeat_interval_ms,
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.entries_since_snapshot_max),
            max_in_snapshot_log_to_keep: self.entries_kept_after_snapshot,
            purge_batch_size: 1,
            snapshot_max_chunk_size: SNAPSHOT_CHUNK_LEN,
            max_payload_entries: MAX_PAYLOAD_ENTRIES,
            ..Config::default()
        };
        Ok(Arc::new(
            config
                .validate()
                .map_err(|e| ControllerError::Config(e.to_string()))?,
        ))
    }

    fn members(&self) -> Result<BTreeMap<u64, BasicNode>, ControllerError> {
        let mut members = BTreeMap::new();
        for (id, addr) in &self.voters {
            members.insert(raft_id(*id)?, BasicNode { addr: addr.clone() });
        }
        if !members.contains_key(&raft_id(self.node_id)?) {
            return Err(ControllerError::Config(
                "node.id is not among controller.quorum.voters".into(),
            ));
        }
        Ok(members)
    }
}

/// Kafka's node ids are non-negative i32s; openraft's are u64.
pub fn raft_id(node_id: i32) -> Result<u64, ControllerError> {
    u64::try_from(node_id).map_err(|_| ControllerError::Config(format!("node id {node_id} is negative")))
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("controller config: {0}")]
    Config(String),
    #[error("controller storage: {0}")]
    Storage(#[from] crate::disk_format::DiskError),
    #[error("controller: {0}")]
    Io(#[from] std::io::Error),
    #[error("controller raft: {0}")]
    Raft(String),
}

/// A request on its way to the active-controller loop, with where to send the answer.
pub struct Command {
    pub request: ControllerRequest,
    /// Came from another node: serve it here or answer NOT_CONTROLLER, never forward again.
    pub forwarded: bool,
    pub reply: oneshot::Sender<ControllerResponse>,
}

/// A running controller node. Dropping it shuts the node down.
pub struct ControllerNode {
    handle: ControllerHandle,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControllerNode {
    /// Starts the node on a new thread and returns once its storage is open and its listener
    /// bound.
    pub fn start(config: ControllerConfig) -> Result<Self, ControllerError> {
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let (shutdown_tx, shutdown_rx) = oneshot::channel();
        let name = format!("controller-{}", config.node_id);
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            match runtime {
                Ok(runtime) => runtime.block_on(run(config, ready_tx, shutdown_rx)),
                Err(e) => drop(ready_tx.send(Err(ControllerError::Io(e)))),
            }
        })?;
        let ready = ready_rx
            .recv()
            .map_err(|_| ControllerError::Raft("controller thread ended".into()));
        match ready.and_then(|r| r) {
            Ok(handle) => Ok(ControllerNode {
                handle,
                shutdown: Some(shutdown_tx),
                thread: Some(thread),
            }),
            Err(e) => {
                let _ = thread.join();
                Err(e)
            }
        }
    }

    pub fn handle(&self) -> ControllerHandle {
        self.handle.clone()
    }

    /// Stops openraft, the listener and the loop, and joins the thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ControllerNode {
    fn drop(&mut self) {
        self.stop();
    }
}

type Ready = std::sync::mpsc::SyncSender<Result<ControllerHandle, ControllerError>>;

async fn run(config: ControllerConfig, ready: Ready, shutdown: oneshot::Receiver<()>) {
    let started = start_parts(&config).await;
    let (raft, handle, tasks) = match started {
        Ok(parts) => parts,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(handle));
    let _ = shutdown.await;
    if let Err(e) = raft.shutdown().await {
        tracing::warn!(error = %e, "controller: raft shutdown");
    }
    for task in tasks {
        task.abort();
    }
}

async fn start_parts(
    config: &ControllerConfig,
) -> Result<
    (
        Raft<TypeConfig>,
        ControllerHandle,
        Vec<tokio::task::JoinHandle<()>>,
    ),
    ControllerError,
> {
    let members = config.members()?;
    let node_id = raft_id(config.node_id)?;
    let (images_tx, images_rx) = watch::channel(Arc::new(MetadataImage::default()));
    let log_store = LogStore::open(&config.metadata_dir)?;
    let state_machine = MetadataStateMachine::open(&config.metadata_dir, images_tx)?;
    let listener = tokio::net::TcpListener::bind(config.listen_addr).await?;
    let listen_addr = listener.local_addr()?;
    let raft = Raft::new(
        node_id,
        config.raft_config()?,
        NetworkFactory,
        log_store,
        state_machine,
    )
    .await
    .map_err(|e| ControllerError::Raft(e.to_string()))?;
    let is_initialized = raft
        .is_initialized()
        .await
        .map_err(|e| ControllerError::Raft(e.to_string()))?;
    if !is_initialized {
        // Every voter bootstraps the same static membership (controller.quorum.voters);
        // openraft accepts that, and refuses it once a log exists.
        if let Err(e) = raft.initialize(members.clone()).await {
            tracing::debug!(error = %e, "controller: initialize");
        }
    }
    let (commands_tx, commands_rx) = mpsc::channel(COMMANDS_QUEUED_MAX);
    let handler = RpcHandler {
        raft: raft.clone(),
        commands: commands_tx.clone(),
    };
    let active = ActiveController::new(node_id, config, raft.clone(), images_rx.clone(), members);
    let tasks = vec![
        tokio::spawn(serve(listener, handler)),
        tokio::spawn(active.run(commands_rx)),
    ];
    let handle = ControllerHandle::new(node_id, listen_addr, commands_tx, images_rx, raft.metrics());
    Ok((raft, handle, tasks))
}

pub(crate) fn duration_ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}
