//! One real `laminar broker` process on a free loopback port, with a data directory that survives
//! `kill9()` / `terminate()` / `restart()` and is removed when the [`Broker`] is dropped.
//!
//! Readiness is not "the port is open" but "the broker answered an ApiVersions request": a listener
//! that accepts but never answers would otherwise make every client test fail in a confusing way.

use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tempfile::TempDir;

use laminar_sys::{limits, process};

/// Environment variable naming the broker binary; without it, `target/debug/laminar` of the
/// workspace (honouring `CARGO_TARGET_DIR`) is used.
pub const BINARY_ENV: &str = "LAMINAR_BIN";

/// How much of the broker's stderr an error message quotes.
const STDERR_TAIL_BYTES: u64 = 4096;
/// First starts tried before a lost race for a probed port is reported.
pub(crate) const FIRST_START_TRIES: u32 = 3;

/// How to start a broker. Every field has a default that suits a black-box test.
#[derive(Clone, Debug)]
pub struct BrokerOptions {
    /// Path of the `laminar` binary; `None` means [`default_binary`].
    pub binary: Option<PathBuf>,
    /// Value of `laminar.cores`.
    pub cores: u32,
    /// Extra `--override key=value` pairs, in order, after the harness's own.
    pub overrides: Vec<(String, String)>,
    /// Passed as `--config FILE` when set.
    pub config_file: Option<PathBuf>,
    /// How long the broker may take to answer its first ApiVersions request.
    pub startup_timeout: Duration,
    /// How long `terminate()` waits after SIGTERM before it reports a hung shutdown.
    pub shutdown_timeout: Duration,
    /// RLIMIT_NOFILE (soft and hard) of the broker process, as `ulimit -n` sets it; `None`
    /// keeps the test's own.
    pub open_files_limit: Option<u64>,
    /// The `log.dirs` directory, made by the test (a fault-injecting mount, say); `None`:
    /// `data` in the broker's own temporary directory.
    pub log_dir: Option<PathBuf>,
    /// The address every listener binds and advertises: loopback, or a test network host's.
    pub host: IpAddr,
    /// The network namespace the process runs in (`ip netns exec`), for a test network's node.
    pub network_namespace: Option<String>,
    /// Listeners besides the harness's PLAINTEXT one, by name (`SASL_PLAINTEXT`, or a name
    /// that `listener.security.protocol.map` in `overrides` maps), each on a port of its own
    /// ([`Broker::listener_addr`]).
    pub extra_listeners: Vec<String>,
    /// Whether the process serves Kafka clients; a controller-only node does not, and counts
    /// as started once its controller listener (then its address) accepts connections.
    pub serves_kafka: bool,
}

impl Default for BrokerOptions {
    fn default() -> Self {
        BrokerOptions {
            binary: None,
            cores: 2,
            overrides: Vec::new(),
            config_file: None,
            serves_kafka: true,
            startup_timeout: Duration::from_secs(20),
            shutdown_timeout: Duration::from_secs(20),
            open_files_limit: None,
            log_dir: None,
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            network_namespace: None,
            extra_listeners: Vec::new(),
        }
    }
}

impl BrokerOptions {
    /// Adds `--override key=value`.
    pub fn with_override(mut self, key: &str, value: &str) -> Self {
        self.overrides.push((key.to_string(), value.to_string()));
        self
    }
}

/// The binary the harness runs when [`BrokerOptions::binary`] is not set.
pub fn default_binary() -> PathBuf {
    if let Some(path) = std::env::var_os(BINARY_ENV) {
        return PathBuf::from(path);
    }
    target_dir().join("debug").join("laminar")
}

/// The workspace's target directory (honouring `CARGO_TARGET_DIR`): on the checkout's disk.
pub fn target_dir() -> PathBuf {
    let workspace_root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives inside the workspace")
        .to_path_buf();
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                workspace_root.join(dir)
            }
        })
        .unwrap_or_else(|| workspace_root.join("target"))
}

