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
    /// Members, assignments, committed offsets and lag per partition of a group (of either
    /// protocol: a KIP-848 consumer group also shows its epochs, assignor and each member's
    /// target assignment).
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
                .map(|g| {
                    let group_type = if g.group_type.is_empty() {
                        "-".to_string()
                    } else {
                        g.group_type
                    };
                    vec![g.group_id, g.state, g.protocol_type, group_type]
                })
                .collect();
            print_table(&["GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"], &rows);
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

/// Kafka's GROUP_ID_NOT_FOUND: what DescribeGroups answers for a consumer group of KIP-848's
/// protocol (ConsumerGroupDescribe describes those).
const GROUP_ID_NOT_FOUND: i16 = 69;

fn describe(group: &str, brokers: &BrokerArgs) -> anyhow::Result<()> {
    let mut bootstrap = brokers.connect()?;
    let mut connection = coordinator(&mut bootstrap, brokers, group)?;
    let description = match connection.describe_group(group) {
        Err(e) if e.kafka_error().is_some_and(|k| k.code == GROUP_ID_NOT_FOUND) => {
            return describe_consumer_group(group, (&mut connection, &brokers.client_config()?));
        }
        described => described.with_context(|| format!("cannot describe group {group}"))?,
    };
    let committed = committed_offsets(&mut connection, group)?;
    if description.state == "Dead" && committed.is_empty() {
        bail!("unknown group {group}");
    }
    print_header(&[
        ("name", group.to_string()),
        ("state", description.state.clone()),
        (
            "protocol",
            format!("{} {}", description.protocol_type, description.protocol),
        ),
        ("members", description.members.len().to_string()),
    ]);
    let owners: Vec<Owner> = description
        .members
        .iter()
        .map(|m| (owner_label(&m.member_id, &m.client_host), m.assignment.as_slice()))
        .collect();
    print_offsets((&mut connection, &brokers.client_config()?), &committed, &owners)
}

/// `group describe` of a consumer group of KIP-848's protocol: its epochs and assignor, each
/// member's current and target assignment, then its committed offsets and lag.
fn describe_consumer_group(
    group: &str,
    (connection, config): (&mut Connection, &laminar_client::ClientConfig),
) -> anyhow::Result<()> {
    let description = connection
        .describe_consumer_group(group)
        .with_context(|| format!("cannot describe consumer group {group}"))?;
    let committed = committed_offsets(connection, group)?;
    print_header(&[
        ("name", group.to_string()),
        ("state", description.state.clone()),
        (
            "protocol",
            format!("consumer (KIP-848), assignor {}", description.assignor_name),
        ),
        (
            "epochs",
            format!(
                "group {}, assignment {}",
                description.group_epoch, description.assignment_epoch
            ),
        ),
        ("members", description.members.len().to_string()),
    ]);
    let or_dash = |text: &str| {
        if text.is_empty() {
            "-".to_string()
        } else {
            text.to_string()
        }
    };
    let rows: Vec<Vec<String>> = description
        .members
        .iter()
        .map(|m| {
            vec![
                m.member_id.clone(),
                or_dash(m.instance_id.as_deref().unwrap_or_default()),
                m.member_epoch.to_string(),
                or_dash(&m.client_id),
                or_dash(&m.client_host),
                or_dash(&partitions_text(&m.assignment)),
                or_dash(&partitions_text(&m.target_assignment)),
            ]
        })
        .collect();
    println!("MEMBERS");
    print_table(
        &[
            "MEMBER", "INSTANCE", "EPOCH", "CLIENT", "HOST", "ASSIGNED", "TARGET",
        ],
        &rows,
    );
    println!();
    let owners: Vec<Owner> = description
        .members
        .iter()
        .map(|m| (owner_label(&m.member_id, &m.client_host), m.assignment.as_slice()))
        .collect();
    print_offsets((connection, config), &committed, &owners)
}

/// The GROUP block of `group describe`: `name:     billing`, one field a line, then a blank line.
fn print_header(fields: &[(&str, String)]) {
    println!("GROUP");
    for (name, value) in fields {
        println!("{:<10}{value}", format!("{name}:"));
    }
    println!();
}

/// Partitions by topic as `orders:0,1 payments:3`.
fn partitions_text(assignment: &[(String, Vec<i32>)]) -> String {
    let topics: Vec<String> = assignment
        .iter()
        .map(|(topic, partitions)| {
            let list: Vec<String> = partitions.iter().map(i32::to_string).collect();
            format!("{topic}:{}", list.join(","))
        })
        .collect();
    topics.join(" ")
}

/// A member as the offsets table names it, and the partitions it owns.
type Owner<'a> = (String, &'a [(String, Vec<i32>)]);

/// "member-id host" (the host when known).
fn owner_label(member_id: &str, client_host: &str) -> String {
    format!("{member_id} {client_host}").trim_end().to_string()
}

fn committed_offsets(connection: &mut Connection, group: &str) -> anyhow::Result<Vec<CommittedOffset>> {
    connection
        .offset_fetch(group, None)
        .with_context(|| format!("cannot read the offsets of {group}"))
}

/// The table of `committed` offsets with each partition's log end offset, lag and owner.
fn print_offsets(
    (connection, config): (&mut Connection, &laminar_client::ClientConfig),
    committed: &[CommittedOffset],
    owners: &[Owner],
) -> anyhow::Result<()> {
    let owner = |topic: &str, partition: i32| {
        owners
            .iter()
            .find(|(_, assignment)| {
                assignment
                    .iter()
                    .any(|(t, ps)| t == topic && ps.contains(&partition))
            })
            .map_or_else(|| "-".to_string(), |(label, _)| label.clone())
    };
    let mut rows = Vec::new();
    let mut topics: Vec<&str> = committed.iter().map(|c| c.topic.as_str()).collect();
    topics.dedup();
    for topic in topics {
        let mine: Vec<&CommittedOffset> = committed.iter().filter(|c| c.topic == topic).collect();
        // Asked of each partition's leader: in a cluster the coordinator leads only some.
        let (metadata, found) = super::topic_metadata(connection, topic)?;
        let ends: std::collections::BTreeMap<i32, i64> =
            super::topic::partition_offsets((&metadata, config), &found, OffsetSpec::Latest)
                .into_iter()
                .collect();
        for c in mine {
            let end = ends.get(&c.partition).copied().unwrap_or(-1);
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
