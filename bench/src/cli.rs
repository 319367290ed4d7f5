//! `laminar bench` command-line arguments.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use laminar_client::{Acks, Compression};

use crate::layout::{BATCH_HEADER_BYTES, KEYED_KEY_BYTES, KEY_BYTES, RECORD_FRAMING_BYTES};

/// `laminar bench …`: load against any Kafka-compatible broker, and this machine's limits.
#[derive(Debug, Clone, Subcommand)]
pub enum BenchCommand {
    /// Produce records as fast as possible or at a fixed rate.
    Produce(ProduceArgs),
    /// Consume records from the start of a topic.
    Consume(ConsumeArgs),
    /// Produce and consume at once; end-to-end latency from a timestamp in each record.
    E2e(E2eArgs),
    /// Measure this machine's disk and loopback limits.
    Limits(LimitsArgs),
    /// Measurement tool for the harness's own ceiling: a server that accepts produce requests
    /// and discards them, and serves canned batches to fetches. Never a broker result.
    Sink(SinkArgs),
    /// Start a broker, give it N partitions, and measure what they cost (decision 0029's figures).
    ///
    /// Memory, descriptors, disk, creation, start and shutdown times, requests over
    /// everything, throughput as the work spreads, idle connections. The harness starts the
    /// broker itself (this `laminar` executable, `laminar broker` on free loopback ports and
    /// a data dir of its own), so it reads its RSS, descriptors and CPU time from /proc,
    /// stops it, kills it and starts it again. Steps, in order: the broker at
    /// 0 partitions; CreateTopics for N partitions (topics of --partitions-per-topic, many
    /// topics per request); the broker with N idle partitions (RSS, descriptors, disk blocks
    /// as `du` counts them, and per partition; CPU over 5 s); one 100-byte record to every
    /// partition (acks=1, pipelined) and the same figures again; Metadata for all topics,
    /// GET /metrics, ListGroups, DescribeConfigs (median of 5); --connections idle
    /// connections (RSS per connection, CPU over 5 s); clean shutdown (SIGTERM to exit); start
    /// after it (spawn to the first Metadata that lists every partition); kill -9 after
    /// producing to 1 000 partitions, and the start after that; then, on a fresh broker,
    /// produce throughput with 1, 100, 1 000 and 10 000 partitions and with 1, 4, 16 and 64
    /// producers, unkeyed and keyed, and consume throughput (1 KiB records, acks=1,
    /// --throughput-mib per run, the fastest of --throughput-tries, each try on a topic
    /// created for it), each against the best of its series.
    ///
    /// Every step is timed and bounded: one that fails or overruns --step-timeout-s is
    /// reported with its error and what it measured, and the run goes on. The goals
    /// (decision 0029) are printed beside the figures as met or not met; nothing is asserted.
    /// Writing steps stop when the disk has less than --min-free-mib free.
    ///
    /// Example: laminar bench scale --partitions 100000 --json scale.json
    #[command(verbatim_doc_comment)]
    Scale(ScaleArgs),
    /// Start a cluster, and produce with acks=all to a topic of replication factor 1 and to one
    /// of replication factor 3 in alternated rounds of equal length (decision 0014).
    ///
    /// The harness starts --brokers brokers itself (this `laminar` executable in combined mode,
    /// broker and controller voter in one process, on free loopback ports, data dirs under
    /// --data-dir, laminar.cores=--cores each), creates the two topics with the same
    /// --partitions, writes one warm-up second to each, then runs --rounds rounds: each
    /// produces for --seconds to one topic and then to the other, the order swapped every
    /// round (RF1 RF3, RF3 RF1, …) so that drift over the run weighs on both alike. Then a
    /// consume round reads the RF1 topic from its start, and the brokers are stopped.
    ///
    /// Reported: per side, MB/s and records/s acknowledged and the produce latency p50/p99, the
    /// RF3/RF1 ratios (of the sums, and the range of the per-round ratios); each broker's CPU
    /// time (from /proc/<pid>/stat and its threads': shards, follower fetchers, the rest) in
    /// each kind of round; bytes sent by fetch (to followers during produce rounds, to the
    /// consumer during the consume round) and how they left (sendfile, copied, read into
    /// memory, from each broker's /metrics); and each broker's CPU per MB it served by fetch.
    /// With --bootstrap it runs against an existing cluster and reports throughput and latency
    /// only. Nothing is judged.
    ///
    /// Example: laminar bench replication --rounds 4 --seconds 10 --json replication.json
    #[command(verbatim_doc_comment)]
    Replication(ReplicationArgs),
    /// Commit offsets as a consumer that commits after every message does (asynchronous
    /// commits): OffsetCommit requests pipelined on one connection to the group's coordinator,
    /// each timed from send to answer, in rounds alternated with rounds of this disk's own
    /// fdatasync latency (run it on the broker's data disk: --sync-dir). Reports commits/s and
    /// the commit latency p50/p99 beside the fdatasync's, and their p99 ratio.
    ///
    /// Example: laminar bench commits --commits 10000 --sync-dir /var/lib/laminar
    #[command(verbatim_doc_comment)]
    Commits(CommitsArgs),
}

