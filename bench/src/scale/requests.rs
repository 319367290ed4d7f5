//! Requests that cover everything the broker holds: Metadata for all topics, `GET /metrics`,
//! ListGroups, DescribeConfigs of a topic and of the broker. Each is timed a few times on one
//! connection (opened beforehand) and the median kept; the time includes decoding the answer.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use laminar_client::Connection;

use super::partitions::connect;
use super::step::StepLog;

/// Tries of each request; the median is reported.
const TRIES: usize = 5;

/// DescribeConfigs resource types.
const TOPIC_RESOURCE: i8 = 2;
const BROKER_RESOURCE: i8 = 4;

/// Times every request; records `<request>_ms_median` for each that worked and fails naming
/// those that did not.
pub fn time_requests(
    bootstrap: &str,
    http: SocketAddr,
    topic: Option<&str>,
    log: &StepLog,
) -> anyhow::Result<()> {
    let mut connection = connect(bootstrap, Duration::from_secs(60))?;
    let mut failures = Vec::new();
    let mut broker_id = None;
    let outcome = median_ms(|| {
        let metadata = connection.metadata(None, false)?;
        broker_id = metadata.brokers.first().map(|b| b.node_id);
        let partitions: usize = metadata.topics.iter().map(|t| t.partitions.len()).sum();
        log.put("metadata_all_partitions", partitions as f64);
        Ok(())
    });
    record(log, "metadata_all_ms_median", outcome, &mut failures);
    let outcome = median_ms(|| {
        let bytes = get_metrics(http)?;
        log.put("metrics_bytes", bytes as f64);
        Ok(())
    });
    record(log, "metrics_ms_median", outcome, &mut failures);
    let outcome = median_ms(|| connection.list_groups().map(drop).map_err(Into::into));
    record(log, "list_groups_ms_median", outcome, &mut failures);
    if let Some(topic) = topic {
        let outcome = describe(&mut connection, TOPIC_RESOURCE, topic);
        record(log, "describe_configs_topic_ms_median", outcome, &mut failures);
    }
    match broker_id {
        Some(id) => {
            let outcome = describe(&mut connection, BROKER_RESOURCE, &id.to_string());
            record(log, "describe_configs_broker_ms_median", outcome, &mut failures);
        }
        None => failures.push("describe_configs_broker: Metadata named no broker".to_owned()),
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    Ok(())
}

fn describe(connection: &mut Connection, resource_type: i8, name: &str) -> anyhow::Result<f64> {
    median_ms(|| {
        let configs = connection.describe_configs(resource_type, name, None)?;
        if configs.is_empty() {
            bail!("no configs for {name}");
        }
        Ok(())
    })
}

fn record(log: &StepLog, key: &'static str, outcome: anyhow::Result<f64>, failures: &mut Vec<String>) {
    match outcome {
        Ok(ms) => log.put(key, ms),
        Err(error) => failures.push(format!("{key}: {error:#}")),
    }
}

/// Median wall time of [`TRIES`] calls of `request`, in ms; the first error ends it.
fn median_ms(mut request: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    let mut times: Vec<f64> = Vec::with_capacity(TRIES);
    for _ in 0..TRIES {
        let started = Instant::now();
        request()?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[TRIES / 2])
}

/// The most of a `/metrics` answer read: far above what 100 000 partitions' families take,
/// and a bound on what a broker's answer can make this process hold.
const METRICS_MAX_BYTES: u64 = 256 << 20;

/// `GET /metrics` over a connection of its own, read to the end; returns the body's bytes.
fn get_metrics(http: SocketAddr) -> anyhow::Result<usize> {
    get_metrics_text(http).map(|body| body.len())
}

/// `GET /metrics` over a connection of its own, read to the end (at most
/// [`METRICS_MAX_BYTES`]); returns the body.
pub fn get_metrics_text(http: SocketAddr) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect_timeout(&http, Duration::from_secs(5))
        .with_context(|| format!("connecting to {http}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {http}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    (&mut stream)
        .take(METRICS_MAX_BYTES + 1)
        .read_to_end(&mut answer)
        .context("reading /metrics")?;
    if answer.len() as u64 > METRICS_MAX_BYTES {
        bail!("/metrics answered more than {} MiB", METRICS_MAX_BYTES >> 20);
    }
    let header_end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("an HTTP answer without a blank line")?;
    let status_line = String::from_utf8_lossy(&answer[..header_end]);
    let status_line = status_line.lines().next().unwrap_or_default();
    if !status_line.contains(" 200 ") {
        bail!("GET /metrics answered {status_line:?}");
    }
    String::from_utf8(answer[header_end + 4..].to_vec()).context("/metrics is not UTF-8")
}
