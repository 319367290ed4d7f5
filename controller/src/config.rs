//! A controller node's settings and errors (`ControllerConfig`, Kafka's names where Kafka has
//! them), kept apart from the node that runs them so that every part of the node can read them
//! without importing the node.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, Config, SnapshotPolicy};

use crate::network::{MAX_PAYLOAD_ENTRIES, SNAPSHOT_CHUNK_LEN};
use crate::transport::{Plaintext, TransportSecurity};

/// A controller node's settings, in Kafka's terms where Kafka has them.
#[derive(Clone)]
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
    /// How the transport's connections are secured (the controller listener's protocol).
    pub transport_security: Arc<dyn TransportSecurity>,
    /// SCRAM users a new cluster starts with (`laminar storage format --add-scram`): the first
    /// active controller of the quorum writes them with the cluster's id, in its first entry.
    /// At most [`BOOTSTRAP_RECORDS_MAX`].
    pub bootstrap_records: Vec<crate::records::UserScramCredentialRecord>,
    /// `controller.quorum.bootstrap.servers`: more controller listeners an observer asks to
    /// be added at, besides the voters'.
    pub bootstrap_servers: Vec<String>,
    /// `Some(address)`: a broker-only node, which follows the metadata log as an observer (a
    /// Raft learner) and asks the voters to replicate to it at `address` (its controller
    /// listener, `host:port`); never among `voters`. `None`: a voter.
    pub observer_address: Option<String>,
    /// The cluster id this node's log dirs were formatted with (`laminar storage format
    /// --cluster-id`): the first active controller names the cluster so. `None`: a random id.
    pub formatted_cluster_id: Option<String>,
}

/// The most bootstrap users: they all go into one log entry.
pub const BOOTSTRAP_RECORDS_MAX: usize = 100;

impl std::fmt::Debug for ControllerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerConfig")
            .field("node_id", &self.node_id)
            .field("listen_addr", &self.listen_addr)
            .field("voters", &self.voters)
            .field("metadata_dir", &self.metadata_dir)
            .field("transport_security", &self.transport_security.describe())
            .finish_non_exhaustive()
    }
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
            bootstrap_records: Vec::new(),
            formatted_cluster_id: None,
            observer_address: None,
            bootstrap_servers: Vec::new(),
            entries_kept_after_snapshot: 500,
            session_timeout_ms: 9000,
            unclean_leader_election_enable: false,
            request_timeout_ms: 30_000,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_ms: 300_000,
            leader_imbalance_per_broker_percentage: 10,
            transport_security: Arc::new(Plaintext),
        }
    }

    pub(crate) fn raft_config(&self) -> Result<Arc<Config>, ControllerError> {
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

    pub(crate) fn members(&self) -> Result<BTreeMap<u64, BasicNode>, ControllerError> {
        let mut members = BTreeMap::new();
        for (id, addr) in &self.voters {
            members.insert(raft_id(*id)?, BasicNode { addr: addr.clone() });
        }
        let voter = members.contains_key(&raft_id(self.node_id)?);
        match (voter, &self.observer_address) {
            (false, None) => Err(ControllerError::Config(
                "node.id is not among controller.quorum.voters".into(),
            )),
            (true, Some(_)) => Err(ControllerError::Config(
                "a broker-only node's node.id must not be among controller.quorum.voters".into(),
            )),
            _ => Ok(members),
        }
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

pub(crate) fn duration_ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}
