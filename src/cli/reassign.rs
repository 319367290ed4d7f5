//! `laminar topic move | reassignments` and `topic describe --log-dirs`: partition
//! reassignments (AlterPartitionReassignments, ListPartitionReassignments) and each replica's
//! size and lag (DescribeLogDirs, asked of every broker holding a replica).

use anyhow::{anyhow, bail, Context};
use laminar_client::Reassignment;

use super::{check_topic_name, print_table, topic_metadata, BrokerArgs, TopicMetadata, ADMIN_TIMEOUT_MS};

/// `--replicas` as `1,2,4`: distinct broker ids, at least one.
pub fn parse_replicas(text: &str) -> anyhow::Result<Vec<i32>> {
    let mut ids = Vec::new();
    for part in text.split(',').map(str::trim) {
        let id: i32 = part
            .parse()
            .map_err(|_| anyhow!("--replicas takes broker ids like 1,2,4, not '{text}'"))?;
        if ids.contains(&id) {
            bail!("broker {id} is named twice in --replicas");
        }
        ids.push(id);
    }
    Ok(ids)
}

fn join(ids: &[i32]) -> String {
    ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

/// Moves `partitions` of `topic` (all when empty) to `replicas`, or cancels their moves.
pub fn move_partitions(
    topic: &str,
    partitions: &[i32],
    replicas: Option<&str>,
    brokers: &BrokerArgs,
) -> anyhow::Result<()> {
    let replicas = replicas.map(parse_replicas).transpose()?;
    let mut connection = brokers.connect()?;
    let (_, found) = topic_metadata(&mut connection, topic)?;
    let indexes: Vec<i32> = if partitions.is_empty() {
        found.partitions.iter().map(|p| p.partition).collect()
    } else {
        partitions.to_vec()
    };
    let wanted: Vec<Reassignment> = indexes
        .iter()
        .map(|p| Reassignment {
            topic: topic.to_string(),
            partition: *p,
            replicas: replicas.clone(),
        })
        .collect();
    let outcomes = connection
        .alter_partition_reassignments(&wanted, ADMIN_TIMEOUT_MS)
        .with_context(|| format!("cannot reassign partitions of {topic}"))?;
    let mut failed = Vec::new();
    for (name, partition, outcome) in outcomes {
        match (outcome, &replicas) {
            (Ok(()), Some(r)) => println!("{name}-{partition}: moving to [{}]", join(r)),
            (Ok(()), None) => println!("{name}-{partition}: reassignment cancelled"),
            (Err(e), _) => failed.push(format!("{name}-{partition}: {e}")),
        }
    }
    if !failed.is_empty() {
        bail!("{}", failed.join("; "));
    }
    Ok(())
}

/// The reassignments in progress, of `topic` or of every topic.
pub fn list(topic: Option<&str>, brokers: &BrokerArgs) -> anyhow::Result<()> {
    let mut connection = brokers.connect()?;
    let wanted = match topic {
        Some(name) => {
            let (_, found) = topic_metadata(&mut connection, name)?;
            let indexes = found.partitions.iter().map(|p| p.partition).collect();
            Some(vec![(name.to_string(), indexes)])
        }
        None => None,
    };
    let ongoing = connection
        .list_partition_reassignments(wanted.as_deref(), ADMIN_TIMEOUT_MS)
        .context("cannot list the reassignments")?;
    let rows: Vec<Vec<String>> = ongoing
        .iter()
        .map(|r| {
            vec![
                r.topic.clone(),
                r.partition.to_string(),
                format!("[{}]", join(&r.replicas)),
                format!("[{}]", join(&r.adding_replicas)),
                format!("[{}]", join(&r.removing_replicas)),
            ]
        })
        .collect();
    print_table(&["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"], &rows);
    Ok(())
}

/// Each replica of `topic` with its size and lag, asked of each broker that is a replica
/// (a broker that cannot be reached shows as such).
pub fn print_replica_sizes(
    topic: &TopicMetadata,
    (metadata, config): (&laminar_client::ClusterMetadata, &laminar_client::ClientConfig),
) {
    let mut brokers: Vec<i32> = topic.partitions.iter().flat_map(|p| p.replicas.clone()).collect();
    brokers.sort_unstable();
    brokers.dedup();
    let mut rows = Vec::new();
    for broker in brokers {
        let found = metadata
            .broker_address(broker)
            .ok_or_else(|| anyhow!("no address"))
            .and_then(|address| replica_sizes(&address, config, &topic.name));
        match found {
            Ok(sizes) => rows.extend(sizes.into_iter().map(|(partition, size, lag)| {
                vec![
                    partition.to_string(),
                    broker.to_string(),
                    size.to_string(),
                    lag.to_string(),
                ]
            })),
            Err(e) => rows.push(vec![
                "-".into(),
                broker.to_string(),
                format!("unknown ({e:#})"),
                "-".into(),
            ]),
        }
    }
    rows.sort_by_key(|r| {
        (
            r[0].parse::<i32>().unwrap_or(i32::MAX),
            r[1].parse::<i32>().unwrap_or(0),
        )
    });
    print_table(&["PARTITION", "BROKER", "SIZE-BYTES", "OFFSET-LAG"], &rows);
}

/// `(partition, size, lag)` of every local replica of `topic` on the broker at `address`.
fn replica_sizes(
    address: &str,
    config: &laminar_client::ClientConfig,
    topic: &str,
) -> anyhow::Result<Vec<(i32, i64, i64)>> {
    check_topic_name(topic)?;
    let mut connection = super::connect_to(address, config)?;
    let dirs = connection.describe_log_dirs(None)?;
    let each = dirs.into_iter().flat_map(|d| d.replicas);
    let mine = each.filter(|r| r.topic == topic);
    Ok(mine.map(|r| (r.partition, r.size_bytes, r.offset_lag)).collect())
}
