//! `laminar consume TOPIC`: fetch records and print them with a kcat-style `--format`.
//!
//! Without `--group` it reads the partitions given (or all) from the chosen start. With
//! `--group` it joins the consumer group, reads what the group assigns it from the committed
//! offsets (or the chosen start where none is committed), commits as it goes and leaves on exit.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::{bail, Context};
use clap::Args;
use laminar_client::records::{batches, decode_records};
use laminar_client::{CommittedOffset, Connection, FetchPosition, FetchSpec, GroupMembership, OffsetSpec};

use super::format::{FormattedRecord, RecordFormat};
use super::{topic_metadata, BrokerArgs, Leaders};

const FETCH: FetchSpec = FetchSpec {
    max_wait_ms: 500,
    min_bytes: 1,
    max_bytes: 8 << 20,
};
const PARTITION_BYTES_MAX: i32 = 1 << 20;
const SESSION_TIMEOUT_MS: i32 = 30_000;

/// Print records of a topic.
///
/// Examples:
///   laminar consume orders --from-beginning -n 10
///   laminar consume orders -p 0 --offset 42 --format '%p/%o %k=%v\n'
///   laminar consume orders --timestamp 1700000000000 -e
///   laminar consume orders --group billing --from-beginning
///
/// Format tokens (kcat's): %k key, %v value, %t topic, %p partition, %o offset, %T timestamp,
/// %h headers, %K key length, %S value length, %% percent; \n \t \\ escapes.
#[derive(Args, Debug)]
pub struct ConsumeArgs {
    topic: String,
    /// Only these partitions (repeatable; default: all). Not with --group.
    #[arg(long = "partition", short = 'p')]
    partitions: Vec<i32>,
    /// Start at the log start offset (where no committed offset exists, with --group).
    #[arg(long, conflicts_with_all = ["offset", "timestamp"])]
    from_beginning: bool,
    /// Start offset: a number, `earliest` or `latest` (default latest).
    #[arg(long, short = 'o', conflicts_with = "timestamp")]
    offset: Option<String>,
    /// Start at the first record with a timestamp at or after this (ms since the epoch).
    #[arg(long)]
    timestamp: Option<i64>,
    /// Consume as a member of this consumer group.
    #[arg(long, short = 'g', conflicts_with = "partitions")]
    group: Option<String>,
    /// Exit after this many records.
    #[arg(short = 'n', long = "num")]
    count: Option<u64>,
    /// Exit once every partition is read up to its end.
    #[arg(short = 'e', long)]
    exit_at_end: bool,
    /// Output format per record.
    #[arg(long, short = 'f', default_value = "%v\\n")]
    format: String,
    #[command(flatten)]
    brokers: BrokerArgs,
}

#[derive(Debug, Clone, Copy)]
enum Start {
    Spec(OffsetSpec),
    Exact(i64),
}

fn start_of(args: &ConsumeArgs) -> anyhow::Result<Start> {
    if args.from_beginning {
        return Ok(Start::Spec(OffsetSpec::Earliest));
    }
    if let Some(ms) = args.timestamp {
        return Ok(Start::Spec(OffsetSpec::Timestamp(ms)));
    }
    Ok(match args.offset.as_deref() {
        None | Some("latest") | Some("end") => Start::Spec(OffsetSpec::Latest),
        Some("earliest") | Some("beginning") | Some("start") => Start::Spec(OffsetSpec::Earliest),
        Some(number) => {
            let offset: i64 = number
                .parse()
                .with_context(|| format!("--offset must be a number, earliest or latest, not {number:?}"))?;
            if offset < 0 {
                bail!("--offset must not be negative");
            }
            Start::Exact(offset)
        }
    })
}

