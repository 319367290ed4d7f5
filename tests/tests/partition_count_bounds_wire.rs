//! Partition counts are bounded per request (`laminar.request.partitions.max`, INVALID_PARTITIONS)
//! and per broker (`max.broker.partitions`, POLICY_VIOLATION, auto-creation included). A refused
//! request creates nothing: no topic, no directory, no change to the topic table. A topic table
//! on disk past the broker's bound stops the start with a message naming the file and the key.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{CreatePartitionsRequest, CreateTopicsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::wire::WireConnection;
use laminar_tests::{Broker, BrokerOptions};

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_PARTITIONS: i16 = 37;
const POLICY_VIOLATION: i16 = 44;

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_string()))
}

/// CreateTopics v4 of `(name, partitions)`; the error code of each, in order.
fn create_topics(conn: &mut WireConnection, topics: &[(&str, i32)], validate_only: bool) -> Result<Vec<i16>> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_validate_only(validate_only)
        .with_topics(
            topics
                .iter()
                .map(|(topic, partitions)| {
                    CreatableTopic::default()
                        .with_name(name(topic))
                        .with_num_partitions(*partitions)
                        .with_replication_factor(1)
                })
                .collect(),
        );
    let response = conn.request(&request, 4)?;
    Ok(response.topics.iter().map(|t| t.error_code).collect())
}

/// CreatePartitions v1 growing `topic` to `count`; its error code.
fn create_partitions(conn: &mut WireConnection, topic: &str, count: i32) -> Result<i16> {
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(name(topic))
            .with_count(count)]);
    let response = conn.request(&request, 1)?;
    Ok(response.results.first().context("empty answer")?.error_code)
}

/// Metadata v8 for `topic`: its error code and partition count.
fn metadata(conn: &mut WireConnection, topic: &str, auto_create: bool) -> Result<(i16, usize)> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name(topic)))
        ]))
        .with_allow_auto_topic_creation(auto_create);
    let response = conn.request(&request, 8)?;
    let answer = response.topics.first().context("empty Metadata answer")?;
    Ok((answer.error_code, answer.partitions.len()))
}

/// Every path under `dir`, and the topic table's bytes.
fn data_dir_state(dir: &Path) -> Result<(BTreeSet<String>, Vec<u8>)> {
    let mut paths = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in fs::read_dir(&next)? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path.clone());
            }
            paths.insert(path.strip_prefix(dir)?.display().to_string());
        }
    }
    let table = fs::read(dir.join("__cluster_metadata/topics.json"))?;
    Ok((paths, table))
}

#[test]
fn create_topics_and_create_partitions_of_i32_max_are_refused_and_create_nothing() -> Result<()> {
    let mut broker = Broker::start(BrokerOptions::default())?;
    let mut conn = WireConnection::connect(broker.addr())?;
    assert_eq!(create_topics(&mut conn, &[("small", 2)], false)?, [0]);
    let before = data_dir_state(&broker.data_dir())?;

    assert_eq!(
        create_topics(&mut conn, &[("bomb", i32::MAX)], false)?,
        [INVALID_PARTITIONS]
    );
    assert_eq!(
        create_topics(&mut conn, &[("bomb", i32::MAX)], true)?,
        [INVALID_PARTITIONS]
    );
    assert_eq!(
        create_topics(&mut conn, &[("bomb", 100_001)], false)?,
        [INVALID_PARTITIONS]
    );
    assert_eq!(
        create_partitions(&mut conn, "small", i32::MAX)?,
        INVALID_PARTITIONS
    );
    assert_eq!(
        create_partitions(&mut conn, "small", 100_003)?,
        INVALID_PARTITIONS
    );

    assert_eq!(data_dir_state(&broker.data_dir())?, before, "nothing was created");
    assert_eq!(
        metadata(&mut conn, "bomb", false)?,
        (UNKNOWN_TOPIC_OR_PARTITION, 0)
    );
    assert_eq!(metadata(&mut conn, "small", false)?, (0, 2));
    // The start opens every partition: it finds two more, not two billion.
    broker.restart()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    assert_eq!(metadata(&mut conn, "small", false)?, (0, 2));
    assert_eq!(
        metadata(&mut conn, "bomb", false)?,
        (UNKNOWN_TOPIC_OR_PARTITION, 0)
    );
    Ok(())
}

#[test]
fn the_bounds_count_every_topic_of_the_request_and_of_the_broker() -> Result<()> {
    let options = BrokerOptions::default()
        .with_override("offsets.topic.num.partitions", "5")
        .with_override("max.broker.partitions", "60")
        .with_override("laminar.request.partitions.max", "40");
    let broker = Broker::start(options)?;
    let mut conn = WireConnection::connect(broker.addr())?;
    // One request: 30 fit, 20 more would make it add 50.
    assert_eq!(
        create_topics(&mut conn, &[("a", 30), ("b", 20)], false)?,
        [0, INVALID_PARTITIONS]
    );
    // The broker: 5 internal + 30 + 20 = 55 of 60.
    assert_eq!(create_topics(&mut conn, &[("b", 20)], false)?, [0]);
    assert_eq!(create_topics(&mut conn, &[("c", 6)], true)?, [POLICY_VIOLATION]);
    assert_eq!(create_topics(&mut conn, &[("c", 6)], false)?, [POLICY_VIOLATION]);
    assert_eq!(create_partitions(&mut conn, "b", 26)?, POLICY_VIOLATION);
    assert_eq!(create_partitions(&mut conn, "b", 25)?, 0);
    // Full: auto-creation is refused too (num.partitions is 1).
    assert_eq!(metadata(&mut conn, "auto", true)?, (POLICY_VIOLATION, 0));
    assert_eq!(create_topics(&mut conn, &[("c", 1)], false)?, [POLICY_VIOLATION]);
    assert_eq!(metadata(&mut conn, "b", false)?, (0, 25));
    assert_eq!(metadata(&mut conn, "c", false)?, (UNKNOWN_TOPIC_OR_PARTITION, 0));
    Ok(())
}

#[test]
fn a_topic_table_past_the_broker_bound_stops_the_start_with_the_file_and_key_named() -> Result<()> {
    let mut broker =
        Broker::start(BrokerOptions::default().with_override("offsets.topic.num.partitions", "1"))?;
    let mut conn = WireConnection::connect(broker.addr())?;
    assert_eq!(create_topics(&mut conn, &[("kept", 10)], false)?, [0]);
    broker.terminate()?;
    broker
        .options_mut()
        .overrides
        .push(("max.broker.partitions".to_string(), "5".to_string()));
    let refused = broker.restart().expect_err("11 partitions do not fit in 5");
    let text = format!("{refused:#}");
    assert!(
        text.contains("topics.json")
            && text.contains("max.broker.partitions")
            && text.contains("11 partitions"),
        "{text}"
    );
    Ok(())
}
