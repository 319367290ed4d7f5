//! Broker metrics: counters each shard keeps for itself (plain `Cell`s, no atomics or locks on
//! the data path), copied out and added up only when `/metrics` is scraped.
//!
//! - [`ShardMetrics`]: one shard's request counts and latencies per Kafka API, per-topic bytes
//!   and records in and out, and durability-wait latency.
//! - [`gather`]: asks every shard for a [`ShardSnapshot`] and returns the [`BrokerSnapshot`].
//! - [`families`]: every metric family, documented in one table, and the Prometheus renderer.

pub mod families;
pub mod histogram;
pub mod shard;

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::ApiKey;

use laminar_engine::io::{DirectAppendStats, FileCacheStats, PrewriteStats, WriteBehindStats};
use laminar_engine::shard::shard_of_partition;

use crate::broker::{on_owning_shards, BrokerCtx, BrokerShard, PartitionAccessError, TopicPartition};
use crate::transactions::records::TxnState;
use histogram::HistogramSnapshot;
pub use shard::{api_key_of, FetchPaths, ProducedTraffic, ShardMetrics, TopicTraffic};

/// Request counters of one API, copied out of a shard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestSnapshot {
    pub served: u64,
    pub failed: u64,
    pub latency: HistogramSnapshot,
}

/// Everything one shard reports. Plain data: moves between shards.
#[derive(Debug, Clone, Default)]
pub struct ShardSnapshot {
    pub shard: usize,
    pub requests: BTreeMap<i16, RequestSnapshot>,
    pub topics: BTreeMap<String, TopicTraffic>,
    pub fetch_paths: FetchPaths,
    pub durability_wait: HistogramSnapshot,
    pub fdatasync: HistogramSnapshot,
    pub connections_active: usize,
    /// Connections that moved from this shard to the one owning their partitions.
    pub connections_moved: u64,
    /// SASL authentications that succeeded and failed on this shard.
    pub authentications: [u64; 2],
    /// Partitions this shard owns (from the topic table).
    pub partition_count: usize,
    /// Bytes in the logs of this shard's open partitions.
    pub log_bytes: u64,
    /// One entry per partition this shard owns; empty unless [`SnapshotDetail::Partitions`].
    pub partitions: Vec<PartitionSnapshot>,
    pub kafka_listener_bound: bool,
    /// Offsets committed by the groups this shard coordinates.
    pub committed_offsets: Vec<GroupOffset>,
    /// This shard's write-behind counters; `None` when write-behind is off.
    pub write_behind: Option<WriteBehindStats>,
    /// This shard's pre-write counters; `None` when pre-writing is off.
    pub prewrite: Option<PrewriteStats>,
    /// This shard's O_DIRECT append counters; `None` before it opens a segment in that mode.
    pub direct_appends: Option<DirectAppendStats>,
    /// This shard's file cache: files held, parked, parks, reopens, refusals.
    pub files: FileCacheStats,
    /// Cluster mode: partitions this shard leads, follows, and leads with a shrunk ISR.
    pub replicas: crate::replication::ReplicaCounts,
    pub transactions: TxnCounts,
}

/// One shard's transactions: those its coordinator holds Ongoing and has completed, and how
/// far its open partitions' last stable offsets trail their high watermarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxnCounts {
    pub ongoing: u64,
    pub committed: u64,
    pub aborted: u64,
    /// High watermark minus last stable offset, added up over the open partitions.
    pub last_stable_offset_lag: u64,
}

impl TxnCounts {
    fn of(state: &BrokerShard) -> TxnCounts {
        let metrics = &state.metrics;
        let ongoing = state.transactions.snapshot().into_iter();
        let ongoing = ongoing.filter(|(_, v)| v.state == TxnState::Ongoing).count();
        let mut last_stable_offset_lag = 0;
        state.partitions.for_each(|_, _, open| {
            let lag = open.high_watermark().get() - open.last_stable_offset().get();
            last_stable_offset_lag += u64::try_from(lag).unwrap_or(0);
        });
        TxnCounts {
            ongoing: ongoing as u64,
            committed: metrics.transactions_committed.get(),
            aborted: metrics.transactions_aborted.get(),
            last_stable_offset_lag,
        }
    }
}

