//! `laminar cluster info | brokers | quorum [describe | add-controller | remove-controller] |
//! unregister | config | rebalance | decommission`: the cluster id, controller
//! and counts; every registered broker with its endpoint, rack, fenced state and leaderships;
//! the controller quorum's leader, term and each voter's lag (from the admin HTTP port's
//! `/v1/status`); removing a broker that left for good (UnregisterBroker); dynamic broker
//! configs (`broker_config.rs`).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use laminar_client::transport::{Security, Transport};

use super::{print_table, BrokerArgs};

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Cluster id, controller, broker, topic and partition counts.
    ///
    /// Example:
    ///   laminar cluster info --brokers 127.0.0.1:9092
    Info {
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Every registered broker: endpoint, rack, fenced or not, partitions it leads.
    ///
    /// Example:
    ///   laminar cluster brokers --brokers 127.0.0.1:9092
    Brokers {
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// The controller quorum (cluster mode). Without a subcommand: leader, term and each
    /// voter's lag from the admin HTTP ports; `describe`, `add-controller` and
    /// `remove-controller` go through the Kafka protocol.
    ///
    /// Examples:
    ///   laminar cluster quorum --admin 10.0.0.1:9644,10.0.0.2:9644,10.0.0.3:9644
    ///   laminar cluster quorum describe --brokers 10.0.0.1:9092
    ///   laminar cluster quorum add-controller 4 --brokers 10.0.0.1:9092
    Quorum {
        #[command(subcommand)]
        action: Option<super::quorum::QuorumAction>,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Removes a broker that left for good from the cluster's metadata (Kafka's `kafka-cluster
    /// unregister`). Refused while it holds replicas: move them first (`laminar topic move`).
    /// A broker still running registers again.
    ///
    /// Example:
    ///   laminar cluster unregister 4 --brokers 127.0.0.1:9092
    Unregister {
        /// The broker's `node.id`.
        id: i32,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Dynamic broker configs (Kafka's `kafka-configs --entity-type brokers`): topic defaults
    /// such as log.retention.ms and message.max.bytes, and the replication throttle rates, for
    /// one broker or every broker, changed while they run. Without --set or --delete: every
    /// value not at its default and where it comes from.
    ///
    /// Examples:
    ///   laminar cluster config --entity-default --set log.retention.ms=86400000
    ///   laminar cluster config --broker 2 --set follower.replication.throttled.rate=10485760
    ///   laminar cluster config --broker 2 --delete follower.replication.throttled.rate
    ///   laminar cluster config --broker 2
    Config(super::broker_config::ConfigArgs),
    /// Spreads replicas and preferred leaders evenly over the unfenced brokers (rack-aware with
    /// broker.rack), moving as little data as it can: after a broker joined, say. Shows the plan
    /// and the bytes it copies; --execute carries it out through AlterPartitionReassignments
    /// with an optional throttle, shows progress on a terminal and waits until done.
    ///
    /// Examples:
    ///   laminar cluster rebalance --brokers 10.0.0.1:9092
    ///   laminar cluster rebalance --execute --throttle 50000000 --brokers 10.0.0.1:9092
    ///   laminar cluster rebalance --cancel --brokers 10.0.0.1:9092
    Rebalance(super::rebalance::RebalanceArgs),
    /// Moves every replica off a broker (same plan and machinery as rebalance), waits until it
    /// holds none and, if it still runs, until it is stopped; then unregisters it. A broker that
    /// is down gets its replicas re-created on the others from the in-sync copies.
    ///
    /// Example:
    ///   laminar cluster decommission 4 --throttle 50000000 --brokers 10.0.0.1:9092
    Decommission(super::rebalance::DecommissionArgs),
}

/// Where the brokers' admin HTTP ports (`laminar.http.listen`) are.
#[derive(Args, Debug, Clone)]
pub struct AdminArgs {
    /// Comma-separated `host:port` admin HTTP addresses; voters' lags are known on the
    /// active controller's node, so list them all.
    #[arg(long, env = "LAMINAR_ADMIN", default_value = "127.0.0.1:9644")]
    pub admin: String,
    /// HTTPS: the PEM file of the CA that signs the admin ports' certificates
    /// (`laminar.http.ssl.keystore.location`).
    #[arg(long, env = "LAMINAR_ADMIN_CA")]
    pub admin_ca: Option<std::path::PathBuf>,
    /// A bearer token for admin ports that ask for one (`laminar.http.authentication.tokens.file`).
    #[arg(long, env = "LAMINAR_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
}

pub fn run(command: ClusterCommand) -> anyhow::Result<()> {
    match command {
        ClusterCommand::Info { brokers } => info(&brokers),
        ClusterCommand::Brokers { brokers } => brokers_table(&brokers),
        ClusterCommand::Quorum { action: None, admin } => quorum(&admin),
        ClusterCommand::Quorum {
            action: Some(action), ..
        } => super::quorum::run(action),
        ClusterCommand::Unregister { id, brokers } => {
            brokers.connect()?.unregister_broker(id)?;
            println!("unregistered broker {id}");
            Ok(())
        }
        ClusterCommand::Config(args) => super::broker_config::run(&args),
        ClusterCommand::Rebalance(args) => super::rebalance::rebalance(&args),
        ClusterCommand::Decommission(args) => super::rebalance::decommission(&args),
    }
}

fn info(brokers: &BrokerArgs) -> anyhow::Result<()> {
    let mut connection = brokers.connect()?;
    let metadata = connection
        .metadata(None, false)
        .context("cannot read cluster metadata")?;
    let partitions: usize = metadata.topics.iter().map(|t| t.partitions.len()).sum();
    println!("CLUSTER");
    println!("cluster id: {}", metadata.cluster_id.as_deref().unwrap_or("-"));
    println!("controller: {}", metadata.controller_id);
    println!("brokers:    {}", metadata.brokers.len());
    println!("topics:     {}", metadata.topics.len());
    println!("partitions: {partitions}");
    println!();
    println!("BROKERS");
    let rows: Vec<Vec<String>> = metadata
        .brokers
        .iter()
        .map(|b| {
            let role = if b.node_id == metadata.controller_id {
                "controller"
            } else {
                ""
            };
            vec![
                b.node_id.to_string(),
                format!("{}:{}", b.host, b.port),
                role.to_string(),
            ]
        })
        .collect();
    print_table(&["ID", "ADDRESS", "ROLE"], &rows);
    Ok(())
}

fn brokers_table(brokers: &BrokerArgs) -> anyhow::Result<()> {
    let mut connection = brokers.connect()?;
    let described = connection
        .describe_cluster()
        .context("cannot describe the cluster")?;
    let metadata = connection
        .metadata(None, false)
        .context("cannot read cluster metadata")?;
    let led = |id: i32| {
        let each = metadata.topics.iter().flat_map(|t| t.partitions.iter());
        each.filter(|p| p.leader == id).count()
    };
    let rows: Vec<Vec<String>> = described
        .brokers
        .iter()
        .map(|b| {
            vec![
                b.node_id.to_string(),
                format!("{}:{}", b.host, b.port),
                b.rack.clone().unwrap_or_else(|| "-".into()),
                if b.fenced { "yes" } else { "no" }.to_string(),
                led(b.node_id).to_string(),
            ]
        })
        .collect();
    print_table(&["ID", "ENDPOINT", "RACK", "FENCED", "LEADER_PARTITIONS"], &rows);
    Ok(())
}

fn quorum(admin: &AdminArgs) -> anyhow::Result<()> {
    let mut statuses = Vec::new();
    let mut failures = Vec::new();
    for address in admin.admin.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        match status_of(address, admin) {
            Ok(status) => statuses.push(status),
            Err(e) => failures.push(format!("{address}: {e:#}")),
        }
    }
    let Some(first) = statuses.first() else {
        bail!("cannot reach any admin port ({})", failures.join("; "));
    };
    let cluster = |s: &serde_json::Value| s.get("cluster").filter(|c| !c.is_null()).cloned();
    let Some(seen) = cluster(first) else {
        bail!("the broker runs in single-node mode: it has no controller quorum");
    };
    // The active controller's node is the one that knows every voter's lag.
    let leader_view = statuses
        .iter()
        .filter_map(cluster)
        .find(|c| c["role"] == "Leader")
        .unwrap_or(seen);
    let quorum = &leader_view["quorum"];
    println!("QUORUM");
    println!("leader:       {}", text(&quorum["leader_id"]));
    println!("term:         {}", text(&quorum["term"]));
    println!("last applied: {}", text(&quorum["last_applied_index"]));
    println!();
    println!("VOTERS");
    let rows: Vec<Vec<String>> = quorum["voters"]
        .as_array()
        .map(|voters| {
            let each = voters
                .iter()
                .map(|v| vec![text(&v["node_id"]), text(&v["matched_index"]), text(&v["lag"])]);
            each.collect()
        })
        .unwrap_or_default();
    if rows.is_empty() {
        println!("(lags are known on the active controller's node: add its --admin address)");
        return Ok(());
    }
    print_table(&["ID", "MATCHED_INDEX", "LAG"], &rows);
    Ok(())
}

fn text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "-".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The status page bodies are small; more than this is not one.
const STATUS_BODY_MAX: u64 = 16 << 20;

/// `GET /v1/status` of one admin port, as JSON (one request per connection, as it serves),
/// over HTTPS and with a token when `admin` says so.
fn status_of(address: &str, admin: &AdminArgs) -> anyhow::Result<serde_json::Value> {
    let addr = address
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {address}"))?
        .next()
        .ok_or_else(|| anyhow!("{address} resolves to nothing"))?;
    let timeout = Duration::from_secs(5);
    let socket = TcpStream::connect_timeout(&addr, timeout)?;
    socket.set_read_timeout(Some(timeout))?;
    let mut stream = match &admin.admin_ca {
        None => Transport::Plain(socket),
        Some(ca) => {
            let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
            let host = host.trim_start_matches('[').trim_end_matches(']');
            Transport::tls(socket, Security::tls_trusting(ca)?, host)?
        }
    };
    let token = admin
        .admin_token
        .as_ref()
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let head = format!("GET /v1/status HTTP/1.1\r\nHost: {address}\r\n{token}Connection: close\r\n\r\n");
    stream.write_all(head.as_bytes())?;
    stream.flush()?;
    let mut answer = Vec::new();
    // A TLS server may close without close_notify once the whole answer is out.
    match stream.take(STATUS_BODY_MAX).read_to_end(&mut answer) {
        Err(e) if e.kind() != std::io::ErrorKind::UnexpectedEof || answer.is_empty() => return Err(e.into()),
        _ => {}
    }
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("not an HTTP answer"))?;
    let (head, body) = answer.split_at(split + 4);
    if !head.starts_with(b"HTTP/1.1 200") && !head.starts_with(b"HTTP/1.0 200") {
        bail!("{}", String::from_utf8_lossy(head).lines().next().unwrap_or(""));
    }
    serde_json::from_slice(body).context("the status page is not JSON")
}
