//! The broker's state: what every shard shares, what each shard owns, and how a request reaches
//! the shard that owns a partition.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::replication::throttle::ThrottleSide;
use laminar_controller::PartitionState;
use laminar_engine::io::WriteBehind;
use laminar_engine::metadata::{MetadataStore, ProducerIdAllocator, TopicMetadata};
use laminar_engine::partition::{LogConfig, Partition};
use laminar_engine::shard::partitions::{PartitionSpec, ShardPartitions};
use laminar_engine::shard::{shard_of_partition, ShardContext, ShardGone, ShardId};
use laminar_engine::task_wakers::SharedWaker;

use crate::config::BrokerConfig;

/// State every shard shares. Shared read-only across shards (the topic table has its own
/// single-writer discipline).
pub struct BrokerShared {
    pub config: BrokerConfig,
    /// The exclusive lock on every log dir, held for the broker's lifetime.
    pub log_dir_locks: Vec<crate::log_dir_lock::LogDirLock>,
    /// Why write-behind, though configured, does not run (its io_uring could not be created).
    pub write_behind_unavailable: Option<String>,
    pub metadata: MetadataStore,
    pub producer_ids: ProducerIdAllocator,
    pub log_dir: PathBuf,
    pub cluster_id: String,
    pub shutdown: ShutdownSignal,
    /// Memory for requests on their way in (`queued.max.request.bytes`).
    pub request_memory: Arc<crate::request_memory::RequestMemory>,
    /// Client connections' share of descriptors (`max.connections`).
    pub connection_slots: Arc<crate::connection_slots::ConnectionSlots>,
    /// Partition files' share of descriptors, shared by the shards' file caches.
    pub storage_descriptors: Arc<laminar_engine::io::DescriptorBudget>,
    /// Opened once every shard has bound its listeners; shards accept only after it.
    pub start_gate: ShutdownSignal,
    /// Cluster mode's link to the controller quorum; `None` in the single-node mode.
    pub cluster: Option<Arc<crate::quorum::ClusterLink>>,
    /// Incremental fetch sessions (KIP-227), whichever shard a fetch arrives on.
    pub fetch_sessions: crate::fetch_sessions::FetchSessions,
}

/// Per-shard broker state. Owned by one shard; not Send.
pub struct BrokerShard {
    pub shared: Arc<BrokerShared>,
    pub partitions: ShardPartitions,
    pub connections_active: Cell<usize>,
    /// The consumer groups this shard coordinates.
    pub groups: crate::group::coordinator::GroupCoordinator,
    pub metrics: crate::metrics::shard::ShardMetrics,
    /// Cluster mode: the partitions this shard leads and follows, and its fetchers.
    pub replication: Option<crate::replication::ShardReplication>,
}

/// Whether opening a replica may create its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Create the partition if it has no files yet (a follower's first fetched batch).
    Create,
    /// Only open a partition that was written (`None` otherwise).
    IfWritten,
}

pub type BrokerCtx = ShardContext<BrokerShard>;

pub use crate::topic_partition::{PartitionAccessError, TopicPartition};

impl BrokerShared {
    /// The log settings of one topic: its overrides over the broker's defaults.
    pub fn log_config_for(&self, topic: &TopicMetadata) -> LogConfig {
        crate::config::engine::log_config(&topic.configs, &self.config)
    }

    /// What a partition of `topic` opens with: its log settings and its id (a directory left by
    /// a deleted topic of that name is not opened as this one's).
    fn partition_spec(&self, topic: &TopicMetadata) -> PartitionSpec {
        PartitionSpec {
            config: self.log_config_for(topic),
            topic_id: Some(topic.id),
        }
    }

    /// [`partition_spec`](Self::partition_spec) of the topic named `topic`; the broker's
    /// defaults and no id if it is gone (an open that races the topic's deletion).
    fn partition_spec_named(&self, topic: &str) -> PartitionSpec {
        self.metadata.with_current(|table| match table.get(topic) {
            Some(topic) => self.partition_spec(topic),
            None => crate::config::engine::log_config(&BTreeMap::new(), &self.config).into(),
        })
    }

