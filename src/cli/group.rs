//! `laminar group list | describe | reset-offsets | delete`. Group requests go to the group's
//! coordinator, found with FindCoordinator.

use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use laminar_client::{CommittedOffset, Connection, OffsetSpec};

use super::progress::Progress;
use super::{print_table, topic_metadata, BrokerArgs};

#[derive(Subcommand, Debug)]
pub enum GroupCommand {
    /// List consumer groups.
    ///
    /// Example:
    ///   laminar group list
    List {
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Members, assignments, committed offsets and lag per partition of a group.
    ///
    /// Example:
    ///   laminar group describe billing
    Describe {
        group: String,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Move a group's committed offsets (the group must have no members). Dry run unless
    /// --execute.
    ///
    /// Examples:
    ///   laminar group reset-offsets billing --topic orders --to-earliest
    ///   laminar group reset-offsets billing --topic orders --to-offset 100 --execute
    ///   laminar group reset-offsets billing --topic orders --to-timestamp 1700000000000 --execute
    ResetOffsets(ResetArgs),
    /// Delete consumer groups (they must have no members).
    ///
    /// Example:
    ///   laminar group delete billing
    Delete {
        #[arg(required = true)]
        groups: Vec<String>,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
}

#[derive(Args, Debug)]
pub struct ResetArgs {
    group: String,
    /// The topic whose offsets move.
    #[arg(long)]
    topic: String,
    /// Only these partitions (repeatable; default: all).
    #[arg(long = "partition", short = 'p')]
    partitions: Vec<i32>,
    /// To the log start offset.
    #[arg(long, group = "target")]
    to_earliest: bool,
    /// To the log end offset.
    #[arg(long, group = "target")]
    to_latest: bool,
    /// To this offset (clamped to the log's range).
    #[arg(long, group = "target")]
    to_offset: Option<i64>,
    /// To the first offset with a timestamp at or after this (ms since the epoch).
    #[arg(long, group = "target")]
    to_timestamp: Option<i64>,
    /// Commit the new offsets (without it, only print them).
    #[arg(long)]
    execute: bool,
    #[command(flatten)]
    brokers: BrokerArgs,
}

pub fn run(command: GroupCommand) -> anyhow::Result<()> {
    match command {
        GroupCommand::List { brokers } => {
            let groups = brokers.connect()?.list_groups().context("cannot list groups")?;
            let rows: Vec<Vec<String>> = groups
                .into_iter()
                .map(|g| vec![g.group_id, g.state, g.protocol_type])
                .collect();
            print_table(&["GROUP", "STATE", "PROTOCOL-TYPE"], &rows);
            Ok(())
        }
        GroupCommand::Describe { group, brokers } => describe(&group, &brokers),
        GroupCommand::ResetOffsets(args) => reset_offsets(&args),
        GroupCommand::Delete { groups, brokers } => {
            let mut connection = brokers.connect()?;
            for group in &groups {
                let mut coordinator = coordinator(&mut connection, &brokers, group)?;
                for (name, outcome) in coordinator.delete_groups(&[group.as_str()])? {
                    outcome.map_err(|e| anyhow!("cannot delete group {name}: {e}"))?;
                    println!("deleted group {name}");
                }
            }
            Ok(())
        }
    }
}

/// How long FindCoordinator is asked again while the coordinator is not ready: a cluster's
/// first group request creates `__consumer_offsets`, and a leader change moves coordinators.
const COORDINATOR_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// `ask` (FindCoordinator, or a request to a coordinator), asked again while the answer is
/// COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS (retriable, as Kafka's clients
/// take them).
pub(super) fn while_coordinator_not_ready<T>(
    mut ask: impl FnMut() -> Result<T, laminar_client::ClientError>,
) -> Result<T, laminar_client::ClientError> {
    const NOT_READY: [i16; 2] = [14, 15];
    let deadline = std::time::Instant::now() + COORDINATOR_WAIT;
    loop {
        match ask() {
            Err(e)
                if e.kafka_error().is_some_and(|k| NOT_READY.contains(&k.code))
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            answer => return answer,
        }
    }
}

/// A connection to `group`'s coordinator (the bootstrap connection when it is the same broker).
pub(super) fn coordinator(
    bootstrap: &mut Connection,
    brokers: &BrokerArgs,
    group: &str,
) -> anyhow::Result<Connection> {
    if group.is_empty() {
        bail!("the group name must not be empty");
    }
    let found = while_coordinator_not_ready(|| bootstrap.find_coordinator(group))
        .with_context(|| format!("cannot find the coordinator of group {group}"))?;
    let address = format!("{}:{}", found.host, found.port);
    BrokerArgs {
        brokers: address.clone(),
        command_config: brokers.command_config.clone(),
    }
    .connect()
    .or_else(|_| brokers.connect())
    .with_context(|| format!("cannot reach the coordinator {address} of group {group}"))
}

fn describe(group: &str, brokers: &BrokerArgs) -> anyhow::Result<()> {
    let mut bootstrap = brokers.connect()?;
    let mut connection = coordinator(&mut bootstrap, brokers, group)?;
    let description = connection
        .describe_group(group)
        .with_context(|| format!("cannot describe group {group}"))?;
    let committed = connection
        .offset_fetch(group, None)
        .with_context(|| format!("cannot read the offsets of {group}"))?;
    if description.state == "Dead" && committed.is_empty() {
        bail!("unknown group {group}");
    }
    println!("GROUP");
    println!("name:     {group}");
    println!("state:    {}", description.state);
    println!("protocol: {} {}", description.protocol_type, description.protocol);
    println!("members:  {}", description.members.len());
    println!();
    let owner = |topic: &str, partition: i32| {
        description
            .members
            .iter()
            .find(|m| {
                m.assignment
                    .iter()
                    .any(|(t, ps)| t == topic && ps.contains(&partition))
            })
            .map_or_else(
                || "-".to_string(),
                |m| {
                    format!("{} {}", m.member_id, m.client_host)
                        .trim_end()
                        .to_string()
                },
            )
    };
    let mut rows = Vec::new();
    let mut topics: Vec<&str> = committed.iter().map(|c| c.topic.as_str()).collect();
    topics.dedup();
    for topic in topics {
        let mine: Vec<&CommittedOffset> = committed.iter().filter(|c| c.topic == topic).collect();
        let asks: Vec<(i32, OffsetSpec)> = mine.iter().map(|c| (c.partition, OffsetSpec::Latest)).collect();
        let ends = connection.list_offsets(topic, &asks)?;
        for (c, (_, end)) in mine.iter().zip(ends) {
            let (current, lag) = if c.offset < 0 {
                ("-".to_string(), "-".to_string())
            } else {
                (c.offset.to_string(), (end - c.offset).max(0).to_string())
            };
            rows.push(vec![
                topic.to_string(),
                c.partition.to_string(),
                current,
                end.to_string(),
                lag,
                owner(topic, c.partition),
            ]);
        }
    }
    print_table(
        &[
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "MEMBER",
        ],
        &rows,
    );
    Ok(())
}

/// Partitions one OffsetCommit of a reset carries, at most (a progress step).
const RESET_OFFSETS_PER_REQUEST: usize = 256;

fn reset_offsets(args: &ResetArgs) -> anyhow::Result<()> {
    let mut bootstrap = args.brokers.connect()?;
    let (_, topic) = topic_metadata(&mut bootstrap, &args.topic)?;
    let partitions: Vec<i32> = if args.partitions.is_empty() {
        topic.partitions.iter().map(|p| p.partition).collect()
    } else {
        args.partitions.clone()
    };
    let spec_for = |spec: OffsetSpec| partitions.iter().map(|p| (*p, spec)).collect::<Vec<_>>();
    let starts = bootstrap.list_offsets(&args.topic, &spec_for(OffsetSpec::Earliest))?;
    let ends = bootstrap.list_offsets(&args.topic, &spec_for(OffsetSpec::Latest))?;
    let targets: Vec<i64> = if args.to_earliest {
        starts.iter().map(|(_, o)| *o).collect()
    } else if args.to_latest {
        ends.iter().map(|(_, o)| *o).collect()
    } else if let Some(offset) = args.to_offset {
        starts
            .iter()
            .zip(&ends)
            .map(|((_, s), (_, e))| offset.clamp(*s, *e))
            .collect()
    } else if let Some(ms) = args.to_timestamp {
        let found = bootstrap.list_offsets(&args.topic, &spec_for(OffsetSpec::Timestamp(ms)))?;
        found
            .iter()
            .zip(&ends)
            .map(|((_, o), (_, e))| if *o < 0 { *e } else { *o })
            .collect()
    } else {
        bail!("say where to: --to-earliest, --to-latest, --to-offset N or --to-timestamp MS");
    };
    let mut connection = coordinator(&mut bootstrap, &args.brokers, &args.group)?;
    let current = connection.offset_fetch(&args.group, Some(&[(args.topic.clone(), partitions.clone())]))?;
    let rows: Vec<Vec<String>> = partitions
        .iter()
        .zip(&targets)
        .map(|(p, target)| {
            let now = current
                .iter()
                .find(|c| c.partition == *p && c.offset >= 0)
                .map_or("-".to_string(), |c| c.offset.to_string());
            vec![args.topic.clone(), p.to_string(), now, target.to_string()]
        })
        .collect();
    print_table(&["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"], &rows);
    if !args.execute {
        println!("dry run: nothing committed (add --execute to commit)");
        return Ok(());
    }
    let offsets: Vec<CommittedOffset> = partitions
        .iter()
        .zip(&targets)
        .map(|(p, o)| CommittedOffset {
            topic: args.topic.clone(),
            partition: *p,
            offset: *o,
        })
        .collect();
    commit_in_steps(&mut connection, &args.group, &offsets)?;
    println!("committed new offsets for group {}", args.group);
    Ok(())
}

/// Commits `offsets` for `group` a step at a time, so that a terminal sees a reset of many
/// partitions advance.
fn commit_in_steps(
    connection: &mut Connection,
    group: &str,
    offsets: &[CommittedOffset],
) -> anyhow::Result<()> {
    let mut progress = Progress::new("committing offsets", offsets.len());
    for chunk in offsets.chunks(RESET_OFFSETS_PER_REQUEST) {
        connection.offset_commit(group, -1, "", chunk).with_context(|| {
            format!("cannot reset the offsets of group {group} (it must have no members)")
        })?;
        progress.advance(chunk.len());
    }
    Ok(())
}
