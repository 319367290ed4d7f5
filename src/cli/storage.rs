//! `laminar storage format`: prepares a node's first log dir before its first start with the
//! SCRAM users it starts with, as Kafka's `kafka-storage format --add-scram` does, so that a
//! broker whose every listener needs SASL can be administered from its first minute. A single
//! node keeps them in its credential store; in a cluster the first active controller writes
//! every node's formatted users into the metadata log when it names the cluster, and from then
//! on the log alone holds the users (`laminar user create` adds more).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Subcommand;
use laminar_broker::config::BrokerConfig;
use laminar_broker::log_dir_lock::LogDirLock;
use laminar_security::credentials::ScramCredentialStore;
use laminar_security::{Mechanism, ScramCredential};

#[derive(Subcommand, Debug)]
pub enum StorageCommand {
    /// Put SCRAM users in a node's first log dir before it first starts.
    ///
    /// Example:
    ///   laminar storage format --config /etc/laminar/server.properties \
    ///     --add-scram 'SCRAM-SHA-512=[name=admin,password=admin-secret]'
    Format {
        /// The broker's properties file (for log.dirs).
        #[arg(long)]
        config: Option<PathBuf>,
        /// `key=value`, as `laminar broker --override`.
        #[arg(long = "override")]
        overrides: Vec<String>,
        /// Kafka's form: `SCRAM-SHA-256=[name=alice,password=alice-secret]`, with an optional
        /// `iterations=8192` (4096 to 16384); a value may be "quoted".
        #[arg(long = "add-scram", required = true)]
        add_scram: Vec<String>,
    },
}

/// PBKDF2 iterations when `--add-scram` names none (as `laminar user create`).
const ITERATIONS_DEFAULT: u32 = 8192;

pub fn run(command: StorageCommand) -> anyhow::Result<()> {
    let StorageCommand::Format {
        config,
        overrides,
        add_scram,
    } = command;
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
    std::fs::create_dir_all(log_dir).with_context(|| format!("cannot create {}", log_dir.display()))?;
    // A running broker holds the lock: its users change through `laminar user`.
    let _lock = LogDirLock::acquire(log_dir)?;
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
