//! The broker under measurement: a child process the harness starts, so that it knows its pid
//! (for `/proc`), and can stop it, kill it and start it again on the same data dir and ports.
//!
//! Owned by the main thread: the child is spawned with PR_SET_PDEATHSIG, so it dies with the
//! thread that spawned it, and every start, stop and kill happens there.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use laminar_client::{ClientConfig, ClusterMetadata, Connection};

use laminar_sys::process;

/// How much of the broker's output an error quotes.
const LOG_TAIL_BYTES: u64 = 2048;
/// Pause between readiness probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(20);

/// A topic the broker should have: name and partition count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    /// Topic name.
    pub name: String,
    /// Partitions.
    pub partitions: i32,
}

/// When a start became visible to clients, from the spawn.
#[derive(Debug, Clone, Copy)]
pub struct Readiness {
    /// The first answer of any kind (connect and ApiVersions).
    pub first_answer: Duration,
    /// The first Metadata for all topics that lists every expected topic and partition with
    /// a leader and no error.
    pub metadata_complete: Duration,
}

/// The `laminar` executable to run as a broker: the one named, or this one.
pub fn binary(named: Option<&Path>) -> anyhow::Result<PathBuf> {
    match named {
        Some(path) => Ok(path.to_path_buf()),
        None => std::env::current_exe().context("finding this executable"),
    }
}

/// A broker's seat in a controller quorum: KRaft's combined mode, broker and controller voter
/// in one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumSeat {
    /// `node.id`.
    pub node_id: i32,
    /// Port of its `CONTROLLER` listener on loopback.
    pub controller_port: u16,
    /// `controller.quorum.voters`: `id@host:port` of every voter, comma-separated.
    pub voters: String,
}

/// A broker child process and how to start it again. Owned by the main thread.
pub struct BrokerProcess {
    binary: PathBuf,
    overrides: Vec<String>,
    data_dir: PathBuf,
    logs_dir: PathBuf,
    port: u16,
    http_port: u16,
    quorum: Option<QuorumSeat>,
    /// Another listener, `(name, port)`: the replication link's own, say.
    extra_listener: Option<(String, u16)>,
    child: Option<Child>,
    starts: u32,
}

impl BrokerProcess {
    /// A broker (not started) on `data_dir`, writing its output under `logs_dir`, on two free
    /// loopback ports.
    pub fn new(
        binary: &Path,
        overrides: &[String],
        data_dir: &Path,
        logs_dir: &Path,
    ) -> anyhow::Result<Self> {
        let ports = free_loopback_ports(2)?;
        Ok(Self::on_ports(
            binary,
            overrides,
            (data_dir, logs_dir),
            [ports[0], ports[1]],
        ))
    }

    /// A broker (not started) on `data_dir`, writing its output under `logs_dir`, on the Kafka
    /// and admin HTTP ports given.
    pub fn on_ports(
        binary: &Path,
        overrides: &[String],
        (data_dir, logs_dir): (&Path, &Path),
        [port, http_port]: [u16; 2],
    ) -> Self {
        BrokerProcess {
            binary: binary.to_path_buf(),
            overrides: overrides.to_vec(),
            data_dir: data_dir.to_path_buf(),
            logs_dir: logs_dir.to_path_buf(),
            port,
            http_port,
            quorum: None,
            extra_listener: None,
            child: None,
            starts: 0,
        }
    }

    /// The same broker with another listener, `name` on `port` (its protocol mapped by the
    /// overrides).
    pub fn with_listener(mut self, name: &str, port: u16) -> Self {
        self.extra_listener = Some((name.to_owned(), port));
        self
    }

    /// The same broker in combined mode, in the seat given of a controller quorum.
    pub fn in_quorum(mut self, seat: QuorumSeat) -> Self {
        self.quorum = Some(seat);
        self
    }

