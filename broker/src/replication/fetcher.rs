//! Fetcher threads: one per source broker per shard, each with one blocking `laminar-client`
//! connection to its leader on the inter-broker listener. A fetcher only carries messages: it
//! asks its shard what to request (`follower::plan`), sends it, and hands the answer back to
//! the shard, which validates and appends it (`follower::apply_*`). One request is in flight per
//! fetcher and an answer is at most `replica.fetch.response.max.bytes`: that bounds the bytes a
//! fetcher holds; the channel to the shard holds one call.

use laminar_model::{NodeId, Offset};
use std::rc::Rc;
use std::time::Duration;

use futures::channel::oneshot;
use kafka_protocol::error::ResponseError;
use laminar_client::{
    ClientConfig, ClientError, Connection, EpochEndQuery, FetchSpec, OffsetSpec, Replica,
    ReplicaFetchPosition,
};

use super::follower::{self, EpochAnswer, FetchedPart, LeaderStart, Plan};
use crate::broker::{BrokerCtx, TopicPartition};
use crate::config::ReplicationSettings;

/// What a fetcher thread asks of its shard.
pub enum Call {
    /// What to request next, and where the leader is; `None`: stop.
    Plan(oneshot::Sender<Option<(String, Plan)>>),
    Epochs(Vec<EpochAnswer>, oneshot::Sender<()>),
    Fetched(Vec<FetchedPart>, oneshot::Sender<()>),
    Starts(Vec<LeaderStart>, oneshot::Sender<()>),
}

/// Starts the fetcher for `source` on this shard: the thread, and the task that serves it.
pub fn start(ctx: &Rc<BrokerCtx>, source: NodeId) -> std::io::Result<()> {
    let replication = ctx
        .state
        .replication
        .as_ref()
        .expect("fetchers run in cluster mode");
    let (calls, served) = async_channel::bounded(1);
    let link = FetcherLink {
        settings: replication.settings.clone(),
        security: replication.fetch_security.clone(),
    };
    let node_id = replication.node_id;
    let shard = ctx.id();
    std::thread::Builder::new()
        .name(format!("laminar-fetch-{shard}-{source}"))
        .spawn(move || run(&calls, node_id, &link))?;
    glommio::spawn_local(serve(ctx.clone(), source, served)).detach();
    Ok(())
}

/// The shard's side: answers the thread's calls until it stops.
async fn serve(ctx: Rc<BrokerCtx>, source: NodeId, calls: async_channel::Receiver<Call>) {
    while let Ok(call) = calls.recv().await {
        match call {
            Call::Plan(reply) => {
                let next = next_plan(&ctx, source).await;
                let stop = next.is_none();
                let _ = reply.send(next);
                if stop {
                    break;
                }
            }
            Call::Epochs(answers, done) => {
                follower::apply_epochs(&ctx, source, answers).await;
                let _ = done.send(());
            }
            Call::Fetched(parts, done) => {
                follower::apply_fetched(&ctx, source, parts).await;
                let _ = done.send(());
            }
            Call::Starts(starts, done) => {
                follower::apply_starts(&ctx, source, starts).await;
                let _ = done.send(());
            }
        }
    }
    if let Some(replication) = &ctx.state.replication {
        replication.fetcher_stopped(source);
    }
}

/// The next non-empty plan for `source` and its address; waits (without a thread spinning)
/// while nothing is due. `None` when the shard follows nothing from `source` any more or is
/// stopping.
async fn next_plan(ctx: &Rc<BrokerCtx>, source: NodeId) -> Option<(String, Plan)> {
    loop {
        if ctx.state.shared.shutdown.is_triggered() {
            return None;
        }
        let replication = ctx.state.replication.as_ref()?;
        let changed = replication.followed_changed();
        let plan = follower::plan(ctx, source).await?;
        let address = source_address(ctx, source, &replication.settings);
        if let (false, Some(address)) = (plan.is_empty(), address) {
            return Some((address, plan));
        }
        let nap = glommio::timer::sleep(Duration::from_millis(100));
        futures::future::select(changed, std::pin::pin!(nap)).await;
    }
}

