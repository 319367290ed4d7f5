//! `laminar storage format | random-uuid`, as Kafka's `kafka-storage`. `format` prepares a
//! node's log dirs before its first start:
//! - `--cluster-id` writes `meta.properties` in every log dir: the cluster id, the node id (in
//!   cluster mode) and each dir's own directory id. The quorum's first active controller names
//!   the cluster with the id its node was formatted with, and a node whose log dirs name
//!   another cluster or node refuses to start (`laminar_broker::meta_properties`).
//! - `--add-scram` puts the SCRAM users it starts with in its first log dir, so that a broker
//!   whose every listener needs SASL can be administered from its first minute. A single node
//!   keeps them in its credential store; in a cluster the first active controller writes every
//!   node's formatted users into the metadata log when it names the cluster, and from then on
//!   the log alone holds the users (`laminar user create` adds more).
//!
//! Formatting is optional: a node started on empty log dirs formats them itself, with a new
//! random cluster id (the first active controller's, in a cluster).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Subcommand;
use laminar_broker::config::BrokerConfig;
use laminar_broker::log_dir_lock::LogDirLock;
use laminar_broker::meta_properties;
use laminar_security::credentials::ScramCredentialStore;
use laminar_security::{Mechanism, ScramCredential};

#[derive(Subcommand, Debug)]
pub enum StorageCommand {
    /// Format a node's log dirs before it first starts: the cluster id, the SCRAM users.
    ///
    /// Example:
    ///   laminar storage format --config /etc/laminar/server.properties \
    ///     --cluster-id MkU3OEVBNTcwNTJENDM2Qg \
    ///     --add-scram 'SCRAM-SHA-512=[name=admin,password=admin-secret]'
    #[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["cluster_id", "add_scram"])))]
    Format {
        /// The broker's properties file (for log.dirs, node.id, process.roles).
        #[arg(long)]
        config: Option<PathBuf>,
        /// `key=value`, as `laminar broker --override`.
        #[arg(long = "override")]
        overrides: Vec<String>,
        /// The cluster id, in Kafka's form (`laminar storage random-uuid` makes one): every node
        /// of the cluster is formatted with the same.
        #[arg(long = "cluster-id", short = 't', allow_hyphen_values = true)]
        cluster_id: Option<String>,
        /// Kafka's form: `SCRAM-SHA-256=[name=alice,password=alice-secret]`, with an optional
        /// `iterations=8192` (4096 to 16384); a value may be "quoted".
        #[arg(long = "add-scram")]
        add_scram: Vec<String>,
    },
    /// Print a new random cluster id, in Kafka's form.
    RandomUuid,
}

/// PBKDF2 iterations when `--add-scram` names none (as `laminar user create`).
const ITERATIONS_DEFAULT: u32 = 8192;

pub fn run(command: StorageCommand) -> anyhow::Result<()> {
    let (config, overrides, cluster_id, add_scram) = match command {
        StorageCommand::RandomUuid => {
            println!("{}", meta_properties::random_kafka_uuid()?);
            return Ok(());
        }
        StorageCommand::Format {
            config,
            overrides,
            cluster_id,
            add_scram,
        } => (config, overrides, cluster_id, add_scram),
    };
    let loaded = match &config {
        Some(path) => BrokerConfig::load(path, &overrides),
        None => BrokerConfig::from_properties("", &overrides),
    }
    .map_err(anyhow::Error::new)?;
    let config = loaded.config;
    let users: Vec<(String, ScramCredential)> = add_scram
        .iter()
        .map(|text| credential_of(text).with_context(|| format!("--add-scram {text:?}")))
        .collect::<anyhow::Result<_>>()?;
    let log_dir = config.log_dirs.first().context("log.dirs names no directory")?;
    // A running broker holds the locks: its users change through `laminar user`.
    let mut locks = Vec::with_capacity(config.log_dirs.len());
    for dir in &config.log_dirs {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        locks.push(LogDirLock::acquire(dir)?);
    }
    if let Some(cluster_id) = &cluster_id {
        format_cluster_id(&config, cluster_id)?;
    }
    if users.is_empty() {
        return Ok(());
    }
    refuse_a_formed_cluster(log_dir)?;
    let mut store =
        ScramCredentialStore::open(log_dir).map_err(|e| anyhow::anyhow!("{}: {e}", log_dir.display()))?;
    for (user, credential) in users {
        let mechanism = credential.mechanism;
        store
            .upsert(&user, credential)
            .map_err(|e| anyhow::anyhow!("{}: {e}", log_dir.display()))?;
        println!("{user}: {mechanism} credential written in {}", log_dir.display());
    }
    Ok(())
}

