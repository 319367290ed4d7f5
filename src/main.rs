//! The `laminar` binary: command-line dispatch only.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod broker_cmd;

#[derive(Parser)]
#[command(
    name = "laminar",
    version,
    about = "Kafka-compatible streaming storage engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a broker (Kafka protocol on `listeners`, data in `log.dirs`).
    ///
    /// Examples:
    ///   laminar broker
    ///   laminar broker --config config/server.properties --override log.dirs=/var/lib/laminar
    Broker {
        /// A Kafka `server.properties` file; without it, single-node defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// `key=value`, applied over the file (as kafka-server-start's --override).
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    /// Load-test any Kafka-compatible broker, and measure this machine's limits.
    #[command(subcommand)]
    Bench(laminar_bench::BenchCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Broker { config, overrides } => broker_cmd::run(config, overrides),
        Command::Bench(command) => laminar_bench::run(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("laminar: {e:#}");
            ExitCode::FAILURE
        }
    }
}
