//! `laminar broker`: check the host, load the config, start the shards, tell systemd (READY,
//! WATCHDOG, STOPPING), stop cleanly on SIGTERM / SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Context;
use laminar_broker::config::write_behind::PROFILE_KEY;
use laminar_broker::config::{BrokerConfig, LoadedBrokerConfig, LogFormat, ProfileRecommendation};
use laminar_client::{ClientConfig, Connection};
use laminar_engine::io::WriteMode;
use laminar_tuning::iotune::{IoProfile, IO_PROFILE_VERSION};
use laminar_tuning::iotune_appends::AppendMode;
use laminar_tuning::sd_notify::{self, NotifyState};

pub fn run(config_path: Option<PathBuf>, overrides: Vec<String>) -> anyhow::Result<()> {
    let config = load_config(config_path, &overrides)?;
    if config.cluster.as_ref().is_some_and(|c| !c.roles.runs_broker()) {
        return run_controller_only(&config);
    }
    let shards = config.laminar_cores.max(1);
    let host = laminar_tuning::probe_host_for(shards as u64).map_err(|e| anyhow::anyhow!("{e}"))?;
    let listeners: Vec<String> = config
        .listeners
        .iter()
        .map(|l| format!("{}://{}:{}", l.name, l.host, l.port))
        .collect();
    let data_dirs: Vec<String> = config.log_dirs.iter().map(|d| d.display().to_string()).collect();
    let http_listen = config.laminar_http_listen;
    let broker = laminar_broker::server::start(config).context("cannot start the broker")?;
    let shared = broker.shared.clone();
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        node_id = shared.config.node_id.get(),
        cores = std::thread::available_parallelism().map_or(1, usize::from),
        shards,
        listeners = %listeners.join(","),
        kafka_addr = %broker.listen_addr,
        http = %http_listen,
        data_dirs = %data_dirs.join(","),
        kernel = %host.kernel_release,
        write_behind = %shared.write_behind_summary(),
        write_mode = %shared.config.write_mode,
        "laminar broker started"
    );
    notify(&[
        NotifyState::Ready,
        NotifyState::Status(format!("serving Kafka on {}", broker.listen_addr)),
    ]);
    let (stopped_tx, stopped_rx) = mpsc::channel::<()>();
    if let Some(interval) = sd_notify::watchdog_interval() {
        // A listener the probe can speak to without TLS (a SASL one answers ApiVersions before
        // authentication); without one, the probe makes TCP connections only.
        let plain = shared
            .config
            .listener_security
            .iter()
            .position(|l| !l.protocol.uses_tls());
        let (addr, kafka_round_trip) = match plain {
            Some(index) => (broker.listen_addrs[index], true),
            None => (broker.listen_addr, false),
        };
        std::thread::Builder::new()
            .name("laminar-watchdog".into())
            .spawn(move || watchdog((addr, kafka_round_trip), interval, stopped_rx))
            .context("cannot start the watchdog thread")?;
    }
    stop_on_signals(&shared)?;
    let joined = broker.join().map_err(|e| anyhow::anyhow!(e));
    if let Some(link) = &shared.cluster {
        link.stop_controller();
    }
    drop(stopped_tx);
    joined?;
    tracing::info!("laminar broker stopped cleanly");
    Ok(())
}

/// The config from the file and overrides, with the iotune profile applied; logging set up as
/// it says.
fn load_config(config_path: Option<PathBuf>, overrides: &[String]) -> anyhow::Result<BrokerConfig> {
    let LoadedBrokerConfig { mut config, warnings } = match &config_path {
        Some(path) => BrokerConfig::load(path, overrides),
        None => BrokerConfig::from_properties("", overrides),
    }
    // Every ConfigError says "config error: ..." itself (main prints it: no logger yet, since
    // the config says which format the logs take).
    .map_err(anyhow::Error::new)?;
    init_logging(config.laminar_log_format);
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    if let Some(path) = config.iotune_profile_path() {
        let recommendation = read_iotune_profile(path)?;
        config
            .apply_iotune_profile(&recommendation)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(config)
}

/// `process.roles=controller`: the quorum's node alone, until SIGTERM or SIGINT.
fn run_controller_only(config: &BrokerConfig) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGTERM, SIGINT]).context("cannot install signal handlers")?;
    let controller = laminar_broker::controller_only::RunningController::start(config)
        .context("cannot start the controller")?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        node_id = config.node_id.get(),
        controller_addr = %controller.listen_addr(),
        "laminar controller started (process.roles=controller: no Kafka listeners)"
    );
    notify(&[
        NotifyState::Ready,
        NotifyState::Status(format!("controller on {}", controller.listen_addr())),
    ]);
    let (stopped_tx, stopped_rx) = mpsc::channel::<()>();
    if let Some(interval) = sd_notify::watchdog_interval() {
        // Pinged while the controller listener accepts connections.
        let probe = (controller.listen_addr(), false);
        std::thread::Builder::new()
            .name("laminar-watchdog".into())
            .spawn(move || watchdog(probe, interval, stopped_rx))
            .context("cannot start the watchdog thread")?;
    }
    if let Some(signal) = signals.forever().next() {
        tracing::info!(signal, "shutting down the controller");
    }
    notify(&[NotifyState::Stopping]);
    drop(stopped_tx);
    controller.stop();
    tracing::info!("laminar controller stopped cleanly");
    Ok(())
}