/// Writes `cluster_id` (and, in cluster mode, the node id) into every log dir's
/// `meta.properties`. A dir already formatted for another cluster or node is refused, naming
/// both; one formatted the same stays as it is.
fn format_cluster_id(config: &BrokerConfig, cluster_id: &str) -> anyhow::Result<()> {
    if !meta_properties::is_kafka_uuid(cluster_id) {
        bail!("--cluster-id {cluster_id}: not a Kafka UUID (22 characters; `laminar storage random-uuid` makes one)");
    }
    let node_id = config.cluster.is_some().then(|| config.node_id.get());
    meta_properties::check_log_dirs(&config.log_dirs, node_id)?;
    for dir in &config.log_dirs {
        let held = meta_properties::read(dir)?;
        if let Some(other) = held.cluster_id.filter(|id| id != cluster_id) {
            bail!(
                "{} is formatted for cluster {other} already, not {cluster_id}",
                dir.display()
            );
        }
    }
    meta_properties::write_every(&config.log_dirs, cluster_id, node_id)?;
    let count = config.log_dirs.len();
    println!("formatted {count} log dir(s) for cluster {cluster_id}");
    Ok(())
}

/// A cluster node whose quorum already wrote its log: its users live there now. (A single
/// node never has that log.)
fn refuse_a_formed_cluster(log_dir: &Path) -> anyhow::Result<()> {
    let metadata = log_dir
        .join(laminar_broker::quorum::METADATA_LOG_DIR)
        .join("raft-log");
    if metadata.exists() {
        bail!(
            "{} holds a cluster's metadata already: add users with `laminar user create`",
            log_dir.display()
        );
    }
    Ok(())
}

/// `MECHANISM=[name=...,password=...(,iterations=...)]` → the user and a fresh credential.
fn credential_of(text: &str) -> anyhow::Result<(String, ScramCredential)> {
    let (mechanism, rest) = text
        .split_once('=')
        .context("expected MECHANISM=[name=...,password=...]")?;
    let mechanism: Mechanism = mechanism
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("unknown mechanism {mechanism:?}"))?;
    if mechanism == Mechanism::Plain {
        bail!("PLAIN users live in the listener's JAAS config, not in storage");
    }
    let inner = rest
        .trim()
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .context("the user's settings go in [...]")?;
    let (mut name, mut password, mut iterations) = (None, None, ITERATIONS_DEFAULT);
    for (key, value) in settings(inner)? {
        match key.as_str() {
            "name" => name = Some(value),
            "password" => password = Some(value),
            "iterations" => iterations = value.parse().with_context(|| format!("iterations={value}"))?,
            other => bail!("unknown setting {other:?} (name, password, iterations)"),
        }
    }
    let name = name.filter(|n| !n.is_empty()).context("name= is missing")?;
    let password = password
        .filter(|p| !p.is_empty())
        .context("password= is missing")?;
    Ok((name, ScramCredential::generate(mechanism, &password, iterations)?))
}

/// `key=value` pairs separated by commas; a "quoted" value may hold commas.
fn settings(text: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=').context("expected key=value")?;
        let after = after.trim_start();
        let (value, remaining) = match after.strip_prefix('"') {
            Some(quoted) => {
                let end = quoted.find('"').context("an unterminated quote")?;
                (&quoted[..end], &quoted[end + 1..])
            }
            None => after.split_at(after.find(',').unwrap_or(after.len())),
        };
        pairs.push((key.trim().to_string(), value.to_string()));
        let remaining = remaining.trim_start();
        rest = match remaining.strip_prefix(',') {
            Some(next) => next.trim_start(),
            None if remaining.is_empty() => remaining,
            None => bail!("expected a comma after {key}"),
        };
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_add_scram_form_is_read() {
        let (name, credential) =
            credential_of("SCRAM-SHA-512=[name=admin,password=\"s3,cret\",iterations=4096]").unwrap();
        assert_eq!(
            (name.as_str(), credential.mechanism, credential.iterations),
            ("admin", Mechanism::ScramSha512, 4096)
        );
        let (_, default) = credential_of("SCRAM-SHA-256=[name=a,password=b]").unwrap();
        assert_eq!(default.iterations, ITERATIONS_DEFAULT);
        for bad in [
            "SCRAM-SHA-512=[name=a]",
            "SCRAM-SHA-512=name=a,password=b",
            "PLAIN=[name=a,password=b]",
            "SCRAM-SHA-512=[name=a,password=b,iterations=10]",
            "SCRAM-SHA-512=[name=a,password=\"b]",
            "SCRAM-SHA-512=[name=a,salt=x,password=b]",
        ] {
            assert!(credential_of(bad).is_err(), "{bad}");
        }
    }
}