/// `laminar bench commits`.
#[derive(Debug, Clone, Args)]
pub struct CommitsArgs {
    /// Bootstrap broker, host:port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub brokers: String,
    /// Topic whose partition 0 the commits name (created with one partition if missing).
    #[arg(long, default_value = "laminar-bench-commits")]
    pub topic: String,
    /// Group that commits (it must have no members: the commits are outside a generation).
    #[arg(long, default_value = "laminar-bench-commits")]
    pub group: String,
    /// Commits per round.
    #[arg(long, default_value_t = 10_000)]
    pub commits: usize,
    /// Commits sent and not yet answered, at most (librdkafka allows 1 000 000 in flight).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub in_flight: u64,
    /// Rounds of commits, each followed by a round of fdatasync probes.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Directory on the broker's data disk for the fdatasync probe's scratch file.
    #[arg(long, default_value = ".")]
    pub sync_dir: PathBuf,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Where to connect, and what to write out.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Bootstrap broker, host:port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub brokers: String,
    /// Topic to use (created with --partitions if missing).
    #[arg(long)]
    pub topic: String,
    /// Partitions of the topic when the harness creates it.
    #[arg(long, default_value_t = 4)]
    pub partitions: i32,
    /// Replication factor of the topic when the harness creates it (-1: the broker's
    /// `default.replication.factor`).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub replication_factor: i16,
    /// A topic config (`retention.bytes=…`) when the harness creates the topic; repeatable.
    #[arg(long = "topic-config", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub topic_configs: Vec<(String, String)>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write a self-contained HTML report to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Directory on the data disk for the limits measured with every run.
    #[arg(long, default_value = ".")]
    pub limits_dir: PathBuf,
    /// Skip measuring the limits (the JSON then has none).
    #[arg(long)]
    pub no_limits: bool,
    #[command(flatten)]
    pub security: SecurityArgs,
}

/// How the harness's connections are secured, in Kafka's client names: to measure what TLS
/// and SASL cost against PLAINTEXT on the same broker.
#[derive(Debug, Clone, Default, Args)]
pub struct SecurityArgs {
    /// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (`security.protocol`); the default is
    /// PLAINTEXT.
    #[arg(long)]
    pub security_protocol: Option<String>,
    /// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 on SASL listeners.
    #[arg(long, default_value = "SCRAM-SHA-512")]
    pub sasl_mechanism: String,
    #[arg(long)]
    pub sasl_username: Option<String>,
    /// The password (else `LAMINAR_SASL_PASSWORD`, which keeps it out of `ps`).
    #[arg(long)]
    pub sasl_password: Option<String>,
    /// PEM file of the CA certificates to trust on SSL and SASL_SSL.
    #[arg(long)]
    pub ssl_ca_location: Option<PathBuf>,
}