/// An offset a consumer group committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOffset {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// One open partition of a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSnapshot {
    pub topic: String,
    pub partition: i32,
    /// Not opened since the broker started (partitions open on first use): offsets and size
    /// are reported as 0.
    pub open: bool,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub size_bytes: u64,
}

/// How much per-partition detail a snapshot (and what is rendered from it) carries. Totals by
/// default, so that a scrape's cost and size do not grow with the partition count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SnapshotDetail {
    #[default]
    Totals,
    /// A series (or status entry) per partition too: asked for with `?partitions=true`.
    Partitions,
}

impl ShardSnapshot {
    /// Copies the counters and gauges of shard `shard` (of `shard_count`), whose state is
    /// `state`. Partitions come from the topic table (what the shard owns); offsets and sizes
    /// from those it has open (a partition opens on first use after its creation).
    pub fn of(
        shard: usize,
        shard_count: usize,
        state: &BrokerShard,
        detail: SnapshotDetail,
    ) -> ShardSnapshot {
        let metrics = &state.metrics;
        let (partition_count, partitions) = owned_partitions(shard, shard_count, state, detail);
        let mut log_bytes = 0;
        state
            .partitions
            .for_each(|_, _, open| log_bytes += open.size_bytes());
        ShardSnapshot {
            shard,
            requests: metrics
                .requests
                .borrow()
                .iter()
                .map(|(key, stats)| {
                    let snapshot = RequestSnapshot {
                        served: stats.served.get(),
                        failed: stats.failed.get(),
                        latency: stats.latency.snapshot(),
                    };
                    (*key, snapshot)
                })
                .collect(),
            topics: metrics.topics.borrow().clone(),
            replicas: state.replication.as_ref().map(|r| r.counts()).unwrap_or_default(),
            fetch_paths: metrics.fetch_paths.get(),
            durability_wait: metrics.durability_wait.snapshot(),
            fdatasync: metrics.fdatasync.snapshot(),
            connections_active: state.connections_active.get(),
            connections_moved: metrics.connections_moved.get(),
            authentications: [
                metrics.authentications_succeeded.get(),
                metrics.authentications_failed.get(),
            ],
            partition_count,
            log_bytes,
            partitions,
            kafka_listener_bound: metrics.kafka_listener_bound.get(),
            committed_offsets: committed_offsets(state),
            write_behind: state.partitions.write_behind_stats(),
            prewrite: state.partitions.prewrite_stats(),
            direct_appends: state.partitions.direct_append_stats(),
            files: state.partitions.file_cache_stats(),
            transactions: TxnCounts::of(state),
        }
    }
}

/// How many partitions shard `shard` owns, and with [`SnapshotDetail::Partitions`] each one.
fn owned_partitions(
    shard: usize,
    shard_count: usize,
    state: &BrokerShard,
    detail: SnapshotDetail,
) -> (usize, Vec<PartitionSnapshot>) {
    let table = state.shared.metadata.current();
    let mut count = 0;
    let mut partitions = Vec::new();
    for topic in table.topics.values() {
        for partition in 0..topic.partition_count {
            if shard_of_partition(&topic.name, partition, shard_count) != shard {
                continue;
            }
            count += 1;
            if detail == SnapshotDetail::Totals {
                continue;
            }
            let open = state.partitions.get(&topic.name, partition);
            partitions.push(PartitionSnapshot {
                topic: topic.name.clone(),
                partition,
                open: open.is_some(),
                log_start_offset: open.as_ref().map_or(0, |p| p.log_start_offset().get()),
                log_end_offset: open.as_ref().map_or(0, |p| p.log_end_offset().get()),
                size_bytes: open.as_ref().map_or(0, |p| p.size_bytes()),
            });
        }
    }
    (count, partitions)
}

