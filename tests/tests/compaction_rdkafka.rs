//! Log compaction through the real binary: a compacted topic with small segments, keyed
//! records overwritten many times, the retention tick compacts; a consumer then reads each
//! key's latest value at the offset it was produced at, before and after a restart.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use laminar_tests::rdkafka_client::{
    assigned_consumer, create_topic, produce_all, producer, read_to_high_watermark, unique_topic, watermarks,
    KeysValuesByOffset, TestRecord, BASE_TIMESTAMP_MS,
};
use laminar_tests::{Broker, BrokerOptions};

const KEYS: usize = 8;
const RECORDS: usize = 240;

#[tokio::test]
async fn compaction_keeps_each_keys_latest_value_at_its_offset_across_a_restart() -> Result<()> {
    let options = BrokerOptions::default().with_override("log.retention.check.interval.ms", "300");
    let mut broker = Broker::start(options)?;
    let topic = unique_topic("compacted");
    let configs = [("cleanup.policy", "compact"), ("segment.bytes", "1024")];
    create_topic(&broker.bootstrap(), &topic, 1, &configs).await?;
    let records: Vec<TestRecord> = (0..RECORDS)
        .map(|i| TestRecord {
            key: Some(format!("key-{}", i % KEYS).into_bytes()),
            value: Some(format!("value-{i}").into_bytes()),
            headers: Vec::new(),
            timestamp_ms: BASE_TIMESTAMP_MS + i as i64,
        })
        .collect();
    let producer = producer(&broker.bootstrap(), &[("linger.ms", "0")])?;
    let mut produced = BTreeMap::new();
    for chunk in records.chunks(8) {
        let offsets = produce_all(&producer, &topic, 0, chunk).await?;
        for (offset, record) in offsets.into_iter().zip(chunk) {
            produced.insert(
                offset,
                (record.key.clone().unwrap(), record.value.clone().unwrap()),
            );
        }
    }
    let mut latest: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
    for (offset, (key, _)) in &produced {
        latest.insert(key.clone(), *offset);
    }
    // Within a few ticks compaction leaves little more than one record per key.
    let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let compacted = loop {
        let read = read_to_high_watermark(&consumer, &topic, 0)?;
        if read.len() < RECORDS / 4 {
            break read;
        }
        if Instant::now() > deadline {
            bail!("still {} of {RECORDS} records after 20 s", read.len());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let check = |read: &KeysValuesByOffset| {
        for (offset, kv) in read {
            assert_eq!(
                produced.get(offset),
                Some(kv),
                "offset {offset} holds what was produced there"
            );
        }
        for (key, offset) in &latest {
            assert!(
                read.contains_key(offset),
                "latest of {key:?} at {offset} survived"
            );
        }
    };
    check(&compacted);
    assert_eq!(
        watermarks(&consumer, &topic, 0)?,
        (0, RECORDS as i64),
        "offsets unchanged"
    );
    drop(consumer);
    broker.restart()?;
    let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
    let after_restart = read_to_high_watermark(&consumer, &topic, 0)?;
    check(&after_restart);
    assert!(after_restart.len() <= compacted.len());
    Ok(())
}
