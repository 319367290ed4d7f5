//! Thin helpers over the `rdkafka` crate (librdkafka) so each test file states what it proves,
//! not how to configure a client. Every helper fails with the broker's answer in the message.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders, Timestamp};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

/// How long one client operation may take before the test fails.
pub const OP_TIMEOUT: Duration = Duration::from_secs(15);

/// One record as a test means it: every field a client can set and must get back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestRecord {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp_ms: i64,
}

/// A record read back, with the offset the broker gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumedRecord {
    pub partition: i32,
    pub offset: i64,
    pub record: TestRecord,
}

/// A fixed time base (2023-11-14T22:13:20Z) so timestamps never depend on the clock.
pub const BASE_TIMESTAMP_MS: i64 = 1_700_000_000_000;

/// `count` records exercising the awkward cases: null keys, a null value (tombstone), a null
/// header value, repeated header keys, binary bytes of every value, and a value of some KiB.
pub fn sample_records(count: usize) -> Vec<TestRecord> {
    (0..count)
        .map(|i| {
            let key = (i % 10 != 3).then(|| format!("key-{i:05}").into_bytes());
            let value = match i % 17 {
                5 => None,
                11 => Some((0..=255u8).cycle().skip(i % 256).take(4096 + i).collect()),
                _ => Some(format!("value-{i}-{}", "x".repeat(i % 50)).into_bytes()),
            };
            let mut headers = vec![("index".to_string(), Some(i.to_string().into_bytes()))];
            if i % 4 == 0 {
                headers.push(("nullable".to_string(), None));
                headers.push(("index".to_string(), Some(vec![0, 1, 2, 0xff])));
            }
            TestRecord {
                key,
                value,
                headers,
                timestamp_ms: BASE_TIMESTAMP_MS + (i as i64) * 1000,
            }
        })
        .collect()
}

/// Base client settings: IPv4 loopback, failures within the test's patience.
pub fn client_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("socket.timeout.ms", "10000")
        .set("api.version.request.timeout.ms", "10000");
    config
}

pub fn admin_client(bootstrap: &str) -> Result<AdminClient<DefaultClientContext>> {
    client_config(bootstrap)
        .create()
        .context("creating an AdminClient")
}

pub fn admin_options() -> AdminOptions {
    AdminOptions::new()
        .operation_timeout(Some(OP_TIMEOUT))
        .request_timeout(Some(OP_TIMEOUT))
}

/// Creates one topic with replication factor 1 and fails with the broker's error code if the
/// broker refuses.
pub async fn create_topic(
    bootstrap: &str,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> Result<()> {
    let admin = admin_client(bootstrap)?;
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    for (key, value) in configs {
        topic = topic.set(key, value);
    }
    let results = admin
        .create_topics([&topic], &admin_options())
        .await
        .context("CreateTopics")?;
    for result in results {
        if let Err((topic, code)) = result {
            bail!("CreateTopics {topic}: broker answered {code:?}");
        }
    }
    Ok(())
}

/// A producer with `acks=all`, no idempotence (groups and idempotence come later), and the given
/// extra settings (e.g. `compression.type`).
pub fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> Result<FutureProducer> {
    let mut config = client_config(bootstrap);
    config
        .set("acks", "all")
        .set("enable.idempotence", "false")
        .set("message.timeout.ms", "30000")
        .set("linger.ms", "5");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    config.create().context("creating a FutureProducer")
}

fn owned_headers(headers: &[(String, Option<Vec<u8>>)]) -> OwnedHeaders {
    headers.iter().fold(OwnedHeaders::new(), |acc, (key, value)| {
        acc.insert(Header {
            key: key.as_str(),
            value: value.as_deref(),
        })
    })
}

/// Sends every record to one partition, all in flight at once, and returns the offsets the
/// broker acknowledged, in send order.
pub async fn produce_all(
    producer: &FutureProducer,
    topic: &str,
    partition: i32,
    records: &[TestRecord],
) -> Result<Vec<i64>> {
    let sends = records.iter().map(|r| {
        let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic)
            .partition(partition)
            .timestamp(r.timestamp_ms)
            .headers(owned_headers(&r.headers));
        if let Some(key) = &r.key {
            record = record.key(key.as_slice());
        }
        if let Some(value) = &r.value {
            record = record.payload(value.as_slice());
        }
        producer.send(record, OP_TIMEOUT)
    });
    let mut offsets = Vec::with_capacity(records.len());
    for (i, delivery) in futures::future::join_all(sends).await.into_iter().enumerate() {
        match delivery {
            Ok(delivery) => {
                assert_eq!(
                    delivery.partition, partition,
                    "record {i} delivered to another partition"
                );
                offsets.push(delivery.offset);
            }
            Err((err, _)) => bail!("produce of record {i} to {topic}/{partition} failed: {err}"),
        }
    }
    Ok(offsets)
}

/// A consumer without a group: partitions are assigned by the test (groups come later).
pub fn assigned_consumer(bootstrap: &str, extra: &[(&str, &str)]) -> Result<BaseConsumer> {
    let mut config = client_config(bootstrap);
    // librdkafka's assign() needs a group.id even though nothing here joins or commits.
    config
        .set("group.id", "laminar-tests-assign-only")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("fetch.wait.max.ms", "100");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    config.create().context("creating a BaseConsumer")
}