fn committed_offsets(state: &BrokerShard) -> Vec<GroupOffset> {
    let mut offsets = Vec::new();
    for listed in state.groups.list() {
        for ((topic, partition), value) in state.groups.committed(&listed.group_id) {
            offsets.push(GroupOffset {
                group: listed.group_id.clone(),
                topic,
                partition,
                offset: value.offset,
            });
        }
    }
    offsets
}

/// A consumer group's lag on one partition: log end offset minus committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupLag {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub lag: i64,
}

/// What a scrape sees: every shard that answered, in shard order.
#[derive(Debug, Clone, Default)]
pub struct BrokerSnapshot {
    pub shards: Vec<ShardSnapshot>,
    /// Shards that did not answer (stopped); readiness fails while any is missing.
    pub shards_missing: Vec<usize>,
    /// Computed from the shards' committed offsets and log end offsets by [`gather`].
    pub group_lag: Vec<GroupLag>,
    /// What the shards were asked for.
    pub detail: SnapshotDetail,
    /// How the open-file limit's shares are used, broker-wide.
    pub descriptors: DescriptorsSnapshot,
    /// Incremental fetch sessions open (KIP-227).
    pub fetch_sessions: usize,
    /// This broker and the quorum, in cluster mode only.
    pub cluster: Option<crate::quorum::ClusterStatus>,
}

/// The descriptor shares (`crate::open_files`): their sizes and what is taken of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DescriptorsSnapshot {
    pub storage_max: u64,
    pub storage_used: u64,
    pub connections_max: u64,
    pub connections_used: u64,
    /// Connections closed as soon as accepted, all slots being taken.
    pub connections_refused_total: u64,
    /// Connections closed as soon as accepted, their address being at its limit.
    pub connections_refused_per_ip_total: u64,
    /// Connections held back by `max.connection.creation.rate`.
    pub connections_throttled_total: u64,
}

impl DescriptorsSnapshot {
    fn of(shared: &crate::broker::BrokerShared) -> DescriptorsSnapshot {
        let slots = &shared.connection_slots;
        DescriptorsSnapshot {
            storage_max: shared.storage_descriptors.storage_limit(),
            storage_used: shared.storage_descriptors.used(),
            connections_max: slots.max(),
            connections_used: slots.open(),
            connections_refused_total: slots.refused_total(),
            connections_refused_per_ip_total: shared.connections_per_ip.refused_total(),
            connections_throttled_total: shared.connection_rate.throttled_total(),
        }
    }
}

impl BrokerSnapshot {
    /// Requests per API, added up over shards.
    pub fn requests(&self) -> BTreeMap<i16, RequestSnapshot> {
        let mut total: BTreeMap<i16, RequestSnapshot> = BTreeMap::new();
        for shard in &self.shards {
            for (key, stats) in &shard.requests {
                let entry = total.entry(*key).or_default();
                entry.served += stats.served;
                entry.failed += stats.failed;
                entry.latency.merge(&stats.latency);
            }
        }
        total
    }

    /// Traffic per topic, added up over shards.
    pub fn topics(&self) -> BTreeMap<String, TopicTraffic> {
        let mut total: BTreeMap<String, TopicTraffic> = BTreeMap::new();
        for shard in &self.shards {
            for (topic, traffic) in &shard.topics {
                total.entry(topic.clone()).or_default().add(traffic);
            }
        }
        total
    }

    pub fn durability_wait(&self) -> HistogramSnapshot {
        self.merged(|shard| &shard.durability_wait)
    }

    pub fn fetch_paths(&self) -> FetchPaths {
        let mut total = FetchPaths::default();
        for shard in &self.shards {
            total.add(&shard.fetch_paths);
        }
        total
    }

    pub fn fdatasync(&self) -> HistogramSnapshot {
        self.merged(|shard| &shard.fdatasync)
    }