/// A running (or stopped, between `kill9()` and `restart()`) broker process.
///
/// Owned by the test thread that started it: the child is spawned with PR_SET_PDEATHSIG, so the
/// broker dies with the thread that (re)started it and never outlives a crashed test run.
pub struct Broker {
    options: BrokerOptions,
    binary: PathBuf,
    port: u16,
    http_port: u16,
    /// The port of each of `options.extra_listeners`, in order.
    extra_ports: Vec<u16>,
    root: TempDir,
    pub(crate) child: Option<Child>,
    starts: u32,
    /// True between `pause()` and `resume()` (or the next kill or restart).
    paused: bool,
}

impl Broker {
    /// Starts a broker and waits until it answers ApiVersions.
    pub fn start(options: BrokerOptions) -> Result<Broker> {
        let binary = options.binary.clone().unwrap_or_else(default_binary);
        check_runnable(&binary)?;
        let root = tempfile::Builder::new()
            .prefix("laminar-test-")
            .tempdir()
            .context("creating the broker's temporary directory")?;
        fs::create_dir(root.path().join("data")).context("creating the data directory")?;
        let [port, http_port] = free_loopback_ports()?;
        let extra_ports = loopback_ports(options.extra_listeners.len())?;
        let mut broker = Broker::unstarted(options, binary, (port, http_port, extra_ports), root);
        // Another process may take a probed port before the broker binds it: a first start
        // that lost that race moves to fresh ports; any other failure is reported.
        for _ in 1..FIRST_START_TRIES {
            match broker.spawn_and_wait() {
                Err(_) if broker.stderr_tail().contains("Address already in use") => {
                    [broker.port, broker.http_port] = free_loopback_ports()?;
                    broker.extra_ports = loopback_ports(broker.extra_ports.len())?;
                }
                started => return started.map(|()| broker),
            }
        }
        broker.spawn_and_wait()?;
        Ok(broker)
    }

    /// Starts a broker with default options.
    pub fn start_default() -> Result<Broker> {
        Broker::start(BrokerOptions::default())
    }

