//! A broker whose data dir holds more partitions than its open-file limit lets it open still
//! comes up: it binds its listener, answers Metadata, serves produce and fetch on the
//! partitions it opened, answers KAFKA_STORAGE_ERROR (retriable) on the others, and says so
//! once at start with the count.

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::{Broker, BrokerOptions};

const KAFKA_STORAGE_ERROR: i16 = 56;
const TOPIC: &str = "many";
/// Three descriptors each (one segment): far more than the limit below allows.
const PARTITIONS: i32 = 300;
const OPEN_FILES_LIMIT: u64 = 256;

fn value(what: &str, partition: i32) -> Vec<u8> {
    format!("{what}-{partition}").into_bytes()
}

/// The number in the start-up line "N of M partitions are not open".
fn not_open_at_start(stderr: &str) -> Result<u64> {
    let line = stderr
        .lines()
        .find(|l| l.contains("partitions are not open"))
        .context("no start-up line about partitions not opened")?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let count = words
        .windows(2)
        .find(|pair| pair[1] == "of")
        .context("the line gives no count")?[0];
    Ok(count.parse()?)
}

#[test]
fn a_broker_with_more_partitions_than_open_files_serves_those_it_could_open() -> Result<()> {
    let options = BrokerOptions::default().with_override("offsets.topic.num.partitions", "1");
    let mut broker = Broker::start(options)?;
    let mut conn = WireConnection::connect(broker.addr())?;
    wire::create_topic(&mut conn, TOPIC, PARTITIONS)?;
    for partition in 0..PARTITIONS {
        let batch = wire::record_batch(&[&value("seed", partition)], 1_700_000_000_000)?;
        let answer = wire::produce(&mut conn, TOPIC, partition, batch, 1)?;
        assert_eq!(answer.error_code, 0, "seeding partition {partition}");
    }
    drop(conn);
    broker.terminate()?;

    broker.options_mut().open_files_limit = Some(OPEN_FILES_LIMIT);
    broker.restart()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(TOPIC.to_string()))))]))
        .with_allow_auto_topic_creation(false);
    let topic = conn.request(&request, 8)?.topics.remove(0);
    assert_eq!(
        (topic.error_code, topic.partitions.len()),
        (0, PARTITIONS as usize)
    );

    let mut served = Vec::new();
    let mut refused = 0;
    for partition in 0..PARTITIONS {
        let batch = wire::record_batch(&[&value("again", partition)], 1_700_000_000_001)?;
        let answer = wire::produce(&mut conn, TOPIC, partition, batch, -1)?;
        match answer.error_code {
            0 => served.push(partition),
            KAFKA_STORAGE_ERROR => refused += 1,
            other => bail!("partition {partition} answered error {other}"),
        }
    }
    assert!(
        !served.is_empty(),
        "some partitions fit in {OPEN_FILES_LIMIT} descriptors"
    );
    assert!(
        refused > 0,
        "not all {PARTITIONS} partitions fit in {OPEN_FILES_LIMIT} descriptors"
    );
    // Exactly the partitions the start left closed are refused (the internal one opened first).
    assert_eq!(not_open_at_start(&broker.stderr_tail())?, refused);
    for partition in [served[0], *served.last().expect("not empty")] {
        let records = wire::fetch_records(&mut conn, TOPIC, partition, 0, 2)?;
        let values: Vec<Option<Bytes>> = records.into_iter().map(|r| r.value).collect();
        let expected = ["seed", "again"].map(|what| Some(Bytes::from(value(what, partition))));
        assert_eq!(values, expected, "partition {partition}");
    }
    assert!(broker.is_running());
    Ok(())
}
