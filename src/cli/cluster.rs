//! `laminar cluster info | brokers | quorum`: the cluster id, controller and counts; every
//! registered broker with its endpoint, rack, fenced state and leaderships; the controller
//! quorum's leader, term and each voter's lag (from the admin HTTP port's `/v1/status`).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};

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
    /// The controller quorum: leader, term and each voter's lag (cluster mode).
    ///
    /// Example:
    ///   laminar cluster quorum --admin 10.0.0.1:9644,10.0.0.2:9644,10.0.0.3:9644
    Quorum {
        #[command(flatten)]
        admin: AdminArgs,
    },
}

/// Where the brokers' admin HTTP ports (`laminar.http.listen`) are.
#[derive(Args, Debug, Clone)]
pub struct AdminArgs {
    /// Comma-separated `host:port` admin HTTP addresses; voters' lags are known on the
    /// active controller's node, so list them all.
    #[arg(long, env = "LAMINAR_ADMIN", default_value = "127.0.0.1:9644")]
    pub admin: String,
}

pub fn run(command: ClusterCommand) -> anyhow::Result<()> {
    match command {
        ClusterCommand::Info { brokers } => info(&brokers),
        ClusterCommand::Brokers { brokers } => brokers_table(&brokers),
        ClusterCommand::Quorum { admin } => quorum(&admin),
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
        match status_of(address) {
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

/// `GET /v1/status` of one admin port, as JSON (one request per connection, as it serves).
fn status_of(address: &str) -> anyhow::Result<serde_json::Value> {
    let addr = address
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {address}"))?
        .next()
        .ok_or_else(|| anyhow!("{address} resolves to nothing"))?;
    let timeout = Duration::from_secs(5);
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    let head = format!("GET /v1/status HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes())?;
    let mut answer = Vec::new();
    stream.take(STATUS_BODY_MAX).read_to_end(&mut answer)?;
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
