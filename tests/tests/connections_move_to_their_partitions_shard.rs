//! A connection whose requests all name partitions of one other shard moves to that shard
//! (docs/decisions/0025, small requests and connections that move, `broker/src/handlers/placement.rs`),
//! against the real binary with two
//! shards.
//!
//! Proves: one connection that produces pipelined batches to partition 0, then to partition 1
//! (owned by different shards, so it moves at least once whichever shard the kernel gave it),
//! gets every batch acknowledged in request order at contiguous offsets, none lost or doubled,
//! requests sent before a move and handled after it included; fetches on that connection read
//! every record back in order; the broker counts the moves.

use anyhow::{ensure, Result};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::http::{get_ok, MetricsPage};
use laminar_tests::rdkafka_client::unique_topic;
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::Broker;

/// Produce requests in flight at once on the connection, as a Kafka producer keeps them.
const PIPELINED: usize = 5;
/// Rounds of `PIPELINED` requests per partition: 100 requests, past the 32 in a row after
/// which a connection moves, so the move happens with requests in flight.
const ROUNDS: usize = 20;
/// Records per batch.
const RECORDS: i64 = 3;

fn produce_request(topic: &str, partition: i32, round: usize, slot: usize) -> Result<ProduceRequest> {
    let values: Vec<Vec<u8>> = (0..RECORDS)
        .map(|i| format!("p{partition}-r{round}-s{slot}-{i}").into_bytes())
        .collect();
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    Ok(ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(wire::record_batch(&refs, 1_700_000_000_000)?))])]))
}

/// Produces `ROUNDS` × `PIPELINED` batches to `partition`, `PIPELINED` in flight at a time, and
/// checks each answer: no error, base offsets contiguous from 0 in request order.
fn produce_pipelined(conn: &mut WireConnection, topic: &str, partition: i32) -> Result<()> {
    let mut expected_base = 0;
    for round in 0..ROUNDS {
        let mut sent = Vec::with_capacity(PIPELINED);
        for slot in 0..PIPELINED {
            sent.push(conn.send(&produce_request(topic, partition, round, slot)?, 8)?);
        }
        for correlation_id in sent {
            let response = conn.receive::<ProduceRequest>(correlation_id, 8)?;
            let answer = &response.responses[0].partition_responses[0];
            ensure!(
                (answer.error_code, answer.base_offset) == (0, expected_base),
                "partition {partition} round {round}: answered (error, base) ({}, {}), expected (0, {expected_base})",
                answer.error_code,
                answer.base_offset
            );
            expected_base += RECORDS;
        }
    }
    Ok(())
}

/// Every value stored in `partition`, in offset order.
fn stored_values(conn: &mut WireConnection, topic: &str, partition: i32) -> Result<Vec<String>> {
    let mut values = Vec::new();
    loop {
        let data = wire::fetch(conn, topic, partition, values.len() as i64)?;
        let records = wire::decode_records(&data)?;
        if records.is_empty() {
            return Ok(values);
        }
        for record in records {
            ensure!(
                record.offset == values.len() as i64,
                "offset {} out of order",
                record.offset
            );
            values.push(String::from_utf8_lossy(record.value.as_deref().unwrap_or_default()).into_owned());
        }
    }
}

#[test]
fn a_connection_moves_to_the_shard_of_its_partitions_and_loses_no_request() -> Result<()> {
    let broker = Broker::start_default()?;
    let topic = unique_topic("moving");
    let mut conn = WireConnection::connect(broker.addr())?;
    wire::create_topic(&mut conn, &topic, 2)?;
    for partition in [0, 1] {
        produce_pipelined(&mut conn, &topic, partition)?;
    }
    for partition in [0, 1] {
        let expected: Vec<String> = (0..ROUNDS)
            .flat_map(|round| {
                (0..PIPELINED).flat_map(move |slot| {
                    (0..RECORDS).map(move |i| format!("p{partition}-r{round}-s{slot}-{i}"))
                })
            })
            .collect();
        assert_eq!(
            stored_values(&mut conn, &topic, partition)?,
            expected,
            "partition {partition}: every record once, in request order"
        );
    }
    let page = MetricsPage::parse(&get_ok(broker.http_addr(), "/metrics")?)?;
    let moved = page.sum("laminar_kafka_connections_moved_total");
    assert!(
        moved >= 1.0,
        "partitions 0 and 1 live on different shards, so the connection moved at least once: {moved}"
    );
    Ok(())
}

/// Groups whose coordinators (their `__consumer_offsets` partitions) are spread over both
/// shards of a two-shard broker: whichever shard the kernel gives the connection, one of them
/// lives on the other.
const GROUPS_ON_BOTH_SHARDS: [&str; 4] = ["commits-a", "commits-b", "commits-c", "commits-d"];
/// Commits per group, past the 32 requests in a row after which a connection moves.
const COMMITS_PER_GROUP: i64 = 40;

/// A connection that only commits offsets (a consumer's coordinator connection) moves to its
/// group's coordinator shard, and every commit, pipelined across the move, is answered and kept.
#[test]
fn a_connection_that_commits_moves_to_its_groups_coordinator_and_loses_no_commit() -> Result<()> {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, OffsetCommitRequest};
    let broker = Broker::start_default()?;
    let topic = unique_topic("committed");
    let mut conn = WireConnection::connect(broker.addr())?;
    wire::create_topic(&mut conn, &topic, 1)?;
    for group in GROUPS_ON_BOTH_SHARDS {
        let commit = |offset: i64| {
            OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str(group)))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)])])
        };
        for first in (1..=COMMITS_PER_GROUP).step_by(PIPELINED) {
            let last = (first + PIPELINED as i64).min(COMMITS_PER_GROUP + 1);
            let sent: Vec<i32> = (first..last)
                .map(|o| conn.send(&commit(o), 2))
                .collect::<Result<_>>()?;
            for correlation_id in sent {
                let answer = conn.receive::<OffsetCommitRequest>(correlation_id, 2)?;
                let code = answer.topics[0].partitions[0].error_code;
                ensure!(code == 0, "{group}: commit answered error {code}");
            }
        }
    }
    let page = MetricsPage::parse(&get_ok(broker.http_addr(), "/metrics")?)?;
    let moved = page.sum("laminar_kafka_connections_moved_total");
    assert!(
        moved >= 1.0,
        "the groups' coordinators live on both shards, so the connection moved: {moved}"
    );
    for group in GROUPS_ON_BOTH_SHARDS {
        let committed = wire::committed_offset(&mut conn, group, (&topic, 0))?;
        assert_eq!(
            committed, COMMITS_PER_GROUP,
            "{group}: the last commit is the committed offset"
        );
    }
    Ok(())
}