/// Resolves `start` for `partitions` of `topic` to offsets, asking each partition's leader.
fn resolve(
    leaders: &mut Leaders,
    topic: &str,
    partitions: &[i32],
    start: Start,
) -> anyhow::Result<BTreeMap<i32, i64>> {
    let spec = match start {
        Start::Exact(offset) => return Ok(partitions.iter().map(|p| (*p, offset)).collect()),
        Start::Spec(spec) => spec,
    };
    let mut resolved = BTreeMap::new();
    for group in leaders.by_leader(partitions.iter().copied()) {
        let connection = leaders.connection(group[0])?;
        let asks: Vec<(i32, OffsetSpec)> = group.iter().map(|p| (*p, spec)).collect();
        for (partition, offset) in connection.list_offsets(topic, &asks)? {
            // No record at or after the timestamp: start at the end.
            let offset = if offset < 0 {
                connection.list_offsets(topic, &[(partition, OffsetSpec::Latest)])?[0].1
            } else {
                offset
            };
            resolved.insert(partition, offset);
        }
    }
    Ok(resolved)
}

struct Consumer {
    /// The bootstrap connection; with `--group`, the group coordinator's (membership, commits).
    connection: Connection,
    /// Fetches and offsets go to each partition's leader.
    leaders: Leaders,
    topic: String,
    format: RecordFormat,
    positions: BTreeMap<i32, i64>,
    high_watermarks: BTreeMap<i32, i64>,
    membership: Option<GroupMembership>,
    printed: u64,
}

pub fn run(args: ConsumeArgs) -> anyhow::Result<()> {
    let format = RecordFormat::parse(&args.format)?;
    let start = start_of(&args)?;
    let mut connection = args.brokers.connect()?;
    let (metadata, topic) = topic_metadata(&mut connection, &args.topic)?;
    let all: Vec<i32> = topic.partitions.iter().map(|p| p.partition).collect();
    for partition in &args.partitions {
        if !all.contains(partition) {
            bail!("topic {} has no partition {partition}", args.topic);
        }
    }
    let mut consumer = Consumer {
        leaders: Leaders::new(args.brokers.client_config()?, metadata, &topic),
        connection,
        topic: args.topic.clone(),
        format,
        positions: BTreeMap::new(),
        high_watermarks: BTreeMap::new(),
        membership: None,
        printed: 0,
    };
    match &args.group {
        Some(group) => {
            // Membership, heartbeats and commits go to the group's coordinator.
            consumer.connection = super::group::coordinator(&mut consumer.connection, &args.brokers, group)?;
            consumer.join(group, start)?;
        }
        None => {
            let chosen = if args.partitions.is_empty() {
                all
            } else {
                args.partitions.clone()
            };
            consumer.positions = resolve(&mut consumer.leaders, &args.topic, &chosen, start)?;
        }
    }
    let outcome = consumer.poll_until_done(&args, start);
    if let Some(membership) = consumer.membership.take() {
        consumer.commit(&membership)?;
        consumer
            .connection
            .leave_group(&membership)
            .context("cannot leave the group")?;
    }
    outcome
}

impl Consumer {
    fn join(&mut self, group: &str, start: Start) -> anyhow::Result<()> {
        let membership = self
            .connection
            .join_group(group, std::slice::from_ref(&self.topic), SESSION_TIMEOUT_MS)
            .with_context(|| format!("cannot join group {group}"))?;
        let assigned: Vec<i32> = membership
            .assignment
            .iter()
            .filter(|(topic, _)| *topic == self.topic)
            .flat_map(|(_, partitions)| partitions.iter().copied())
            .collect();
        let committed = self
            .connection
            .offset_fetch(group, Some(&[(self.topic.clone(), assigned.clone())]))
            .with_context(|| format!("cannot read the committed offsets of {group}"))?;
        let uncommitted: Vec<i32> = assigned
            .iter()
            .copied()
            .filter(|p| !committed.iter().any(|c| c.partition == *p && c.offset >= 0))
            .collect();
        self.positions = resolve(&mut self.leaders, &self.topic, &uncommitted, start)?;
        for c in committed
            .into_iter()
            .filter(|c| c.offset >= 0 && assigned.contains(&c.partition))
        {
            self.positions.insert(c.partition, c.offset);
        }
        self.membership = Some(membership);
        Ok(())
    }

