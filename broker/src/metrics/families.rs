//! Every metric family the broker exports, documented in [`FAMILIES`] (the one place; `/metrics`
//! prints each family's help from it), and the Prometheus text renderer.
//!
//! Names follow Redpanda's (`redpanda_kafka_request_latency_seconds` is
//! `laminar_kafka_request_latency_seconds` here) so that dashboards translate by prefix; labels
//! use Kafka's names (`request="Produce"`, `topic`, `partition`, `group`).

use std::fmt::Write;

use super::histogram::HistogramSnapshot;
use super::{api_name, BrokerSnapshot, DescriptorsSnapshot, ShardSnapshot, SnapshotDetail};

/// A family's Prometheus type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A metric family: name, type, labels and meaning.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

const fn family(
    name: &'static str,
    kind: Kind,
    labels: &'static [&'static str],
    help: &'static str,
) -> Family {
    Family {
        name,
        kind,
        labels,
        help,
    }
}

pub const BUILD_INFO: &str = "laminar_build_info";
pub const UPTIME: &str = "laminar_uptime_seconds_total";
pub const REQUESTS: &str = "laminar_kafka_requests_total";
pub const REQUEST_ERRORS: &str = "laminar_kafka_request_errors_total";
pub const REQUEST_LATENCY: &str = "laminar_kafka_request_latency_seconds";
pub const REQUEST_BYTES: &str = "laminar_kafka_request_bytes_total";
pub const RECORDS_PRODUCED: &str = "laminar_kafka_records_produced_total";
pub const RECORDS_FETCHED: &str = "laminar_kafka_records_fetched_total";
pub const FETCH_BYTES: &str = "laminar_kafka_fetch_bytes_total";
pub const CONNECTIONS: &str = "laminar_kafka_connections_active";
pub const CONNECTIONS_REFUSED: &str = "laminar_kafka_connections_refused_total";
pub const CONNECTIONS_REFUSED_PER_IP: &str = "laminar_kafka_connections_refused_per_ip_total";
pub const CONNECTIONS_THROTTLED: &str = "laminar_kafka_connections_throttled_total";
pub const CONNECTIONS_MOVED: &str = "laminar_kafka_connections_moved_total";
pub const AUTHENTICATIONS: &str = "laminar_kafka_authentications_total";
pub const FETCH_SESSIONS: &str = "laminar_kafka_fetch_sessions";
pub const DESCRIPTORS_MAX: &str = "laminar_descriptors_max";
pub const DESCRIPTORS_USED: &str = "laminar_descriptors_used";
pub const FILES: &str = "laminar_storage_files";
pub const FILE_EVENTS: &str = "laminar_storage_file_events_total";
pub const PARTITIONS: &str = "laminar_kafka_partitions";
pub const LOG_BYTES: &str = "laminar_storage_log_bytes";
pub const FDATASYNC_LATENCY: &str = "laminar_storage_fdatasync_latency_seconds";
pub const DURABILITY_WAIT: &str = "laminar_storage_durability_wait_seconds";
pub const GROUP_LAG: &str = "laminar_kafka_consumer_group_lag";
pub const GROUP_LAG_SUM: &str = "laminar_kafka_consumer_group_lag_sum";
pub const GROUP_LAG_MAX: &str = "laminar_kafka_consumer_group_lag_max";
pub const UNDER_REPLICATED: &str = "laminar_kafka_under_replicated_partitions";
pub const WRITEBACK_SUBMITTED: &str = "laminar_storage_writeback_ranges_submitted_total";
pub const WRITEBACK_COMPLETED: &str = "laminar_storage_writeback_ranges_completed_total";
pub const WRITEBACK_FAILED: &str = "laminar_storage_writeback_ranges_failed_total";
pub const WRITEBACK_DEFERRED: &str = "laminar_storage_writeback_ranges_deferred_total";
pub const WRITEBACK_BYTES: &str = "laminar_storage_writeback_bytes_total";
pub const WRITEBACK_IN_FLIGHT: &str = "laminar_storage_writeback_in_flight";
pub const PREWRITE_BYTES: &str = "laminar_storage_prewrite_bytes_total";
pub const PREWRITE_FAILED: &str = "laminar_storage_prewrite_chains_failed_total";
pub const PREWRITE_WAITS: &str = "laminar_storage_prewrite_waits_total";
pub const DIRECT_WRITES: &str = "laminar_storage_direct_writes_total";
pub const DIRECT_BYTES: &str = "laminar_storage_direct_bytes_total";
pub const DIRECT_WAITS: &str = "laminar_storage_direct_waits_total";
pub const DIRECT_BUFFERS: &str = "laminar_storage_direct_buffers";
pub const CACHE_HITS: &str = "laminar_cache_hits_total";
pub const CACHE_MISSES: &str = "laminar_cache_misses_total";
pub const CACHE_BYTES: &str = "laminar_cache_bytes";
pub const QUORUM_LEADER: &str = "laminar_controller_quorum_leader";
pub const QUORUM_TERM: &str = "laminar_controller_quorum_term";
pub const QUORUM_APPLIED: &str = "laminar_controller_last_applied_index";
pub const VOTER_LAG: &str = "laminar_controller_voter_lag";
pub const BROKER_FENCED: &str = "laminar_broker_fenced";
pub const PARTITIONS_LED: &str = "laminar_partitions_led";
pub const PARTITIONS_FOLLOWED: &str = "laminar_partitions_followed";
pub const TRANSACTIONS_ONGOING: &str = "laminar_transactions_ongoing";
pub const TRANSACTIONS_COMMITTED: &str = "laminar_transactions_committed_total";
pub const TRANSACTIONS_ABORTED: &str = "laminar_transactions_aborted_total";
pub const LAST_STABLE_OFFSET_LAG: &str = "laminar_transactions_last_stable_offset_lag";

