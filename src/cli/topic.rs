//! `laminar topic create | list | describe | delete | alter-config | add-partitions | move |
//! reassignments`.

use anyhow::{anyhow, bail, Context};
use clap::Subcommand;
use laminar_client::{ConfigChange, NewTopic, OffsetSpec};

use super::progress::Progress;
use super::reassign;
use super::{
    check_topic_name, parse_key_value, print_table, topic_metadata, BrokerArgs, TopicMetadata,
    ADMIN_TIMEOUT_MS,
};

#[derive(Subcommand, Debug)]
pub enum TopicCommand {
    /// Create a topic.
    ///
    /// Examples:
    ///   laminar topic create orders -p 12
    ///   laminar topic create audit -p 3 -c retention.ms=604800000 -c cleanup.policy=delete
    Create {
        name: String,
        /// Partitions (default: the broker's num.partitions).
        #[arg(short = 'p', long, default_value_t = -1)]
        partitions: i32,
        /// Replication factor (default: the broker's default.replication.factor).
        #[arg(short = 'r', long, default_value_t = -1)]
        replicas: i16,
        /// Topic config `key=value`, repeatable.
        #[arg(short = 'c', long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// List topics with their partition and replica counts.
    ///
    /// Example:
    ///   laminar topic list
    List {
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Partitions (leader, replicas, ISR, log start and end offsets) and configs of a topic;
    /// with --log-dirs also each replica's size and offset lag, from every broker holding one.
    ///
    /// Examples:
    ///   laminar topic describe orders
    ///   laminar topic describe orders --log-dirs
    Describe {
        name: String,
        /// Also each replica's size in bytes and offset lag (DescribeLogDirs).
        #[arg(long = "log-dirs")]
        log_dirs: bool,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Delete topics and their data.
    ///
    /// Example:
    ///   laminar topic delete orders audit
    Delete {
        #[arg(required = true)]
        names: Vec<String>,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Set or delete topic config overrides.
    ///
    /// Examples:
    ///   laminar topic alter-config orders --set retention.ms=3600000
    ///   laminar topic alter-config orders --delete retention.ms
    AlterConfig {
        name: String,
        /// `key=value` to override, repeatable.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Override to drop (back to the broker default), repeatable.
        #[arg(long = "delete", value_name = "KEY")]
        delete: Vec<String>,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Add partitions to a topic.
    ///
    /// Example:
    ///   laminar topic add-partitions orders --num 4
    AddPartitions {
        name: String,
        /// How many partitions to add.
        #[arg(short = 'n', long = "num")]
        num: i32,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Move partitions to other brokers (cluster mode), or cancel a move in progress. The
    /// new replicas copy the data from the leader; the move completes once they are in sync.
    ///
    /// Examples:
    ///   laminar topic move orders --partition 0 --replicas 1,2,4
    ///   laminar topic move orders --replicas 2,3,4          (every partition)
    ///   laminar topic move orders --partition 0 --cancel
    Move {
        name: String,
        /// Partition to move, repeatable (default: every partition of the topic).
        #[arg(short = 'p', long = "partition")]
        partitions: Vec<i32>,
        /// The new replicas, preferred leader first: broker ids like 1,2,4.
        #[arg(long, required_unless_present = "cancel", conflicts_with = "cancel")]
        replicas: Option<String>,
        /// Cancel the move in progress (back to the replicas before it).
        #[arg(long)]
        cancel: bool,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
    /// Partition moves in progress: replicas, those being added and removed (cluster mode).
    ///
    /// Examples:
    ///   laminar topic reassignments
    ///   laminar topic reassignments orders
    Reassignments {
        name: Option<String>,
        #[command(flatten)]
        brokers: BrokerArgs,
    },
}

pub fn run(command: TopicCommand) -> anyhow::Result<()> {
    match command {
        TopicCommand::Create {
            name,
            partitions,
            replicas,
            configs,
            brokers,
        } => create(&name, partitions, replicas, &configs, &brokers),
        TopicCommand::List { brokers } => list(&brokers),
        TopicCommand::Describe {
            name,
            log_dirs,
            brokers,
        } => describe(&name, log_dirs, &brokers),
        TopicCommand::Delete { names, brokers } => delete(&names, &brokers),
        TopicCommand::AlterConfig {
            name,
            set,
            delete,
            brokers,
        } => alter_config(&name, &set, delete, &brokers),
        TopicCommand::AddPartitions { name, num, brokers } => add_partitions(&name, num, &brokers),
        TopicCommand::Move {
            name,
            partitions,
            replicas,
            cancel: _,
            brokers,
        } => reassign::move_partitions(&name, &partitions, replicas.as_deref(), &brokers),
        TopicCommand::Reassignments { name, brokers } => reassign::list(name.as_deref(), &brokers),
    }
}

/// Creates the topic (-1 partitions or replicas: the broker's default) with the `key=value`
/// `configs`.
fn create(
    name: &str,
    partitions: i32,
    replicas: i16,
    configs: &[String],
    brokers: &BrokerArgs,
) -> anyhow::Result<()> {
    check_topic_name(name)?;
    let configs = configs
        .iter()
        .map(|c| parse_key_value(c))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut connection = brokers.connect()?;
    let topic = NewTopic {
        name: name.to_string(),
        partitions,
        replication_factor: replicas,
        configs,
    };
    let outcomes = connection.create_topics(&[topic], ADMIN_TIMEOUT_MS)?;
    for (topic, outcome) in outcomes {
        outcome.map_err(|e| anyhow!("cannot create topic {topic}: {e}"))?;
        println!("created topic {topic}");
    }
    Ok(())
}

fn list(brokers: &BrokerArgs) -> anyhow::Result<()> {
    let metadata = brokers
        .connect()?
        .metadata(None, false)
        .context("cannot list topics")?;
    let rows: Vec<Vec<String>> = metadata
        .topics
        .iter()
        .map(|t| {
            let replicas = t.partitions.first().map_or(0, |p| p.replicas.len());
            vec![
                t.name.clone(),
                t.partitions.len().to_string(),
                replicas.to_string(),
            ]
        })
        .collect();
    print_table(&["NAME", "PARTITIONS", "REPLICAS"], &rows);
    Ok(())
}

/// Topics one DeleteTopics request names, at most (a progress step).
const DELETE_TOPICS_PER_REQUEST: usize = 4;

fn delete(names: &[String], brokers: &BrokerArgs) -> anyhow::Result<()> {
    for name in names {
        check_topic_name(name)?;
    }
    let mut connection = brokers.connect()?;
    // A few topics per request, so that a terminal sees the deletion advance (each topic's
    // partitions are removed from disk before its answer).
    let mut progress = Progress::new("deleting topics", names.len());
    for chunk in names.chunks(DELETE_TOPICS_PER_REQUEST) {
        let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let outcomes = connection.delete_topics(&chunk, ADMIN_TIMEOUT_MS)?;
        progress.clear();
        for (topic, outcome) in outcomes {
            match outcome {
                Ok(()) => println!("deleted topic {topic}"),
                Err(e) if e.code == 3 => bail!("unknown topic {topic}"),
                Err(e) => bail!("cannot delete topic {topic}: {e}"),
            }
        }
        progress.advance(chunk.len());
    }
    Ok(())
}

/// Overrides the `key=value` pairs of `set`, drops the overrides of `delete`.
fn alter_config(name: &str, set: &[String], delete: Vec<String>, brokers: &BrokerArgs) -> anyhow::Result<()> {
    check_topic_name(name)?;
    let mut changes = Vec::new();
    for pair in set {
        let (key, value) = parse_key_value(pair)?;
        changes.push(ConfigChange::Set(key, value));
    }
    changes.extend(delete.into_iter().map(ConfigChange::Delete));
    if changes.is_empty() {
        bail!("nothing to change: give --set KEY=VALUE or --delete KEY");
    }
    brokers
        .connect()?
        .alter_topic_configs(name, &changes)
        .with_context(|| format!("cannot alter the configs of {name}"))?;
    println!("altered {} config(s) of topic {name}", changes.len());
    Ok(())
}

/// Adds `num` partitions to the topic.
fn add_partitions(name: &str, num: i32, brokers: &BrokerArgs) -> anyhow::Result<()> {
    if num <= 0 {
        bail!("--num must be at least 1, not {num}");
    }
    let mut connection = brokers.connect()?;
    let (_, topic) = topic_metadata(&mut connection, name)?;
    let total = topic.partitions.len() as i32 + num;
    connection
        .create_partitions(name, total, ADMIN_TIMEOUT_MS)
        .with_context(|| format!("cannot add partitions to {name}"))?;
    println!("topic {name} now has {total} partitions");
    Ok(())
}

fn describe(name: &str, log_dirs: bool, brokers: &BrokerArgs) -> anyhow::Result<()> {
    let mut connection = brokers.connect()?;
    let (metadata, topic) = topic_metadata(&mut connection, name)?;
    let config = brokers.client_config()?;
    let earliest = partition_offsets((&metadata, &config), &topic, OffsetSpec::Earliest);
    let latest = partition_offsets((&metadata, &config), &topic, OffsetSpec::Latest);
    let configs = connection
        .describe_topic_configs(name, None)
        .with_context(|| format!("cannot describe the configs of {name}"))?;
    println!("SUMMARY");
    println!("name:       {name}");
    println!("partitions: {}", topic.partitions.len());
    println!(
        "replicas:   {}",
        topic.partitions.first().map_or(0, |p| p.replicas.len())
    );
    println!();
    println!("PARTITIONS");
    print_partitions(&topic, &earliest, &latest);
    println!();
    if log_dirs {
        println!("REPLICAS");
        reassign::print_replica_sizes(&topic, (&metadata, &config));
        println!();
    }
    println!("CONFIGS");
    let rows: Vec<Vec<String>> = configs
        .iter()
        .map(|c| config_row(&c.name, c.value.as_deref(), c.source))
        .collect();
    print_table(&["KEY", "VALUE", "SOURCE"], &rows);
    Ok(())
}

/// `(partition, offset)` of every partition of `topic` for `spec`, in the topic's partition
/// order, each asked of its leader (only a leader answers ListOffsets); -1 where the leader
/// could not answer.
pub(super) fn partition_offsets(
    (metadata, config): (&laminar_client::ClusterMetadata, &laminar_client::ClientConfig),
    topic: &TopicMetadata,
    spec: OffsetSpec,
) -> Vec<(i32, i64)> {
    let mut by_leader: std::collections::BTreeMap<i32, Vec<(i32, OffsetSpec)>> = Default::default();
    for p in &topic.partitions {
        by_leader.entry(p.leader).or_default().push((p.partition, spec));
    }
    let mut found = std::collections::BTreeMap::new();
    for (leader, partitions) in by_leader {
        let answered = metadata
            .broker_address(leader)
            .ok_or_else(|| anyhow::anyhow!("partitions without a leader"))
            .and_then(|address| {
                Ok(super::connect_to(&address, config)?.list_offsets(&topic.name, &partitions)?)
            });
        if let Ok(offsets) = answered {
            found.extend(offsets);
        }
    }
    let offset_of = |p: i32| found.get(&p).copied().unwrap_or(-1);
    topic
        .partitions
        .iter()
        .map(|p| (p.partition, offset_of(p.partition)))
        .collect()
}

/// One row per partition: leader, replicas, ISR and its `earliest` and `latest` offsets.
fn print_partitions(topic: &TopicMetadata, earliest: &[(i32, i64)], latest: &[(i32, i64)]) {
    let join = |ids: &[i32]| ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
    let rows: Vec<Vec<String>> = topic
        .partitions
        .iter()
        .zip(earliest.iter().zip(latest))
        .map(|(p, ((_, start), (_, end)))| {
            vec![
                p.partition.to_string(),
                p.leader.to_string(),
                format!("[{}]", join(&p.replicas)),
                format!("[{}]", join(&p.isr)),
                start.to_string(),
                end.to_string(),
            ]
        })
        .collect();
    print_table(
        &[
            "PARTITION",
            "LEADER",
            "REPLICAS",
            "ISR",
            "LOG-START-OFFSET",
            "LOG-END-OFFSET",
        ],
        &rows,
    );
}

/// A config's key, value ("-" when unset or sensitive) and where the value comes from (Kafka's
/// ConfigSource code).
fn config_row(name: &str, value: Option<&str>, source: i8) -> Vec<String> {
    let source = match source {
        1 => "topic",
        5 => "default",
        _ => "broker",
    };
    vec![
        name.to_string(),
        value.unwrap_or("-").to_string(),
        source.to_string(),
    ]
}