    fn commit(&mut self, membership: &GroupMembership) -> anyhow::Result<()> {
        let offsets: Vec<CommittedOffset> = self
            .positions
            .iter()
            .map(|(partition, offset)| CommittedOffset {
                topic: self.topic.clone(),
                partition: *partition,
                offset: *offset,
            })
            .collect();
        if offsets.is_empty() {
            return Ok(());
        }
        self.connection
            .offset_commit(
                &membership.group,
                membership.generation,
                &membership.member_id,
                &offsets,
            )
            .with_context(|| format!("cannot commit offsets of group {}", membership.group))
    }

    fn done(&self, args: &ConsumeArgs) -> bool {
        if args.count.is_some_and(|n| self.printed >= n) {
            return true;
        }
        args.exit_at_end
            && self
                .positions
                .iter()
                .all(|(p, offset)| self.high_watermarks.get(p).is_some_and(|hw| offset >= hw))
    }

    fn poll_until_done(&mut self, args: &ConsumeArgs, start: Start) -> anyhow::Result<()> {
        let stdout = std::io::stdout();
        let mut out = Vec::with_capacity(64 * 1024);
        while !self.done(args) {
            if self.positions.is_empty() {
                // A group member assigned nothing waits for a rebalance.
                std::thread::sleep(std::time::Duration::from_millis(FETCH.max_wait_ms as u64));
            }
            for group in self.leaders.by_leader(self.positions.keys().copied()) {
                self.fetch_from_leader(&group, args.count, &mut out)?;
            }
            stdout.lock().write_all(&out).context("cannot write stdout")?;
            out.clear();
            if let Some(membership) = self.membership.clone() {
                self.commit(&membership)?;
                if !self.connection.heartbeat(&membership)? {
                    let group = membership.group.clone();
                    self.join(&group, start)?;
                }
            }
        }
        stdout.lock().flush().context("cannot write stdout")?;
        Ok(())
    }

    /// One fetch of `partitions` (all led by one broker) from their leader, printed.
    fn fetch_from_leader(
        &mut self,
        partitions: &[i32],
        count: Option<u64>,
        out: &mut Vec<u8>,
    ) -> anyhow::Result<()> {
        let positions: Vec<FetchPosition> = partitions
            .iter()
            .map(|partition| FetchPosition {
                topic: self.topic.clone(),
                partition: *partition,
                offset: self.positions.get(partition).copied().unwrap_or(0),
                partition_max_bytes: PARTITION_BYTES_MAX,
            })
            .collect();
        let Some(first) = partitions.first() else {
            return Ok(());
        };
        for fetched in self.leaders.connection(*first)?.fetch(&FETCH, &positions)? {
            if let Some(error) = fetched.error {
                bail!("fetch {}-{}: {error}", fetched.topic, fetched.partition);
            }
            self.high_watermarks
                .insert(fetched.partition, fetched.high_watermark);
            self.print_records(&fetched, count, out)?;
        }
        Ok(())
    }

    fn print_records(
        &mut self,
        fetched: &laminar_client::FetchedPartition,
        count: Option<u64>,
        out: &mut Vec<u8>,
    ) -> anyhow::Result<()> {
        let position = self
            .positions
            .get_mut(&fetched.partition)
            .expect("fetched what we asked for");
        for record in decode_records(&fetched.records)? {
            if record.offset < *position || count.is_some_and(|n| self.printed >= n) {
                continue;
            }
            let headers: Vec<(String, Option<Vec<u8>>)> = record
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_ref().map(|v| v.to_vec())))
                .collect();
            self.format.write(
                &FormattedRecord {
                    topic: &self.topic,
                    partition: fetched.partition,
                    offset: record.offset,
                    timestamp_ms: record.timestamp,
                    key: record.key.as_deref(),
                    value: record.value.as_deref(),
                    headers: &headers,
                },
                out,
            );
            *position = record.offset + 1;
            self.printed += 1;
        }
        // Batches without printable records (control batches) still move the position on,
        // unless -n stopped us inside the data.
        if count.is_none_or(|n| self.printed < n) {
            if let Some(Ok(last)) = batches(&fetched.records).last() {
                *position = (*position).max(last.last_offset() + 1);
            }
        }
        Ok(())
    }
}
