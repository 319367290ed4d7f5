//! One broker per log dir: a second broker started on a data dir in use exits at once with a
//! message naming the dir, touches no partition, and the first keeps serving. The lock goes
//! with the process (a broker killed with SIGKILL leaves none behind).

use std::collections::BTreeMap;
use std::fs;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Result};
use bytes::Bytes;
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::{default_binary, Broker, BrokerOptions};

const TOPIC: &str = "locked";

/// Every file under `dir` with its length and modification time.
fn files(dir: &Path) -> Result<BTreeMap<String, (u64, SystemTime)>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in fs::read_dir(&next)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                pending.push(entry.path());
            }
            let name = entry.path().strip_prefix(dir)?.display().to_string();
            out.insert(name, (meta.len(), meta.modified()?));
        }
    }
    Ok(out)
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Runs a second broker on `data_dir` (own ports) until it exits; its status and stderr.
fn second_broker(data_dir: &Path) -> Result<(std::process::ExitStatus, String)> {
    let stderr = tempfile::NamedTempFile::new()?;
    let mut child = Command::new(default_binary())
        .arg("broker")
        .args([
            "--override",
            &format!("listeners=PLAINTEXT://127.0.0.1:{}", free_port()?),
        ])
        .args([
            "--override",
            &format!("laminar.http.listen=127.0.0.1:{}", free_port()?),
        ])
        .args(["--override", &format!("log.dirs={}", data_dir.display())])
        .args(["--override", "laminar.cores=1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr.reopen()?)
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "the second broker did not exit: {}",
                fs::read_to_string(stderr.path())?
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok((status, fs::read_to_string(stderr.path())?))
}

fn produce(conn: &mut WireConnection, value: &[u8]) -> Result<i64> {
    let answer = wire::produce(
        conn,
        TOPIC,
        0,
        wire::record_batch(&[value], 1_700_000_000_000)?,
        -1,
    )?;
    assert_eq!(answer.error_code, 0, "{answer:?}");
    Ok(answer.base_offset)
}

#[test]
fn a_second_broker_on_a_log_dir_in_use_exits_and_the_first_keeps_serving() -> Result<()> {
    let mut first = Broker::start(BrokerOptions::default())?;
    let mut conn = WireConnection::connect(first.addr())?;
    wire::create_topic(&mut conn, TOPIC, 2)?;
    assert_eq!(produce(&mut conn, b"before")?, 0);
    let before = files(&first.data_dir())?;

    let (status, stderr) = second_broker(&first.data_dir())?;
    assert!(!status.success(), "the second broker must fail: {stderr}");
    let data_dir = fs::canonicalize(first.data_dir())?;
    assert!(
        stderr.contains("in use by another broker process")
            && stderr.contains(&data_dir.display().to_string()),
        "{stderr}"
    );
    assert_eq!(
        files(&first.data_dir())?,
        before,
        "the second broker touched nothing"
    );

    assert_eq!(produce(&mut conn, b"after")?, 1);
    let records = wire::fetch_records(&mut conn, TOPIC, 0, 0, 2)?;
    let values: Vec<Option<Bytes>> = records.into_iter().map(|r| r.value).collect();
    assert_eq!(values, [Some(Bytes::from("before")), Some(Bytes::from("after"))]);

    // The lock dies with its process: no stale lock after a crash.
    first.kill9()?;
    first.restart()?;
    let mut conn = WireConnection::connect(first.addr())?;
    assert_eq!(produce(&mut conn, b"restarted")?, 2);
    Ok(())
}
