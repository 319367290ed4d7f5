//! `laminar bench replication`: acks=all produce to a topic of replication factor 1 and to one
//! of replication factor 3, in alternated rounds of equal length on one cluster, reported as
//! ratios (decision 0014). On a noisy VM only figures measured side by side in one run compare
//! (docs/decisions/0008, 0011). A consume round then reads the RF1 topic, so that the leaders'
//! cost of a fetched MB can be compared between followers and a consumer.

mod cluster;
mod link_security;
mod report;
mod usage;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use laminar_client::{ClientConfig, Connection, OffsetSpec};
use serde_json::json;

use crate::cli::{CommonArgs, ConsumeArgs, DeliveryArgs, ProduceArgs, ReplicationArgs};
use crate::run::{consume_result, produce_result};
use crate::scale::broker::binary;
use crate::scale::partitions::DiskFloor;
use crate::scale::probe::cpu_seconds;
use crate::scale::RunDir;
use crate::setup::prepare_topic;
use crate::stats::Measurement;
use cluster::LocalCluster;
use report::{ReplicationReport, Round, RoundKind, Side};
use usage::{MachineCpu, Usage};

/// The warm-up each topic gets before the measured rounds (its partitions' files created,
/// connections and followers' fetch sessions started), not reported.
const WARM_UP: Duration = Duration::from_secs(1);
/// The largest segment the topics get (a quarter of --retention-mib below that): retention
/// deletes whole segments, so they must be a fraction of what it keeps.
const SEGMENT_MAX_BYTES: u64 = 64 << 20;
/// How long the consume round waits for retention to have deleted what it will (the brokers
/// started look every second), so that nothing is deleted under the consumer.
const RETENTION_SETTLE: Duration = Duration::from_millis(2_500);
/// A consume round gives up after this long without a record.
const CONSUME_IDLE_TIMEOUT_S: u64 = 10;

/// `laminar bench replication`.
pub fn run(args: ReplicationArgs) -> anyhow::Result<()> {
    check(&args)?;
    let dir = RunDir::create(args.data_dir.as_deref(), "laminar-replication-")?;
    let cluster = match &args.bootstrap {
        Some(_) => None,
        None => {
            let binary = binary(args.broker_bin.as_deref())?;
            eprintln!(
                "laminar bench replication: starting {} brokers ({}) under {}",
                args.brokers,
                binary.display(),
                dir.path().display()
            );
            Some(LocalCluster::start(&args, &binary, dir.path())?)
        }
    };
    let plan = Plan::new(&args, cluster.as_ref(), dir.path().to_path_buf());
    let outcome = measure(&args, &plan);
    if let Some(cluster) = cluster {
        for problem in cluster.stop() {
            eprintln!("stopping the brokers: {problem}");
        }
    }
    outcome?.emit(args.json.as_deref())
}

fn check(args: &ReplicationArgs) -> anyhow::Result<()> {
    if args.bootstrap.is_none() && args.replication_factor > args.brokers as i16 {
        bail!(
            "--replication-factor {} needs at least as many brokers (--brokers {})",
            args.replication_factor,
            args.brokers
        );
    }
    if args.replication_factor == 1 {
        bail!("--replication-factor 1 would compare replication factor 1 with itself");
    }
    Ok(())
}

/// What every round needs.
struct Plan {
    bootstrap: String,
    /// `(pid, admin HTTP address)` of each broker started, node 1 first; empty with
    /// `--bootstrap`.
    brokers: Vec<(u32, SocketAddr)>,
    sides: [Side; 2],
    producers: usize,
    floor: DiskFloor,
}

impl Plan {
    fn new(args: &ReplicationArgs, cluster: Option<&LocalCluster>, dir: PathBuf) -> Plan {
        let bootstrap = match (cluster, &args.bootstrap) {
            (Some(cluster), _) => cluster.bootstrap(),
            (None, Some(bootstrap)) => bootstrap.clone(),
            (None, None) => unreachable!("a cluster is started without --bootstrap"),
        };
        let brokers = cluster.map_or_else(Vec::new, |cluster| {
            let pids = cluster.nodes.iter().filter_map(|node| node.pid().ok());
            pids.zip(cluster.nodes.iter().map(|node| node.http_addr()))
                .collect()
        });
        // Distinct names per run, so that runs against one cluster never share a topic.
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let side = |replication_factor: i16| Side {
            label: format!("rf{replication_factor}"),
            topic: format!("bench-rf{replication_factor}-{stamp}"),
            replication_factor,
        };
        let producers = match args.producer.producers {
            0 => usize::try_from(args.partitions).unwrap_or(1),
            asked => asked,
        };
        Plan {
            bootstrap,
            brokers,
            sides: [side(1), side(args.replication_factor)],
            producers,
            floor: DiskFloor {
                dir,
                min_free_bytes: args.min_free_mib << 20,
            },
        }
    }