/// `host:port` of `source`'s inter-broker listener, if it is registered and unfenced.
pub(crate) fn source_address(
    ctx: &Rc<BrokerCtx>,
    source: NodeId,
    settings: &ReplicationSettings,
) -> Option<String> {
    let link = ctx.state.shared.cluster.as_ref()?;
    let image = link.image();
    let broker = image.metadata.brokers.get(&source).filter(|b| !b.fenced)?;
    let endpoint = broker
        .endpoints
        .iter()
        .find(|e| e.listener_name == settings.inter_broker_listener_name)?;
    Some(format!("{}:{}", endpoint.host, endpoint.port))
}

/// What a fetcher thread connects with: the replication settings, and the inter-broker
/// listener's security (TLS, the broker's SASL login), built once at start.
struct FetcherLink {
    settings: ReplicationSettings,
    security: laminar_client::Security,
}

/// The thread: plan, request, hand over; until its shard says stop or is gone.
fn run(calls: &async_channel::Sender<Call>, node_id: NodeId, link: &FetcherLink) {
    let settings = &link.settings;
    let mut connection: Option<(String, Connection)> = None;
    loop {
        let (reply, plan) = oneshot::channel();
        if calls.send_blocking(Call::Plan(reply)).is_err() {
            return;
        }
        let Ok(Some((address, plan))) = futures::executor::block_on(plan) else {
            return;
        };
        match exchange(&mut connection, &address, &plan, node_id, link) {
            Ok(answers) => {
                if !hand_over(calls, answers) {
                    return;
                }
            }
            Err(error) => {
                log_failure(&address, &error);
                // A Kafka error arrives in a whole answer: the connection is still in step and
                // is kept (a leader that has not yet applied this broker's new registration
                // answers STALE_BROKER_EPOCH for a moment). Anything else may have left it
                // mid-frame.
                if !matches!(error, ClientError::Kafka { .. }) {
                    connection = None;
                }
                std::thread::sleep(Duration::from_millis(settings.fetch_backoff_ms));
            }
        }
    }
}

/// The answers of one exchange with the leader.
struct Answers {
    epochs: Vec<EpochAnswer>,
    fetched: Vec<FetchedPart>,
    starts: Vec<LeaderStart>,
}

fn exchange(
    connection: &mut Option<(String, Connection)>,
    address: &str,
    plan: &Plan,
    node_id: NodeId,
    link: &FetcherLink,
) -> Result<Answers, ClientError> {
    if connection.as_ref().is_none_or(|(at, _)| at != address) {
        *connection = Some((address.to_string(), connect(address, link)?));
    }
    let (_, conn) = connection.as_mut().expect("connected above");
    let mut answers = Answers {
        epochs: Vec::new(),
        fetched: Vec::new(),
        starts: leader_starts(conn, &plan.starts)?,
    };
    if !plan.queries.is_empty() {
        let queries: Vec<EpochEndQuery> = plan
            .queries
            .iter()
            .map(|q| EpochEndQuery {
                tp: q.tp.clone(),
                current_leader_epoch: q.current_leader_epoch,
                leader_epoch: q.leader_epoch,
            })
            .collect();
        answers.epochs = conn
            .offsets_for_leader_epoch(node_id, &queries)?
            .into_iter()
            .map(|end| EpochAnswer {
                tp: end.tp,
                error_code: end.error.map_or(0, |e| e.code),
                leader_epoch: end.leader_epoch,
                end_offset: end.end_offset,
            })
            .collect();
    }
    if !plan.fetches.is_empty() {
        answers.fetched = fetch(conn, plan, node_id, &link.settings)?;
    }
    Ok(answers)
}

/// ListOffsets earliest for each partition, a request per partition (rare: only after an
/// OFFSET_OUT_OF_RANGE).
fn leader_starts(
    conn: &mut Connection,
    partitions: &[TopicPartition],
) -> Result<Vec<LeaderStart>, ClientError> {
    let mut starts = Vec::with_capacity(partitions.len());
    for tp in partitions {
        let answer = conn.list_offsets(&tp.topic, &[(tp.partition, OffsetSpec::Earliest)]);
        let log_start_offset = match answer {
            Ok(found) => found.first().map(|(_, offset)| Offset::new(*offset)).ok_or(-1),
            Err(ClientError::Kafka { error, .. }) => Err(error.code),
            Err(other) => return Err(other),
        };
        starts.push(LeaderStart {
            tp: tp.clone(),
            log_start_offset,
        });
    }
    Ok(starts)
}