/// Assigns `topic/partition` at `offset` and reads until `count` records arrived; fails on any
/// consumer error or when they do not arrive within `OP_TIMEOUT`.
pub fn consume(
    consumer: &BaseConsumer,
    topic: &str,
    partition: i32,
    offset: Offset,
    count: usize,
) -> Result<Vec<ConsumedRecord>> {
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, partition, offset)?;
    consumer.assign(&assignment)?;
    poll_records(consumer, count)
}

/// Polls the current assignment until `count` records arrived.
pub fn poll_records(consumer: &BaseConsumer, count: usize) -> Result<Vec<ConsumedRecord>> {
    let deadline = Instant::now() + OP_TIMEOUT;
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        if Instant::now() >= deadline {
            bail!(
                "only {} of {count} records arrived within {OP_TIMEOUT:?}",
                out.len()
            );
        }
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Err(err)) => bail!("consumer error after {} records: {err}", out.len()),
            Some(Ok(message)) => out.push(ConsumedRecord {
                partition: message.partition(),
                offset: message.offset(),
                record: TestRecord {
                    key: message.key().map(<[u8]>::to_vec),
                    value: message.payload().map(<[u8]>::to_vec),
                    headers: message
                        .headers()
                        .map(|h| {
                            h.iter()
                                .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                                .collect()
                        })
                        .unwrap_or_default(),
                    timestamp_ms: match message.timestamp() {
                        Timestamp::CreateTime(ms) => ms,
                        other => bail!("record at offset {} has timestamp {other:?}", message.offset()),
                    },
                },
            }),
        }
    }
    Ok(out)
}

/// Asserts that `consumed` is exactly `expected`, at consecutive offsets from `first_offset`,
/// naming the first field that differs.
pub fn assert_records_match(expected: &[TestRecord], consumed: &[ConsumedRecord], first_offset: i64) {
    assert_eq!(consumed.len(), expected.len(), "record count");
    for (i, (want, got)) in expected.iter().zip(consumed).enumerate() {
        assert_eq!(got.offset, first_offset + i as i64, "offset of record {i}");
        assert_eq!(got.record.key, want.key, "key of record {i}");
        assert_eq!(got.record.value, want.value, "value of record {i}");
        assert_eq!(got.record.headers, want.headers, "headers of record {i}");
        assert_eq!(
            got.record.timestamp_ms, want.timestamp_ms,
            "timestamp of record {i}"
        );
    }
}

/// Keys and values by offset (a compacted log's records have gaps between offsets).
pub type KeysValuesByOffset = std::collections::BTreeMap<i64, (Vec<u8>, Vec<u8>)>;

/// Every record of `topic`/`partition` from its start to its high watermark, by offset (null
/// keys and values read as empty). Fails on a consumer error or if the last offset below the
/// high watermark does not arrive within `OP_TIMEOUT`.
pub fn read_to_high_watermark(
    consumer: &BaseConsumer,
    topic: &str,
    partition: i32,
) -> Result<KeysValuesByOffset> {
    let (_, high) = watermarks(consumer, topic, partition)?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let mut out = KeysValuesByOffset::new();
    let deadline = Instant::now() + OP_TIMEOUT;
    while out.keys().next_back().is_none_or(|&last| last < high - 1) {
        if Instant::now() > deadline {
            bail!("read {} records, never reached offset {}", out.len(), high - 1);
        }
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let key = m.key().unwrap_or_default().to_vec();
                out.insert(m.offset(), (key, m.payload().unwrap_or_default().to_vec()));
            }
            Some(Err(e)) => bail!("consumer error: {e}"),
            None => {}
        }
    }
    Ok(out)
}

/// Low and high watermark of one partition, as ListOffsets reports them.
pub fn watermarks(consumer: &BaseConsumer, topic: &str, partition: i32) -> Result<(i64, i64)> {
    consumer
        .fetch_watermarks(topic, partition, OP_TIMEOUT)
        .with_context(|| format!("ListOffsets watermarks of {topic}/{partition}"))
}

/// A topic name unique within this process, readable in broker logs.
pub fn unique_topic(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A member of consumer group `group` (manual commits, from the earliest offset, range
/// assignment, a short session).
pub fn group_member(bootstrap: &str, group: &str) -> Result<BaseConsumer> {
    let mut config = client_config(bootstrap);
    config
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("partition.assignment.strategy", "range");
    Ok(config.create()?)
}

/// Commits `next_offset` for `topic`/`partition`, synchronously.
pub fn commit(consumer: &BaseConsumer, topic: &str, partition: i32, next_offset: i64) -> Result<()> {
    let mut offsets = TopicPartitionList::new();
    offsets.add_partition_offset(topic, partition, Offset::Offset(next_offset))?;
    consumer.commit(&offsets, rdkafka::consumer::CommitMode::Sync)?;
    Ok(())
}

/// The offset of the first record a (subscribed) consumer gets.
pub fn first_offset_seen(consumer: &BaseConsumer) -> Result<i64> {
    let deadline = Instant::now() + OP_TIMEOUT * 2;
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) => return Ok(message.offset()),
            Some(Err(err)) => bail!("poll: {err}"),
            None => {}
        }
    }
    bail!("no record within {:?}", OP_TIMEOUT * 2)
}