/// Every family `/metrics` serves, in the order it serves them.
pub const FAMILIES: &[Family] = &[
    family(
        BUILD_INFO,
        Kind::Gauge,
        &["version"],
        "Always 1; the label carries the broker version.",
    ),
    family(
        UPTIME,
        Kind::Counter,
        &[],
        "Seconds since the broker started (Redpanda: redpanda_uptime_seconds_total).",
    ),
    family(
        REQUESTS,
        Kind::Counter,
        &["request"],
        "Kafka requests answered, by API (Kafka's request name, e.g. Produce, Fetch).",
    ),
    family(
        REQUEST_ERRORS,
        Kind::Counter,
        &["request"],
        "Kafka requests that could not be answered (malformed, unsupported version) and closed \
         their connection, by API. Error codes inside answered responses are not counted here.",
    ),
    family(
        REQUEST_LATENCY,
        Kind::Histogram,
        &["request"],
        "Time from a request's last byte arriving to its response being ready to write, by API \
         (Redpanda: redpanda_kafka_request_latency_seconds). Log2 buckets from 8 us to 33.5 s.",
    ),
    family(
        REQUEST_BYTES,
        Kind::Counter,
        &["topic", "direction"],
        "Record bytes per topic: direction=\"in\" produced and accepted, direction=\"out\" sent \
         in fetch responses (Redpanda: redpanda_kafka_request_bytes_total; Kafka: BytesInPerSec, \
         BytesOutPerSec).",
    ),
    family(
        RECORDS_PRODUCED,
        Kind::Counter,
        &["topic"],
        "Records produced and accepted per topic, from batch headers \
         (Redpanda: redpanda_kafka_records_produced_total).",
    ),
    family(
        RECORDS_FETCHED,
        Kind::Counter,
        &["topic"],
        "Records sent to fetchers per topic, from batch headers; a fetch from inside a batch \
         counts the whole batch (Redpanda: redpanda_kafka_records_fetched_total).",
    ),
    family(
        FETCH_BYTES,
        Kind::Counter,
        &["path"],
        "Fetched record bytes by how they reached the socket: path=\"sendfile\" from the page \
         cache without a copy, \"copied\" from the file through user space because the socket \
         was full at that moment, \"memory\" read into memory first (data no longer cached).",
    ),
    family(
        CONNECTIONS,
        Kind::Gauge,
        &["shard"],
        "Open Kafka client connections per shard.",
    ),
    family(
        CONNECTIONS_MOVED,
        Kind::Counter,
        &["shard"],
        "Connections that left this shard for the one owning every partition their produce and \
         fetch requests named (docs/decisions/0025).",
    ),
    family(
        AUTHENTICATIONS,
        Kind::Counter,
        &["result"],
        "SASL authentications that ended, by result (success, failure); each failure is also \
         logged with the client's address.",
    ),
    family(
        CONNECTIONS_REFUSED,
        Kind::Counter,
        &[],
        "Client connections closed as soon as accepted because every slot was taken \
         (max.connections, at most half the open-file limit).",
    ),
    family(
        CONNECTIONS_REFUSED_PER_IP,
        Kind::Counter,
        &[],
        "Client connections closed as soon as accepted because their address held its limit \
         (max.connections.per.ip and its overrides) or went past its connection_creation_rate \
         quota; the first of each minute is logged with the address.",
    ),
    family(
        CONNECTIONS_THROTTLED,
        Kind::Counter,
        &[],
        "Client connections held before they were served because the broker's or their \
         listener's max.connection.creation.rate was reached.",
    ),
    family(
        DESCRIPTORS_MAX,
        Kind::Gauge,
        &["share"],
        "Each share of the open-file limit: share=\"storage\" for partition files (idle ones \
         close and reopen on demand), \"connections\" for client connections.",
    ),
    family(
        DESCRIPTORS_USED,
        Kind::Gauge,
        &["share"],
        "Descriptors taken of each share.",
    ),
    family(
        FILES,
        Kind::Gauge,
        &["shard", "state"],
        "Partition files each shard holds: state=\"open\" with a descriptor, \"parked\" closed \
         while idle, reopened at their next use.",
    ),
    family(
        FILE_EVENTS,
        Kind::Counter,
        &["shard", "event"],
        "File cache events per shard: event=\"park\" (an idle file closed for lack of \
         descriptors), \"reopen\" (a parked file opened again), \"refusal\" (an open refused \
         with nothing idle to close: the partition answered KAFKA_STORAGE_ERROR).",
    ),
    family(
        FETCH_SESSIONS,
        Kind::Gauge,
        &[],
        "Incremental fetch sessions (KIP-227) the broker holds, of at most \
         max.incremental.fetch.session.cache.slots (Kafka's NumIncrementalFetchSessions).",
    ),
    family(
        PARTITIONS,
        Kind::Gauge,
        &["shard"],
        "Partition replicas each shard owns.",
    ),
    family(
        LOG_BYTES,
        Kind::Gauge,
        &["shard"],
        "Bytes in the segment files of the partitions each shard owns.",
    ),
    family(
        FDATASYNC_LATENCY,
        Kind::Histogram,
        &[],
        "Duration of each fdatasync of a segment file (one covers every batch appended since the \
         previous one: group commit).",
    ),
    family(
        DURABILITY_WAIT,
        Kind::Histogram,
        &[],
        "Time a produce with acks=all (laminar.fsync=always) or a periodic flush \
         (laminar.fsync=interval) waited for its data to be fdatasync'd, group-commit queueing \
         included.",
    ),
    family(
        GROUP_LAG,
        Kind::Gauge,
        &["group", "topic", "partition"],
        "Log end offset minus the group's committed offset, per partition (kafka_exporter: \
         kafka_consumergroup_lag), computed when scraped; only with /metrics?partitions=true, \
         so that a default scrape does not grow with the partition count.",
    ),
    family(
        GROUP_LAG_SUM,
        Kind::Gauge,
        &["group"],
        "A group's lag over all its committed partitions (Redpanda: \
         redpanda_kafka_consumer_group_lag_sum).",
    ),
    family(
        GROUP_LAG_MAX,
        Kind::Gauge,
        &["group"],
        "A group's largest lag on one partition (Redpanda: redpanda_kafka_consumer_group_lag_max).",
    ),
    family(
        UNDER_REPLICATED,
        Kind::Gauge,
        &[],
        "Partitions this broker leads whose in-sync replicas are fewer than their replicas \
         (Kafka: UnderReplicatedPartitions); 0 on a single node.",
    ),
    family(
        WRITEBACK_SUBMITTED,
        Kind::Counter,
        &["shard"],
        "Write-behind ranges (sync_file_range of appended segment bytes, \
         laminar.storage.write_batch_bytes each or a multiple) handed to the kernel, per shard. \
         No sample while write-behind is off.",
    ),
    family(
        WRITEBACK_COMPLETED,
        Kind::Counter,
        &["shard"],
        "Write-behind ranges whose completion was reaped, failed ones included, per shard.",
    ),
    family(
        WRITEBACK_FAILED,
        Kind::Counter,
        &["shard"],
        "Write-behind ranges that completed with an error; the file's log then fails at its \
         next append or fdatasync.",
    ),
    family(
        WRITEBACK_DEFERRED,
        Kind::Counter,
        &["shard"],
        "Times a range was ready while laminar.storage.io_depth ranges were in flight; it goes \
         out with the file's next append, merged with what follows.",
    ),
    family(
        WRITEBACK_BYTES,
        Kind::Counter,
        &["shard"],
        "Bytes of write-behind ranges that completed without error, per shard.",
    ),
    family(
        WRITEBACK_IN_FLIGHT,
        Kind::Gauge,
        &["shard"],
        "Write-behind ranges in flight (submitted, completion not yet reaped), per shard.",
    ),
    family(
        PREWRITE_BYTES,
        Kind::Counter,
        &["shard"],
        "Bytes of segment blocks pre-written (zeros, synced) ahead of appends, per shard \
         (laminar.storage.prewrite). No sample while pre-writing is off.",
    ),
    family(
        PREWRITE_FAILED,
        Kind::Counter,
        &["shard"],
        "Pre-writes that failed (a full disk, an I/O error): the appends then allocate their \
         blocks as they go, and report errors of their own.",
    ),
    family(
        PREWRITE_WAITS,
        Kind::Counter,
        &["shard"],
        "Times an append, truncate or close waited for a pre-write of the blocks it touches.",
    ),
    family(
        DIRECT_WRITES,
        Kind::Counter,
        &["shard"],
        "O_DIRECT writes of segment appends issued on the shard's ring, per shard \
         (laminar.storage.write_mode=direct). No sample before the shard opens a segment in \
         that mode.",
    ),
    family(
        DIRECT_BYTES,
        Kind::Counter,
        &["shard"],
        "Bytes those O_DIRECT writes carried, the partial blocks rewritten and the zero padding \
         included.",
    ),
    family(
        DIRECT_WAITS,
        Kind::Counter,
        &["shard"],
        "Times a sync, a read, a truncate or a close waited for O_DIRECT appends to be written.",
    ),
    family(
        DIRECT_BUFFERS,
        Kind::Gauge,
        &["shard"],
        "O_DIRECT staging buffers (1 MiB each) the shard has out, staging appends or held by \
         writes in flight; at most 128.",
    ),
    family(
        CACHE_HITS,
        Kind::Counter,
        &["shard"],
        "Reads of O_DIRECT segment files served from the shard's recent writes \
         (laminar.cache.bytes), per shard.",
    ),
    family(
        CACHE_MISSES,
        Kind::Counter,
        &["shard"],
        "Reads of O_DIRECT segment files the recent writes did not hold: they went to the disk.",
    ),
    family(
        CACHE_BYTES,
        Kind::Gauge,
        &["shard"],
        "Bytes of recent writes the shard holds for reads (at most its share of \
         laminar.cache.bytes).",
    ),
    family(
        QUORUM_LEADER,
        Kind::Gauge,
        &[],
        "The controller quorum's leader (the active controller) as this node's voter knows it, \
         -1 while there is none (Kafka: ActiveControllerCount is this == node.id). Cluster mode \
         only, like every laminar_controller_ and laminar_broker_ family.",
    ),
    family(
        QUORUM_TERM,
        Kind::Gauge,
        &[],
        "The quorum's Raft term as this node sees it (KRaft: current-epoch).",
    ),
    family(
        QUORUM_APPLIED,
        Kind::Gauge,
        &[],
        "The last metadata log index this node applied (KRaft: last-applied-record-offset).",
    ),
    family(
        VOTER_LAG,
        Kind::Gauge,
        &["voter"],
        "Entries each voter is behind the leader's log; on the active controller's node only \
         (the leader alone tracks replication).",
    ),
    family(
        BROKER_FENCED,
        Kind::Gauge,
        &[],
        "1 while the quorum's metadata shows this broker fenced (it leads nothing), else 0.",
    ),
    family(
        PARTITIONS_LED,
        Kind::Gauge,
        &[],
        "Partitions this broker leads in the quorum's metadata (Kafka: LeaderCount).",
    ),
    family(
        PARTITIONS_FOLLOWED,
        Kind::Gauge,
        &[],
        "Partitions this broker holds a follower replica of and copies from their leaders \
         (cluster mode).",
    ),
    family(
        TRANSACTIONS_ONGOING,
        Kind::Gauge,
        &[],
        "Transactional ids this broker coordinates whose transaction is Ongoing (begun, not yet \
         ending).",
    ),
    family(
        TRANSACTIONS_COMMITTED,
        Kind::Counter,
        &[],
        "Transactions this broker's coordinator committed: markers written to every partition \
         and the CompleteCommit state durable.",
    ),
    family(
        TRANSACTIONS_ABORTED,
        Kind::Counter,
        &[],
        "Transactions this broker's coordinator aborted (by the producer, or past their \
         timeout): markers written and the CompleteAbort state durable.",
    ),
    family(
        LAST_STABLE_OFFSET_LAG,
        Kind::Gauge,
        &[],
        "High watermark minus last stable offset, added up over the partitions open here: \
         offsets that read_committed consumers wait on while transactions stay open (a hanging \
         one keeps it growing; `laminar txn list` and `describe-producers` find it).",
    ),
];