    fn merged(&self, histogram: impl Fn(&ShardSnapshot) -> &HistogramSnapshot) -> HistogramSnapshot {
        let mut total = HistogramSnapshot::default();
        for shard in &self.shards {
            total.merge(histogram(shard));
        }
        total
    }

    /// Every shard answered and has its Kafka listener bound.
    pub fn all_shards_serving(&self) -> bool {
        self.shards_missing.is_empty() && self.shards.iter().all(|s| s.kafka_listener_bound)
    }
}

/// The Kafka name of an API key (`Produce`, `Fetch`, …), or `api_<key>` for a key this build
/// does not know.
pub fn api_name(key: i16) -> String {
    match ApiKey::try_from(key) {
        Ok(api) => format!("{api:?}"),
        Err(_) => format!("api_{key}"),
    }
}

/// Asks every shard for its snapshot (one `submit_to` each, concurrently), then the owners of
/// the partitions that groups committed offsets for for their log end offsets (for the lag).
pub async fn gather(ctx: &Rc<BrokerCtx>, detail: SnapshotDetail) -> BrokerSnapshot {
    let asks = (0..ctx.shard_count()).map(|shard| async move {
        let answer = ctx
            .submit_to(shard, move |there| async move {
                ShardSnapshot::of(there.id(), there.shard_count(), &there.state, detail)
            })
            .await;
        (shard, answer)
    });
    let mut snapshot = BrokerSnapshot {
        detail,
        descriptors: DescriptorsSnapshot::of(&ctx.state.shared),
        fetch_sessions: ctx.state.shared.fetch_sessions.len(),
        cluster: ctx.state.shared.cluster.as_ref().map(|link| link.status()),
        ..BrokerSnapshot::default()
    };
    for (shard, answer) in futures::future::join_all(asks).await {
        match answer {
            Ok(shard_snapshot) => snapshot.shards.push(shard_snapshot),
            Err(_) => snapshot.shards_missing.push(shard),
        }
    }
    let ends = committed_log_ends(ctx, &snapshot.shards).await;
    snapshot.group_lag = group_lag(&snapshot.shards, &ends);
    snapshot
}

/// Log end offsets of the open partitions that some group committed an offset for.
async fn committed_log_ends(ctx: &Rc<BrokerCtx>, shards: &[ShardSnapshot]) -> BTreeMap<(String, i32), i64> {
    let committed: std::collections::BTreeSet<TopicPartition> = shards
        .iter()
        .flat_map(|s| s.committed_offsets.iter())
        .map(|c| TopicPartition {
            topic: c.topic.clone().into(),
            partition: c.partition,
        })
        .collect();
    let items = committed.into_iter().map(|tp| (tp, ())).collect();
    let ends = on_owning_shards(ctx, items, |there, tp, ()| async move {
        let open = there.state.partitions.get(&tp.topic, tp.partition);
        open.map(|p| p.log_end_offset().get())
            .ok_or(PartitionAccessError::UnknownTopicOrPartition)
    })
    .await;
    ends.into_iter()
        .filter_map(|(tp, end)| Some(((tp.topic.to_string(), tp.partition), end.ok()?)))
        .collect()
}

/// Lag of every committed offset: the partition's log end offset minus the committed offset,
/// never below 0. Partitions whose end is unknown (not open, or on a shard that did not answer)
/// are left out rather than guessed.
pub fn group_lag(shards: &[ShardSnapshot], ends: &BTreeMap<(String, i32), i64>) -> Vec<GroupLag> {
    let mut lag: Vec<GroupLag> = shards
        .iter()
        .flat_map(|s| s.committed_offsets.iter())
        .filter_map(|c| {
            let end = ends.get(&(c.topic.clone(), c.partition))?;
            Some(GroupLag {
                group: c.group.clone(),
                topic: c.topic.clone(),
                partition: c.partition,
                lag: (end - c.offset).max(0),
            })
        })
        .collect();
    lag.sort_by(|a, b| (&a.group, &a.topic, a.partition).cmp(&(&b.group, &b.topic, b.partition)));
    lag
}

#[cfg(test)]
mod tests;