    /// `127.0.0.1:<port>`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The Kafka listener's address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The admin HTTP address (`/metrics`).
    pub fn http_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.http_port))
    }

    /// The pid of the running broker.
    pub fn pid(&self) -> anyhow::Result<u32> {
        self.child
            .as_ref()
            .map(Child::id)
            .context("the broker is not running")
    }

    /// The data dir (`log.dirs`).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The command line, for the report.
    pub fn command_line(&self) -> Vec<String> {
        let mut args = vec!["broker".to_owned()];
        let mut listeners = format!("listeners=PLAINTEXT://127.0.0.1:{}", self.port);
        let mut quorum = Vec::new();
        if let Some((name, port)) = &self.extra_listener {
            listeners.push_str(&format!(",{name}://127.0.0.1:{port}"));
        }
        if let Some(seat) = &self.quorum {
            listeners.push_str(&format!(",CONTROLLER://127.0.0.1:{}", seat.controller_port));
            quorum.push("process.roles=broker,controller".to_owned());
            quorum.push(format!("node.id={}", seat.node_id));
            quorum.push(format!("controller.quorum.voters={}", seat.voters));
        }
        let own = [
            format!("log.dirs={}", self.data_dir.display()),
            listeners,
            format!("laminar.http.listen=127.0.0.1:{}", self.http_port),
        ];
        for setting in own.iter().chain(&quorum).chain(&self.overrides) {
            args.push("--override".to_owned());
            args.push(setting.clone());
        }
        args
    }

    /// Spawns the broker; returns the moment of the spawn.
    pub fn spawn(&mut self) -> anyhow::Result<Instant> {
        if self.child.is_some() {
            bail!("spawn: the broker is already running");
        }
        self.starts += 1;
        let log = File::create(self.log_path()).context("creating the broker's log file")?;
        let mut command = Command::new(&self.binary);
        command
            .args(self.command_line())
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("duplicating the log handle")?)
            .stderr(log);
        process::kill_with_parent(&mut command);
        let spawned = Instant::now();
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        self.child = Some(child);
        Ok(spawned)
    }

    /// Waits until Metadata for all topics lists every topic of `expected` with all its
    /// partitions led and without errors, or `limit` after `spawned` has passed.
    pub fn wait_ready(
        &mut self,
        spawned: Instant,
        expected: &[TopicSpec],
        limit: Duration,
    ) -> anyhow::Result<Readiness> {
        let mut first_answer = None;
        let mut connection: Option<Connection> = None;
        let mut last_problem = String::from("no answer yet");
        loop {
            self.check_running()?;
            if spawned.elapsed() >= limit {
                bail!(
                    "not ready {} s after the spawn (last: {last_problem}); its log ends:\n{}",
                    limit.as_secs(),
                    self.log_tail()
                );
            }
            if connection.is_none() {
                connection = self.connect_for_probe(limit.saturating_sub(spawned.elapsed()));
            }
            if let Some(open) = connection.as_mut() {
                first_answer.get_or_insert_with(|| spawned.elapsed());
                match open.metadata(None, false) {
                    Ok(metadata) => match missing(&metadata, expected) {
                        None => {
                            return Ok(Readiness {
                                first_answer: first_answer.expect("set above"),
                                metadata_complete: spawned.elapsed(),
                            })
                        }
                        Some(problem) => last_problem = problem,
                    },
                    Err(error) => {
                        last_problem = format!("metadata: {error}");
                        connection = None;
                    }
                }
            }
            std::thread::sleep(PROBE_INTERVAL);
        }
    }

    fn connect_for_probe(&self, left: Duration) -> Option<Connection> {
        let config = ClientConfig {
            client_id: "laminar-bench-scale".to_owned(),
            connect_timeout: Duration::from_millis(500),
            io_timeout: Some(left.max(Duration::from_secs(1))),
            ..ClientConfig::default()
        };
        Connection::connect(&self.bootstrap(), &config).ok()
    }

    fn check_running(&mut self) -> anyhow::Result<()> {
        let child = self.child.as_mut().context("the broker is not running")?;
        if let Some(status) = child.try_wait().context("checking on the broker")? {
            self.child = None;
            bail!("the broker exited ({status}); its log ends:\n{}", self.log_tail());
        }
        Ok(())
    }

    /// SIGTERM, then waits for the exit; returns how long it took. Past `limit` the broker is
    /// killed and the stop reported as failed.
    pub fn terminate(&mut self, limit: Duration) -> anyhow::Result<Duration> {
        let started = Instant::now();
        self.signal_stop()?;
        self.wait_stopped(started, limit)
    }

    /// SIGTERM, without waiting for the exit (several brokers of one quorum stop together).
    pub fn signal_stop(&self) -> anyhow::Result<()> {
        let child = self.child.as_ref().context("the broker is not running")?;
        // Not reaped yet (a reaped broker leaves `child` None), so its pid names only it.
        process::send_sigterm(child).context("sending SIGTERM")
    }

    /// Waits for the exit after [`Self::signal_stop`] at `started`; returns how long it took.
    /// Past `limit` after `started` the broker is killed and the stop reported as failed.
    pub fn wait_stopped(&mut self, started: Instant, limit: Duration) -> anyhow::Result<Duration> {
        let mut child = self.child.take().context("the broker is not running")?;
        loop {
            if let Some(status) = child.try_wait().context("waiting for the broker")? {
                let took = started.elapsed();
                if !status.success() {
                    bail!(
                        "the broker exited with {status} after SIGTERM ({:.2} s); its log ends:\n{}",
                        took.as_secs_f64(),
                        self.log_tail()
                    );
                }
                return Ok(took);
            }
            if started.elapsed() >= limit {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "the broker had not exited {} s after SIGTERM; killed it",
                    limit.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGKILL and reap: a crash, as far as the broker can tell.
    pub fn kill9(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            // An exited child makes kill() fail; wait() still reaps it.
            let _ = child.kill();
            child.wait().context("reaping the killed broker")?;
        }
        Ok(())
    }

    fn log_path(&self) -> PathBuf {
        let name = self.data_dir.file_name().unwrap_or_default().to_string_lossy();
        self.logs_dir.join(format!("broker-{name}-{}.log", self.starts))
    }

    /// The end of what the current (or last) broker process wrote.
    pub fn log_tail(&self) -> String {
        let read = || -> std::io::Result<String> {
            let mut file = File::open(self.log_path())?;
            let len = file.metadata()?.len();
            file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)))?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        };
        read().unwrap_or_else(|error| format!("<no log: {error}>"))
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let _ = self.kill9();
    }
}