/// What the renderer needs besides the shards' snapshot.
#[derive(Debug, Clone)]
pub struct RenderContext<'a> {
    pub version: &'a str,
    pub uptime_seconds: f64,
    /// Whether per-partition series are rendered.
    pub detail: SnapshotDetail,
}

/// The whole `/metrics` page in Prometheus text format 0.0.4.
pub fn render(snapshot: &BrokerSnapshot, context: &RenderContext<'_>) -> String {
    let mut out = String::with_capacity(16 * 1024);
    for family in FAMILIES {
        header(&mut out, family);
        samples(&mut out, family.name, snapshot, context);
    }
    out
}

fn header(out: &mut String, family: &Family) {
    let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
    let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind.as_str());
}

fn samples(out: &mut String, name: &str, snapshot: &BrokerSnapshot, context: &RenderContext<'_>) {
    match name {
        BUILD_INFO => sample(out, name, &[("version", context.version)], 1),
        UPTIME => {
            let _ = writeln!(out, "{name} {:.3}", context.uptime_seconds);
        }
        REQUESTS | REQUEST_ERRORS | REQUEST_LATENCY => request_samples(out, name, snapshot),
        REQUEST_BYTES | RECORDS_PRODUCED | RECORDS_FETCHED => topic_samples(out, name, snapshot),
        FETCH_BYTES => {
            let paths = snapshot.fetch_paths();
            sample(out, name, &[("path", "sendfile")], paths.sendfile);
            sample(out, name, &[("path", "copied")], paths.copied);
            sample(out, name, &[("path", "memory")], paths.memory);
        }
        CONNECTIONS | CONNECTIONS_MOVED | PARTITIONS | LOG_BYTES => shard_samples(out, name, snapshot),
        CONNECTIONS_REFUSED => sample(out, name, &[], snapshot.descriptors.connections_refused_total),
        CONNECTIONS_REFUSED_PER_IP => sample(
            out,
            name,
            &[],
            snapshot.descriptors.connections_refused_per_ip_total,
        ),
        CONNECTIONS_THROTTLED => sample(out, name, &[], snapshot.descriptors.connections_throttled_total),
        AUTHENTICATIONS => {
            let sum = |i: usize| snapshot.shards.iter().map(|s| s.authentications[i]).sum::<u64>();
            sample(out, name, &[("result", "success")], sum(0));
            sample(out, name, &[("result", "failure")], sum(1));
        }
        FETCH_SESSIONS => sample(out, name, &[], snapshot.fetch_sessions as u64),
        DESCRIPTORS_MAX | DESCRIPTORS_USED => descriptor_samples(out, name, &snapshot.descriptors),
        FILES | FILE_EVENTS => file_samples(out, name, snapshot),
        FDATASYNC_LATENCY => histogram(out, name, &[], &snapshot.fdatasync()),
        DURABILITY_WAIT => histogram(out, name, &[], &snapshot.durability_wait()),
        GROUP_LAG if context.detail == SnapshotDetail::Partitions => group_lag_samples(out, name, snapshot),
        GROUP_LAG => {}
        GROUP_LAG_SUM | GROUP_LAG_MAX => group_lag_totals(out, name, snapshot),
        UNDER_REPLICATED => {
            let total: usize = snapshot.shards.iter().map(|s| s.replicas.under_replicated).sum();
            sample(out, name, &[], total as u64);
        }
        PARTITIONS_FOLLOWED => {
            if snapshot.cluster.is_some() {
                let total: usize = snapshot.shards.iter().map(|s| s.replicas.followed).sum();
                sample(out, name, &[], total as u64);
            }
        }
        WRITEBACK_SUBMITTED | WRITEBACK_COMPLETED | WRITEBACK_FAILED | WRITEBACK_DEFERRED
        | WRITEBACK_BYTES | WRITEBACK_IN_FLIGHT => writeback_samples(out, name, snapshot),
        PREWRITE_BYTES | PREWRITE_FAILED | PREWRITE_WAITS => prewrite_samples(out, name, snapshot),
        DIRECT_WRITES | DIRECT_BYTES | DIRECT_WAITS | DIRECT_BUFFERS | CACHE_HITS | CACHE_MISSES
        | CACHE_BYTES => {
            direct_samples(out, name, snapshot);
        }
        QUORUM_LEADER | QUORUM_TERM | QUORUM_APPLIED | VOTER_LAG | BROKER_FENCED | PARTITIONS_LED => {
            cluster_samples(out, name, snapshot);
        }
        TRANSACTIONS_ONGOING | TRANSACTIONS_COMMITTED | TRANSACTIONS_ABORTED | LAST_STABLE_OFFSET_LAG => {
            transaction_samples(out, name, snapshot);
        }
        other => unreachable!("family {other} has no renderer"),
    }
}