    /// `<host>:<port>` (`127.0.0.1:<port>` but on a test network), for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.addr().to_string()
    }

    /// The socket address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::new(self.options.host, self.port)
    }

    /// The address of listener `name` of [`BrokerOptions::extra_listeners`].
    pub fn listener_addr(&self, name: &str) -> Option<SocketAddr> {
        let index = self.options.extra_listeners.iter().position(|n| n == name)?;
        Some(SocketAddr::new(self.options.host, self.extra_ports[index]))
    }

    /// Every listener's `NAME://host:port`, the harness's PLAINTEXT one first.
    fn listeners(&self) -> String {
        let mut listeners = vec![format!("PLAINTEXT://{}", self.addr())];
        for (name, port) in self.options.extra_listeners.iter().zip(&self.extra_ports) {
            listeners.push(format!("{name}://{}", SocketAddr::new(self.options.host, *port)));
        }
        listeners.join(",")
    }

    /// The admin HTTP address (`laminar.http.listen`): `/metrics`, `/v1/status`. A test
    /// network's node binds it on its namespace's own loopback: off loopback the endpoint would
    /// need HTTPS and tokens, and no test reads a namespaced node's endpoint.
    pub fn http_addr(&self) -> SocketAddr {
        let host = match self.options.network_namespace {
            Some(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            None => self.options.host,
        };
        SocketAddr::new(host, self.http_port)
    }

    /// The `log.dirs` directory, kept across restarts.
    pub fn data_dir(&self) -> PathBuf {
        match &self.options.log_dir {
            Some(dir) => dir.clone(),
            None => self.root.path().join("data"),
        }
    }

    /// The options this broker runs with.
    pub fn options(&self) -> &BrokerOptions {
        &self.options
    }

    /// The options of the next `restart()` (changing them does not touch a running broker).
    pub fn options_mut(&mut self) -> &mut BrokerOptions {
        &mut self.options
    }

    /// Process id of the running broker, if it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// How the process ended, once it has (reaped then: a restart starts it again).
    pub fn exit_status(&mut self) -> Result<Option<ExitStatus>> {
        let Some(child) = self.child.as_mut() else {
            return Ok(None);
        };
        let status = child.try_wait().context("waiting for the broker")?;
        if status.is_some() {
            self.child = None;
        }
        Ok(status)
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGKILL, then reap: a crash, as far as the broker can tell. A paused broker dies too
    /// (SIGKILL needs no SIGCONT).
    pub fn kill9(&mut self) -> Result<()> {
        self.paused = false;
        if let Some(mut child) = self.child.take() {
            // An already-exited child makes kill() fail with InvalidInput; wait() still reaps it.
            let _ = child.kill();
            child.wait().context("reaping the killed broker")?;
        }
        Ok(())
    }

    /// SIGTERM, then wait for exit. Fails (after a SIGKILL) if shutdown exceeds the timeout, so a
    /// hung shutdown is reported instead of hanging the test.
    pub fn terminate(&mut self) -> Result<ExitStatus> {
        let Some(mut child) = self.child.take() else {
            bail!("terminate(): the broker is not running");
        };
        let pid = child.id();
        // Not reaped yet (a reaped broker leaves `child` None), so the pid names the broker.
        // A paused broker would hold SIGTERM until SIGCONT: it gets both.
        if std::mem::take(&mut self.paused) {
            let _ = process::send_sigcont(&child);
        }
        if let Err(error) = process::send_sigterm(&child) {
            bail!("SIGTERM to broker {pid} failed: {error}");
        }
        let deadline = Instant::now() + self.options.shutdown_timeout;
        loop {
            if let Some(status) = child.try_wait().context("waiting for the broker")? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "broker did not exit within {:?} of SIGTERM (killed it); its stderr:\n{}",
                    self.options.shutdown_timeout,
                    self.stderr_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGSTOP: the process freezes with its sockets open (a hung machine, as its peers and
    /// clients see it) until [`Broker::resume`].
    pub fn pause(&mut self) -> Result<()> {
        let child = self
            .child
            .as_ref()
            .context("pause(): the broker is not running")?;
        process::send_sigstop(child).with_context(|| format!("SIGSTOP to broker {}", child.id()))?;
        self.paused = true;
        Ok(())
    }

    /// SIGHUP: the broker reads its TLS listeners' certificates again.
    pub fn hang_up(&mut self) -> Result<()> {
        let child = self
            .child
            .as_ref()
            .context("hang_up(): the broker is not running")?;
        process::send_sighup(child).with_context(|| format!("SIGHUP to broker {}", child.id()))
    }

    /// SIGCONT to a paused broker: it goes on from where it stopped.
    pub fn resume(&mut self) -> Result<()> {
        let child = self
            .child
            .as_ref()
            .context("resume(): the broker is not running")?;
        process::send_sigcont(child).with_context(|| format!("SIGCONT to broker {}", child.id()))?;
        self.paused = false;
        Ok(())
    }

    /// True between [`Broker::pause`] and [`Broker::resume`].
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Starts the broker again on the same port and data directory. A running broker is first
    /// stopped cleanly.
    pub fn restart(&mut self) -> Result<()> {
        if self.child.is_some() {
            self.terminate()?;
        }
        self.spawn_and_wait()
    }

    /// The file the current (or last) broker process writes its stderr to.
    pub fn stderr_path(&self) -> PathBuf {
        self.log_path(self.starts)
    }

    /// Every start's stderr file, the first start's first.
    pub fn stderr_paths(&self) -> Vec<PathBuf> {
        (1..=self.starts).map(|start| self.log_path(start)).collect()
    }

    /// The last few KiB the current (or last) broker process wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        read_tail(&self.log_path(self.starts)).unwrap_or_else(|e| format!("<no stderr: {e}>"))
    }

    /// How many lines for which `matches` holds every process of this broker (each start)
    /// wrote to stderr so far.
    pub fn stderr_lines_where(&self, matches: impl Fn(&str) -> bool) -> usize {
        (1..=self.starts)
            .filter_map(|start| fs::read_to_string(self.log_path(start)).ok())
            .map(|text| text.lines().filter(|line| matches(line)).count())
            .sum()
    }

    /// How many bytes the current (or last) broker process wrote to stderr so far.
    pub fn stderr_bytes(&self) -> Result<u64> {
        Ok(std::fs::metadata(self.log_path(self.starts))?.len())
    }

    /// The stderr tail once it contains `needle`, waiting up to `timeout`. The broker answers on
    /// its port before it logs "laminar broker started", so a start-up line needs the wait.
    pub fn stderr_tail_with(&self, needle: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let stderr = self.stderr_tail();
            if stderr.contains(needle) {
                return Ok(stderr);
            }
            if Instant::now() >= deadline {
                bail!("stderr lacks {needle:?} after {timeout:?}:\n{stderr}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_path(&self, start: u32) -> PathBuf {
        self.root.path().join(format!("broker-{start}.stderr"))
    }

    fn command_line(&self) -> Vec<String> {
        let mut args = vec!["broker".to_string()];
        if let Some(config) = &self.options.config_file {
            args.push("--config".into());
            args.push(config.display().to_string());
        }
        let harness = [
            ("listeners", self.listeners()),
            ("log.dirs", self.data_dir().display().to_string()),
            ("laminar.cores", self.options.cores.to_string()),
            ("laminar.http.listen", self.http_addr().to_string()),
        ];
        let extra = self
            .options
            .overrides
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()));
        for (key, value) in harness.iter().map(|(k, v)| (*k, v.clone())).chain(extra) {
            args.push("--override".into());
            args.push(format!("{key}={value}"));
        }
        args
    }

    fn spawn_and_wait(&mut self) -> Result<()> {
        self.spawn()?;
        let args = self.command_line();
        self.wait_until_serving()
            .with_context(|| format!("command: {} {}", self.binary.display(), args.join(" ")))
    }

    /// A broker not started yet, on the ports given (`(kafka, http, extra listeners)`), its
    /// files under `root` ([`crate::Cluster`] starts its nodes together).
    pub(crate) fn unstarted(
        options: BrokerOptions,
        binary: PathBuf,
        (port, http_port, extra_ports): (u16, u16, Vec<u16>),
        root: TempDir,
    ) -> Broker {
        Broker {
            options,
            binary,
            port,
            http_port,
            extra_ports,
            root,
            child: None,
            starts: 0,
            paused: false,
        }
    }

    /// Starts the process without waiting for it to serve (see [`crate::Cluster`]).
    pub(crate) fn spawn(&mut self) -> Result<()> {
        assert!(self.child.is_none(), "spawn with a broker still running");
        self.starts += 1;
        let log = File::create(self.log_path(self.starts)).context("creating the stderr log")?;
        let args = self.command_line();
        let mut command = match &self.options.network_namespace {
            Some(namespace) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", namespace]).arg(&self.binary);
                command
            }
            None => Command::new(&self.binary),
        };
        command
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("duplicating the log handle")?)
            .stderr(log)
            .env("RUST_BACKTRACE", "1");
        process::kill_with_parent(&mut command);
        if let Some(limit) = self.options.open_files_limit {
            limits::limit_open_files_of_child(&mut command, limit);
        }
        let child = command
            .spawn()
            .with_context(|| format!("spawning {} {}", self.binary.display(), args.join(" ")))?;
        self.child = Some(child);
        Ok(())
    }

    pub(crate) fn wait_until_serving(&mut self) -> Result<()> {
        let started = Instant::now();
        let timeout = self.options.startup_timeout;
        loop {
            let child = self.child.as_mut().expect("spawned above");
            if let Some(status) = child.try_wait()? {
                self.child = None;
                bail!(
                    "laminar broker exited ({status}) before serving on {}; its stderr:\n{}",
                    self.bootstrap(),
                    self.stderr_tail()
                );
            }
            let probed = match self.options.serves_kafka {
                true => probe_api_versions(self.addr()),
                false => TcpStream::connect_timeout(&self.addr(), Duration::from_millis(500))
                    .map(drop)
                    .map_err(anyhow::Error::from),
            };
            let last_problem = match probed {
                Ok(()) => return Ok(()),
                Err(e) => format!("{e:#}"),
            };
            if started.elapsed() >= timeout {
                let _ = self.kill9();
                bail!(
                    "laminar broker did not answer ApiVersions on {} within {timeout:?} (last \
                     attempt: {last_problem}); killed it. Its stderr:\n{}",
                    self.bootstrap(),
                    self.stderr_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.kill9();
    }
}

pub(crate) fn check_runnable(binary: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = fs::metadata(binary).map_err(|e| {
        anyhow::anyhow!(
            "laminar binary not found at {} ({e}): build it with `cargo build` at the workspace \
             root, or set {BINARY_ENV} to its path",
            binary.display()
        )
    })?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        bail!(
            "{} is not an executable file (set {BINARY_ENV} to the laminar binary)",
            binary.display()
        );
    }
    Ok(())
}

/// `N` distinct free ports (see [`loopback_ports`]).
fn free_loopback_ports<const N: usize>() -> Result<[u16; N]> {
    let ports = loopback_ports(N)?;
    let mut out = [0; N];
    out.copy_from_slice(&ports);
    Ok(out)
}

/// Where test brokers' ports come from: below the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`, 32768 and up by default), where no `bind(0)` and no
/// client's local port lands. A killed broker's ports then stay free for its restart, instead
/// of going to whatever asks the kernel next. Each test process starts at its own place (by
/// pid) and takes ports in turn; each is checked by binding it.
const TEST_PORTS: std::ops::Range<u32> = 20_000..32_000;

/// `count` distinct loopback ports that were free a moment ago (see [`TEST_PORTS`]).
pub fn loopback_ports(count: usize) -> Result<Vec<u16>> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let span = TEST_PORTS.end - TEST_PORTS.start;
    let origin = std::process::id().wrapping_mul(2_654_435_761) % span;
    let mut ports = Vec::with_capacity(count);
    for _ in 0..span {
        if ports.len() == count {
            break;
        }
        let step = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let port = u16::try_from(TEST_PORTS.start + (origin + step) % span).context("a port fits 16 bits")?;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            ports.push(port);
        }
    }
    anyhow::ensure!(ports.len() == count, "no {count} free ports in {TEST_PORTS:?}");
    Ok(ports)
}

/// One ApiVersions v0 round trip: request header v1 (api_key 18, version 0, correlation id,
/// client id), empty body; the response must echo the correlation id and carry error_code 0.
pub(crate) fn probe_api_versions(addr: SocketAddr) -> Result<()> {
    const CORRELATION_ID: i32 = 0x4c41_4d4e;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_nodelay(true)?;
    let client_id = b"laminar-test-probe";
    let mut body = Vec::new();
    body.extend_from_slice(&18i16.to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&CORRELATION_ID.to_be_bytes());
    body.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    body.extend_from_slice(client_id);
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame)?;
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .context("reading the ApiVersions response size")?;
    let size = i32::from_be_bytes(size);
    if !(6..=1 << 20).contains(&size) {
        bail!("ApiVersions response size {size} is implausible");
    }
    let mut response = vec![0u8; size as usize];
    stream
        .read_exact(&mut response)
        .context("reading the ApiVersions response")?;
    let correlation_id = i32::from_be_bytes(response[0..4].try_into().expect("4 bytes"));
    let error_code = i16::from_be_bytes(response[4..6].try_into().expect("2 bytes"));
    if correlation_id != CORRELATION_ID || error_code != 0 {
        bail!("ApiVersions answered correlation id {correlation_id:#x}, error code {error_code}");
    }
    Ok(())
}