impl SecurityArgs {
    /// The client settings these arguments ask for.
    pub fn client_config(&self) -> anyhow::Result<laminar_client::ClientConfig> {
        let settings = laminar_client::SecuritySettings {
            protocol: self.security_protocol.as_deref().map(str::parse).transpose()?,
            ssl_ca_location: self.ssl_ca_location.clone(),
            // Empty when the arguments were made in code (`SecurityArgs::default()`).
            sasl_mechanism: match self.sasl_mechanism.trim() {
                "" => None,
                mechanism => Some(mechanism.parse()?),
            },
            sasl_username: self.sasl_username.clone(),
            sasl_password: self
                .sasl_password
                .clone()
                .or_else(|| std::env::var("LAMINAR_SASL_PASSWORD").ok()),
        };
        Ok(laminar_client::ClientConfig {
            security: settings.security()?,
            ..laminar_client::ClientConfig::default()
        })
    }
}

/// Producer settings shared by `produce`, `e2e` and `replication`.
#[derive(Debug, Clone, Args)]
pub struct ProducerArgs {
    /// Bytes of each record's value.
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    /// Records per second in total; unset or -1 for as fast as possible.
    #[arg(long, allow_negative_numbers = true)]
    pub throughput: Option<f64>,
    /// 0, 1 or all.
    #[arg(long, default_value = "1", value_parser = parse_acks)]
    pub acks: Acks,
    /// Largest batch in bytes of record values.
    #[arg(long, default_value_t = 256 * 1024)]
    pub batch_bytes: usize,
    /// How long a batch may wait for more records at a fixed rate.
    #[arg(long, default_value_t = 5)]
    pub linger_ms: u64,
    /// Batch compression.
    #[arg(long, value_enum, default_value_t = CompressionArg::None)]
    pub compression: CompressionArg,
    /// Producer threads, one connection each.
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    /// Produce requests in flight per connection.
    #[arg(long, default_value_t = 5)]
    pub max_in_flight: usize,
    /// Largest produce request (Kafka's `max.request.size`). A request carries one batch for
    /// each of the producer's partitions that has one ready, as many as fit, as Kafka's
    /// producer does; at least one. A value below one batch sends one batch per request.
    #[arg(long, default_value_t = 1024 * 1024)]
    pub max_request_bytes: usize,
    /// Keyed records, spread as Kafka's default partitioner spreads them: every record gets a
    /// distinct 16-byte key (its timestamp, then a sequence number) and goes to the partition
    /// murmur2 of its key picks among all of the topic's partitions (every producer writes to
    /// all of them when one broker leads them), so a request carries many small batches.
    /// Without it, a batch fills one partition, the next batch the next one, as Kafka's sticky
    /// partitioner does with unkeyed records (keys then hold only the timestamp).
    #[arg(long)]
    pub keyed: bool,
    /// Bytes a keyed producer holds in batches waiting or in flight (Kafka's `buffer.memory`):
    /// a pool of `buffer-bytes / batch-bytes` batch buffers, one per batch however few records
    /// it holds, as Kafka's producer allocates them. A record that needs a new batch while
    /// none is free waits for an acknowledgement.
    #[arg(long, default_value_t = 32 * 1024 * 1024)]
    pub buffer_bytes: usize,
}

/// `laminar bench produce`.
#[derive(Debug, Clone, Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Records to send in total (across producers).
    #[arg(long)]
    pub num_records: u64,
    #[command(flatten)]
    pub producer: ProducerArgs,
    #[command(flatten)]
    pub delivery: DeliveryArgs,
}

/// Batches in a transaction unless `--transaction-batches` says otherwise.
const TRANSACTION_BATCHES_DEFAULT: usize = 10;
/// Kafka's producer allows at most 5 requests in flight with idempotence.
const IDEMPOTENT_IN_FLIGHT_MAX: usize = 5;