/// The quorum and this broker's membership; nothing in single-node mode.
fn cluster_samples(out: &mut String, name: &str, snapshot: &BrokerSnapshot) {
    let Some(cluster) = &snapshot.cluster else { return };
    let quorum = &cluster.quorum;
    match name {
        QUORUM_LEADER => {
            let leader = quorum.leader_id.and_then(|id| i64::try_from(id).ok());
            sample_i64(out, name, &[], leader.unwrap_or(-1));
        }
        QUORUM_TERM => sample(out, name, &[], quorum.term),
        QUORUM_APPLIED => sample(out, name, &[], quorum.last_applied_index.unwrap_or(0)),
        VOTER_LAG => {
            for voter in &quorum.voters {
                let id = voter.node_id.to_string();
                sample(out, name, &[("voter", &id)], voter.lag.unwrap_or(0));
            }
        }
        BROKER_FENCED => sample(out, name, &[], u64::from(cluster.fenced)),
        _ => sample(out, name, &[], cluster.partitions_led),
    }
}

/// The shards' transaction counts, added up: one sample per broker.
fn transaction_samples(out: &mut String, name: &str, snapshot: &BrokerSnapshot) {
    let each = snapshot.shards.iter().map(|s| s.transactions);
    let total: u64 = match name {
        TRANSACTIONS_ONGOING => each.map(|t| t.ongoing).sum(),
        TRANSACTIONS_COMMITTED => each.map(|t| t.committed).sum(),
        TRANSACTIONS_ABORTED => each.map(|t| t.aborted).sum(),
        _ => each.map(|t| t.last_stable_offset_lag).sum(),
    };
    sample(out, name, &[], total);
}

