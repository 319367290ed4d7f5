//! `laminar broker`: load the config, start the shards, stop cleanly on SIGTERM / SIGINT.

use std::path::PathBuf;

use anyhow::Context;
use laminar_net::config::{BrokerConfig, LoadedBrokerConfig};

pub fn run(config_path: Option<PathBuf>, overrides: Vec<String>) -> anyhow::Result<()> {
    init_logging();
    let LoadedBrokerConfig { config, warnings } = match &config_path {
        Some(path) => BrokerConfig::load(path, &overrides),
        None => BrokerConfig::from_properties("", &overrides),
    }
    .map_err(|e| anyhow::anyhow!("config error: {e}"))?;
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    let broker = laminar_net::server::start(config).context("cannot start the broker")?;
    let shared = broker.shared.clone();
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        node_id = shared.config.node_id,
        shards = shared.config.laminar_cores,
        listener = %broker.listen_addr,
        log_dir = %shared.log_dir.display(),
        "laminar broker started"
    );
    let shutdown = shared.shutdown.clone();
    let mut signals =
        signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT])
            .context("cannot install signal handlers")?;
    std::thread::Builder::new()
        .name("laminar-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                tracing::info!(signal, "shutting down: finishing requests, flushing partitions");
                shutdown.trigger();
            }
        })
        .context("cannot start the signal thread")?;
    broker.join().map_err(|e| anyhow::anyhow!(e))?;
    tracing::info!("laminar broker stopped cleanly");
    Ok(())
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LAMINAR_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
