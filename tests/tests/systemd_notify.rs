//! The broker as systemd runs it (Type=notify): READY=1 once the Kafka port serves, WATCHDOG=1
//! pings when WATCHDOG_USEC is set, STOPPING=1 on SIGTERM, then a clean exit.

use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use laminar_sys::process;
use laminar_tests::default_binary;

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Reads datagrams until one contains `wanted` (or the deadline passes); returns all seen.
fn wait_for(socket: &UnixDatagram, wanted: &str, within: Duration) -> Result<Vec<String>> {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match socket.recv(&mut buf) {
            Ok(n) => {
                let message = String::from_utf8_lossy(&buf[..n]).into_owned();
                let done = message.lines().any(|l| l == wanted);
                seen.push(message);
                if done {
                    return Ok(seen);
                }
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {
            }
            Err(e) => return Err(e.into()),
        }
    }
    bail!("no {wanted} within {within:?}; got {seen:?}")
}

#[test]
fn notifies_ready_watchdog_and_stopping() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (kafka, http) = (free_port()?, free_port()?);
    let overrides = [
        format!("listeners=PLAINTEXT://127.0.0.1:{kafka}"),
        format!("log.dirs={}", dir.path().join("data").display()),
        "laminar.cores=1".to_string(),
        format!("laminar.http.listen=127.0.0.1:{http}"),
    ];
    run_under_systemd(dir.path(), &overrides, (kafka, "STATUS=serving Kafka on"))
}

/// A controller-only node (no Kafka port) is ready once its controller listener serves, and
/// pings the watchdog as a broker does.
#[test]
fn a_controller_only_node_notifies_ready_watchdog_and_stopping() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let controller = free_port()?;
    let overrides = [
        "process.roles=controller".to_string(),
        "node.id=1".to_string(),
        format!("controller.quorum.voters=1@127.0.0.1:{controller}"),
        format!("listeners=CONTROLLER://127.0.0.1:{controller}"),
        format!("log.dirs={}", dir.path().join("data").display()),
    ];
    run_under_systemd(dir.path(), &overrides, (controller, "STATUS=controller on"))
}

/// Runs `laminar broker` with `overrides` as systemd would (NOTIFY_SOCKET, WATCHDOG_USEC) and
/// checks READY=1 (with `status`, once `port` listens), WATCHDOG=1, STOPPING=1 on SIGTERM and a
/// clean exit.
fn run_under_systemd(dir: &std::path::Path, overrides: &[String], (port, status): (u16, &str)) -> Result<()> {
    let socket_path = dir.join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path)?;
    socket.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut command = Command::new(default_binary());
    command.arg("broker");
    for value in overrides {
        command.args(["--override", value]);
    }
    let mut child = command
        .env("NOTIFY_SOCKET", &socket_path)
        .env("WATCHDOG_USEC", "400000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("spawning the broker")?;
    let outcome = (|| -> Result<()> {
        let ready = wait_for(&socket, "READY=1", Duration::from_secs(20))?;
        // READY=1 comes only after the port serves.
        TcpStream::connect(("127.0.0.1", port)).context("READY=1 before the port listens")?;
        assert!(ready.last().unwrap().contains(status), "{ready:?}");
        wait_for(&socket, "WATCHDOG=1", Duration::from_secs(5))?;
        // Not reaped yet: the pid names the process.
        process::send_sigterm(&child).expect("SIGTERM to the broker");
        wait_for(&socket, "STOPPING=1", Duration::from_secs(10))?;
        Ok(())
    })();
    if outcome.is_err() {
        let _ = child.kill();
    }
    let exit = child.wait()?;
    outcome?;
    assert!(exit.success(), "exit status {exit}");
    Ok(())
}
