//! The client-side commands of `laminar` (rpk-style verbs, Kafka names), one module per group.
//! Every command talks to a broker through `laminar_client` and fails with one line that
//! says why (unreachable broker, unknown topic, invalid name, the broker's error code).

pub mod acl;
mod broker_config;
pub mod cluster;
pub mod consume;
pub mod format;
pub mod group;
pub mod host;
pub mod produce;
pub mod progress;
mod quorum;
pub mod quota;
pub mod reassign;
pub mod rebalance;
pub mod storage;
pub mod topic;
pub mod txn;
pub mod user;

use anyhow::{anyhow, bail, Context};
use clap::Args;
use laminar_client::{ClientConfig, ClusterMetadata, Connection, TopicMetadata};

/// Where the brokers are and how to reach them; every client command takes it.
#[derive(Args, Debug, Clone)]
pub struct BrokerArgs {
    /// Comma-separated `host:port` bootstrap brokers (also `--bootstrap-server`, Kafka's name).
    #[arg(
        long,
        short = 'X',
        alias = "bootstrap-server",
        env = "LAMINAR_BROKERS",
        default_value = "127.0.0.1:9092"
    )]
    pub brokers: String,
    /// A client properties file with the security settings, as Kafka's tools take it:
    /// `security.protocol`, `ssl.ca.location` (or a PEM `ssl.truststore.location`),
    /// `sasl.mechanism`, and `sasl.username` with `sasl.password` or a `sasl.jaas.config`.
    #[arg(long, env = "LAMINAR_COMMAND_CONFIG")]
    pub command_config: Option<std::path::PathBuf>,
}

/// How long admin requests may take on the broker.
pub const ADMIN_TIMEOUT_MS: i32 = 30_000;

/// A connection to the broker at `address` (`host:port`) with `config`.
pub fn connect_to(address: &str, config: &ClientConfig) -> Result<Connection, laminar_client::ClientError> {
    Connection::connect(address, config)
}

impl BrokerArgs {
    /// The settings every connection of a command is made with, `--command-config`'s security
    /// included.
    pub fn client_config(&self) -> anyhow::Result<ClientConfig> {
        let mut config = ClientConfig {
            client_id: "laminar-cli".into(),
            connect_timeout: std::time::Duration::from_secs(5),
            ..ClientConfig::default()
        };
        if let Some(path) = &self.command_config {
            let read = || -> anyhow::Result<laminar_client::Security> {
                let text = std::fs::read_to_string(path)?;
                let entries = laminar_broker::config::properties::parse_properties(&text)?;
                let entries = entries.into_iter().map(|e| (e.key, e.value)).collect();
                Ok(laminar_client::SecuritySettings::from_properties(&entries)?.security()?)
            };
            config.security = read().with_context(|| format!("--command-config {}", path.display()))?;
        }
        Ok(config)
    }

    /// Connects to the first bootstrap broker that answers ApiVersions.
    pub fn connect(&self) -> anyhow::Result<Connection> {
        let config = self.client_config()?;
        let mut failures = Vec::new();
        for address in self.brokers.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            match connect_to(address, &config) {
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

/// One connection per leader of a topic's partitions, opened on first use: in a cluster only a
/// partition's leader serves its produces, fetches and offsets (a single node leads them all).
pub struct Leaders {
    config: ClientConfig,
    metadata: ClusterMetadata,
    leader_of: std::collections::BTreeMap<i32, i32>,
    open: std::collections::BTreeMap<i32, Connection>,
}

impl Leaders {
    pub fn new(config: ClientConfig, metadata: ClusterMetadata, topic: &TopicMetadata) -> Leaders {
        let leader_of = topic.partitions.iter().map(|p| (p.partition, p.leader)).collect();
        Leaders {
            config,
            metadata,
            leader_of,
            open: Default::default(),
        }
    }

    /// The connection to `partition`'s leader.
    pub fn connection(&mut self, partition: i32) -> anyhow::Result<&mut Connection> {
        let leader = self.leader_of.get(&partition).copied().unwrap_or(-1);
        if !self.open.contains_key(&leader) {
            let address = self
                .metadata
                .broker_address(leader)
                .ok_or_else(|| anyhow!("partition {partition} has no leader now"))?;
            let connection = connect_to(&address, &self.config)
                .with_context(|| format!("cannot reach broker {leader} at {address}"))?;
            self.open.insert(leader, connection);
        }
        Ok(self.open.get_mut(&leader).expect("opened above"))
    }

    /// `partitions` grouped by their leader, each group in the given order.
    pub fn by_leader(&self, partitions: impl IntoIterator<Item = i32>) -> Vec<Vec<i32>> {
        let mut groups: std::collections::BTreeMap<i32, Vec<i32>> = Default::default();
        for partition in partitions {
            let leader = self.leader_of.get(&partition).copied().unwrap_or(-1);
            groups.entry(leader).or_default().push(partition);
        }
        groups.into_values().collect()
    }
}

/// Kafka's topic name rules, checked before asking the broker for a clearer message.
pub fn check_topic_name(name: &str) -> anyhow::Result<()> {
    laminar_engine::metadata::topic_table::validate_topic_name(name).map_err(|e| anyhow!("{e}"))
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
