//! `laminar produce TOPIC`: one record per stdin line.
//!
//! Lines are batched per partition and sent whenever stdin has nothing more buffered (so an
//! interactive line goes out at once and a pipe goes out in large batches) or a batch is full.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use anyhow::{anyhow, bail, Context};
use bytes::{Bytes, BytesMut};
use clap::Args;
use laminar_client::records::{encode_batch, plain_record};
use laminar_client::{Acks, Compression};

use super::{parse_key_value, topic_metadata, BrokerArgs, Leaders};
use laminar_client::partitioner::partition_for_key;

/// Records per batch before it is sent regardless of stdin.
const BATCH_RECORDS_MAX: usize = 1000;
/// Record bytes per batch before it is sent regardless of stdin.
const BATCH_BYTES_MAX: usize = 512 * 1024;
const PRODUCE_TIMEOUT_MS: i32 = 30_000;

/// Produce stdin lines as records.
///
/// Examples:
///   echo hello | laminar produce orders
///   printf 'k1:v1\nk2:v2\n' | laminar produce orders --key-separator : --acks all
///   laminar produce orders --headers source=cli,env=dev --compression zstd < lines.txt
#[derive(Args, Debug)]
pub struct ProduceArgs {
    topic: String,
    /// Split each line at the first SEP into key and value (keyed records go to Kafka's
    /// murmur2 partition of the key).
    #[arg(long, value_name = "SEP")]
    key_separator: Option<String>,
    /// Headers on every record: `k=v,k2=v2`.
    #[arg(long, value_name = "K=V,...")]
    headers: Option<String>,
    /// Produce every record to this partition.
    #[arg(long, short = 'p')]
    partition: Option<i32>,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none", value_parser = parse_compression)]
    compression: Compression,
    /// 0, 1 or all.
    #[arg(long, default_value = "all")]
    acks: Acks,
    #[command(flatten)]
    brokers: BrokerArgs,
}

fn parse_compression(text: &str) -> Result<Compression, String> {
    match text {
        "none" => Ok(Compression::None),
        "gzip" => Ok(Compression::Gzip),
        "snappy" => Ok(Compression::Snappy),
        "lz4" => Ok(Compression::Lz4),
        "zstd" => Ok(Compression::Zstd),
        other => Err(format!(
            "unknown compression {other:?} (none, gzip, snappy, lz4, zstd)"
        )),
    }
}

/// Records waiting to be sent to one partition.
#[derive(Default)]
struct PendingBatch {
    records: Vec<(Option<Bytes>, Bytes)>,
    bytes: usize,
}

struct Producer<'a> {
    args: &'a ProduceArgs,
    leaders: Leaders,
    headers: Vec<(String, String)>,
    partitions: i32,
    next_unkeyed: i32,
    pending: BTreeMap<i32, PendingBatch>,
    produced: u64,
}

pub fn run(args: ProduceArgs) -> anyhow::Result<()> {
    let mut connection = args.brokers.connect()?;
    let (metadata, topic) = topic_metadata(&mut connection, &args.topic)?;
    let partitions = topic.partitions.len() as i32;
    if let Some(partition) = args.partition {
        if !(0..partitions).contains(&partition) {
            bail!(
                "topic {} has no partition {partition} (it has {partitions})",
                args.topic
            );
        }
    }
    let headers = match &args.headers {
        Some(text) => text
            .split(',')
            .map(parse_key_value)
            .collect::<anyhow::Result<Vec<_>>>()?,
        None => Vec::new(),
    };
    let mut producer = Producer {
        args: &args,
        leaders: Leaders::new(args.brokers.client_config()?, metadata, &topic),
        headers,
        partitions,
        next_unkeyed: 0,
        pending: BTreeMap::new(),
        produced: 0,
    };
    // Our own buffer, to see whether more input is already here (`buffer()`).
    let mut input = std::io::BufReader::with_capacity(256 * 1024, std::io::stdin().lock());
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).context("cannot read stdin")? == 0 {
            break;
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        producer.add(text)?;
        if input.buffer().is_empty() {
            producer.send_all()?;
        }
    }
    producer.send_all()?;
    let _ = writeln!(
        std::io::stderr(),
        "produced {} record(s) to {}",
        producer.produced,
        args.topic
    );
    Ok(())
}

impl Producer<'_> {
    fn add(&mut self, line: &[u8]) -> anyhow::Result<()> {
        let (key, value) = match &self.args.key_separator {
            Some(separator) => {
                let separator = separator.as_bytes();
                let at = line
                    .windows(separator.len().max(1))
                    .position(|w| w == separator)
                    .ok_or_else(|| {
                        anyhow!(
                            "line without the key separator: {}",
                            String::from_utf8_lossy(line)
                        )
                    })?;
                (
                    Some(Bytes::copy_from_slice(&line[..at])),
                    Bytes::copy_from_slice(&line[at + separator.len()..]),
                )
            }
            None => (None, Bytes::copy_from_slice(line)),
        };
        let partition = match (self.args.partition, &key) {
            (Some(partition), _) => partition,
            (None, Some(key)) => partition_for_key(key, self.partitions),
            (None, None) => {
                self.next_unkeyed = (self.next_unkeyed + 1) % self.partitions;
                self.next_unkeyed
            }
        };
        let batch = self.pending.entry(partition).or_default();
        batch.bytes += value.len() + key.as_ref().map_or(0, Bytes::len);
        batch.records.push((key, value));
        if batch.records.len() >= BATCH_RECORDS_MAX || batch.bytes >= BATCH_BYTES_MAX {
            self.send(partition)?;
        }
        Ok(())
    }

    fn send_all(&mut self) -> anyhow::Result<()> {
        let partitions: Vec<i32> = self.pending.keys().copied().collect();
        for partition in partitions {
            self.send(partition)?;
        }
        Ok(())
    }

    fn send(&mut self, partition: i32) -> anyhow::Result<()> {
        let Some(batch) = self.pending.remove(&partition) else {
            return Ok(());
        };
        if batch.records.is_empty() {
            return Ok(());
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let records: Vec<_> = batch
            .records
            .into_iter()
            .enumerate()
            .map(|(index, (key, value))| {
                let mut record = plain_record(index as i64, now_ms, key, Some(value));
                for (name, value) in &self.headers {
                    record
                        .headers
                        .insert(name.clone().into(), Some(Bytes::from(value.clone())));
                }
                record
            })
            .collect();
        let mut encoded = BytesMut::new();
        encode_batch(&mut encoded, &records, self.args.compression)?;
        self.leaders
            .connection(partition)?
            .produce(
                &self.args.topic,
                partition,
                encoded.freeze(),
                self.args.acks,
                PRODUCE_TIMEOUT_MS,
            )
            .with_context(|| format!("cannot produce to {}-{partition}", self.args.topic))?;
        self.produced += records.len() as u64;
        Ok(())
    }
}
