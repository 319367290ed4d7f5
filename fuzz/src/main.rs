//! `laminar-fuzz inproc|live|controller-port`: runs the fuzzing harness and prints frames per API, crashes,
//! hangs and peak RSS; exits 1 when anything crashed or hung.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use laminar_fuzz::report::{regression_files, Report};
use laminar_fuzz::{inproc, live};

#[derive(Parser)]
#[command(
    name = "laminar-fuzz",
    about = "Fuzz every API the broker advertises, at every version"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Frames straight to the request handlers of a broker inside a worker process.
    Inproc(Common),
    /// Frames over TCP to a running broker.
    Live {
        /// The broker's Kafka address.
        #[arg(long)]
        broker: String,
        /// A fresh connection must get an ApiVersions answer every this many frames.
        #[arg(long, default_value_t = 1000)]
        check_every: u64,
        /// The broker's process id (to report its peak RSS).
        #[arg(long)]
        broker_pid: Option<u32>,
        /// The broker is a node of a cluster: also the APIs only cluster mode serves.
        #[arg(long)]
        cluster: bool,
        #[command(flatten)]
        security: SecurityArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Mutated frames of the controllers' transport to a node's CONTROLLER listener.
    ControllerPort {
        /// The node's controller address (host:port).
        #[arg(long)]
        addr: std::net::SocketAddr,
        #[command(flatten)]
        budget: Budget,
    },
    /// Prints a saved frame (a *.hex file) decoded: its header and request.
    Show { file: PathBuf },
    /// The worker of `inproc` (started by it).
    #[command(hide = true)]
    InprocWorker {
        #[arg(long)]
        board: PathBuf,
        #[arg(long)]
        from: u64,
        #[arg(long)]
        frames: u64,
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        hang_ms: u64,
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        regression: Vec<PathBuf>,
    },
}

/// How many frames, from which seed, and what counts as a hang: every run's.
#[derive(Args)]
struct Budget {
    /// Generated frames (regression frames are replayed first, in addition).
    #[arg(long, default_value_t = 100_000)]
    frames: u64,
    /// The run's seed: frame i is a function of (seed, i).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// No answer within this many ms (plus what the request may wait) is a hang.
    #[arg(long, default_value_t = 5000)]
    hang_ms: u64,
}

#[derive(Args)]
struct Common {
    #[command(flatten)]
    budget: Budget,
    /// Where each crashing or hanging frame is written, as hex.
    #[arg(long, default_value = "fuzz-findings")]
    out: PathBuf,
    /// Directory of regression frames (*.hex) to replay first.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/regressions"))]
    regressions: PathBuf,
}

fn main() -> ExitCode {
    let command = Cli::parse().command;
    if let Command::ControllerPort { addr, budget } = command {
        return controller_port(addr, &budget);
    }
    match run(command) {
        Ok((target, report)) => {
            print!("{}", report.table(target));
            if report.crashes + report.hangs > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("laminar-fuzz: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn controller_port(addr: std::net::SocketAddr, budget: &Budget) -> ExitCode {
    let hang = Duration::from_millis(budget.hang_ms);
    match laminar_fuzz::controller_port::run(addr, budget.frames, budget.seed, hang) {
        Ok(report) => {
            println!(
                "controller port: {} frames in {:.1?}: {} answered, {} closed, {} hangs, lost: {:?}",
                report.frames,
                report.elapsed,
                report.answered,
                report.closed,
                report.hangs.len(),
                report.lost
            );
            for frame in &report.hangs {
                println!("hang: {}", laminar_fuzz::report::hex(frame));
            }
            match report.hangs.is_empty() && report.lost.is_none() {
                true => ExitCode::SUCCESS,
                false => ExitCode::FAILURE,
            }
        }
        Err(error) => {
            eprintln!("laminar-fuzz: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// How `live` reaches a TLS or SASL listener.
#[derive(clap::Args, Debug)]
struct SecurityArgs {
    /// Connect with TLS, trusting the CA certificates of this PEM file (SSL, SASL_SSL).
    #[arg(long)]
    tls_ca: Option<std::path::PathBuf>,
    /// Log in with SASL PLAIN as `user:password` before the frames (SASL listeners).
    #[arg(long)]
    sasl_plain: Option<String>,
    /// Skip creating and filling the seeds' topics (a SASL listener fuzzed before
    /// authentication refuses those requests).
    #[arg(long)]
    no_prepare: bool,
}

impl SecurityArgs {
    fn security(self) -> anyhow::Result<laminar_fuzz::connection::Security> {
        let plain_login = self
            .sasl_plain
            .map(|login| match login.split_once(':') {
                Some((user, password)) => Ok((user.to_string(), password.to_string())),
                None => Err(anyhow::anyhow!("--sasl-plain takes user:password")),
            })
            .transpose()?;
        Ok(laminar_fuzz::connection::Security {
            tls_ca: self.tls_ca,
            plain_login,
        })
    }
}

fn run(command: Command) -> anyhow::Result<(&'static str, Report)> {
    match command {
        Command::Inproc(common) => {
            let options = inproc::Options {
                exe: std::env::current_exe()?,
                frames: common.budget.frames,
                seed: common.budget.seed,
                hang: Duration::from_millis(common.budget.hang_ms),
                out: common.out,
                regressions: regression_files(&common.regressions),
            };
            Ok(("inproc", inproc::run(&options)?))
        }
        Command::Live {
            broker,
            check_every,
            broker_pid,
            cluster,
            security,
            common,
        } => {
            let prepare = !security.no_prepare;
            let options = live::Options {
                broker,
                frames: common.budget.frames,
                seed: common.budget.seed,
                hang: Duration::from_millis(common.budget.hang_ms),
                out: common.out,
                regressions: regression_files(&common.regressions),
                check_every: check_every.max(1),
                broker_pid,
                cluster_mode: cluster,
                security: security.security()?,
                prepare,
            };
            Ok(("live", live::run(&options)?))
        }
        Command::ControllerPort { .. } => unreachable!("main runs it before"),
        Command::Show { file } => {
            let frame = laminar_fuzz::report::read_frame(&file)?;
            println!("{} bytes: {}", frame.len(), laminar_fuzz::report::hex(&frame));
            match laminar_fuzz::waits::decode_frame(&frame) {
                Ok((header, request, trailing)) => {
                    println!("{header:?}\n{request:#?}\n{trailing} bytes after the body")
                }
                Err(e) => println!("does not decode: {e}"),
            }
            std::process::exit(0)
        }
        Command::InprocWorker {
            board,
            from,
            frames,
            seed,
            hang_ms,
            out,
            regression,
        } => {
            inproc::worker(inproc::WorkerArgs {
                board,
                from,
                frames,
                seed,
                hang: Duration::from_millis(hang_ms),
                out,
                regressions: regression,
            })?;
            unreachable!("the worker exits the process when it is done")
        }
    }
}
