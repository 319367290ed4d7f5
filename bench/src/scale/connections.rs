//! Idle client connections: each connects, sends ApiVersions, reads the answer and then stays
//! open doing nothing, as the connections of an idle application would. The broker's RSS
//! before and after gives the memory per connection; its CPU time over a few seconds while
//! they idle gives what they cost when nothing happens.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::probe::{cpu_seconds, open_fds, rss_bytes};
use super::step::StepLog;

/// Consecutive failed connects after which the step stops opening more: the broker is not
/// accepting, and each further try would wait for its timeout.
const CONSECUTIVE_FAILURES_MAX: u32 = 20;
/// Longest wait for one connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest wait for all the ApiVersions answers together.
const ANSWERS_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause before sampling the broker, so that connection set-up work has settled.
const SETTLE: Duration = Duration::from_millis(500);
/// The broker counts as quiet once it uses at most this share of a core over [`QUIET_WINDOW`]:
/// as long as a written partition's checkpoint delay (10 s idle) plus the maintenance period
/// that runs it (5 s). A 5 s window could end just before the checkpoints of the partitions
/// written last began, and they then fell into the measurement (8 % of a core once, at 1 000
/// partitions).
const QUIET_SHARE_MAX: f64 = 0.02;
const QUIET_WINDOW: Duration = Duration::from_secs(15);
/// The longest the step waits for the broker's background work (checkpoints of partitions
/// written just before) to end before it measures.
const QUIET_WAIT_MAX: Duration = Duration::from_secs(180);

/// An ApiVersions v0 request (header v1, client id "scale", empty body), framed.
fn api_versions_frame(correlation_id: i32) -> Vec<u8> {
    let client_id = b"scale";
    let mut body = Vec::new();
    body.extend_from_slice(&18i16.to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&correlation_id.to_be_bytes());
    body.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    body.extend_from_slice(client_id);
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// Opens up to `count` connections that each send ApiVersions; returns those open.
fn open(addr: SocketAddr, count: usize, log: &StepLog) -> (Vec<TcpStream>, Option<String>) {
    let mut streams = Vec::with_capacity(count);
    let (mut failures, mut consecutive, mut first_error) = (0u64, 0u32, None);
    for index in 0..count {
        if log.cancelled() || consecutive >= CONSECUTIVE_FAILURES_MAX {
            break;
        }
        let opened = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).and_then(|mut stream| {
            stream.set_nodelay(true)?;
            stream.write_all(&api_versions_frame(index as i32))?;
            Ok(stream)
        });
        match opened {
            Ok(stream) => {
                streams.push(stream);
                consecutive = 0;
            }
            Err(error) => {
                failures += 1;
                consecutive += 1;
                first_error.get_or_insert_with(|| format!("connection {index}: {error}"));
            }
        }
    }
    log.put("connect_failures", failures as f64);
    let tried = streams.len() as u64 + failures;
    log.put("connections_not_tried", (count as u64 - tried) as f64);
    if consecutive >= CONSECUTIVE_FAILURES_MAX {
        log.note(format!(
            "stopped opening connections after {CONSECUTIVE_FAILURES_MAX} connects in a row failed"
        ));
    }
    (streams, first_error)
}

/// Reads each connection's ApiVersions answer within [`ANSWERS_TIMEOUT`] in all; returns the
/// connections that were answered.
fn answered(streams: Vec<TcpStream>) -> (Vec<TcpStream>, u64) {
    let deadline = Instant::now() + ANSWERS_TIMEOUT;
    let mut answered = Vec::with_capacity(streams.len());
    let mut unanswered = 0;
    for mut stream in streams {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let read = stream.set_read_timeout(Some(left)).and_then(|()| {
            let mut size = [0u8; 4];
            stream.read_exact(&mut size)?;
            let size = i32::from_be_bytes(size).clamp(0, 1 << 20) as usize;
            let mut body = vec![0u8; size];
            stream.read_exact(&mut body)
        });
        match read {
            Ok(()) => answered.push(stream),
            Err(_) => unanswered += 1,
        }
    }
    (answered, unanswered)
}

