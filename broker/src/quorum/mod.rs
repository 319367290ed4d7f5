//! The broker in a controller quorum (cluster mode, `process.roles=broker,controller`): this
//! process runs a voter of the quorum (`laminar-controller`, on its own thread with its own
//! tokio runtime) and is a broker registered with it. The topic table the shards route by becomes a view of the quorum's
//! `ClusterMetadata` (`view.rs`); admin requests and producer-id blocks go to the quorum
//! (`admin.rs`); registration, heartbeats and controlled shutdown are in `membership.rs`.
//!
//! Clients are served by each partition's leader (others answer NOT_LEADER_OR_FOLLOWER);
//! followers copy it (`crate::replication`).

pub mod admin;
pub mod membership;
pub mod migrate;
pub mod stray;
pub mod transport_security;
pub mod view;

use laminar_model::{BrokerEpoch, NodeId};
use std::net::ToSocketAddrs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use laminar_controller::{ControllerConfig, ControllerHandle, ControllerNode, MetadataImage};
use laminar_engine::metadata::TopicMetadata;

use crate::config::{BrokerConfig, ClusterSettings};

/// The controller's directory under the first log dir (KRaft's name for the metadata log).
pub const METADATA_LOG_DIR: &str = "__cluster_metadata-0";
/// Topics removed from the metadata or given new configs (and broker config changes) whose local
/// partitions still wait for shard 0 to delete or reconfigure them: past this the metadata thread waits (back-pressure),
/// nothing is dropped.
const TOPIC_CHANGES_QUEUED_MAX: usize = 1024;

/// What shard 0 does to local partitions after a metadata change.
#[derive(Debug, Clone)]
pub enum MetadataChange {
    /// The topic is gone: delete its partitions.
    Removed(Arc<TopicMetadata>),
    /// Its config overrides changed: apply them to its open partitions.
    Reconfigured(Arc<TopicMetadata>),
    /// This broker's dynamic configs changed (already in its effective config): apply them to
    /// every open partition and every shard's throttles.
    BrokerReconfigured,
}

/// What `ClusterLink::status` reports: plain data, copied out when the admin port asks.
#[derive(Debug, Clone)]
pub struct ClusterStatus {
    pub node_id: NodeId,
    /// Whether the published metadata shows this broker fenced.
    pub fenced: bool,
    pub broker_epoch: BrokerEpoch,
    pub partitions_led: u64,
    /// The quorum as this node's voter sees it; voters' lags only on the active controller.
    pub quorum: laminar_controller::QuorumStatus,
}

/// The broker's link to the quorum. Shared by every shard and the membership and metadata
/// threads (`Arc`); its controller handle's futures work from glommio.
pub struct ClusterLink {
    pub handle: ControllerHandle,
    pub node_id: NodeId,
    /// The epoch of this broker's current registration (-1 before the first).
    broker_epoch: AtomicI64,
    /// Set when controlled shutdown begins: heartbeats stop, or they would unfence us again.
    stopping: AtomicBool,
    /// Whether this broker may still act as a leader: renewed by its heartbeats.
    pub session: Arc<membership::SessionLease>,
    /// The latest applied metadata, published by the metadata thread with the topic view.
    image: ArcSwap<MetadataImage>,
    /// Notified after each publication of `image` (the shards' replication tasks wait on it).
    published: event_listener::Event,
    /// The producer-id block InitProducerId hands ids from: `(next, end)`.
    producer_ids: Mutex<(i64, i64)>,
    /// The voter this process runs; taken and stopped once the shards have stopped.
    node: Mutex<Option<ControllerNode>>,
    topic_changes: (
        async_channel::Sender<MetadataChange>,
        async_channel::Receiver<MetadataChange>,
    ),
    /// How followers connect to leaders (the inter-broker listener's TLS and SASL login).
    pub replica_fetch_security: laminar_client::Security,
}

/// Where the voters reach this node's controller listener, if the node is not among the static
/// voters (a broker-only node, or a controller waiting to be made a voter): it then follows the
/// quorum as an observer (decision 0042).
fn observer_address(config: &BrokerConfig, settings: &ClusterSettings) -> Option<String> {
    if settings.voters.contains_key(&config.node_id.get()) {
        return None;
    }
    tracing::info!(
        node_id = config.node_id.get(),
        "not among controller.quorum.voters: following the quorum as an observer"
    );
    let listener = &settings.controller_listener;
    let host = &listener.host;
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.clone()
    };
    Some(format!("{host}:{}", listener.port))
}

