//! Starts the broker: the shards, a listener on every shard (SO_REUSEPORT), and the shutdown
//! sequence: stop accepting, let in-flight requests finish, flush and close every partition.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{select, Either};
use glommio::net::TcpListener;
use laminar_engine::io::writeback::WriteBehindRing;
use laminar_engine::io::{DescriptorBudget, FileCache, GlommioStorage, ReserveBudget, WriteBehind};
use laminar_engine::metadata::{MetadataStore, ProducerIdAllocator};
use laminar_engine::shard::partitions::ShardPartitions;
use laminar_engine::shard::runtime::ShardRuntimeConfig;
use laminar_engine::shard::{ShardGone, ShardRuntime};

use crate::broker::{BrokerCtx, BrokerShard, BrokerShared, ShutdownSignal};
use crate::config::BrokerConfig;
use crate::connection;
use crate::connection_slots::{ConnectionSlot, NoSlot, ROOM_WAIT_MAX};
use crate::connections_per_ip::{ConnectionsPerIp, IpConnection};
use crate::fetch_sessions::FetchSessions;
use crate::kafka_listener::{self, ListenerId};
use crate::log_dir_lock::LogDirLock;
use crate::open_files;
use crate::request_memory::RequestMemory;
use laminar_security::credentials::ScramCredentialStore;

/// How long shutdown waits for connections to finish their current request.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A broker that has started: its shards run until [`ShutdownSignal::trigger`].
pub struct RunningBroker {
    pub shared: Arc<BrokerShared>,
    /// The first client listener's address.
    pub listen_addr: SocketAddr,
    /// Every client listener's address, in the order of `listeners`.
    pub listen_addrs: Vec<SocketAddr>,
    runtime: ShardRuntime<BrokerShard>,
}