    /// `min.insync.replicas` of `topic`: its override, else the broker's.
    pub fn min_insync_replicas(&self, topic: &str) -> i32 {
        let table = self.metadata.current();
        table
            .get(topic)
            .and_then(|t| t.configs.get("min.insync.replicas"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(self.config.min_insync_replicas)
    }

    /// Whether `topic`'s `key` (`leader.replication.throttled.replicas` or
    /// `follower.replication.throttled.replicas`) lists `partition` on this broker.
    pub fn replica_throttled(&self, key: &str, topic: &str, partition: i32) -> bool {
        let table = self.metadata.current();
        let listed = table.get(topic).and_then(|t| t.configs.get(key));
        listed.is_some_and(|value| {
            crate::replication::throttle::lists_replica(value, partition, self.node_id())
        })
    }

    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// The write-behind settings the shards run with (off when unavailable).
    pub fn write_behind(&self) -> WriteBehind {
        match self.write_behind_unavailable {
            None => self.config.write_behind.settings,
            Some(_) => WriteBehind::disabled(),
        }
    }

    /// For the startup line and `/v1/status`: the settings and their sources, or why not.
    pub fn write_behind_summary(&self) -> String {
        match &self.write_behind_unavailable {
            None => self.config.write_behind.to_string(),
            Some(reason) => format!("unavailable ({reason}); configured {}", self.config.write_behind),
        }
    }
}

impl BrokerShard {
    /// The open partition `tp`, which must be owned by this shard; opened (and created) if
    /// need be.
    pub async fn partition(&self, tp: &TopicPartition) -> Result<Rc<Partition>, PartitionAccessError> {
        let led = self.led_state_of(tp)?;
        let config = || self.shared.partition_spec_named(&tp.topic);
        let partition = self
            .partitions
            .get_or_open(&tp.topic, tp.partition, config)
            .await?;
        self.under_replication(tp, &partition, led.as_ref());
        let epoch = led.map_or(0, |state| state.leader_epoch);
        // Batches carry the epoch Metadata advertises for this leader (KIP-101): the quorum's
        // in a cluster, 0 on a single node (which never changes it).
        if partition.leader_epoch() != epoch {
            partition.set_leader_epoch(epoch);
        }
        Ok(partition)
    }

    /// The partition `tp` for a read: `None` when it exists but was never written, so that
    /// reads do not create its files (`ShardPartitions::get_or_open_written`).
    pub async fn partition_to_read(
        &self,
        tp: &TopicPartition,
    ) -> Result<Option<Rc<Partition>>, PartitionAccessError> {
        let led = self.led_state_of(tp)?;
        let config = || self.shared.partition_spec_named(&tp.topic);
        let partition = self
            .partitions
            .get_or_open_written(&tp.topic, tp.partition, config)
            .await?;
        if let Some(partition) = &partition {
            self.under_replication(tp, partition, led.as_ref());
        }
        Ok(partition)
    }

    /// Whether `side`'s replication throttle applies to `tp` on this broker (a rate is set and
    /// the topic lists the replica).
    pub fn replication_throttled(&self, side: ThrottleSide, tp: &TopicPartition) -> bool {
        let Some(replication) = &self.replication else {
            return false;
        };
        replication.throttle(side).is_limited()
            && self
                .shared
                .replica_throttled(side.replicas_key(), &tp.topic, tp.partition)
    }

    /// `tp` as one of its replicas, whoever leads it: for the follower's fetcher and the
    /// leader-election paths. Cluster mode only (NOT_LEADER_OR_FOLLOWER otherwise, and when this
    /// broker is no replica of it).
    pub async fn replica_partition(
        &self,
        tp: &TopicPartition,
        mode: OpenMode,
    ) -> Result<Option<Rc<Partition>>, PartitionAccessError> {
        let link = self
            .shared
            .cluster
            .as_ref()
            .ok_or(PartitionAccessError::NotLeader)?;
        let table = self.shared.metadata.current();
        let topic = table
            .get(&tp.topic)
            .ok_or(PartitionAccessError::UnknownTopicOrPartition)?
            .clone();
        let image = link.image();
        let state = image
            .metadata
            .partition_by_name(&tp.topic, tp.partition)
            .ok_or(PartitionAccessError::UnknownTopicOrPartition)?;
        if !state.replicas.contains(&link.node_id) {
            return Err(PartitionAccessError::NotLeader);
        }
        let config = || self.shared.partition_spec(&topic);
        let partition = match mode {
            OpenMode::Create => Some(
                self.partitions
                    .get_or_open(&tp.topic, tp.partition, config)
                    .await?,
            ),
            OpenMode::IfWritten => {
                self.partitions
                    .get_or_open_written(&tp.topic, tp.partition, config)
                    .await?
            }
        };
        if let Some(partition) = &partition {
            self.under_replication(tp, partition, None);
        }
        Ok(partition)
    }

    /// In cluster mode a partition's high watermark comes from replication, from its first
    /// open; and a leader's state exists from its first use as leader (`led`), even if the
    /// shard's replication task has not taken the new metadata up yet.
    fn under_replication(
        &self,
        tp: &TopicPartition,
        partition: &Rc<Partition>,
        led: Option<&PartitionState>,
    ) {
        if let Some(replication) = &self.replication {
            replication.on_open(tp, partition);
            if let Some(state) = led {
                replication.ensure_leading(tp, state, partition);
            }
        }
    }

    /// The leader epoch this broker leads `tp` at: the quorum's in a cluster, 0 on a single
    /// node (as Metadata answers). Call after `partition_to_read` accepted `tp`.
    pub fn leader_epoch_of(&self, tp: &TopicPartition) -> i32 {
        let Some(link) = &self.shared.cluster else {
            return 0;
        };
        let image = link.image();
        image
            .metadata
            .partition_by_name(&tp.topic, tp.partition)
            .map_or(0, |s| s.leader_epoch)
    }

    /// Whether `tp` exists in the topic table (in a cluster, also whether this broker leads
    /// it: NOT_LEADER_OR_FOLLOWER otherwise), and in a cluster the state of the partition.
    fn led_state_of(&self, tp: &TopicPartition) -> Result<Option<PartitionState>, PartitionAccessError> {
        let exists = self.shared.metadata.with_current(|table| {
            table
                .get(&tp.topic)
                .is_some_and(|topic| (0..topic.partition_count).contains(&tp.partition))
        });
        if !exists {
            return Err(PartitionAccessError::UnknownTopicOrPartition);
        }
        let Some(link) = &self.shared.cluster else {
            return Ok(None);
        };
        // Clients are served by the leader only; followers reach their replicas through
        // `replica_partition`.
        let image = link.image();
        match image.metadata.partition_by_name(&tp.topic, tp.partition) {
            None => Err(PartitionAccessError::UnknownTopicOrPartition),
            Some(state) if state.leader != link.node_id => Err(PartitionAccessError::NotLeader),
            Some(state) => Ok(Some(state.clone())),
        }
    }
}

/// The shard that owns `tp` in a broker running `shard_count` shards; `None` for a negative
/// index, which a client may send but no partition has (so it never reaches the routing table).
pub fn owner_of(tp: &TopicPartition, shard_count: usize) -> Option<ShardId> {
    (tp.partition >= 0).then(|| shard_of_partition(&tp.topic, tp.partition, shard_count))
}

/// Runs `work` for every item on the shard that owns its partition: one message per shard,
/// items of one shard run concurrently there, and the results come back in the input's order
/// (docs/ARCHITECTURE.md invariant 2: split by owning shard, forwarded, reassembled).
pub async fn on_owning_shards<T, R, F, Fut>(
    ctx: &Rc<BrokerCtx>,
    items: Vec<(TopicPartition, T)>,
    work: F,
) -> Vec<(TopicPartition, Result<R, PartitionAccessError>)>
where
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(Rc<BrokerCtx>, TopicPartition, T) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = Result<R, PartitionAccessError>> + 'static,
{
    let item_count = items.len();
    // One copy of each name stays here for the answer; the other goes to the owning shard.
    let mut names = Vec::with_capacity(item_count);
    let indexed = items.into_iter().enumerate().map(|(index, (tp, item))| {
        names.push(tp.clone());
        (tp, (index, item))
    });
    let (by_shard, unowned) = by_owning_shard(indexed, ctx.shard_count());
    let mut results: Vec<Option<Result<R, PartitionAccessError>>> = (0..item_count).map(|_| None).collect();
    for (_, (index, _)) in unowned {
        results[index] = Some(Err(PartitionAccessError::UnknownTopicOrPartition));
    }
    let per_shard = handover_order(by_shard, ctx.id())
        .into_iter()
        .map(|(shard, batch)| {
            let work = work.clone();
            let indices: Vec<usize> = batch.iter().map(|(_, (index, _))| *index).collect();
            async move {
                let done = ctx
                    .submit_to(shard, move |there| async move {
                        let mut left = batch.into_iter();
                        let mut started = 0usize;
                        let runs = std::iter::from_fn(|| {
                            if started.is_multiple_of(PREFETCH_PARTITIONS) {
                                prefetch_the_next_ones(&there, left.as_slice());
                            }
                            started += 1;
                            let (tp, (_, item)) = left.next()?;
                            Some(work(there.clone(), tp, item))
                        });
                        run_all_in_order(runs).await
                    })
                    .await;
                match done {
                    Ok(answers) => indices.into_iter().zip(answers).collect::<Vec<_>>(),
                    Err(gone) => {
                        let lost = |index| (index, Err(PartitionAccessError::ShardGone(ShardGone(gone.0))));
                        indices.into_iter().map(lost).collect()
                    }
                }
            }
        });
    for (index, result) in futures::future::join_all(per_shard).await.into_iter().flatten() {
        results[index] = Some(result);
    }
    let answered = names.into_iter().zip(results);
    answered
        .map(|(tp, result)| (tp, result.expect("every item gets exactly one result")))
        .collect()
}

/// Items by the shard that owns each one's partition, in their order within each shard, and
/// apart those naming a negative partition index, which no shard owns.
pub type ByOwningShard<T> = (
    BTreeMap<ShardId, Vec<(TopicPartition, T)>>,
    Vec<(TopicPartition, T)>,
);

/// Splits `items` by owning shard (see [`ByOwningShard`]).
pub fn by_owning_shard<T>(
    items: impl IntoIterator<Item = (TopicPartition, T)>,
    shard_count: usize,
) -> ByOwningShard<T> {
    let (mut by_shard, mut unowned): ByOwningShard<T> = Default::default();
    for (tp, item) in items {
        match owner_of(&tp, shard_count) {
            Some(shard) => by_shard.entry(shard).or_insert_with(Vec::new).push((tp, item)),
            None => unowned.push((tp, item)),
        }
    }
    (by_shard, unowned)
}

/// Partitions prefetched at once, ahead of their work: enough that their cache misses overlap,
/// few enough that what is prefetched (a few lines of each partition's objects) is still in
/// the cache when its work runs, however many partitions the request names.
const PREFETCH_PARTITIONS: usize = 128;

/// Asks the CPU to load what the work on the next [`PREFETCH_PARTITIONS`] partitions of a
/// shard's list touches first (`ShardPartitions::prefetch`, docs/decisions/0026, per-batch cost across many
/// partitions).
/// `left`: the partitions whose work has not started. One alone has no misses to overlap.
fn prefetch_the_next_ones<T>(there: &BrokerCtx, left: &[(TopicPartition, T)]) {
    if left.len() > 1 {
        let next = &left[..left.len().min(PREFETCH_PARTITIONS)];
        there
            .state
            .partitions
            .prefetch(next.iter().map(|(tp, _)| (&*tp.topic, tp.partition)));
    }
}

/// Runs `runs` concurrently on this task and returns their outputs in order. Each is polled
/// once as it starts, and only those that wait then (a partition opening, a lock held) join a
/// `FuturesUnordered`: an append into the page cache finishes at its first poll, and the set's
/// task per future, with its linking and atomics, cost more than the append's own bookkeeping
/// in requests naming thousands of partitions (docs/decisions/0026, per-batch cost across many partitions).
/// The first polls
/// use a shared waker: a run that waits keeps a clone of the waker it was polled with until the
/// set polls it again, and glommio's own count of a task's wakers overflows at 32 768 runs
/// (`laminar_engine::task_wakers`).
async fn run_all_in_order<F: Future>(runs: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    use futures::StreamExt;
    let mut outputs = Vec::new();
    let mut waiting = futures::stream::FuturesUnordered::new();
    let mut shared = SharedWaker::default();
    let waker = std::future::poll_fn(|cx| Poll::Ready(shared.waker_for(cx).clone())).await;
    // One heap slot, reused by every run that finishes at its first poll (most do): a run
    // cannot move once polled, and an allocation per partition was 3 % of a keyed produce's
    // CPU. A run that waits keeps its slot, and the next run gets a new one.
    let mut slot: std::pin::Pin<Box<Option<F>>> = Box::pin(None);
    for run in runs {
        slot.set(Some(run));
        let at = outputs.len();
        let mut started = slot
            .as_mut()
            .as_pin_mut()
            .expect("a run was just put in the slot");
        match started.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(output) => {
                outputs.push(Some(output));
                slot.set(None);
            }
            Poll::Pending => {
                outputs.push(None);
                let mut pending = std::mem::replace(&mut slot, Box::pin(None));
                waiting.push(async move {
                    let run = pending
                        .as_mut()
                        .as_pin_mut()
                        .expect("the slot holds the waiting run");
                    (at, run.await)
                });
            }
        }
    }
    while let Some((at, output)) = waiting.next().await {
        outputs[at] = Some(output);
    }
    let finished = outputs
        .into_iter()
        .map(|output| output.expect("every run finished"));
    finished.collect()
}

/// The order in which per-shard work is started: every other shard first, `here` last. This
/// shard's own work runs inline when first polled and may finish without yielding (an append
/// into the page cache does), so polled first it would hold back the hand-over to the other
/// shards until it is done: their appends (and fdatasyncs) would start only after this shard's
/// instead of beside them. Measured: acks=all 1.18x, acks=1 1.04x (docs/decisions/0008).
fn handover_order<V>(by_shard: BTreeMap<ShardId, V>, here: ShardId) -> Vec<(ShardId, V)> {
    let (local, mut order): (Vec<_>, Vec<_>) = by_shard.into_iter().partition(|(shard, _)| *shard == here);
    order.extend(local);
    order
}

/// A one-way signal to every shard (stop, or start serving): closing the channel wakes every
/// waiter on every thread.
#[derive(Clone)]
pub struct ShutdownSignal {
    closed: async_channel::Receiver<()>,
    _keep_open: async_channel::Sender<()>,
}

impl Default for ShutdownSignal {
    fn default() -> Self {
        let (sender, receiver) = async_channel::bounded(1);
        Self {
            closed: receiver,
            _keep_open: sender,
        }
    }
}

impl ShutdownSignal {
    pub fn trigger(&self) {
        self.closed.close();
    }

