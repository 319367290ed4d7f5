//! Runs one `laminar broker` through the Rust harness and takes orders on stdin, one per line, so
//! the Python and Node suites share the harness instead of re-implementing it:
//!
//! ```text
//! laminar-test-broker [--cores N] [--override key=value]... [--listener NAME]...
//!                     [--cluster N [--session-timeout-ms MS]]
//!   stdout: "ready 127.0.0.1:PORT <data dir>"      once serving
//!   stdin:  kill9 | terminate | restart | stop      each answered on stdout:
//!           "ok" / "ok exit=<code>" / "ready ..." / "error <message on one line>"
//!           listeners                             "ok NAME=host:port ..."
//! ```
//! `--listener NAME` adds a listener besides the PLAINTEXT one `ready` names (one broker only),
//! on a port of its own; `listeners` says where each is.
//! EOF on stdin stops the broker (SIGKILL) and exits, so a crashed test run leaves no broker.
//!
//! With `--cluster N` it runs N nodes in combined mode (`laminar_tests::Cluster`, node ids 1..=N,
//! every `--override` on every node) and says `ready <host:port,host:port,...> <node 1's data
//! dir>` once all serve. `--session-timeout-ms MS` sets `broker.session.timeout.ms` (default
//! 6000): how long a dead node keeps its leaderships. It then takes, one per line:
//!
//! ```text
//!   kill9 <node>        SIGKILL and reap                      "ok"
//!   terminate <node>    SIGTERM, wait for the exit             "ok exit=<code>"
//!   restart <node>      same ports, same data dir; waits until it serves (a node still
//!                       running is first stopped with SIGTERM) "ok <host:port>"
//!   pause <node>        SIGSTOP (sockets stay open, nothing answers)   "ok"
//!   resume <node>       SIGCONT                                "ok"
//!   dirs                every node's data dir                  "ok 1=<dir> 2=<dir> ..."
//!   nodes               every node's state and address         "ok 1=running@host:port ..."
//!                       (running | paused | stopped)
//!   pid <node>          the running node's process id          "ok <pid>"
//!   stop                kill every node, answer "ok", exit
//! ```
//! A failed command answers `error <message on one line>` and changes nothing else.

#![forbid(unsafe_code)]

use std::io::{BufRead, Write};

use anyhow::{bail, Context, Result};
use laminar_tests::{Broker, BrokerOptions, Cluster};

/// A cluster's default session timeout: short, so that tests of failures stay short.
const CLUSTER_SESSION_TIMEOUT_MS: u64 = 6_000;

/// What the command line asks for.
struct Args {
    options: BrokerOptions,
    /// How many nodes a cluster should have (`None`: one plain broker).
    cluster: Option<usize>,
    session_timeout_ms: u64,
}

fn parse_args() -> Result<Args> {
    let mut parsed = Args {
        options: BrokerOptions::default(),
        cluster: None,
        session_timeout_ms: CLUSTER_SESSION_TIMEOUT_MS,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--cluster" => parsed.cluster = Some(value()?.parse()?),
            "--cores" => parsed.options.cores = value()?.parse()?,
            "--listener" => parsed.options.extra_listeners.push(value()?),
            "--session-timeout-ms" => parsed.session_timeout_ms = value()?.parse()?,
            "--override" => {
                let pair = value()?;
                let (key, value) = pair.split_once('=').context("--override needs key=value")?;
                parsed.options = parsed.options.with_override(key, value);
            }
            other => bail!("unknown argument {other:?}"),
        }
    }
    Ok(parsed)
}

/// Runs a cluster of `count` nodes until `stop` or EOF on stdin.
fn serve_cluster(args: Args, count: usize, out: &mut impl Write) -> Result<()> {
    let mut cluster = match Cluster::start(count, args.session_timeout_ms, args.options) {
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
        let line = line?;
        if line.trim() == "stop" {
            break;
        }
        let answer = cluster_command(&mut cluster, line.trim());
        writeln!(out, "{}", answer.unwrap_or_else(|e| one_line(&e)))?;
        out.flush()?;
    }
    drop(cluster); // kills every node
    writeln!(out, "ok")?;
    out.flush()?;
    Ok(())
}

/// One cluster command (see the module comment) and its `ok ...` answer.
fn cluster_command(cluster: &mut Cluster, line: &str) -> Result<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let count = cluster.nodes.len();
    let node_arg = || -> Result<i32> {
        let text = words.get(1).context("which node? (a node id from 1)")?;
        let id: i32 = text.parse().with_context(|| format!("node id {text:?}"))?;
        if id < 1 || id as usize > count {
            bail!("no node {id}: the cluster has nodes 1..={count}");
        }
        Ok(id)
    };
    match words.first().copied().unwrap_or("") {
        "kill9" => cluster.node(node_arg()?).kill9().map(|()| "ok".into()),
        "terminate" => {
            let status = cluster.node(node_arg()?).terminate()?;
            Ok(format!("ok exit={}", status.code().unwrap_or(-1)))
        }
        "restart" => {
            let id = node_arg()?;
            cluster.restart(id)?;
            Ok(format!("ok {}", cluster.node(id).bootstrap()))
        }
        "pause" => cluster.node(node_arg()?).pause().map(|()| "ok".into()),
        "resume" => cluster.node(node_arg()?).resume().map(|()| "ok".into()),
        "pid" => {
            let node = cluster.node(node_arg()?);
            let pid = node.pid().context("the node is not running")?;
            Ok(format!("ok {pid}"))
        }
        "dirs" => {
            let each = cluster.nodes.iter().enumerate();
            let dirs: Vec<String> = each
                .map(|(i, n)| format!("{}={}", i + 1, n.data_dir().display()))
                .collect();
            Ok(format!("ok {}", dirs.join(" ")))
        }
        "nodes" => {
            let each = cluster.nodes.iter_mut().enumerate();
            let nodes: Vec<String> = each
                .map(|(i, n)| {
                    let state = match (n.is_running(), n.is_paused()) {
                        (true, true) => "paused",
                        (true, false) => "running",
                        (false, _) => "stopped",
                    };
                    format!("{}={state}@{}", i + 1, n.bootstrap())
                })
                .collect();
            Ok(format!("ok {}", nodes.join(" ")))
        }
        other => bail!(
            "unknown command {other:?} (a cluster takes kill9, terminate, restart, pause, resume \
             <node>; pid <node>; dirs; nodes; stop)"
        ),
    }
}

fn ready_line(broker: &Broker) -> String {
    format!("ready {} {}", broker.bootstrap(), broker.data_dir().display())
}

fn listeners_line(broker: &Broker) -> String {
    let names = broker.options().extra_listeners.iter();
    let each: Vec<String> = names
        .filter_map(|name| Some(format!("{name}={}", broker.listener_addr(name)?)))
        .collect();
    format!("ok {}", each.join(" "))
}

fn one_line(err: &anyhow::Error) -> String {
    format!("error {err:#}").replace('\n', " | ")
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let mut out = std::io::stdout().lock();
    if let Some(count) = args.cluster {
        return serve_cluster(args, count, &mut out);
    }
    let mut broker = match Broker::start(args.options) {
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
            "listeners" => Ok(listeners_line(&broker)),
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