/// Per Kafka API: requests served, failed, and their latency.
fn request_samples(out: &mut String, name: &str, snapshot: &BrokerSnapshot) {
    for (key, stats) in snapshot.requests() {
        let api = api_name(key);
        let labels = [("request", api.as_str())];
        match name {
            REQUESTS => sample(out, name, &labels, stats.served),
            REQUEST_ERRORS => sample(out, name, &labels, stats.failed),
            _ => histogram(out, name, &labels, &stats.latency),
        }
    }
}

/// Per topic: bytes in and out, records produced or fetched.
fn topic_samples(out: &mut String, name: &str, snapshot: &BrokerSnapshot) {
    for (topic, traffic) in snapshot.topics() {
        match name {
            REQUEST_BYTES => {
                sample(
                    out,
                    name,
                    &[("topic", &topic), ("direction", "in")],
                    traffic.bytes_in,
                );
                sample(
                    out,
                    name,
                    &[("topic", &topic), ("direction", "out")],
                    traffic.bytes_out,
                );
            }
            RECORDS_PRODUCED => sample(out, name, &[("topic", &topic)], traffic.records_in),
            _ => sample(out, name, &[("topic", &topic)], traffic.records_out),
        }
    }
}

/// Per shard: connections, connections moved away, partitions owned, log bytes.
fn shard_samples(out: &mut String, name: &str, snapshot: &BrokerSnapshot) {
    for shard in &snapshot.shards {
        let value = match name {
            CONNECTIONS => shard.connections_active as u64,
            CONNECTIONS_MOVED => shard.connections_moved,
            PARTITIONS => shard.partition_count as u64,
            _ => shard.log_bytes,
        };
        sample(out, name, &[("shard", &shard.shard.to_string())], value);
    }
}