fn read_tail(path: &Path) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(STDERR_TAIL_BYTES);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Ok(if start > 0 {
        format!("[...]{text}")
    } else if text.is_empty() {
        "<empty>".into()
    } else {
        text
    })
}

/// Copies the files and directories under `from` into `to` (which exists).
pub(crate) fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    for entry in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            fs::create_dir_all(&target)?;
            copy_dir(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target).with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn options(binary: PathBuf) -> BrokerOptions {
        BrokerOptions {
            binary: Some(binary),
            startup_timeout: Duration::from_secs(2),
            ..Default::default()
        }
    }

    #[test]
    fn missing_binary_is_named_with_the_fix() {
        let err = Broker::start(options("/nonexistent/laminar".into()))
            .err()
            .expect("must fail");
        let text = format!("{err:#}");
        assert!(text.contains("/nonexistent/laminar"), "{text}");
        assert!(
            text.contains("cargo build") && text.contains(BINARY_ENV),
            "{text}"
        );
    }

    #[test]
    fn early_exit_quotes_stderr_and_status() {
        let dir = tempfile::tempdir().unwrap();
        let bin = script(dir.path(), "laminar", "echo \"bad config: $*\" >&2; exit 3");
        let err = Broker::start(options(bin)).err().expect("must fail");
        let text = format!("{err:#}");
        assert!(text.contains("exit status: 3"), "{text}");
        // The stderr quote proves the harness passed the agreed command line.
        assert!(
            text.contains("bad config: broker --override listeners=PLAINTEXT://127.0.0.1:"),
            "{text}"
        );
        assert!(text.contains("--override laminar.cores=2"), "{text}");
    }

    #[test]
    fn silent_process_times_out_and_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let bin = script(dir.path(), "laminar", "echo starting >&2; exec sleep 60");
        let started = Instant::now();
        let err = Broker::start(options(bin)).err().expect("must fail");
        let text = format!("{err:#}");
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(
            text.contains("did not answer ApiVersions") && text.contains("starting"),
            "{text}"
        );
    }

    #[test]
    fn data_dir_and_bootstrap_follow_the_port() {
        // A listener that answers ApiVersions v0 the way a broker would, to exercise the
        // readiness probe and restart bookkeeping without a real broker.
        let dir = tempfile::tempdir().unwrap();
        let responder = dir.path().join("responder.py");
        fs::write(&responder, RESPONDER_PY).unwrap();
        let bin = script(
            dir.path(),
            "laminar",
            &format!("exec python3 {} \"$@\"", responder.display()),
        );
        let mut broker = Broker::start(options(bin)).expect("fake broker starts");
        assert!(broker.bootstrap().starts_with("127.0.0.1:"));
        assert!(broker.data_dir().is_dir());
        fs::write(broker.data_dir().join("marker"), b"kept").unwrap();
        broker.kill9().unwrap();
        assert!(!broker.is_running());
        broker.restart().unwrap();
        assert!(broker.is_running());
        assert_eq!(fs::read(broker.data_dir().join("marker")).unwrap(), b"kept");
        let status = broker.terminate().unwrap();
        assert!(status.success(), "{status}");
    }

    /// Answers every frame with correlation id + error_code 0, on the port from `listeners=`.
    const RESPONDER_PY: &str = r#"
import os, signal, socket, struct, sys, threading
port = int([a for a in sys.argv if a.startswith("listeners=")][0].rsplit(":", 1)[1])
# os._exit, not sys.exit: SystemExit, raised wherever the main thread happens to be, ends in
# the interpreter's shutdown, which exited with status 1 once under load in CI.
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port)); srv.listen()
def serve(conn):
    while True:
        head = conn.recv(4)
        if len(head) < 4: return
        body = b""
        size = struct.unpack(">i", head)[0]
        while len(body) < size: body += conn.recv(size - len(body))
        conn.sendall(struct.pack(">iih", 6, struct.unpack(">i", body[4:8])[0], 0))
while True:
    c, _ = srv.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;
}
