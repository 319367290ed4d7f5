//! `laminar cluster info`: brokers, controller, topic and partition counts.

use anyhow::Context;
use clap::Subcommand;

use super::{print_table, BrokerArgs};

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Brokers, controller, topic and partition counts.
    ///
    /// Example:
    ///   laminar cluster info --brokers 127.0.0.1:9092
    Info {
        #[command(flatten)]
        brokers: BrokerArgs,
    },
}

pub fn run(command: ClusterCommand) -> anyhow::Result<()> {
    let ClusterCommand::Info { brokers } = command;
    let mut connection = brokers.connect()?;
    let metadata = connection
        .metadata(None, false)
        .context("cannot read cluster metadata")?;
    let partitions: usize = metadata.topics.iter().map(|t| t.partitions.len()).sum();
    println!("CLUSTER");
    println!("controller: {}", metadata.controller_id);
    println!("topics:     {}", metadata.topics.len());
    println!("partitions: {partitions}");
    println!();
    println!("BROKERS");
    let rows: Vec<Vec<String>> = metadata
        .brokers
        .iter()
        .map(|b| {
            let role = if b.node_id == metadata.controller_id {
                "controller"
            } else {
                ""
            };
            vec![
                b.node_id.to_string(),
                format!("{}:{}", b.host, b.port),
                role.to_string(),
            ]
        })
        .collect();
    print_table(&["ID", "ADDRESS", "ROLE"], &rows);
    Ok(())
}