    pub fn is_triggered(&self) -> bool {
        self.closed.is_closed()
    }

    /// Resolves once [`ShutdownSignal::trigger`] has been called (on any thread).
    pub async fn wait(&self) {
        while self.closed.recv().await.is_ok() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_that_wait_finish_in_any_order_and_answer_in_theirs() {
        use futures::channel::oneshot;
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..6).map(|_| oneshot::channel::<u32>()).unzip();
        let runs = receivers.into_iter().enumerate().map(|(i, receiver)| async move {
            if i % 2 == 0 {
                return i as u32 * 10; // finishes at its first poll
            }
            receiver.await.expect("sent") + i as u32 * 10
        });
        let mut all = Box::pin(run_all_in_order(runs));
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(all.as_mut().poll(&mut cx).is_pending(), "three runs wait");
        // The waiting ones finish last first.
        for (i, sender) in senders.into_iter().enumerate().rev() {
            let _ = sender.send(1);
            if i == 1 {
                break;
            }
            assert!(all.as_mut().poll(&mut cx).is_pending());
        }
        let std::task::Poll::Ready(outputs) = all.as_mut().poll(&mut cx) else {
            panic!("every run finished");
        };
        assert_eq!(outputs, vec![0, 11, 20, 31, 40, 51]);
    }

    #[test]
    fn other_shards_are_handed_their_work_before_this_one_runs_its_own() {
        let by_shard: BTreeMap<ShardId, &str> = [(0, "a"), (1, "b"), (2, "c")].into_iter().collect();
        let order = |here| handover_order(by_shard.clone(), here);
        assert_eq!(order(0), vec![(1, "b"), (2, "c"), (0, "a")]);
        assert_eq!(order(1), vec![(0, "a"), (2, "c"), (1, "b")]);
        // Work for other shards only: the order stays by shard.
        assert_eq!(order(5), vec![(0, "a"), (1, "b"), (2, "c")]);
    }
}
