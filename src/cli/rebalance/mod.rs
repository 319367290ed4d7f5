//! `laminar cluster rebalance` and `laminar cluster decommission`: spread replicas and
//! leaderships evenly over the brokers (after one joined), or move every replica off a broker
//! and unregister it (before it leaves); both through AlterPartitionReassignments.

mod execute;
pub mod plan;

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context};
use clap::Args;
use laminar_client::{ClusterMetadata, Connection};

use self::plan::{Broker, Move, Placement};
use super::{connect_to, print_table, BrokerArgs};

#[derive(Args, Debug)]
pub struct RebalanceArgs {
    /// Carry the plan out (without it, only show it).
    #[arg(long)]
    pub execute: bool,
    /// Bytes per second each broker may spend copying replicas while the plan runs
    /// (leader.replication.throttled.rate and follower.replication.throttled.rate, removed at
    /// the end). Without it, copies run at full speed.
    #[arg(long, value_name = "BYTES_PER_SECOND")]
    pub throttle: Option<u64>,
    /// Cancel the moves in progress (and remove the throttles) instead.
    #[arg(long, conflicts_with_all = ["execute", "throttle"])]
    pub cancel: bool,
    #[command(flatten)]
    pub brokers: BrokerArgs,
}

#[derive(Args, Debug)]
pub struct DecommissionArgs {
    /// The broker's `node.id`.
    pub id: i32,
    /// As for `rebalance --throttle`.
    #[arg(long, value_name = "BYTES_PER_SECOND")]
    pub throttle: Option<u64>,
    /// How long to wait, once it holds nothing, for a running broker to be stopped before it is
    /// unregistered (a broker still running would register again).
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub stop_timeout: u64,
    #[command(flatten)]
    pub brokers: BrokerArgs,
}

/// Where the replicas are, as the cluster tells: the unfenced brokers and every partition.
struct Inputs {
    brokers: Vec<Broker>,
    partitions: Vec<Placement>,
}

pub fn rebalance(args: &RebalanceArgs) -> anyhow::Result<()> {
    let mut connection = args.brokers.connect()?;
    if args.cancel {
        return execute::cancel(&mut connection);
    }
    let inputs = gather(&mut connection, &args.brokers)?;
    let moves = plan::plan(&inputs.brokers, &inputs.partitions, &BTreeSet::new())?;
    show(&inputs, &moves);
    if args.execute && !moves.is_empty() {
        execute::run(&mut connection, &moves, args.throttle)?;
    }
    Ok(())
}

pub fn decommission(args: &DecommissionArgs) -> anyhow::Result<()> {
    let mut connection = args.brokers.connect()?;
    let inputs = gather(&mut connection, &args.brokers)?;
    let leaving = BTreeSet::from([args.id]);
    let moves = plan::plan(&inputs.brokers, &inputs.partitions, &leaving)?;
    show(&inputs, &moves);
    if !moves.is_empty() {
        execute::run(&mut connection, &moves, args.throttle)?;
    }
    let metadata = connection
        .metadata(None, false)
        .context("cannot read cluster metadata")?;
    let held = metadata.topics.iter().flat_map(|t| &t.partitions);
    let held = held.filter(|p| p.replicas.contains(&args.id)).count();
    if held > 0 {
        bail!(
            "broker {} still holds {held} replicas; it was not unregistered",
            args.id
        );
    }
    wait_until_stopped(&mut connection, args)?;
    connection
        .unregister_broker(args.id)
        .context("cannot unregister the broker")?;
    println!("broker {} holds no replicas and is unregistered", args.id);
    Ok(())
}