/// The two descriptor shares, their sizes or what is used of them.
fn descriptor_samples(out: &mut String, name: &str, descriptors: &DescriptorsSnapshot) {
    let (storage, connections) = match name {
        DESCRIPTORS_MAX => (descriptors.storage_max, descriptors.connections_max),
        _ => (descriptors.storage_used, descriptors.connections_used),
    };
    sample(out, name, &[("share", "storage")], storage);
    sample(out, name, &[("share", "connections")], connections);
}

/// Per shard: files held by state, or the file cache's events.
fn file_samples(out: &mut String, name: &str, snapshot: &BrokerSnapshot) {
    for shard in &snapshot.shards {
        let id = shard.shard.to_string();
        let files = &shard.files;
        let series: &[(&str, &str, u64)] = match name {
            FILES => &[
                ("state", "open", files.files - files.parked),
                ("state", "parked", files.parked),
            ],
            _ => &[
                ("event", "park", files.parks),
                ("event", "reopen", files.reopens),
                ("event", "refusal", files.refusals),
            ],
        };
        for (label, value_label, value) in series {
            sample(out, name, &[("shard", &id), (label, value_label)], *value);
        }
    }
}

fn group_lag_samples(out: &mut String, name: &str, snapshot: &BrokerSnapshot) {
    for lag in &snapshot.group_lag {
        let partition = lag.partition.to_string();
        let labels = [
            ("group", lag.group.as_str()),
            ("topic", lag.topic.as_str()),
            ("partition", partition.as_str()),
        ];
        sample_i64(out, name, &labels, lag.lag);
    }
}

