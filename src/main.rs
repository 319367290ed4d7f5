//! The `laminar` binary: command-line dispatch only.

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "laminar",
    version,
    about = "Kafka-compatible streaming storage engine"
)]
enum Command {}

fn main() {
    let _ = Command::parse();
}
