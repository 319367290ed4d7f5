//! The `laminar` binary: command-line dispatch only.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod broker_cmd;
mod cli;

#[derive(Parser)]
#[command(
    name = "laminar",
    version,
    about = "Kafka-compatible streaming storage engine",
    after_help = "Client commands take --brokers HOST:PORT[,...] (default 127.0.0.1:9092, or $LAMINAR_BROKERS)."
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
    /// Create, list, describe, delete and change topics.
    #[command(subcommand)]
    Topic(cli::topic::TopicCommand),
    Produce(cli::produce::ProduceArgs),
    Consume(cli::consume::ConsumeArgs),
    /// List, describe, reset and delete consumer groups.
    #[command(subcommand)]
    Group(cli::group::GroupCommand),
    /// Cluster-wide information.
    #[command(subcommand)]
    Cluster(cli::cluster::ClusterCommand),
    /// Create, delete and list SCRAM users.
    #[command(subcommand)]
    User(cli::user::UserCommand),
    /// ACLs: who may do what to which topics, groups and the cluster.
    #[command(subcommand)]
    Acl(cli::acl::AclCommand),
    /// Prepare a node's log dirs before its first start (cluster id, SCRAM users), or make a
    /// cluster id.
    #[command(subcommand)]
    Storage(cli::storage::StorageCommand),
    /// Client quotas: bytes a second, request time and partition mutations per user and client.
    #[command(subcommand)]
    Quota(cli::quota::QuotaCommand),
    /// Transactions: list and describe them and their producers, abort a hanging one.
    #[command(subcommand)]
    Txn(cli::txn::TxnCommand),
    Tune(cli::host::TuneArgs),
    Iotune(cli::host::IotuneArgs),
    InstallService(cli::host::InstallServiceArgs),
    /// Load-test any Kafka-compatible broker, and measure this machine's limits.
    #[command(subcommand)]
    Bench(laminar_bench::BenchCommand),
}

/// The laminar(8) man page and one per subcommand (laminar-broker(8), ..., which the first one
/// names), as `(file name, roff)`: rendered from this CLI definition, so they never drift from
/// `--help`.
fn man_pages() -> Vec<(String, Vec<u8>)> {
    let render = |command: clap::Command| {
        let mut page = Vec::new();
        clap_mangen::Man::new(command)
            .section("8")
            .render(&mut page)
            .expect("rendering into memory does not fail");
        page
    };
    let top = Cli::command();
    let mut pages = vec![("laminar.8".to_string(), render(top.clone()))];
    for sub in top
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let page = sub
            .clone()
            .display_name(format!("laminar-{}", sub.get_name()))
            .bin_name(format!("laminar {}", sub.get_name()));
        pages.push((format!("laminar-{}.8", sub.get_name()), render(page)));
    }
    pages
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Broker { config, overrides } => broker_cmd::run(config, overrides),
        Command::Topic(command) => cli::topic::run(command),
        Command::Produce(args) => cli::produce::run(args),
        Command::Consume(args) => cli::consume::run(args),
        Command::Group(command) => cli::group::run(command),
        Command::Cluster(command) => cli::cluster::run(command),
        Command::User(command) => cli::user::run(command),
        Command::Acl(command) => cli::acl::run(command),
        Command::Quota(command) => cli::quota::run(command),
        Command::Txn(command) => cli::txn::run(command),
        Command::Storage(command) => cli::storage::run(command),
        Command::Tune(args) => cli::host::tune(args),
        Command::Iotune(args) => cli::host::iotune(args),
        Command::InstallService(args) => cli::host::install_service(args, &man_pages()),
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
