//! A broker started the README's way, with a relative `log.dirs` (`./data`), shuts down cleanly:
//! every partition's state file says clean, so the next start skips recovery.

use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use laminar_tests::default_binary;
use laminar_tests::wire::{self, WireConnection};

#[test]
fn relative_log_dir_is_left_clean() -> Result<()> {
    let work = tempfile::tempdir()?;
    let free = |()| -> Result<u16> { Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port()) };
    let (port, http_port) = (free(())?, free(())?);
    let child = Command::new(default_binary())
        .current_dir(work.path())
        .args(["broker", "--override", "log.dirs=data"])
        .args(["--override", &format!("listeners=PLAINTEXT://127.0.0.1:{port}")])
        .args([
            "--override",
            &format!("laminar.http.listen=127.0.0.1:{http_port}"),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .context("start the broker")?;
    let addr = format!("127.0.0.1:{port}").parse()?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(addr).is_err() {
        ensure!(Instant::now() < deadline, "broker did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut conn = WireConnection::connect(addr)?;
    wire::auto_create(&mut conn, "relative")?;
    let answer = wire::produce(&mut conn, "relative", 0, wire::record_batch(&[b"v"], 1_000)?, -1)?;
    assert_eq!(answer.error_code, 0);
    drop(conn);
    // SIGTERM, as systemd and Ctrl-C send it.
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    let output = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "clean exit; stderr: {stderr}");
    assert!(!stderr.contains("did not close cleanly"), "stderr: {stderr}");
    // The log's state file says clean (`engine/src/log/disk_state.rs`: byte 5 is 1).
    let state = work.path().join("data/relative-0/.laminar-log-state");
    let bytes = std::fs::read(&state).with_context(|| format!("no state file at {}", state.display()))?;
    assert_eq!(
        (&bytes[..4], bytes.get(5)),
        (&b"LLST"[..], Some(&1)),
        "not clean: {bytes:?}"
    );
    Ok(())
}