fn fetch(
    conn: &mut Connection,
    plan: &Plan,
    node_id: NodeId,
    settings: &ReplicationSettings,
) -> Result<Vec<FetchedPart>, laminar_client::ClientError> {
    let positions: Vec<ReplicaFetchPosition> = plan
        .fetches
        .iter()
        .map(|f| ReplicaFetchPosition {
            tp: f.tp.clone(),
            topic_id: f.topic_id,
            offset: f.offset,
            current_leader_epoch: f.current_leader_epoch,
            log_start_offset: f.log_start_offset,
            partition_max_bytes: settings.fetch_max_bytes,
        })
        .collect();
    let spec = FetchSpec {
        max_wait_ms: settings.fetch_wait_max_ms,
        min_bytes: 1,
        max_bytes: settings.fetch_response_max_bytes,
    };
    Ok(conn
        .fetch_as_replica(
            Replica {
                id: node_id,
                broker_epoch: plan.broker_epoch,
            },
            &spec,
            &positions,
        )?
        .into_iter()
        .map(|p| FetchedPart {
            tp: TopicPartition {
                topic: p.topic.into(),
                partition: p.partition,
            },
            error_code: p.error.map_or(0, |e| e.code),
            high_watermark: Offset::new(p.high_watermark),
            log_start_offset: Offset::new(p.log_start_offset),
            records: p.records,
        })
        .collect())
}

/// A leader that refuses this broker (its login, its ClusterAction right, its certificate)
/// is a configuration fault an operator must see; a leader that is down or restarting is
/// routine while the cluster fails over, and so is one whose metadata has not yet seen this
/// broker's new registration (STALE_BROKER_EPOCH until it has).
fn log_failure(address: &str, error: &ClientError) {
    let refused = match error {
        ClientError::Kafka { error, .. } => error.code != ResponseError::StaleBrokerEpoch.code(),
        ClientError::Io(e) => e.kind() == std::io::ErrorKind::InvalidData,
        _ => false,
    };
    if refused && REFUSAL_LOG.due() {
        tracing::warn!(%address, %error, "replica fetch refused by the leader (logged at most once a minute)");
    } else {
        tracing::debug!(%address, %error, "replica fetch failed");
    }
}

static REFUSAL_LOG: std::sync::LazyLock<crate::connection_slots::LogAtMostEvery> =
    std::sync::LazyLock::new(crate::connection_slots::LogAtMostEvery::minute);

fn connect(address: &str, link: &FetcherLink) -> Result<Connection, laminar_client::ClientError> {
    let settings = &link.settings;
    let wait = Duration::from_millis(u64::try_from(settings.fetch_wait_max_ms).unwrap_or(0));
    let config = ClientConfig {
        client_id: "laminar-replica-fetcher".to_owned(),
        // An answer is at most replica.fetch.response.max.bytes plus one oversized first batch
        // per partition; the frame limit keeps a broken leader from sizing our allocation.
        frame_bytes_max: (settings.fetch_response_max_bytes as usize)
            .saturating_mul(2)
            .max(64 << 20),
        connect_timeout: Duration::from_secs(5),
        // A leader answers within its wait; one that does not (frozen, cut off) holds this
        // fetcher, and every partition it serves, only this long before a reconnect.
        io_timeout: Some(wait + Duration::from_secs(10)),
        security: link.security.clone(),
    };
    Connection::connect(address, &config)
}

/// Gives the shard the answers and waits until it has applied them (so the next plan starts
/// from the new log ends); false when the shard is gone.
fn hand_over(calls: &async_channel::Sender<Call>, answers: Answers) -> bool {
    let Answers {
        epochs,
        fetched,
        starts,
    } = answers;
    (epochs.is_empty() || applied(calls, |done| Call::Epochs(epochs, done)))
        && (fetched.is_empty() || applied(calls, |done| Call::Fetched(fetched, done)))
        && (starts.is_empty() || applied(calls, |done| Call::Starts(starts, done)))
}

/// Sends one call and waits for the shard to be done with it; false when the shard is gone.
fn applied(calls: &async_channel::Sender<Call>, call: impl FnOnce(oneshot::Sender<()>) -> Call) -> bool {
    let (done, applied) = oneshot::channel();
    calls.send_blocking(call(done)).is_ok() && futures::executor::block_on(applied).is_ok()
}
