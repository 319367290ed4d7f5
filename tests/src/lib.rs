//! Shared harness for the black-box tests: start a real `laminar` broker process on a free
//! loopback port with a temporary data directory, and drive it with real Kafka clients
//! (librdkafka through the `rdkafka` crate) or raw protocol bytes.

#![forbid(unsafe_code)]

pub mod broker;
pub mod certs;
pub mod cli;
pub mod cluster;
pub mod disks;
pub mod history;
pub mod http;
pub mod nemesis;
pub mod netns;
pub mod power_cut;
pub mod process;
pub mod rdkafka_client;
pub mod scram_cluster;
pub mod tls_client;
pub mod transactions;
pub mod wire;
pub mod workload;

pub use broker::{default_binary, Broker, BrokerOptions, BINARY_ENV};
pub use cluster::Cluster;

/// Env switch for the consumer-group and idempotent-producer suites, which need APIs the broker
/// gains later. Those tests print that they are skipped and return when it is not `1`.
pub const GROUPS_ENV: &str = "LAMINAR_TEST_GROUPS";

/// True when the group / idempotence suites should run.
pub fn groups_enabled() -> bool {
    std::env::var(GROUPS_ENV).map(|v| v == "1").unwrap_or(false)
}

/// Polls `check` every 20 ms until it holds (an error counts as not yet) or `within` passes;
/// returns the time it took.
pub fn wait_for(
    within: std::time::Duration,
    what: &str,
    mut check: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<std::time::Duration> {
    let started = std::time::Instant::now();
    loop {
        if check().unwrap_or(false) {
            return Ok(started.elapsed());
        }
        if started.elapsed() > within {
            anyhow::bail!("{what}: not within {within:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
