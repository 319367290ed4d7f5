//! `laminar cluster quorum describe | add-controller | remove-controller`: the metadata quorum
//! through any broker (DescribeQuorum, AddRaftVoter, RemoveRaftVoter; Kafka's
//! `kafka-metadata-quorum`). A controller is added in two steps, as KIP-853 has it: start the
//! node outside `controller.quorum.voters` (it follows the quorum as an observer and catches
//! up), then `add-controller` makes it a voter.

use anyhow::Context;
use clap::Subcommand;
use laminar_client::QuorumMember;

use super::{print_table, BrokerArgs};

#[derive(Subcommand, Debug)]
pub enum QuorumAction {
    /// The quorum's leader, epoch and high watermark, then every voter and observer with its
    /// log end and lag behind the leader.
    ///
    /// Example:
    ///   laminar cluster quorum describe --brokers 127.0.0.1:9092
    Describe {
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Makes an observer a voter. Start the node first with its id outside
    /// controller.quorum.voters; it must have caught up with the log.
    ///
    /// Example:
    ///   laminar cluster quorum add-controller 4 --brokers 127.0.0.1:9092
    AddController {
        /// The node's `node.id`.
        id: i32,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Makes a voter an observer again (it keeps following the log while it runs). The last
    /// voter stays.
    ///
    /// Example:
    ///   laminar cluster quorum remove-controller 3 --brokers 127.0.0.1:9092
    RemoveController {
        /// The node's `node.id`.
        id: i32,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
}

pub fn run(action: QuorumAction) -> anyhow::Result<()> {
    match action {
        QuorumAction::Describe { brokers } => describe(&brokers),
        QuorumAction::AddController { id, brokers } => {
            brokers
                .connect()?
                .add_raft_voter(id)
                .context("cannot add the controller")?;
            println!("node {id} is a voter of the quorum");
            Ok(())
        }
        QuorumAction::RemoveController { id, brokers } => {
            brokers
                .connect()?
                .remove_raft_voter(id)
                .context("cannot remove the controller")?;
            println!("node {id} is no longer a voter of the quorum");
            Ok(())
        }
    }
}

fn describe(brokers: &BrokerArgs) -> anyhow::Result<()> {
    let quorum = brokers
        .connect()?
        .describe_quorum()
        .context("cannot describe the quorum")?;
    println!("leader:         {}", quorum.leader_id);
    println!("leader epoch:   {}", quorum.leader_epoch);
    println!("high watermark: {}", quorum.high_watermark);
    println!();
    let leader_end = quorum
        .voters
        .iter()
        .find(|m| m.node_id == quorum.leader_id)
        .and_then(|m| m.log_end_offset);
    let row = |role: &str, member: &QuorumMember| {
        let end = member.log_end_offset;
        let lag = leader_end.zip(end).map(|(leader, own)| (leader - own).max(0));
        let text = |value: Option<i64>| value.map_or_else(|| "-".to_string(), |v| v.to_string());
        vec![member.node_id.to_string(), role.to_string(), text(end), text(lag)]
    };
    let rows: Vec<Vec<String>> = (quorum.voters.iter().map(|m| row("voter", m)))
        .chain(quorum.observers.iter().map(|m| row("observer", m)))
        .collect();
    print_table(&["ID", "ROLE", "LOG_END_OFFSET", "LAG"], &rows);
    Ok(())
}