    fn common(&self, args: &ReplicationArgs, side: &Side) -> CommonArgs {
        let retention_bytes = args.retention_mib << 20;
        let segment_bytes = (retention_bytes / 4).clamp(1 << 20, SEGMENT_MAX_BYTES);
        CommonArgs {
            brokers: self.bootstrap.clone(),
            topic: side.topic.clone(),
            partitions: args.partitions,
            replication_factor: side.replication_factor,
            topic_configs: vec![
                ("retention.bytes".to_owned(), retention_bytes.to_string()),
                ("segment.bytes".to_owned(), segment_bytes.to_string()),
            ],
            json: None,
            report: None,
            limits_dir: PathBuf::from("."),
            no_limits: true,
            security: Default::default(),
        }
    }

    /// Every broker's counters now, this process's CPU time (the harness shares the machine)
    /// and the machine's.
    fn sample(&self) -> anyhow::Result<Sample> {
        let brokers = self.brokers.iter().map(|(pid, http)| Usage::read(*pid, *http));
        Ok(Sample {
            brokers: brokers.collect::<anyhow::Result<Vec<_>>>()?,
            harness_cpu_seconds: cpu_seconds(std::process::id())?,
            machine: MachineCpu::read()?,
        })
    }

    /// Runs `work` between two samples; returns what it measured as a round of `kind`.
    fn measured(
        &self,
        (index, kind): (u32, RoundKind),
        work: impl FnOnce() -> anyhow::Result<Measurement>,
    ) -> anyhow::Result<Round> {
        let before = self.sample()?;
        let measurement = work()?;
        let after = self.sample()?;
        Ok(Round {
            index,
            kind,
            measurement,
            brokers: after
                .brokers
                .iter()
                .zip(&before.brokers)
                .map(|(a, b)| a.since(b))
                .collect(),
            harness_cpu_seconds: after.harness_cpu_seconds - before.harness_cpu_seconds,
            machine: after.machine.since(&before.machine),
        })
    }
}

/// The counters at one moment.
struct Sample {
    brokers: Vec<Usage>,
    harness_cpu_seconds: f64,
    machine: MachineCpu,
}

/// Topics, warm-up, the alternated rounds and the consume round.
fn measure(args: &ReplicationArgs, plan: &Plan) -> anyhow::Result<ReplicationReport> {
    for side in &plan.sides {
        let layout = prepare_topic(&plan.common(args, side)).with_context(|| {
            format!(
                "creating {} (replication factor {})",
                side.topic, side.replication_factor
            )
        })?;
        if layout.leaders.len() != args.partitions as usize {
            bail!(
                "{} has {} partitions, not {}",
                side.topic,
                layout.leaders.len(),
                args.partitions
            );
        }
        produce_for(args, plan, side, WARM_UP)?;
    }
    let mut rounds = Vec::new();
    for round in 0..args.rounds {
        plan.floor.check()?;
        for index in round_order(round) {
            let side = &plan.sides[index];
            let seconds = Duration::from_secs(args.seconds);
            let kind = RoundKind::Produce(index);
            rounds.push(plan.measured((round + 1, kind), || produce_for(args, plan, side, seconds))?);
        }
    }
    if !args.skip_consume {
        rounds.push(consume_round(args, plan)?);
    }
    Ok(ReplicationReport::new(args, plan, rounds))
}

/// The sides in round `round`'s order: RF1 first in even rounds, RF3 first in odd ones, so
/// that neither always runs on the memory and page cache the other just left.
fn round_order(round: u32) -> [usize; 2] {
    if round.is_multiple_of(2) {
        [0, 1]
    } else {
        [1, 0]
    }
}

