//! `laminar bench` as a stand-alone program, for running the harness from this crate before (or
//! besides) the `laminar` binary: `cargo run --release -p laminar-bench --example laminar-bench -- produce …`.

use clap::Parser;
use laminar_bench::BenchCommand;

#[derive(Parser)]
#[command(name = "laminar-bench", about = "laminar bench, stand-alone")]
struct Cli {
    #[command(subcommand)]
    command: BenchCommand,
}

fn main() -> anyhow::Result<()> {
    laminar_bench::run(Cli::parse().command)
}