impl RunningBroker {
    /// Runs `work` on `shard` with its context, from a thread that is not a shard, and blocks
    /// until it returns. For tools that feed request frames to [`crate::handlers::handle`]
    /// without a socket (laminar-fuzz); connections never use it.
    pub fn run_on_shard<R, F, Fut>(&self, shard: usize, work: F) -> Result<R, ShardGone>
    where
        F: FnOnce(Rc<BrokerCtx>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = R> + 'static,
        R: Send + 'static,
    {
        self.runtime.run_on(shard, work)
    }

    /// Waits until every shard has stopped.
    pub fn join(self) -> Result<(), String> {
        self.runtime.join()
    }
}

/// Starts a broker with `config`. Returns once every shard listens.
pub fn start(config: BrokerConfig) -> anyhow::Result<RunningBroker> {
    laminar_sys::memory::keep_freed_memory();
    let log_dir_locks = checked_log_dir_locks(&config)?;
    let log_dir = log_dir_locks[0].dir().to_path_buf();
    let metadata = MetadataStore::open(&log_dir, config.max_broker_partitions)?;
    let (cluster, offsets_partitions) = cluster_and_offsets(&metadata, &config, &log_dir)?;
    let producer_ids = ProducerIdAllocator::open(&log_dir)?;
    let (listen_addrs, listener_tls) = (kafka_listener::resolve_addrs(&config)?, listener_tls(&config)?);
    let (cluster_id, cluster_start) = cluster_identity(&log_dir_locks, &config, cluster.as_deref())?;
    let shard_count = config.laminar_cores.max(1);
    let open_files_limit = open_files::open_files_limit();
    let shares = open_files::descriptor_shares(open_files_limit, config.max_connections, shard_count);
    let descriptors = shares.storage;
    let reservations = ReserveBudget::for_log_dir(&log_dir);
    let write_behind_unavailable = probe_write_behind(config.write_behind.settings);
    let shared = Arc::new(BrokerShared {
        request_memory: RequestMemory::new(config.queued_max_request_bytes),
        fetch_sessions: FetchSessions::new(config.max_incremental_fetch_session_cache_slots as usize),
        connections_per_ip: ConnectionsPerIp::new(config.connections_per_ip.clone()),
        connection_rate: connection_rate(&config),
        failed_logins: failed_logins(&config),
        authorizer: open_authorizer(&config.authorizer, &log_dir, cluster.as_ref())?,
        client_quotas: client_quotas(&config, &log_dir, cluster.as_ref())?,
        effective_config: effective_config(&config, &log_dir, cluster.as_ref())?,
        config,
        log_dir_locks,
        write_behind_unavailable,
        metadata,
        producer_ids,
        log_dir: log_dir.clone(),
        cluster_id,
        shutdown: ShutdownSignal::default(),
        connection_slots: shares.connections,
        storage_descriptors: descriptors.clone(),
        start_gate: ShutdownSignal::default(),
        cluster: cluster.clone(),
        scram_credentials: open_scram_credentials(&log_dir)?,
        listener_tls,
    });
    if let Some(link) = cluster {
        follow_the_quorum(&shared, link, cluster_start)?;
    }
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<ShardReady>();
    let init_shared = shared.clone();
    let budgets = ShardBudgets {
        descriptors: descriptors.clone(),
        reservations: reservations.clone(),
    };
    let runtime = ShardRuntime::start(
        ShardRuntimeConfig {
            shard_count,
            pin: true,
            spin_before_park: None,
        },
        move |id| shard_state(&init_shared, &budgets, ((id, shard_count), offsets_partitions)),
        shard_main_on(listen_addrs.clone(), ready_tx),
    )?;
    if let Err(e) = wait_for_shards(&ready_rx, shard_count) {
        shared.shutdown.trigger();
        let _ = runtime.join();
        anyhow::bail!("{e}");
    }
    log_budgets(open_files_limit, &descriptors, &shared, &reservations);
    shared.start_gate.trigger();
    Ok(RunningBroker {
        shared,
        listen_addr: listen_addrs[0],
        listen_addrs,
        runtime,
    })
}

/// Each listener's TLS: its key, certificates and trust store read now, so that a bad one
/// stops the start with a message naming the listener.
fn listener_tls(config: &BrokerConfig) -> anyhow::Result<Vec<Option<crate::tls::ListenerTls>>> {
    let each = config.listener_security.iter().map(|listener| {
        let Some(settings) = &listener.tls else {
            return Ok(None);
        };
        crate::tls::ListenerTls::new(settings)
            .map(Some)
            .map_err(|e| anyhow::anyhow!("listener {}: {e}", listener.name))
    });
    each.collect()
}

fn log_budgets(
    open_files_limit: u64,
    descriptors: &laminar_engine::io::DescriptorBudget,
    shared: &BrokerShared,
    reservations: &ReserveBudget,
) {
    tracing::info!(
        open_files_limit,
        partition_file_descriptors = descriptors.limit(),
        connections_max = shared.connection_slots.max(),
        reserved_ahead_bytes_max = reservations.limit(),
        "partitions open on first use; files of idle ones close when descriptors run short"
    );
}

/// The ACLs, if `authorizer.class.name` turns them on: a single node's from its log dir, a
/// cluster's from its metadata.
fn open_authorizer(
    settings: &Option<crate::config::AuthorizerSettings>,
    log_dir: &Path,
    cluster: Option<&Arc<crate::quorum::ClusterLink>>,
) -> anyhow::Result<Option<crate::authorization::Authorizer>> {
    use crate::authorization::Authorizer;
    let Some(settings) = settings.clone() else {
        return Ok(None);
    };
    let authorizer = match cluster {
        Some(link) => Authorizer::of_cluster(settings, link.clone()),
        None => {
            Authorizer::open(settings, log_dir).map_err(|e| anyhow::anyhow!("cannot load the ACLs: {e}"))?
        }
    };
    tracing::info!(
        acls = authorizer.acls().bindings().count(),
        "ACLs on (authorizer.class.name)"
    );
    Ok(Some(authorizer))
}

/// How failed logins are slowed: `connection.failed.authentication.delay.ms`, doubling to its max.
fn failed_logins(config: &BrokerConfig) -> crate::failed_logins::FailedLogins {
    crate::failed_logins::FailedLogins::new(
        millis(config.connection_failed_authentication_delay_ms),
        millis(config.connection_failed_authentication_delay_max_ms),
    )
}

/// The client quotas: a single node's from its log dir, a cluster's from its metadata.
fn client_quotas(
    config: &BrokerConfig,
    log_dir: &Path,
    cluster: Option<&Arc<crate::quorum::ClusterLink>>,
) -> anyhow::Result<crate::client_quotas::ClientQuotaManager> {
    use crate::client_quotas::ClientQuotaManager;
    Ok(match cluster {
        Some(link) => ClientQuotaManager::of_cluster(link.clone(), config.quota_windows),
        None => ClientQuotaManager::open(log_dir, config.quota_windows)?,
    })
}

/// The config with the dynamic values over it: a single node's from its log dir, a cluster
/// node's from the metadata.
fn effective_config(
    config: &BrokerConfig,
    log_dir: &Path,
    cluster: Option<&Arc<crate::quorum::ClusterLink>>,
) -> anyhow::Result<crate::dynamic_configs::EffectiveConfig> {
    use crate::dynamic_configs::EffectiveConfig;
    match cluster {
        Some(link) => EffectiveConfig::of_cluster(config, &link.image().metadata),
        None => EffectiveConfig::open(config, log_dir),
    }
}

/// The connection creation rates; the inter-broker listener is exempt from the broker's.
fn connection_rate(config: &BrokerConfig) -> crate::connection_rate::ConnectionRate {
    let inter_broker = config.cluster.as_ref().and_then(|_| {
        let name = kafka_listener::inter_broker_name(config);
        let index = config.listeners.iter().position(|l| l.name == name)?;
        Some(kafka_listener::ListenerId(index))
    });
    crate::connection_rate::ConnectionRate::new(
        config.max_connection_creation_rate,
        &config.listener_connection_creation_rates,
        inter_broker,
    )
}

/// A non-negative millisecond setting (the registry bounds it) as a duration.
fn millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The SCRAM users of the first log dir.
fn open_scram_credentials(log_dir: &Path) -> anyhow::Result<std::sync::RwLock<ScramCredentialStore>> {
    let store =
        ScramCredentialStore::open(log_dir).map_err(|e| anyhow::anyhow!("{}: {e}", log_dir.display()))?;
    Ok(std::sync::RwLock::new(store))
}

/// Each shard's main task, listening on `addrs`.
fn shard_main_on(
    addrs: Vec<SocketAddr>,
    ready: std::sync::mpsc::Sender<ShardReady>,
) -> impl Fn(Rc<BrokerCtx>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> + Send + Clone {
    move |ctx| Box::pin(shard_main(ctx, addrs.clone(), ready.clone()))
}

/// Starts this node's controller voter, registers the broker (retrying until the quorum has a
/// leader), starts its heartbeats and waits until the quorum unfences it: only then does the
/// broker serve clients.
fn join_cluster(
    config: &BrokerConfig,
    settings: &crate::config::ClusterSettings,
    log_dir: &std::path::Path,
) -> anyhow::Result<Arc<crate::quorum::ClusterLink>> {
    use crate::quorum::membership;
    laminar_engine::log::set_failure_hook(stop_on_failed_log);
    let link = crate::quorum::ClusterLink::start(config, settings, log_dir)?;
    membership::register(&link, config)?;
    let interval = Duration::from_millis(settings.heartbeat_interval_ms);
    membership::start_heartbeats(link.clone(), config.clone(), interval)?;
    membership::wait_until_unfenced(&link);
    tracing::info!(
        node_id = config.node_id.get(),
        "unfenced by the controller quorum"
    );
    Ok(link)
}

/// Exit status of a broker stopped by a failed log dir (EX_IOERR).
const FAILED_LOG_EXIT_STATUS: i32 = 74;

/// In a cluster, a log that failed (an I/O error it could not refuse and undo) or found its
/// disk full stops the broker, as Kafka halts a broker whose log dirs are all offline (a
/// broker has one here). A replica that can no longer write would keep its
/// leaderships and its session while it serves neither; stopped, it loses them within the
/// session timeout, and its supervisor (the systemd unit's `Restart=on-failure`) starts it
/// again: recovery checks what is on disk and replication brings the rest.
fn stop_on_failed_log(dir: &std::path::Path, error: &std::io::Error) {
    // Files gone from under a log are a topic deleted while a request still used it (the
    // fuzzer found one with DeleteRecords), not a failing disk: that log alone refuses.
    if error.kind() == std::io::ErrorKind::NotFound {
        return;
    }
    tracing::error!(dir = %dir.display(), %error, "a log failed: stopping the broker");
    eprintln!(
        "laminar: a log failed ({}: {error}); stopping the broker so that its partitions move",
        dir.display()
    );
    std::process::exit(FAILED_LOG_EXIT_STATUS);
}

/// Cluster mode's link (joined, unfenced), and `__consumer_offsets`' partition count.
fn cluster_and_offsets(
    metadata: &MetadataStore,
    config: &BrokerConfig,
    log_dir: &std::path::Path,
) -> anyhow::Result<(Option<Arc<crate::quorum::ClusterLink>>, i32)> {
    let cluster = config
        .cluster
        .as_ref()
        .map(|settings| join_cluster(config, settings, log_dir))
        .transpose()?;
    let offsets_partitions = offsets_partitions(metadata, config, cluster.as_deref())?;
    Ok((cluster, offsets_partitions))
}

/// `__consumer_offsets`' partition count. Cluster mode creates the topic through the quorum when
/// a group first needs it (FindCoordinator), once brokers have joined to spread it over; a
/// topic the quorum already has keeps its count, as in Kafka, so that no group changes home.
fn offsets_partitions(
    metadata: &MetadataStore,
    config: &BrokerConfig,
    cluster: Option<&crate::quorum::ClusterLink>,
) -> anyhow::Result<i32> {
    let Some(link) = cluster else {
        return crate::group::ensure_offsets_topic(metadata, config);
    };
    let image = link.handle.metadata();
    let existing = image.metadata.topic_by_name(crate::group::OFFSETS_TOPIC);
    Ok(existing
        .and_then(|t| i32::try_from(t.partitions.len()).ok())
        .filter(|count| *count > 0)
        .unwrap_or(config.offsets_topic_num_partitions))
}

/// Makes the topic table a view of the quorum's metadata, after migrating the single-node
/// topics of `topics.json` into the quorum at the data dir's first start in it
/// (`quorum::migrate`; then `meta.properties` names the cluster and this node, so the
/// migration runs once), or at later starts after setting aside the replicas the metadata no
/// longer places here (`quorum::stray`).
fn follow_the_quorum(
    shared: &Arc<BrokerShared>,
    link: Arc<crate::quorum::ClusterLink>,
    start: crate::meta_properties::ClusterStart,
) -> anyhow::Result<()> {
    let log_dirs: Vec<std::path::PathBuf> = shared
        .log_dir_locks
        .iter()
        .map(|l| l.dir().to_path_buf())
        .collect();
    let node_id = Some(shared.config.node_id.get());
    if start == crate::meta_properties::ClusterStart::First {
        let single_node = shared.metadata.current();
        crate::quorum::migrate::single_node_topics(&link, &single_node);
        crate::meta_properties::write_every(&log_dirs, &shared.cluster_id, node_id)?;
    } else {
        // A log dir added since, or a file from before directory ids, gets its id now.
        crate::meta_properties::write_every(&log_dirs, &shared.cluster_id, node_id)?;
        // Not at the first start: the single-node topics it migrates are not in the metadata
        // yet, and would all look stray.
        let max_percent = shared
            .config
            .cluster
            .as_ref()
            .map_or(100, |settings| settings.stray_replicas_max_percent);
        crate::quorum::stray::set_aside_stray_replicas(&link, &shared.log_dir, max_percent)?;
    }
    crate::quorum::view::start_sync(shared.clone(), link)
}

/// What a shard reports once it listens: nothing, or why it cannot serve.
type ShardReady = Result<(), String>;

/// Waits until every shard listens; returns the first failure, if any.
fn wait_for_shards(ready: &std::sync::mpsc::Receiver<ShardReady>, shard_count: usize) -> Result<(), String> {
    for _ in 0..shard_count {
        ready
            .recv()
            .map_err(|_| "a shard stopped during start-up".to_string())??;
    }
    Ok(())
}

/// The log dirs, locked, once their `meta.properties` are known to name one cluster and this
/// node: nothing in them is read or written before (another broker may be using them, or they
/// may be another cluster's).
pub(crate) fn checked_log_dir_locks(config: &BrokerConfig) -> anyhow::Result<Vec<LogDirLock>> {
    let node_id = config.cluster.is_some().then(|| config.node_id.get());
    crate::meta_properties::check_log_dirs(&config.log_dirs, node_id)?;
    lock_log_dirs(&config.log_dirs)
}

/// Creates (durably: a power cut keeps a log dir this start created) and locks every log dir,
/// and removes what a crash left of deleted partitions,
/// in `log.dirs` order (the first one holds all data). The
/// paths are absolute from here on: glommio opens directories through io_uring, which resolves
/// a relative path against no directory at all (EBADF), so `./data` would fail at close.
fn lock_log_dirs(dirs: &[PathBuf]) -> anyhow::Result<Vec<LogDirLock>> {
    let mut locks: Vec<LogDirLock> = Vec::with_capacity(dirs.len());
    for dir in dirs {
        laminar_engine::io::create_dir_all_durably(dir)
            .map_err(|e| anyhow::anyhow!("log.dirs: cannot create {}: {e}", dir.display()))?;
        let dir = std::fs::canonicalize(dir)
            .map_err(|e| anyhow::anyhow!("log.dirs: cannot resolve {}: {e}", dir.display()))?;
        // The same directory named twice is locked once (a second lock would be refused).
        if locks.iter().all(|lock| lock.dir() != dir) {
            locks.push(LogDirLock::acquire(&dir)?);
            remove_retired_dirs(&dir)?;
        }
    }
    anyhow::ensure!(!locks.is_empty(), "log.dirs is empty");
    Ok(locks)
}

/// Finishes the removals a crash interrupted (`io::remove_dir_durably`): the partitions were
/// already gone, their retired directories only took space.
fn remove_retired_dirs(dir: &std::path::Path) -> anyhow::Result<()> {
    let removed = laminar_engine::io::remove_retired_dirs(dir).map_err(|e| {
        anyhow::anyhow!(
            "log.dirs: cannot remove deleted partitions in {}: {e}",
            dir.display()
        )
    })?;
    if removed > 0 {
        tracing::info!(log_dir = %dir.display(), removed, "removed the directories of partitions deleted before a crash");
    }
    Ok(())
}

/// What the shards' storage shares: the descriptor budget and the log dir's budget of blocks
/// reserved ahead of appends.
struct ShardBudgets {
    descriptors: Arc<DescriptorBudget>,
    reservations: Arc<ReserveBudget>,
}

/// One shard's state, created on that shard's thread.
/// `((shard, shard_count), offsets_partitions)`: the shard's id and the shard count, and
/// `__consumer_offsets`' partition count.
fn shard_state(
    shared: &Arc<BrokerShared>,
    budgets: &ShardBudgets,
    (shard, offsets_partitions): ((usize, usize), i32),
) -> BrokerShard {
    // The shard's files take their descriptors from its account on the shared budget, through
    // the cache that closes idle ones when it runs short.
    let shard_descriptors = budgets.descriptors.shard();
    let storage = shard_storage(shared)
        .with_mapped_appends(shared.config.laminar_storage_mapped_appends)
        .with_descriptor_budget(shard_descriptors.clone())
        .with_reserve_budget(budgets.reservations.clone());
    let storage = FileCache::new(storage, Some(shard_descriptors));
    let group_settings = crate::group::state::GroupSettings {
        initial_rebalance_delay_ms: i64::from(shared.config.group_initial_rebalance_delay_ms),
    };
    BrokerShard {
        shared: shared.clone(),
        partitions: ShardPartitions::new(shared.log_dir.clone(), Rc::new(storage)),
        connections_active: Default::default(),
        groups: crate::group::GroupCoordinator::new(group_settings, offsets_partitions)
            .with_consumer_settings(shared.config.consumer_groups.clone(), shard.1),
        transactions: Default::default(),
        metrics: Default::default(),
        replication: shared
            .config
            .cluster
            .as_ref()
            .zip(shared.cluster.as_ref())
            .map(|(cluster, link)| {
                crate::replication::ShardReplication::new(
                    shared.config.node_id,
                    (cluster.replication.clone(), link.replica_fetch_security.clone()),
                    &shared.log_dir,
                    shard,
                    link.session.clone(),
                )
            }),
    }
}

/// Whether write-behind can run here: `None` if so (or if it is off), else why not. Checked once,
/// before the shards start, so that a missing feature is one warning, not one per shard.
fn probe_write_behind(settings: WriteBehind) -> Option<String> {
    if !settings.is_enabled() {
        return None;
    }
    let error = WriteBehindRing::new(settings).err()?;
    tracing::warn!(
        error = %error,
        "write-behind unavailable (its io_uring cannot be created); running without it"
    );
    Some(error.to_string())
}

/// The shard's storage; without write-behind or pre-writes if their rings cannot be created.
fn shard_storage(shared: &BrokerShared) -> GlommioStorage {
    let mode = shared.config.write_mode.mode;
    let storage = GlommioStorage::with_write_behind(mode, shared.write_behind()).unwrap_or_else(|error| {
        tracing::warn!(%error, "write-behind unavailable on this shard; running without it");
        GlommioStorage::new(mode)
    });
    let shards = shared.config.laminar_cores.max(1) as u64;
    let storage = storage.with_recent_writes(shared.config.laminar_cache_bytes / shards);
    let prewrite = shared.config.laminar_storage_prewrite;
    match storage.clone().with_prewrite(prewrite) {
        Ok(storage) => storage,
        Err(error) => {
            tracing::warn!(%error, "pre-written segments unavailable on this shard; blocks are reserved with fallocate");
            storage
        }
    }
}

async fn shard_main(ctx: Rc<BrokerCtx>, addrs: Vec<SocketAddr>, ready: std::sync::mpsc::Sender<ShardReady>) {
    let started = std::time::Instant::now();
    ctx.state
        .partitions
        .observe_syncs(ctx.state.metrics.fdatasync_observer());
    // Partitions open on first use: after a clean shutdown nothing is read here, after a crash
    // each partition written since its last clean close is recovered when it is first used.
    // The group coordinator's partitions are replayed now.
    crate::group::load(&ctx).await;
    crate::transactions::store::load_at_start(&ctx);
    let listeners = match bind_listeners(&addrs) {
        Ok(listeners) => listeners,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    ctx.state.metrics.set_kafka_listener_bound();
    if ctx.id() == 0 {
        match crate::admin_http::bind(&ctx.state.shared.config) {
            Ok(admin) => {
                let addr = admin
                    .listener
                    .local_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                tracing::info!(%addr, "admin HTTP listening (/metrics, /v1/status, /v1/status/ready)");
                glommio::spawn_local(crate::admin_http::serve(ctx.clone(), admin, started)).detach();
            }
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        }
    }
    let _ = ready.send(Ok(()));
    // No shard accepts until every shard has bound its listeners: a start-up that fails on one
    // shard (the admin port, say) must not have served clients on another meanwhile.
    let serving = {
        let open = std::pin::pin!(ctx.state.shared.start_gate.wait());
        let stop = std::pin::pin!(ctx.state.shared.shutdown.wait());
        matches!(select(open, stop).await, Either::Left(_))
    };
    let tasks = ShardTasks::spawn(&ctx);
    if serving {
        let accepting = listeners
            .iter()
            .enumerate()
            .map(|(index, listener)| accept_until_shutdown(&ctx, listener, ListenerId(index)));
        futures::future::join_all(accepting).await;
    }
    drop(listeners);
    drain_connections(&ctx).await;
    tasks.stop().await;
    for (tp, error) in ctx.state.partitions.close_all().await {
        tracing::error!(topic = &*tp.topic, partition = tp.partition, %error, "partition did not close cleanly");
    }
}

/// This shard's socket on each client listener's address.
fn bind_listeners(addrs: &[SocketAddr]) -> Result<Vec<TcpListener>, String> {
    addrs
        .iter()
        .map(|addr| {
            kafka_listener::bind(*addr).map_err(|e| format!("listeners: cannot listen on {addr}: {e}"))
        })
        .collect()
}

/// A shard's background tasks, stopped (dropped) once its connections are drained.
struct ShardTasks {
    stopped_on_drop: Vec<glommio::Task<()>>,
    /// Cluster mode: replication ends by itself at shutdown, with a last checkpoint.
    replication: Option<glommio::Task<()>>,
}

impl ShardTasks {
    fn spawn(ctx: &Rc<BrokerCtx>) -> ShardTasks {
        let mut stopped_on_drop = vec![
            glommio::spawn_local(crate::maintenance::run(ctx.clone())),
            glommio::spawn_local(crate::group::run_timers(ctx.clone())),
            glommio::spawn_local(crate::transactions::store::run_timers(ctx.clone())),
        ];
        let pressure_ctx = ctx.clone();
        stopped_on_drop.push(glommio::spawn_local(async move {
            pressure_ctx.state.partitions.answer_descriptor_pressure().await
        }));
        if ctx.id() == 0 {
            stopped_on_drop.push(glommio::spawn_local(crate::maintenance::give_back_memory(
                ctx.clone(),
            )));
        }
        let link = ctx.state.shared.cluster.clone();
        if let (Some(link), 0) = (&link, ctx.id()) {
            let removed = crate::quorum::view::apply_topic_changes(ctx.clone(), link.clone());
            stopped_on_drop.push(glommio::spawn_local(removed));
        }
        let replication =
            link.map(|link| glommio::spawn_local(crate::replication::manager::run(ctx.clone(), link)));
        ShardTasks {
            stopped_on_drop,
            replication,
        }
    }

    async fn stop(self) {
        drop(self.stopped_on_drop);
        if let Some(replication) = self.replication {
            replication.await;
        }
    }
}

async fn accept_until_shutdown(ctx: &Rc<BrokerCtx>, listener: &TcpListener, id: ListenerId) {
    let shutdown = ctx.state.shared.shutdown.clone();
    loop {
        let accepted = {
            let accept = std::pin::pin!(listener.accept());
            let stop = std::pin::pin!(shutdown.wait());
            match select(accept, stop).await {
                Either::Left((accepted, _)) => accepted,
                Either::Right(_) => return,
            }
        };
        match accepted {
            Ok(stream) => {
                let hold = ctx
                    .state
                    .shared
                    .connection_rate
                    .hold_for(id, std::time::Instant::now());
                if !hold.is_zero() {
                    // Past the creation rate: this connection, and the listen queue behind it,
                    // wait (KIP-612).
                    let held = std::pin::pin!(glommio::timer::sleep(hold));
                    let stop = std::pin::pin!(shutdown.wait());
                    if let Either::Right(_) = select(held, stop).await {
                        return;
                    }
                }
                if let Some(admitted) = admit(ctx, stream, id) {
                    let waited = std::pin::pin!(admit_after_room(ctx, admitted));
                    let stop = std::pin::pin!(shutdown.wait());
                    if let Either::Right(_) = select(waited, stop).await {
                        return;
                    }
                }
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// An accepted connection with its address's count, until it gets a slot.
struct Admitted {
    stream: glommio::net::TcpStream,
    from: IpConnection,
    listener: ListenerId,
}

/// Serves a connection just accepted if its address is under `max.connections.per.ip` and it
/// gets a slot. One that finds the connections' share lent to the storage waits for it in its
/// own task, as many at once as `ConnectionSlots` lets wait; past them, the connection is
/// handed back and the accept loop waits with it, so that the next connections stay in the
/// listen queue instead of being closed (a burst of connects against a storage holding its
/// whole share, as Kafka's acceptor waits for a slot). Those past `max.connections` or their
/// address's limit are closed at once.
fn admit(ctx: &Rc<BrokerCtx>, stream: glommio::net::TcpStream, listener: ListenerId) -> Option<Admitted> {
    let shared = &ctx.state.shared;
    // A connection whose peer is already gone has no address to count: dropped, so closed.
    let ip = stream.peer_addr().ok()?.ip();
    if !shared.client_quotas.admits_connection_from(ip) {
        shared.connections_per_ip.refused_for_rate(ip);
        return None; // past its address's connection_creation_rate (KIP-612): closed at once
    }
    let from = shared.connections_per_ip.take(ip)?;
    let admitted = Admitted {
        stream,
        from,
        listener,
    };
    let slots = &shared.connection_slots;
    let waiting = match slots.take() {
        Ok(slot) => {
            glommio::spawn_local(serve(ctx.clone(), admitted, slot)).detach();
            return None;
        }
        Err(NoSlot::NoRoomYet) => match slots.start_waiting() {
            Some(waiting) => waiting,
            None => return Some(admitted),
        },
        Err(why) => {
            slots.refused(why);
            return None; // the stream is dropped, so closed at once: the client retries after its backoff
        }
    };
    let ctx = ctx.clone();
    glommio::spawn_local(async move {
        let taken = wait_for_room(&ctx).await;
        drop(waiting);
        serve_or_refuse(ctx, admitted, taken).await;
    })
    .detach();
    None
}

/// The accept loop's own wait for room, for the connection `admit` handed back: at most one
/// per shard beyond the waiters `ConnectionSlots` counts, each a descriptor of the kept reserve.
async fn admit_after_room(ctx: &Rc<BrokerCtx>, admitted: Admitted) {
    let taken = wait_for_room(ctx).await;
    let ctx = ctx.clone();
    glommio::spawn_local(serve_or_refuse(ctx, admitted, taken)).detach();
}

async fn serve_or_refuse(ctx: Rc<BrokerCtx>, admitted: Admitted, taken: Result<ConnectionSlot, NoSlot>) {
    match taken {
        Ok(slot) => serve(ctx, admitted, slot).await,
        Err(why) => ctx.state.shared.connection_slots.refused(why),
    }
}

/// Serves the connection; its address's count is given back when it closes.
async fn serve(ctx: Rc<BrokerCtx>, admitted: Admitted, slot: ConnectionSlot) {
    let Admitted {
        stream,
        from,
        listener,
    } = admitted;
    connection::serve(ctx, stream, slot, listener).await;
    drop(from);
}

/// A slot, once the storage gave back descriptors or within `ROOM_WAIT_MAX`.
async fn wait_for_room(ctx: &Rc<BrokerCtx>) -> Result<ConnectionSlot, NoSlot> {
    let slots = &ctx.state.shared.connection_slots;
    let deadline = std::time::Instant::now() + ROOM_WAIT_MAX;
    loop {
        let released = slots.room_released();
        match slots.take() {
            Err(NoSlot::NoRoomYet) if std::time::Instant::now() < deadline => {
                let waited = std::pin::pin!(released);
                let timeout = std::pin::pin!(glommio::timer::sleep(Duration::from_millis(20)));
                select(waited, timeout).await;
            }
            taken => return taken,
        }
    }
}

async fn drain_connections(ctx: &Rc<BrokerCtx>) {
    let deadline = std::time::Instant::now() + DRAIN_TIMEOUT;
    while ctx.state.connections_active.get() > 0 && std::time::Instant::now() < deadline {
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }
}

/// The cluster id this broker answers, and (cluster mode) whether the data dir starts in a
/// quorum for the first time. Single-node mode: the id kept in `meta.properties`. Cluster
/// mode: the quorum's (written by its first active controller, so the registration this
/// broker just made carried it at the latest), checked against `meta.properties`.
fn cluster_identity(
    locks: &[LogDirLock],
    config: &BrokerConfig,
    cluster: Option<&crate::quorum::ClusterLink>,
) -> anyhow::Result<(String, crate::meta_properties::ClusterStart)> {
    use crate::meta_properties::{check_cluster, single_node_cluster_id, ClusterStart};
    let log_dirs: Vec<std::path::PathBuf> = locks.iter().map(|l| l.dir().to_path_buf()).collect();
    let Some(link) = cluster else {
        return Ok((single_node_cluster_id(&log_dirs)?, ClusterStart::Again));
    };
    let log_dir = &log_dirs[0];
    let image = link.handle.metadata();
    let quorum_id = image
        .metadata
        .cluster_id
        .clone()
        .ok_or_else(|| anyhow::anyhow!("the controller quorum has no cluster id yet"))?;
    let start = check_cluster(log_dir, config.node_id.get(), &quorum_id)?;
    Ok((quorum_id, start))
}