/// Produces to `side`'s topic with acks as asked (all by default) for `length`, through
/// `laminar bench produce`'s own code path; returns what was acknowledged.
fn produce_for(
    args: &ReplicationArgs,
    plan: &Plan,
    side: &Side,
    length: Duration,
) -> anyhow::Result<Measurement> {
    let mut producer = args.producer.clone();
    producer.producers = plan.producers;
    let produce = ProduceArgs {
        common: plan.common(args, side),
        // The round ends on time, not on a count.
        num_records: u64::MAX,
        producer,
        delivery: DeliveryArgs::default(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (cancel, cancelled) = mpsc::channel::<()>();
    let timer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = cancelled.recv_timeout(length) {
                stop.store(true, Ordering::Relaxed);
            }
        })
    };
    let result = produce_result(&produce, &stop);
    drop(cancel);
    timer.join().expect("the round's timer does not panic");
    let result = result.with_context(|| format!("producing to {}", side.topic))?;
    Ok(result
        .sections
        .into_iter()
        .next()
        .context("a produce section")?
        .measurement)
}

/// Reads the RF1 topic from its start (every record retention kept), through `laminar bench
/// consume`'s own code path, one consumer per partition, for --seconds at least.
fn consume_round(args: &ReplicationArgs, plan: &Plan) -> anyhow::Result<Round> {
    let side = &plan.sides[0];
    std::thread::sleep(RETENTION_SETTLE);
    let common = plan.common(args, side);
    let records = records_held(&common)?;
    let consume = ConsumeArgs {
        common,
        num_records: records,
        consumers: usize::try_from(args.partitions).unwrap_or(1),
        fetch_max_bytes: crate::consume::FETCH_MAX_BYTES_DEFAULT,
        idle_timeout_s: CONSUME_IDLE_TIMEOUT_S,
        fetch_session: false,
    };
    let length = Duration::from_secs(args.seconds);
    // Read again from the start until the round has lasted as long as a produce round: one
    // pass over what retention keeps is too short for CPU times counted in 10 ms ticks.
    plan.measured((1, RoundKind::Consume(0)), || {
        let started = Instant::now();
        let mut passes = Vec::new();
        while passes.is_empty() || started.elapsed() < length {
            let result = consume_result(&consume).with_context(|| format!("consuming {}", side.topic))?;
            passes.push(
                result
                    .sections
                    .into_iter()
                    .next()
                    .context("a consume section")?
                    .measurement,
            );
        }
        Ok(Measurement::concat(&passes))
    })
}

/// Records between the log start and end offsets of every partition of the topic, each asked
/// of its leader.
fn records_held(common: &CommonArgs) -> anyhow::Result<u64> {
    let layout = prepare_topic(common)?;
    let mut held = 0u64;
    for (partition, leader) in &layout.leaders {
        let mut connection = Connection::connect(leader, &ClientConfig::default())
            .with_context(|| format!("connecting to {leader}"))?;
        let specs = [
            (*partition, OffsetSpec::Earliest),
            (*partition, OffsetSpec::Latest),
        ];
        let offsets = connection.list_offsets(&common.topic, &specs[..1])?;
        let ends = connection.list_offsets(&common.topic, &specs[1..])?;
        let (start, end) = (offsets.first().map(|o| o.1), ends.first().map(|o| o.1));
        let (Some(start), Some(end)) = (start, end) else {
            bail!("no offsets for {}-{partition}", common.topic);
        };
        held += u64::try_from(end - start).context("a log end before its start")?;
    }
    Ok(held)
}

/// Kafka's name of an acks setting.
fn acks_name(acks: laminar_client::Acks) -> String {
    match acks.wire() {
        -1 => "all".to_owned(),
        other => other.to_string(),
    }
}

/// The settings for the report.
fn settings(args: &ReplicationArgs, plan: &Plan) -> serde_json::Value {
    json!({
        "bootstrap": args.bootstrap, "brokers_started": plan.brokers.len(), "cores_per_broker": args.cores,
        "partitions": args.partitions, "rounds": args.rounds, "seconds_per_round": args.seconds,
        "record_size": args.producer.record_size, "acks": acks_name(args.producer.acks),
        "batch_bytes": args.producer.batch_bytes, "producers": plan.producers,
        "max_in_flight": args.producer.max_in_flight, "throughput": args.producer.rate(),
        "compression": format!("{:?}", args.producer.compression).to_lowercase(),
        "topics": plan.sides.iter().map(|s| &s.topic).collect::<Vec<_>>(),
        "replication_factors": plan.sides.iter().map(|s| s.replication_factor).collect::<Vec<_>>(),
        "overrides": args.overrides, "retention_mib": args.retention_mib,
        "inter_broker_protocol": args.inter_broker_protocol.name(),
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
    })
}