/// How `produce` delivers: plain, idempotent or in transactions.
#[derive(Debug, Clone, Args)]
pub struct DeliveryArgs {
    /// Idempotent producer (needs --acks all): a producer id from InitProducerId, epoch 0, and
    /// per-partition sequences in every batch.
    #[arg(long)]
    pub idempotent: bool,
    /// Transactional producer (idempotent too): InitProducerId with a transactional id, then
    /// transactions of --transaction-batches batches each (AddPartitionsToTxn for the
    /// partitions they go to, the batches, EndTxn to commit once all are acknowledged).
    /// Transactions committed and the EndTxn round trip are reported.
    #[arg(long)]
    pub transactional: bool,
    /// Batches in each transaction (the last may hold fewer).
    #[arg(long, default_value_t = TRANSACTION_BATCHES_DEFAULT, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub transaction_batches: usize,
    /// Transactional id (default `laminar-bench-<pid>`); with several producers, each adds
    /// `-<its index>`.
    #[arg(long)]
    pub transactional_id: Option<String>,
}

impl Default for DeliveryArgs {
    fn default() -> DeliveryArgs {
        DeliveryArgs {
            idempotent: false,
            transactional: false,
            transaction_batches: TRANSACTION_BATCHES_DEFAULT,
            transactional_id: None,
        }
    }
}

impl DeliveryArgs {
    /// Whether batches carry a producer id and sequences.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent || self.transactional
    }

    /// Refuses what Kafka's producer refuses with idempotence: acks other than all, more than
    /// 5 requests in flight.
    pub fn check(&self, producer: &ProducerArgs) -> anyhow::Result<()> {
        if !self.is_idempotent() {
            return Ok(());
        }
        let kind = if self.transactional {
            "--transactional"
        } else {
            "--idempotent"
        };
        if producer.acks != Acks::All {
            anyhow::bail!("{kind} needs --acks all: Kafka requires acks=all for idempotence");
        }
        if producer.max_in_flight > IDEMPOTENT_IN_FLIGHT_MAX {
            anyhow::bail!("{kind} allows --max-in-flight {IDEMPOTENT_IN_FLIGHT_MAX} at most, as Kafka's producer does with idempotence");
        }
        Ok(())
    }

    /// The transactional id of producer `index` of `producers`, when transactional.
    pub fn transactional_id_of(&self, index: usize, producers: usize) -> Option<String> {
        if !self.transactional {
            return None;
        }
        let base = self
            .transactional_id
            .clone()
            .unwrap_or_else(|| format!("laminar-bench-{}", std::process::id()));
        Some(if producers > 1 {
            format!("{base}-{index}")
        } else {
            base
        })
    }
}

/// `laminar bench consume`.
#[derive(Debug, Clone, Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Records to consume in total (across consumers).
    #[arg(long)]
    pub num_records: u64,
    /// Consumer threads, one connection each; partitions are dealt round-robin. Each connects
    /// and warms a receive buffer the size of its largest answer before the clock starts.
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    /// Bytes asked per fetch (split evenly over a consumer's partitions, at least 1 MiB each).
    /// The default is Kafka consumers' `fetch.max.bytes` (50 MiB). Each consumer holds about
    /// this much receive memory.
    #[arg(long, default_value_t = crate::consume::FETCH_MAX_BYTES_DEFAULT)]
    pub fetch_max_bytes: i32,
    /// Give up after this long without a record.
    #[arg(long, default_value_t = 10)]
    pub idle_timeout_s: u64,
    /// Fetch in an incremental fetch session (KIP-227), as Kafka's Java consumer does: after
    /// the first fetch, each names only the partitions whose position moved, and the answer
    /// carries only partitions with news.
    #[arg(long)]
    pub fetch_session: bool,
}

