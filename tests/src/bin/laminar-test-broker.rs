//! Runs one `laminar broker` through the Rust harness and takes orders on stdin, one per line, so
//! the Python and Node suites share the harness instead of re-implementing it:
//!
//! ```text
//! laminar-test-broker [--cores N] [--override key=value]...
//!   stdout: "ready 127.0.0.1:PORT <data dir>"      once serving
//!   stdin:  kill9 | terminate | restart | stop      each answered on stdout:
//!           "ok" / "ok exit=<code>" / "ready ..." / "error <message on one line>"
//! ```
//! EOF on stdin stops the broker (SIGKILL) and exits, so a crashed test run leaves no broker.

use std::io::{BufRead, Write};

use anyhow::{bail, Context, Result};
use laminar_tests::{Broker, BrokerOptions};

fn parse_args() -> Result<BrokerOptions> {
    let mut options = BrokerOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--cores" => options.cores = args.next().context("--cores needs a value")?.parse()?,
            "--override" => {
                let pair = args.next().context("--override needs key=value")?;
                let (key, value) = pair.split_once('=').context("--override needs key=value")?;
                options = options.with_override(key, value);
            }
            other => bail!("unknown argument {other:?}"),
        }
    }
    Ok(options)
}

fn ready_line(broker: &Broker) -> String {
    format!("ready {} {}", broker.bootstrap(), broker.data_dir().display())
}

fn one_line(err: &anyhow::Error) -> String {
    format!("error {err:#}").replace('\n', " | ")
}

fn main() -> Result<()> {
    let options = parse_args()?;
    let mut out = std::io::stdout().lock();
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
