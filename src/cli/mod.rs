//! The client-side commands of `laminar` (rpk-style verbs, Kafka names), one module per group.
//! Every command talks to a broker through `laminar_client` and fails with one line that
//! says why (unreachable broker, unknown topic, invalid name, the broker's error code).

pub mod cluster;
pub mod consume;
pub mod format;
pub mod group;
pub mod host;
pub mod produce;
pub mod reassign;
pub mod topic;

use anyhow::{anyhow, bail, Context};
use clap::Args;
use laminar_client::{ClientConfig, ClusterMetadata, Connection, TopicMetadata};

/// Where the brokers are; every client command takes it.
#[derive(Args, Debug, Clone)]
pub struct BrokerArgs {
    /// Comma-separated `host:port` bootstrap brokers.
    #[arg(long, short = 'X', env = "LAMINAR_BROKERS", default_value = "127.0.0.1:9092")]
    pub brokers: String,
}

/// How long admin requests may take on the broker.
pub const ADMIN_TIMEOUT_MS: i32 = 30_000;

impl BrokerArgs {
    /// Connects to the first bootstrap broker that answers ApiVersions.
    pub fn connect(&self) -> anyhow::Result<Connection> {
        let config = ClientConfig {
            client_id: "laminar-cli".into(),
            connect_timeout: std::time::Duration::from_secs(5),
            ..ClientConfig::default()
        };
        let mut failures = Vec::new();
        for address in self.brokers.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            match Connection::connect(address, &config) {
                Ok(connection) => return Ok(connection),
                Err(e) => failures.push(format!("{address}: {e}")),
            }
        }
        if failures.is_empty() {
            bail!("--brokers is empty");
        }
        Err(anyhow!("cannot reach any broker ({})", failures.join("; ")))
    }
}

/// Kafka's topic name rules, checked before asking the broker for a clearer message.
pub fn check_topic_name(name: &str) -> anyhow::Result<()> {
    laminar_engine::cluster::metadata::validate_topic_name(name).map_err(|e| anyhow!("{e}"))
}

/// Metadata of one existing topic, or "unknown topic".
pub fn topic_metadata(
    connection: &mut Connection,
    topic: &str,
) -> anyhow::Result<(ClusterMetadata, TopicMetadata)> {
    check_topic_name(topic)?;
    let metadata = connection
        .metadata(Some(&[topic]), false)
        .with_context(|| format!("cannot read metadata of {topic}"))?;
    let found = metadata
        .topic(topic)
        .cloned()
        .ok_or_else(|| anyhow!("unknown topic {topic}"))?;
    if let Some(error) = &found.error {
        if error.code == 3 {
            bail!("unknown topic {topic}");
        }
        bail!("topic {topic}: {error}");
    }
    Ok((metadata, found))
}

/// `key=value` into its parts.
pub fn parse_key_value(text: &str) -> anyhow::Result<(String, String)> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| anyhow!("expected key=value, got {text:?}"))?;
    if key.trim().is_empty() {
        bail!("empty key in {text:?}");
    }
    Ok((key.trim().to_string(), value.to_string()))
}

/// Prints rows as left-aligned columns, two spaces apart.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}