/// The write-behind recommendation of the iotune profile at `path` (`laminar iotune` writes it).
fn read_iotune_profile(path: PathBuf) -> anyhow::Result<ProfileRecommendation> {
    let profile = IoProfile::read_json(&path).map_err(|e| {
        anyhow::anyhow!(
            "config error: {PROFILE_KEY}: cannot read the iotune profile {}: {e}",
            path.display()
        )
    })?;
    anyhow::ensure!(
        profile.version == IO_PROFILE_VERSION,
        "config error: {PROFILE_KEY}: the iotune profile {} has format version {}; this broker \
         reads version {IO_PROFILE_VERSION} (run `laminar iotune` again)",
        path.display(),
        profile.version
    );
    Ok(ProfileRecommendation {
        path,
        write_batch_bytes: profile.recommended_write_batch_bytes as u64,
        io_depth: profile.recommended_io_depth as u64,
        write_mode: profile.recommended_write_mode.map(|mode| match mode {
            AppendMode::Buffered => WriteMode::Buffered,
            AppendMode::Direct => WriteMode::Direct,
        }),
    })
}

/// Pings systemd at half its watchdog interval, but only after the broker answered a Kafka
/// ApiVersions round trip: a wedged shard that still accepts connections stops the pings. A
/// broker whose every listener is TLS gets a TCP connect as its probe instead.
fn watchdog(
    (kafka_addr, kafka_round_trip): (SocketAddr, bool),
    interval: Duration,
    stopped: mpsc::Receiver<()>,
) {
    let period = interval / 2;
    let client = ClientConfig {
        client_id: "laminar-watchdog".into(),
        connect_timeout: period,
        io_timeout: Some(period),
        ..ClientConfig::default()
    };
    let probe_addr = loopback_if_unspecified(kafka_addr);
    while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
        let answered = match kafka_round_trip {
            true => Connection::connect(&probe_addr.to_string(), &client).map(drop),
            false => std::net::TcpStream::connect_timeout(&probe_addr, period)
                .map(drop)
                .map_err(laminar_client::ClientError::Io),
        };
        match answered {
            Ok(()) => notify(&[NotifyState::Watchdog]),
            Err(e) => tracing::warn!(error = %e, "watchdog: broker did not answer; not pinging systemd"),
        }
    }
}

fn loopback_if_unspecified(mut addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    addr
}

fn notify(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "cannot notify systemd");
    }
}

/// Logs go to stderr, as text or JSON lines (`laminar.log.format`). Text is coloured only on a
/// terminal (a file or journald gets plain text), and has no timestamp of its own under
/// systemd's journal, which stamps every line (`JOURNAL_STREAM` is set for a unit whose stderr
/// goes to the journal). JSON always carries its timestamp: a shipper parses it from the object.
fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("LAMINAR_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => logs.json().with_ansi(false).flatten_event(true).init(),
        LogFormat::Text => {
            let logs = logs.with_ansi(std::io::stderr().is_terminal());
            if std::env::var_os("JOURNAL_STREAM").is_some() {
                logs.without_time().init();
            } else {
                logs.init();
            }
        }
    }
}

/// SIGTERM or SIGINT: in cluster mode a controlled shutdown first (leaderships move while the
/// shards still serve, so clients move with them), then the shards stop. SIGHUP: every TLS
/// listener reads its key, certificates and trust store again (new connections use them).
fn stop_on_signals(shared: &std::sync::Arc<laminar_broker::broker::BrokerShared>) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let shared = shared.clone();
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
        .context("cannot install signal handlers")?;
    std::thread::Builder::new()
        .name("laminar-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if signal == SIGHUP {
                    reload_certificates(&shared);
                    continue;
                }
                tracing::info!(signal, "shutting down: finishing requests, flushing partitions");
                notify(&[NotifyState::Stopping]);
                if let Some(link) = &shared.cluster {
                    laminar_broker::quorum::membership::controlled_shutdown(link);
                }
                shared.shutdown.trigger();
                return;
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

/// Reloads every TLS listener's files; a listener whose files do not load keeps what it had.
fn reload_certificates(shared: &laminar_broker::broker::BrokerShared) {
    let listeners = shared.config.listeners.iter().zip(&shared.listener_tls);
    for (listener, tls) in listeners {
        let Some(tls) = tls else { continue };
        match tls.reload() {
            Ok(()) => tracing::info!(listener = %listener.name, "TLS certificates reloaded"),
            Err(error) => {
                tracing::error!(listener = %listener.name, %error, "TLS certificates not reloaded; keeping the old ones")
            }
        }
    }
}
