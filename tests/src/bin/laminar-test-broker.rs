//! Runs one `laminar broker` through the Rust harness and takes orders on stdin, one per line, so
//! the Python and Node suites share the harness instead of re-implementing it:
//!
//! ```text
//! laminar-test-broker [--cores N] [--override key=value]... [--cluster N]
//!   stdout: "ready 127.0.0.1:PORT <data dir>"      once serving
//!   stdin:  kill9 | terminate | restart | stop      each answered on stdout:
//!           "ok" / "ok exit=<code>" / "ready ..." / "error <message on one line>"
//! ```
//! EOF on stdin stops the broker (SIGKILL) and exits, so a crashed test run leaves no broker.
//!
//! With `--cluster N` it runs N nodes in combined mode (`laminar_tests::Cluster`) and says
//! `ready <host:port,host:port,...> <node 1's data dir>` once all serve; it takes `stop` only
//! (EOF kills them all).

use std::io::{BufRead, Write};

use anyhow::{bail, Context, Result};
use laminar_tests::{Broker, BrokerOptions, Cluster};

/// A cluster's session timeout: short, so that tests of failures stay short.
const CLUSTER_SESSION_TIMEOUT_MS: u64 = 6_000;

/// The broker's options, and how many nodes a cluster should have (`None`: one plain broker).
fn parse_args() -> Result<(BrokerOptions, Option<usize>)> {
    let mut options = BrokerOptions::default();
    let mut cluster = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--cluster" => cluster = Some(args.next().context("--cluster needs a count")?.parse()?),
            "--cores" => options.cores = args.next().context("--cores needs a value")?.parse()?,
            "--override" => {
                let pair = args.next().context("--override needs key=value")?;
                let (key, value) = pair.split_once('=').context("--override needs key=value")?;
                options = options.with_override(key, value);
            }
            other => bail!("unknown argument {other:?}"),
        }
    }
    Ok((options, cluster))
}

/// Runs a cluster of `count` nodes until `stop` or EOF on stdin.
fn serve_cluster(options: BrokerOptions, count: usize, out: &mut impl Write) -> Result<()> {
    let cluster = match Cluster::start(count, CLUSTER_SESSION_TIMEOUT_MS, options) {
        Ok(cluster) => cluster,
        Err(err) => {
            writeln!(out, "{}", one_line(&err))?;
            out.flush()?;
            std::process::exit(1);
        }
    };
    let bootstrap: Vec<String> = cluster.nodes.iter().map(Broker::bootstrap).collect();
    let first_dir = cluster.nodes.first().map(|n| n.data_dir()).unwrap_or_default();
    writeln!(out, "ready {} {}", bootstrap.join(","), first_dir.display())?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        match line?.trim() {
            "stop" => break,
            other => writeln!(out, "error unknown command {other:?} (a cluster takes stop)")?,
        }
        out.flush()?;
    }
    drop(cluster); // kills every node
    writeln!(out, "ok")?;
    out.flush()?;
    Ok(())
}

fn ready_line(broker: &Broker) -> String {
    format!("ready {} {}", broker.bootstrap(), broker.data_dir().display())
}

fn one_line(err: &anyhow::Error) -> String {
    format!("error {err:#}").replace('\n', " | ")
}

fn main() -> Result<()> {
    let (options, cluster) = parse_args()?;
    let mut out = std::io::stdout().lock();
    if let Some(count) = cluster {
        return serve_cluster(options, count, &mut out);
    }
    let mut broker = match Broker::start(options) {
        Ok(broker) => broker,
        Err(err) => {
            writeln!(out, "{}", one_line(&err))?;
            out.flush()?;
            std::process::exit(1);
        }
    };
    writeln!(out, "{}", ready_line(&broker))?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let answer = match line.trim() {
            "kill9" => broker.kill9().map(|()| "ok".to_string()),
            "terminate" => broker
                .terminate()
                .map(|status| format!("ok exit={}", status.code().unwrap_or(-1))),
            "restart" => broker.restart().map(|()| ready_line(&broker)),
            "stop" => {
                let answer = if broker.is_running() {
                    broker.terminate().map(|_| ())
                } else {
                    Ok(())
                };
                writeln!(
                    out,
                    "{}",
                    answer.map(|()| "ok".to_string()).unwrap_or_else(|e| one_line(&e))
                )?;
                out.flush()?;
                return Ok(());
            }
            other => Err(anyhow::anyhow!("unknown command {other:?}")),
        };
        writeln!(out, "{}", answer.unwrap_or_else(|e| one_line(&e)))?;
        out.flush()?;
    }
    broker.kill9()
}