impl ClusterLink {
    /// Starts this node's voter (or, on a broker-only node, its observer) with its metadata
    /// under `<log_dir>/__cluster_metadata-0/`.
    pub fn start(
        config: &BrokerConfig,
        settings: &ClusterSettings,
        log_dir: &Path,
    ) -> anyhow::Result<Arc<Self>> {
        let listener = &settings.controller_listener;
        let listen_addr = (listener.host.as_str(), listener.port)
            .to_socket_addrs()
            .map_err(|e| anyhow::anyhow!("listeners: cannot resolve {listener}: {e}"))?
            .next()
            .ok_or_else(|| anyhow::anyhow!("listeners: {listener} resolves to nothing"))?;
        // The controller fsyncs what it writes in its directory, not the directory's entry here.
        let metadata_dir = log_dir.join(METADATA_LOG_DIR);
        laminar_engine::io::create_dir_all_durably(&metadata_dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", metadata_dir.display()))?;
        let mut controller = ControllerConfig::new(
            config.node_id.get(),
            listen_addr,
            settings.voters.clone(),
            metadata_dir,
        );
        controller.session_timeout_ms = settings.session_timeout_ms;
        controller.unclean_leader_election_enable = config.unclean_leader_election_enable;
        controller.auto_leader_rebalance_enable = settings.auto_leader_rebalance_enable;
        controller.leader_imbalance_check_interval_ms = settings.leader_imbalance_check_interval_ms;
        controller.leader_imbalance_per_broker_percentage = settings.leader_imbalance_per_broker_percentage;
        controller.bootstrap_records = crate::scram_users::bootstrap_records(log_dir)?;
        // Formatted for a cluster (a node id beside the cluster id): the quorum takes that id.
        let properties = crate::meta_properties::read(log_dir)?;
        controller.formatted_cluster_id = properties.cluster_id.filter(|_| properties.node_id.is_some());
        controller.observer_address = observer_address(config, settings);
        controller.bootstrap_servers = settings.bootstrap_servers.clone();
        let links = config
            .peer_links
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("a cluster node without peer links"))?;
        let replica_fetch_security = match &links.replication {
            Some(link) => crate::peer_security::client_security(link)?,
            None => laminar_client::Security::default(),
        };
        let failure_delay = std::time::Duration::from_millis(
            u64::try_from(config.connection_failed_authentication_delay_ms).unwrap_or(0),
        );
        controller.transport_security =
            transport_security::ControllerLinkSecurity::for_link(&links.controller, failure_delay)?;
        let node = ControllerNode::start(controller).map_err(|e| anyhow::anyhow!("controller: {e}"))?;
        tracing::info!(
            addr = %node.handle().listen_addr(),
            voters = ?settings.voters,
            security = %crate::config::broker::peer_links::describe(&links.controller),
            replication = %links.replication.as_ref().map_or("-".into(), crate::config::broker::peer_links::describe),
            "controller listening"
        );
        Ok(Arc::new(ClusterLink {
            handle: node.handle(),
            node_id: config.node_id,
            broker_epoch: AtomicI64::new(-1),
            stopping: AtomicBool::new(false),
            session: Arc::new(membership::SessionLease::new(std::time::Duration::from_millis(
                settings.session_timeout_ms,
            ))),
            image: ArcSwap::from_pointee(MetadataImage::default()),
            published: event_listener::Event::new(),
            producer_ids: Mutex::new((0, 0)),
            node: Mutex::new(Some(node)),
            topic_changes: async_channel::bounded(TOPIC_CHANGES_QUEUED_MAX),
            replica_fetch_security,
        }))
    }

    /// The metadata as last published to the shards.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.load_full()
    }

    /// Looks at the metadata as last published without taking a reference to it: for checks
    /// on every request, which must not make the shards bump one shared counter.
    pub fn peek_image<R>(&self, look: impl FnOnce(&MetadataImage) -> R) -> R {
        look(&self.image.load())
    }

    /// Resolves at the next publication of the metadata (listen, then look: none is missed).
    pub fn published(&self) -> event_listener::EventListener {
        self.published.listen()
    }

    pub fn broker_epoch(&self) -> BrokerEpoch {
        BrokerEpoch::new(self.broker_epoch.load(Ordering::Acquire))
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// The controller id clients are told: the quorum's leader when it is a broker they can
    /// reach, else this broker (which forwards admin requests to the quorum, as KRaft brokers
    /// name a broker when the active controller is a controller-only node); -1 with no leader.
    pub fn controller_id(&self) -> i32 {
        let leader = self.handle.quorum_status().leader_id;
        let Some(leader) = leader.and_then(|id| i32::try_from(id).ok()) else {
            return -1;
        };
        let is_broker = self.peek_image(|image| image.metadata.brokers.contains_key(&NodeId::new(leader)));
        if is_broker {
            leader
        } else {
            self.node_id.get()
        }
    }

    /// This broker and the quorum as this node sees them, for `/v1/status` and `/metrics`.
    pub fn status(&self) -> ClusterStatus {
        let image = self.image();
        let md = &image.metadata;
        let partitions_led = md
            .topics
            .values()
            .flat_map(|t| t.partitions.values())
            .filter(|p| p.leader == self.node_id)
            .count();
        ClusterStatus {
            node_id: self.node_id,
            fenced: !md.is_unfenced(self.node_id),
            broker_epoch: self.broker_epoch(),
            partitions_led: u64::try_from(partitions_led).unwrap_or(u64::MAX),
            quorum: self.handle.quorum_status(),
        }
    }

    /// Stops the voter (after the shards stopped): the quorum goes on without it.
    pub fn stop_controller(&self) {
        let node = self.node.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(node) = node {
            node.shutdown();
        }
    }

    /// The next topic removed or reconfigured in the metadata (for shard 0, which deletes or
    /// reconfigures its partitions).
    pub async fn next_metadata_change(&self) -> Option<MetadataChange> {
        self.topic_changes.1.recv().await.ok()
    }
}
