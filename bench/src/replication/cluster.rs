//! The cluster under measurement: `--brokers` broker processes the harness starts in combined
//! mode (each a controller voter too), so that it knows their pids (for `/proc`) and admin
//! ports (for `/metrics`). Owned by the main thread, like each [`BrokerProcess`].

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::cli::ReplicationArgs;
use crate::scale::broker::{free_loopback_ports, BrokerProcess, QuorumSeat};
use crate::scale::partitions::connect;

/// How long the brokers may take to form a quorum and all be unfenced.
const START_LIMIT: Duration = Duration::from_secs(90);
/// How long each broker may take to exit after SIGTERM.
const STOP_LIMIT: Duration = Duration::from_secs(30);
/// Session timeout of the brokers started: a heartbeat every second (a sixth of it) keeps the
/// controller traffic small next to the load measured.
const SESSION_TIMEOUT_MS: u64 = 6_000;

/// The brokers started, node ids 1 ..= n in order.
pub struct LocalCluster {
    /// `nodes[i]` is node `i + 1`.
    pub nodes: Vec<BrokerProcess>,
}

impl LocalCluster {
    /// Starts `args.brokers` brokers with data dirs and logs under `dir`, and waits until
    /// Metadata lists every one of them (registered and unfenced).
    pub fn start(args: &ReplicationArgs, binary: &Path, dir: &Path) -> anyhow::Result<LocalCluster> {
        let count = usize::from(args.brokers);
        // Picked together, so that no port repeats: Kafka, HTTP, controller, replication.
        let ports = free_loopback_ports(4 * count)?;
        let link = super::link_security::overrides(args.inter_broker_protocol, dir)?;
        let voters: Vec<String> = (0..count)
            .map(|i| format!("{}@127.0.0.1:{}", i + 1, ports[2 * count + i]))
            .collect();
        let mut nodes = Vec::with_capacity(count);
        for i in 0..count {
            let data_dir = dir.join(format!("node-{}", i + 1));
            std::fs::create_dir(&data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
            let overrides = node_overrides(args, link.as_deref());
            let mut node =
                BrokerProcess::on_ports(binary, &overrides, (&data_dir, dir), [ports[i], ports[count + i]]);
            if link.is_some() {
                node = node.with_listener(super::link_security::LISTENER, ports[3 * count + i]);
            }
            nodes.push(node.in_quorum(QuorumSeat {
                node_id: i32::try_from(i + 1).expect("at most 9 brokers"),
                controller_port: ports[2 * count + i],
                voters: voters.join(","),
            }));
        }
        // A broker serves only once a quorum exists: all are spawned before any is waited for.
        let mut spawned = Vec::with_capacity(count);
        for node in &mut nodes {
            spawned.push(node.spawn()?);
        }
        for (node, spawned) in nodes.iter_mut().zip(spawned) {
            node.wait_ready(spawned, &[], START_LIMIT)?;
        }
        let cluster = LocalCluster { nodes };
        cluster.wait_all_listed(Instant::now() + START_LIMIT)?;
        Ok(cluster)
    }

    /// `host:port` of node 1.
    pub fn bootstrap(&self) -> String {
        self.nodes[0].bootstrap()
    }

    fn wait_all_listed(&self, deadline: Instant) -> anyhow::Result<()> {
        let mut connection = connect(&self.bootstrap(), Duration::from_secs(10))?;
        loop {
            let listed = connection.metadata(Some(&[]), false)?.brokers.len();
            if listed == self.nodes.len() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "Metadata lists {listed} of {} brokers {} s after the start; node 1's log ends:\n{}",
                    self.nodes.len(),
                    START_LIMIT.as_secs(),
                    self.nodes[0].log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM to every broker at once (one stopping alone would wait for a quorum the others
    /// are leaving), then waits for each; one that has not exited by [`STOP_LIMIT`] is killed.
    /// Returns what went wrong, if anything: a broker killed loses nothing the report needs.
    pub fn stop(mut self) -> Vec<String> {
        let started = Instant::now();
        let mut problems = Vec::new();
        for node in &self.nodes {
            if let Err(error) = node.signal_stop() {
                problems.push(format!("{error:#}"));
            }
        }
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if let Err(error) = node.wait_stopped(started, STOP_LIMIT) {
                problems.push(format!("broker {}: {error:#}", i + 1));
            }
        }
        problems
    }
}

/// The settings every broker gets after its own seat: one core each by default (three brokers
/// share this machine's cores as three machines would not), a heartbeat a sixth of the session
/// timeout, retention checked every second, the replication link's security, then the user's.
fn node_overrides(args: &ReplicationArgs, link: Option<&[String]>) -> Vec<String> {
    let mut overrides = vec![
        format!("laminar.cores={}", args.cores),
        format!("broker.session.timeout.ms={SESSION_TIMEOUT_MS}"),
        format!("broker.heartbeat.interval.ms={}", SESSION_TIMEOUT_MS / 6),
        // Retention (--retention-mib) keeps the disk bounded only if it runs often.
        "log.retention.check.interval.ms=1000".to_owned(),
    ];
    overrides.extend(link.into_iter().flatten().cloned());
    overrides.extend(args.overrides.iter().cloned());
    overrides
}