/// Why `metadata` does not yet show every topic of `expected` whole, or `None` when it does.
fn missing(metadata: &ClusterMetadata, expected: &[TopicSpec]) -> Option<String> {
    let topics: std::collections::HashMap<&str, _> =
        metadata.topics.iter().map(|t| (t.name.as_str(), t)).collect();
    for spec in expected {
        let Some(topic) = topics.get(spec.name.as_str()) else {
            return Some(format!("topic {} not listed", spec.name));
        };
        if let Some(error) = &topic.error {
            return Some(format!("topic {}: {error}", spec.name));
        }
        if topic.partitions.len() != spec.partitions as usize {
            return Some(format!(
                "topic {} lists {} of {} partitions",
                spec.name,
                topic.partitions.len(),
                spec.partitions
            ));
        }
        if let Some(p) = topic
            .partitions
            .iter()
            .find(|p| p.error.is_some() || p.leader < 0)
        {
            let why = p
                .error
                .as_ref()
                .map_or("no leader".to_owned(), ToString::to_string);
            return Some(format!("{}-{}: {why}", spec.name, p.partition));
        }
    }
    None
}

/// `count` distinct free loopback ports: every probe socket stays bound until all are picked.
pub fn free_loopback_ports(count: usize) -> anyhow::Result<Vec<u16>> {
    let probes = (0..count)
        .map(|_| TcpListener::bind("127.0.0.1:0").context("binding a probe socket"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    probes
        .iter()
        .map(|probe| Ok(probe.local_addr()?.port()))
        .collect()
}