/// `laminar bench e2e`.
#[derive(Debug, Clone, Args)]
pub struct E2eArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Records to send in total (across producers).
    #[arg(long)]
    pub num_records: u64,
    #[command(flatten)]
    pub producer: ProducerArgs,
    /// Consumer threads.
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
}

/// `laminar bench limits`.
#[derive(Debug, Clone, Args)]
pub struct LimitsArgs {
    /// Directory on the disk to measure.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Write the limits as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// `laminar bench scale`.
#[derive(Debug, Clone, Args)]
pub struct ScaleArgs {
    /// Partitions in all.
    #[arg(long, default_value_t = 10_000)]
    pub partitions: u32,
    /// Partitions of each topic (the last topic takes the rest).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub partitions_per_topic: u32,
    /// Directory for the run: the brokers' data dirs and logs go under it, and it is kept
    /// (the N-partition data dir itself is removed before the throughput runs, to give its
    /// disk back). Default: a new directory in the current one (on its disk, not a tmpfs),
    /// removed at the end.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Skip the produce and consume throughput runs.
    #[arg(long)]
    pub skip_throughput: bool,
    /// Idle client connections to open (fewer if this process's open-file limit, raised to
    /// its hard limit, cannot hold them: the run says so).
    #[arg(long, default_value_t = 10_000)]
    pub connections: u64,
    /// Record-value MiB each throughput run produces (long enough that a run's start-up
    /// does not decide its figure).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub throughput_mib: u64,
    /// Tries of each throughput run, made in rounds (each round tries every point once, in
    /// turn); the fastest is kept and all are reported. On a VM that hands freed memory back to
    /// its host, a run writing into memory freed long ago is up to 2× slower than the same run
    /// just after another's data was deleted (docs/decisions/0008).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    pub throughput_tries: u64,
    /// Longest a step (and each throughput run) may take, in seconds.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub step_timeout_s: u64,
    /// Steps that write stop when the data dir's filesystem has less than this free (MiB):
    /// a broker that reserves blocks ahead for every partition can fill a disk.
    #[arg(long, default_value_t = 2048)]
    pub min_free_mib: u64,
    /// The `laminar` executable to run as the broker (default: this one).
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    /// `key=value` for the broker, after the harness's own (log.dirs, listeners,
    /// laminar.http.listen).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

/// `laminar bench replication`: the producer settings of `produce`, with acks=all and one
/// producer per partition unless told otherwise.
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("acks", |arg| arg.default_value("all")),
    mut_arg("producers", |arg| arg
        .default_value("0")
        .help("Producer threads, one connection each; 0: one per partition (a producer's partitions must share a leader)")),
)]
pub struct ReplicationArgs {
    /// Run against this existing cluster (`host:port` of one broker) instead of starting one;
    /// the brokers' CPU times and /metrics are then not read.
    #[arg(long)]
    pub bootstrap: Option<String>,
    /// Brokers to start, each a controller voter too (combined mode).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=9))]
    pub brokers: u16,
    /// `laminar.cores` of each broker started.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub cores: u32,
    /// The replication factor compared with 1.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i16).range(1..=9))]
    pub replication_factor: i16,
    /// Partitions of each of the two topics.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=10_000))]
    pub partitions: i32,
    /// Rounds; each produces to both topics, one after the other.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub rounds: u32,
    /// Seconds each topic is produced to in each round.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub seconds: u64,
    /// Skip the consume round.
    #[arg(long)]
    pub skip_consume: bool,
    /// `retention.bytes` of each partition, in MiB, with segments of a quarter of it (at most
    /// 64 MiB): older data is deleted as the rounds go, so that the disk bounds the rate, not
    /// the length of a run (the brokers started look for it every second).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub retention_mib: u64,
    #[command(flatten)]
    pub producer: ProducerArgs,
    /// Directory for the brokers' data dirs and logs, kept. Default: a new directory in the
    /// current one (on its disk, not a tmpfs), removed at the end.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Rounds stop when the data dir's filesystem has less than this free (MiB).
    #[arg(long, default_value_t = 2048)]
    pub min_free_mib: u64,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// The `laminar` executable to run as the brokers (default: this one).
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    /// `key=value` for every broker, after the harness's own.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// How the brokers started replicate: over their PLAINTEXT listener, or over a listener of
    /// their own with TLS (SSL) or TLS and SASL PLAIN (SASL_SSL), certificates made by the run.
    #[arg(long, value_enum, default_value = "plaintext")]
    pub inter_broker_protocol: InterBrokerProtocol,
}