/// Per group: the lag added up, or the largest, over its partitions.
fn group_lag_totals(out: &mut String, name: &str, snapshot: &BrokerSnapshot) {
    let mut per_group: std::collections::BTreeMap<&str, (i64, i64)> = Default::default();
    for lag in &snapshot.group_lag {
        let (sum, max) = per_group.entry(lag.group.as_str()).or_default();
        *sum += lag.lag;
        *max = (*max).max(lag.lag);
    }
    for (group, (sum, max)) in per_group {
        let value = if name == GROUP_LAG_SUM { sum } else { max };
        sample_i64(out, name, &[("group", group)], value);
    }
}

/// One sample per shard for which `value` has one.
fn per_shard_samples(
    out: &mut String,
    name: &str,
    snapshot: &BrokerSnapshot,
    value: impl Fn(&ShardSnapshot) -> Option<u64>,
) {
    for shard in &snapshot.shards {
        if let Some(value) = value(shard) {
            sample(out, name, &[("shard", &shard.shard.to_string())], value);
        }
    }
}

/// Per shard with write-behind on: its counters.
fn writeback_samples(out: &mut String, name: &str, snapshot: &BrokerSnapshot) {
    per_shard_samples(out, name, snapshot, |shard| {
        let stats = shard.write_behind.as_ref()?;
        Some(match name {
            WRITEBACK_SUBMITTED => stats.ranges_submitted,
            WRITEBACK_COMPLETED => stats.ranges_completed,
            WRITEBACK_FAILED => stats.ranges_failed,
            WRITEBACK_DEFERRED => stats.ranges_deferred,
            WRITEBACK_BYTES => stats.bytes_written_back,
            _ => stats.in_flight,
        })
    });
}