/// A broker still running would register again: waits (at most `--stop-timeout`) until the
/// quorum has fenced it, which it does once the broker stops.
fn wait_until_stopped(connection: &mut Connection, args: &DecommissionArgs) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(args.stop_timeout);
    let mut told = false;
    loop {
        let described = connection
            .describe_cluster()
            .context("cannot describe the cluster")?;
        let running = described
            .brokers
            .iter()
            .any(|b| b.node_id == args.id && !b.fenced);
        if !running {
            return Ok(());
        }
        if !told {
            println!(
                "broker {} holds no replicas: stop it now; it is unregistered once it has stopped",
                args.id
            );
            told = true;
        }
        if std::time::Instant::now() >= deadline {
            bail!(
                "broker {} still runs after {} s; stop it, then `laminar cluster unregister {}`",
                args.id,
                args.stop_timeout,
                args.id
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

fn gather(connection: &mut Connection, brokers: &BrokerArgs) -> anyhow::Result<Inputs> {
    let metadata = connection
        .metadata(None, false)
        .context("cannot read cluster metadata")?;
    let described = connection
        .describe_cluster()
        .context("cannot describe the cluster")?;
    let unfenced = described.brokers.iter().filter(|b| !b.fenced);
    let brokers_now: Vec<Broker> = unfenced
        .map(|b| Broker {
            id: b.node_id,
            rack: b.rack.clone(),
        })
        .collect();
    let sizes = replica_sizes(&metadata, &brokers.client_config()?);
    let partitions = metadata
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
        .map(|(t, p)| Placement {
            topic: t.name.clone(),
            partition: p.partition,
            replicas: p.replicas.clone(),
            size_bytes: sizes.get(&(t.name.clone(), p.partition)).copied().unwrap_or(0),
        })
        .collect();
    Ok(Inputs {
        brokers: brokers_now,
        partitions,
    })
}

/// Each partition's largest replica, asked of every broker (one that cannot be reached counts
/// its replicas as empty: the plan's byte counts are then low, not wrong about placement).
fn replica_sizes(
    metadata: &ClusterMetadata,
    config: &laminar_client::ClientConfig,
) -> BTreeMap<(String, i32), u64> {
    let mut sizes: BTreeMap<(String, i32), u64> = BTreeMap::new();
    for broker in &metadata.brokers {
        let address = format!("{}:{}", broker.host, broker.port);
        let Ok(dirs) = connect_to(&address, config).and_then(|mut c| c.describe_log_dirs(None)) else {
            eprintln!(
                "broker {} did not describe its log dirs; its sizes count as 0",
                broker.node_id
            );
            continue;
        };
        for replica in dirs.into_iter().flat_map(|d| d.replicas) {
            let size = u64::try_from(replica.size_bytes).unwrap_or(0);
            let entry = sizes.entry((replica.topic, replica.partition)).or_default();
            *entry = (*entry).max(size);
        }
    }
    sizes
}

/// The moves, then replicas and preferred leaders per broker before and after.
fn show(inputs: &Inputs, moves: &[Move]) {
    if moves.is_empty() {
        println!("balanced: nothing to move");
        return;
    }
    let join = |ids: &[i32]| ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
    let rows: Vec<Vec<String>> = moves
        .iter()
        .map(|m| {
            vec![
                format!("{}-{}", m.topic, m.partition),
                join(&m.from),
                join(&m.to),
                m.bytes.to_string(),
            ]
        })
        .collect();
    print_table(&["PARTITION", "FROM", "TO", "BYTES_TO_COPY"], &rows);
    let after: BTreeMap<(&str, i32), &Vec<i32>> = moves
        .iter()
        .map(|m| ((m.topic.as_str(), m.partition), &m.to))
        .collect();
    let mut counts: BTreeMap<i32, [usize; 4]> = inputs.brokers.iter().map(|b| (b.id, [0; 4])).collect();
    for p in &inputs.partitions {
        let now = after
            .get(&(p.topic.as_str(), p.partition))
            .copied()
            .unwrap_or(&p.replicas);
        for (column, replicas) in [(0, &p.replicas), (2, now)] {
            for (position, broker) in replicas.iter().enumerate() {
                let entry = counts.entry(*broker).or_default();
                entry[column] += 1;
                entry[column + 1] += usize::from(position == 0);
            }
        }
    }
    println!();
    let rows: Vec<Vec<String>> = counts
        .iter()
        .map(|(id, c)| {
            [id.to_string()]
                .into_iter()
                .chain(c.iter().map(ToString::to_string))
                .collect()
        })
        .collect();
    print_table(
        &["BROKER", "REPLICAS", "LEADERS", "REPLICAS_AFTER", "LEADERS_AFTER"],
        &rows,
    );
    let bytes: u64 = moves.iter().map(|m| m.bytes).sum();
    println!("\n{} partitions move; {bytes} bytes to copy", moves.len());
}