/// `--inter-broker-protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InterBrokerProtocol {
    #[value(name = "plaintext")]
    Plaintext,
    #[value(name = "ssl")]
    Ssl,
    #[value(name = "sasl_ssl")]
    SaslSsl,
}

impl InterBrokerProtocol {
    /// Kafka's name of the security protocol.
    pub fn name(self) -> &'static str {
        match self {
            InterBrokerProtocol::Plaintext => "PLAINTEXT",
            InterBrokerProtocol::Ssl => "SSL",
            InterBrokerProtocol::SaslSsl => "SASL_SSL",
        }
    }
}

/// `laminar bench sink`.
#[derive(Debug, Clone, Args)]
pub struct SinkArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Value bytes of the records in the canned batches served to fetches.
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
}

/// `--compression`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompressionArg {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl CompressionArg {
    /// The codec.
    pub fn codec(self) -> Compression {
        match self {
            CompressionArg::None => Compression::None,
            CompressionArg::Gzip => Compression::Gzip,
            CompressionArg::Snappy => Compression::Snappy,
            CompressionArg::Lz4 => Compression::Lz4,
            CompressionArg::Zstd => Compression::Zstd,
        }
    }
}

fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_owned(), value.to_owned())),
        _ => Err(format!("expected key=value, got {text:?}")),
    }
}

fn parse_acks(text: &str) -> Result<Acks, String> {
    text.parse()
}

impl ProducerArgs {
    /// The total rate asked for, `None` for as fast as possible.
    pub fn rate(&self) -> Option<f64> {
        self.throughput.filter(|rate| *rate > 0.0)
    }

    /// Records per batch: as many values as fit `batch_bytes`, at least one.
    pub fn records_per_batch(&self) -> usize {
        (self.batch_bytes / self.record_size.max(1)).max(1)
    }

    /// Full batches that fit one request of `max_request_bytes` (at least one), counting each
    /// record's key, value and framing, and the batch header.
    pub fn batches_per_request(&self) -> usize {
        let record_bytes = self.record_size + KEY_BYTES + RECORD_FRAMING_BYTES;
        let batch_bytes = self.records_per_batch() * record_bytes + BATCH_HEADER_BYTES;
        (self.max_request_bytes / batch_bytes).max(1)
    }

    /// Batch buffers in a keyed producer's pool: `buffer_bytes / batch_bytes`, one at least.
    pub fn batch_buffers(&self) -> usize {
        (self.buffer_bytes / self.batch_bytes.max(1)).max(1)
    }

    /// Keyed records that fit one request of `max_request_bytes` (at least one), were each to
    /// land in a batch of its own: every record's key, value and framing, and a batch header.
    pub fn records_per_keyed_request(&self) -> usize {
        let record_bytes = self.record_size + KEYED_KEY_BYTES + RECORD_FRAMING_BYTES + BATCH_HEADER_BYTES;
        (self.max_request_bytes / record_bytes).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: BenchCommand,
    }