/// The idle-connection step: `count` connections (already cut to the open-file budget),
/// then the broker's RSS growth per connection and its CPU time over `idle`.
pub fn idle_connections(
    pid: u32,
    addr: SocketAddr,
    count: usize,
    idle: Duration,
    log: &StepLog,
) -> anyhow::Result<()> {
    wait_until_quiet(pid, log)?;
    let cpu_share_before = cpu_share_over(pid, idle)?;
    log.put("cpu_share_before_connections", cpu_share_before);
    let rss_before = rss_bytes(pid)?;
    let fds_before = open_fds(pid)?;
    log.put("rss_bytes_before", rss_before as f64);
    let started = Instant::now();
    let (streams, connect_error) = open(addr, count, log);
    let (streams, unanswered) = answered(streams);
    log.put("connections_open_seconds", started.elapsed().as_secs_f64());
    log.put("connections_answered", streams.len() as f64);
    log.put("connections_unanswered", unanswered as f64);
    if streams.is_empty() {
        bail!(
            "no connection was answered ({})",
            connect_error.unwrap_or_default()
        );
    }
    std::thread::sleep(SETTLE);
    let rss_after = rss_bytes(pid)?;
    log.put("rss_bytes", rss_after as f64);
    let fds_after = open_fds(pid)?;
    log.put("fds", fds_after as f64);
    log.put("fds_added", fds_after as f64 - fds_before as f64);
    let per_connection = (rss_after as f64 - rss_before as f64) / streams.len() as f64;
    log.put("rss_bytes_per_connection", per_connection);
    let cpu_share = cpu_share_over(pid, idle)?;
    log.put("idle_seconds", idle.as_secs_f64());
    log.put("cpu_share_while_idle", cpu_share);
    log.put(
        "cpu_share_added_by_connections",
        (cpu_share - cpu_share_before).max(0.0),
    );
    let failed = count - streams.len();
    drop(streams);
    if failed > 0 {
        let why = connect_error.unwrap_or_else(|| "no ApiVersions answer".to_owned());
        bail!("{failed} of {count} connections were not served (first: {why})");
    }
    Ok(())
}

/// The share of a core the broker used over `window`.
fn cpu_share_over(pid: u32, window: Duration) -> anyhow::Result<f64> {
    let before = cpu_seconds(pid)?;
    std::thread::sleep(window);
    Ok((cpu_seconds(pid)? - before) / window.as_secs_f64())
}

/// Waits until the broker's background work is done (or [`QUIET_WAIT_MAX`]), so that what is
/// measured next (what connections cost, a consume's throughput) is not mixed with it; logs how
/// long that took.
pub(super) fn wait_until_quiet(pid: u32, log: &StepLog) -> anyhow::Result<()> {
    let started = Instant::now();
    while cpu_share_over(pid, QUIET_WINDOW)? > QUIET_SHARE_MAX {
        if started.elapsed() > QUIET_WAIT_MAX {
            log.note(format!(
                "the broker was still busy after {QUIET_WAIT_MAX:?}; measuring anyway"
            ));
            break;
        }
    }
    log.put("quiet_after_seconds", started.elapsed().as_secs_f64());
    Ok(())
}

/// Connections the harness can hold open under its open-file limit `soft_limit`, keeping
/// `reserve` descriptors for everything else it opens.
pub fn connection_budget(soft_limit: u64, reserve: u64) -> anyhow::Result<u64> {
    let open_now = open_fds(std::process::id()).context("counting this process's descriptors")?;
    Ok(soft_limit.saturating_sub(open_now + reserve))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_is_an_api_versions_v0_request() {
        let frame = api_versions_frame(7);
        assert_eq!(&frame[..4], &(frame.len() as i32 - 4).to_be_bytes());
        assert_eq!(&frame[4..8], &[0, 18, 0, 0], "api key 18, version 0");
        assert_eq!(&frame[8..12], &7i32.to_be_bytes());
        assert_eq!(&frame[14..], b"scale");
    }
}