/// Per shard with pre-writing on: its counters.
fn prewrite_samples(out: &mut String, name: &str, snapshot: &BrokerSnapshot) {
    per_shard_samples(out, name, snapshot, |shard| {
        let stats = shard.prewrite.as_ref()?;
        Some(match name {
            PREWRITE_BYTES => stats.bytes_prewritten,
            PREWRITE_FAILED => stats.chains_failed,
            _ => stats.waits,
        })
    });
}

/// Per shard writing O_DIRECT appends on its ring: its counters.
fn direct_samples(out: &mut String, name: &str, snapshot: &BrokerSnapshot) {
    per_shard_samples(out, name, snapshot, |shard| {
        let stats = shard.direct_appends.as_ref()?;
        Some(match name {
            DIRECT_WRITES => stats.writes,
            DIRECT_BYTES => stats.bytes_written,
            DIRECT_WAITS => stats.waits,
            DIRECT_BUFFERS => stats.buffers_out,
            CACHE_HITS => stats.cache_hits,
            CACHE_MISSES => stats.cache_misses,
            _ => stats.cache_bytes,
        })
    });
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: u64) {
    let _ = writeln!(out, "{name}{} {value}", label_set(labels));
}

fn sample_i64(out: &mut String, name: &str, labels: &[(&str, &str)], value: i64) {
    let _ = writeln!(out, "{name}{} {value}", label_set(labels));
}

fn histogram(out: &mut String, name: &str, labels: &[(&str, &str)], h: &HistogramSnapshot) {
    for (bound, count) in h.cumulative() {
        let le = format!("{bound}");
        let mut with_le = labels.to_vec();
        with_le.push(("le", &le));
        let _ = writeln!(out, "{name}_bucket{} {count}", label_set(&with_le));
    }
    let mut with_inf = labels.to_vec();
    with_inf.push(("le", "+Inf"));
    let _ = writeln!(out, "{name}_bucket{} {}", label_set(&with_inf), h.count());
    let set = label_set(labels);
    let _ = writeln!(out, "{name}_sum{set} {}", h.sum_micros as f64 / 1e6);
    let _ = writeln!(out, "{name}_count{set} {}", h.count());
}

/// `{a="x",b="y"}`, or nothing without labels. Values are escaped as the text format says.
fn label_set(labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = labels
        .iter()
        .map(|(key, value)| format!("{key}=\"{}\"", escape(value)))
        .collect();
    format!("{{{}}}", pairs.join(","))
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