    fn parse(args: &[&str]) -> Result<BenchCommand, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map(|c| c.command)
    }

    #[test]
    fn security_arguments_made_in_code_are_plaintext() {
        // `bench replication` builds its runs' arguments with `SecurityArgs::default()`.
        let config = SecurityArgs::default().client_config().expect("plaintext");
        assert!(config.security.tls.is_none() && config.security.sasl.is_none());
    }

    #[test]
    fn a_request_holds_the_batches_kafkas_default_request_size_holds() {
        let producer = |extra: &[&str]| {
            let args = [&["produce", "--topic", "t", "--num-records", "1"][..], extra].concat();
            match parse(&args).expect("parses") {
                BenchCommand::Produce(args) => args.producer,
                _ => unreachable!("parsed a produce command"),
            }
        };
        // 256 records of 1 KiB, ~267.6 KB a batch: 3 fit in 1 MiB, a 4th would not.
        assert_eq!(producer(&[]).batches_per_request(), 3);
        assert_eq!(producer(&["--max-request-bytes", "1"]).batches_per_request(), 1);
        assert_eq!(
            producer(&["--batch-bytes", "16384", "--record-size", "100"]).batches_per_request(),
            53 // 163 records of 121 bytes and a 61-byte header: 19 784 bytes a batch
        );
    }

    #[test]
    fn produce_arguments_parse() {
        let command = parse(&[
            "produce",
            "--brokers",
            "h:1",
            "--topic",
            "t",
            "--record-size",
            "100",
            "--num-records",
            "5000",
            "--throughput",
            "1000",
            "--acks",
            "all",
            "--compression",
            "zstd",
            "--producers",
            "2",
            "--partitions",
            "8",
            "--json",
            "o.json",
            "--topic-config",
            "retention.ms=1000",
        ])
        .expect("parses");
        let BenchCommand::Produce(args) = command else {
            panic!("not produce")
        };
        assert_eq!(args.common.brokers, "h:1");
        assert_eq!(args.common.partitions, 8);
        assert_eq!(args.common.replication_factor, -1);
        assert_eq!(
            args.common.topic_configs,
            vec![("retention.ms".to_owned(), "1000".to_owned())]
        );
        assert_eq!(args.producer.acks, Acks::All);
        assert_eq!(args.producer.compression.codec(), Compression::Zstd);
        assert_eq!(args.producer.rate(), Some(1000.0));
        assert_eq!(args.producer.records_per_batch(), 2621);
        assert_eq!(args.common.json.as_deref(), Some(std::path::Path::new("o.json")));
    }

    #[test]
    fn idempotence_needs_acks_all_and_transactions_are_idempotent() {
        let produce = |extra: &[&str]| {
            let args = [&["produce", "--topic", "t", "--num-records", "1"][..], extra].concat();
            match parse(&args).expect("parses") {
                BenchCommand::Produce(args) => args,
                _ => unreachable!("parsed a produce command"),
            }
        };
        let plain = produce(&[]);
        assert!(!plain.delivery.is_idempotent() && plain.delivery.check(&plain.producer).is_ok());
        let refused = produce(&["--idempotent"]);
        let error = refused.delivery.check(&refused.producer).unwrap_err();
        assert!(error.to_string().contains("needs --acks all"), "{error}");
        let too_many = produce(&["--transactional", "--acks", "all", "--max-in-flight", "6"]);
        assert!(too_many.delivery.check(&too_many.producer).is_err());
        let transactional = produce(&["--transactional", "--acks", "all"]);
        let delivery = &transactional.delivery;
        assert!(delivery.is_idempotent() && delivery.check(&transactional.producer).is_ok());
        assert_eq!(delivery.transaction_batches, 10);
        let pid = std::process::id();
        assert_eq!(
            delivery.transactional_id_of(0, 1),
            Some(format!("laminar-bench-{pid}"))
        );
        let named = produce(&[
            "--transactional",
            "--transactional-id",
            "t",
            "--transaction-batches",
            "100",
        ]);
        assert_eq!(named.delivery.transaction_batches, 100);
        assert_eq!(named.delivery.transactional_id_of(2, 3).as_deref(), Some("t-2"));
        assert_eq!(
            produce(&["--idempotent"]).delivery.transactional_id_of(0, 1),
            None
        );
        assert!(parse(&[
            "produce",
            "--topic",
            "t",
            "--num-records",
            "1",
            "--transaction-batches",
            "0"
        ])
        .is_err());
    }

    #[test]
    fn unlimited_rate_and_bad_values() {
        let command = parse(&[
            "produce",
            "--topic",
            "t",
            "--num-records",
            "1",
            "--throughput",
            "-1",
        ])
        .expect("parses");
        let BenchCommand::Produce(args) = command else {
            panic!("not produce")
        };
        assert_eq!(args.producer.rate(), None);
        assert_eq!(args.producer.acks, Acks::Leader);
        assert!(parse(&["produce", "--topic", "t", "--num-records", "1", "--acks", "2"]).is_err());
        assert!(parse(&[
            "produce",
            "--topic",
            "t",
            "--num-records",
            "1",
            "--compression",
            "brotli"
        ])
        .is_err());
        assert!(
            parse(&["consume", "--topic", "t"]).is_err(),
            "--num-records is required"
        );
        assert!(parse(&["limits", "--dir", "/tmp"]).is_ok());
    }

    #[test]
    fn replication_defaults_to_acks_all_and_one_producer_per_partition() {
        let BenchCommand::Replication(args) = parse(&["replication"]).expect("parses") else {
            panic!("not replication")
        };
        assert_eq!((args.producer.acks, args.producer.producers), (Acks::All, 0));
        assert_eq!(
            (args.brokers, args.cores, args.replication_factor, args.partitions),
            (3, 1, 3, 3)
        );
        assert_eq!((args.rounds, args.seconds), (4, 10));
        assert!(args.bootstrap.is_none() && !args.skip_consume);
        let command = parse(&[
            "replication",
            "--bootstrap",
            "h:1",
            "--rounds",
            "1",
            "--seconds",
            "2",
            "--record-size",
            "100",
            "--acks",
            "1",
            "--producers",
            "6",
        ]);
        let BenchCommand::Replication(args) = command.expect("parses") else {
            panic!("not replication")
        };
        assert_eq!(args.bootstrap.as_deref(), Some("h:1"));
        assert_eq!(
            (args.rounds, args.seconds, args.producer.record_size),
            (1, 2, 100)
        );
        assert_eq!((args.producer.acks, args.producer.producers), (Acks::Leader, 6));
        for bad in [
            ["--rounds", "0"],
            ["--brokers", "10"],
            ["--replication-factor", "0"],
        ] {
            assert!(
                parse(&[&["replication"][..], &bad[..]].concat()).is_err(),
                "{bad:?}"
            );
        }
        // The defaults changed for `replication` only.
        let produce = parse(&["produce", "--topic", "t", "--num-records", "1"]).expect("parses");
        let BenchCommand::Produce(args) = produce else {
            panic!("not produce")
        };
        assert_eq!((args.producer.acks, args.producer.producers), (Acks::Leader, 1));
    }

    #[test]
    fn scale_arguments_parse() {
        let BenchCommand::Scale(args) = parse(&["scale"]).expect("parses") else {
            panic!("not scale")
        };
        assert_eq!(
            (args.partitions, args.partitions_per_topic, args.connections),
            (10_000, 1_000, 10_000)
        );
        assert!(!args.skip_throughput && args.overrides.is_empty());
        let command = parse(&[
            "scale",
            "--partitions",
            "200",
            "--partitions-per-topic",
            "50",
            "--skip-throughput",
            "--override",
            "laminar.cores=1",
        ]);
        let BenchCommand::Scale(args) = command.expect("parses") else {
            panic!("not scale")
        };
        assert_eq!((args.partitions, args.partitions_per_topic), (200, 50));
        assert_eq!(args.overrides, vec!["laminar.cores=1".to_owned()]);
        assert!(parse(&["scale", "--partitions-per-topic", "0"]).is_err());
    }
}
