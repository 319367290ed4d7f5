//! Requests that stopped or wedged the broker before, replayed with their exact bytes: each now
//! gets a Kafka error code or a closed connection, the broker process lives on, the connection
//! (where it stays open) answers the next request, and a fetch long poll costs no CPU.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerId, DeleteRecordsRequest, FetchRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::process::cpu_time;
use laminar_tests::wire::{self, Reaction, WireConnection};
use laminar_tests::{Broker, BrokerOptions};

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_REQUEST: i16 = 42;
const REACTION_WAIT: Duration = Duration::from_secs(5);

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// The broker still runs and a fresh connection gets an ApiVersions answer.
fn assert_alive(broker: &mut Broker, after: &str) -> Result<()> {
    assert!(
        broker.is_running(),
        "broker died after {after}; stderr:\n{}",
        broker.stderr_tail()
    );
    let mut conn = WireConnection::connect(broker.addr())?;
    let answer = conn.request(&ApiVersionsRequest::default(), 0)?;
    assert_eq!(answer.error_code, 0, "ApiVersions after {after}");
    Ok(())
}

/// A frame: size prefix, then `body` (request header and request body, hand-encoded).
fn frame(body: &[u8]) -> Vec<u8> {
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    frame
}

/// Array counts far beyond the frame made the codec reserve them up front (154 GB for
/// 0x7fffffff Metadata topics: the process aborted). Each frame below is a few dozen bytes.
#[test]
fn array_counts_beyond_the_frame_close_the_connection_without_allocating() -> Result<()> {
    let mut broker = Broker::start(BrokerOptions::default())?;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "Metadata v1, topics = 0x7fffffff",
            frame(&[
                0, 3, 0, 1, 0, 0, 0, 7, // api key 3, version 1, correlation id 7
                0, 4, b'h', b'o', b's', b't', // client id "host"
                0x7f, 0xff, 0xff, 0xff, // topics: i32 count
            ]),
        ),
        (
            "Metadata v9 (flexible), topics = compact 2^31",
            frame(&[
                0, 3, 0, 9, 0, 0, 0, 8, // api key 3, version 9, correlation id 8
                0xff, 0xff, // client id null
                0,    // header tagged fields
                0x81, 0x80, 0x80, 0x80, 0x08, // topics: uvarint 2^31 + 1
                1, 0, 0, // auto-create, authorized operations, tagged fields
            ]),
        ),
        (
            "Produce v3, topic_data = 0x7fffffff",
            frame(&[
                0, 0, 0, 3, 0, 0, 0, 9, 0xff, 0xff, // api 0 v3, correlation 9, client id null
                0xff, 0xff, // transactional id null
                0xff, 0xff, 0, 0, 0x75, 0x30, // acks -1, timeout 30000
                0x7f, 0xff, 0xff, 0xff, // topic_data: i32 count
            ]),
        ),
        (
            "Fetch v4, topics = 0x7fffffff",
            frame(&[
                0, 1, 0, 4, 0, 0, 0, 10, 0xff, 0xff, // api 1 v4, correlation 10, client id null
                0xff, 0xff, 0xff, 0xff, 0, 0, 0, 100, 0, 0, 0, 1, // replica -1, wait 100, min 1
                0, 0, 0x10, 0, 0, // max bytes 4096, isolation 0
                0x7f, 0xff, 0xff, 0xff, // topics: i32 count
            ]),
        ),
        (
            "OffsetCommit v8 (flexible), topics = compact 2^32 - 1",
            frame(&[
                0, 8, 0, 8, 0, 0, 0, 11, 0xff, 0xff, 0, // api 8 v8, correlation 11, header
                2, b'g', // group id "g" (compact)
                0xff, 0xff, 0xff, 0xff, // generation -1
                1, 0, // member id "" and instance id null (compact)
                0xff, 0xff, 0xff, 0xff, 0x0f, // topics: uvarint 2^32 - 1
            ]),
        ),
    ];
    for (what, bytes) in cases {
        let mut conn = WireConnection::connect(broker.addr())?;
        conn.write_raw(&bytes)?;
        let reaction = conn.reaction(REACTION_WAIT)?;
        assert_eq!(reaction, Reaction::Closed, "{what}");
        assert_alive(&mut broker, what)?;
    }
    Ok(())
}

/// Partition -1 and -2 reached the routing table's assertion and stopped the process (exit 70).
#[test]
fn negative_partition_indexes_get_unknown_topic_or_partition() -> Result<()> {
    let mut broker = Broker::start(BrokerOptions::default())?;
    let topic = "negative-partitions";
    let mut conn = WireConnection::connect(broker.addr())?;
    wire::create_topic(&mut conn, topic, 2)?;
    for partition in [-1, -2, i32::MIN] {
        let batch = wire::record_batch(&[b"v"], 1_700_000_000_000)?;
        let produced = wire::produce(&mut conn, topic, partition, batch, -1)?;
        assert_eq!(
            produced.error_code, UNKNOWN_TOPIC_OR_PARTITION,
            "produce to {partition}"
        );
        let fetched = wire::fetch(&mut conn, topic, partition, 0)?;
        assert_eq!(
            fetched.error_code, UNKNOWN_TOPIC_OR_PARTITION,
            "fetch {partition}"
        );
        let (listed, _, _) = wire::list_offset(&mut conn, topic, partition, -1)?;
        assert_eq!(listed, UNKNOWN_TOPIC_OR_PARTITION, "list offsets of {partition}");
        let request = DeleteRecordsRequest::default()
            .with_timeout_ms(5_000)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(partition)
                    .with_offset(0)])]);
        let deleted = conn.request(&request, 1)?;
        let code = deleted.topics[0].partitions[0].error_code;
        assert_eq!(code, UNKNOWN_TOPIC_OR_PARTITION, "delete records of {partition}");
        assert_alive(&mut broker, &format!("partition {partition}"))?;
    }
    Ok(())
}

fn partition_data(index: i32) -> Result<PartitionProduceData> {
    Ok(PartitionProduceData::default()
        .with_index(index)
        .with_records(Some(wire::record_batch(&[b"dup"], 1_700_000_000_000)?)))
}

/// The same partition twice made the request wait for itself: never answered, and the
/// connection answered nothing after it. A topic named twice with distinct partitions is fine.
#[test]
fn produce_naming_a_partition_twice_is_answered_and_the_connection_goes_on() -> Result<()> {
    let mut broker = Broker::start(BrokerOptions::default())?;
    let topic = "named-twice";
    let mut conn = WireConnection::connect(broker.addr())?;
    conn.stream().set_read_timeout(Some(REACTION_WAIT))?;
    wire::create_topic(&mut conn, topic, 3)?;
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![partition_data(0)?, partition_data(0)?]),
            TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![partition_data(1)?]),
            TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![partition_data(2)?]),
        ]);
    let response = conn
        .request(&request, 8)
        .context("the answer to the duplicate request")?;
    let answers: Vec<(i32, i16)> = response
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter().map(|p| (p.index, p.error_code)))
        .collect();
    assert_eq!(
        answers,
        vec![(0, INVALID_REQUEST), (0, INVALID_REQUEST), (1, 0), (2, 0)],
        "every entry is answered; both entries of partition 0 refused, the others appended"
    );
    // Nothing of partition 0 was appended, and the connection still answers.
    assert_eq!(wire::list_offset(&mut conn, topic, 0, -1)?.1, 0);
    let batch = wire::record_batch(&[b"after"], 1_700_000_000_000)?;
    let after = wire::produce(&mut conn, topic, 0, batch, -1)?;
    assert_eq!((after.error_code, after.base_offset), (0, 0));
    assert_alive(&mut broker, "a produce naming a partition twice")
}

/// A fetch whose min_bytes exceeds what the partition holds waits for max_wait_ms. It compared
/// against the fetch offset rather than what it had read, so it re-read in a loop: 4.99 s of
/// CPU in a 5 s poll. Now it sleeps until an append.
#[test]
fn a_long_poll_short_of_min_bytes_waits_without_burning_cpu() -> Result<()> {
    let broker = Broker::start(BrokerOptions::default())?;
    let topic = "long-poll";
    let mut conn = WireConnection::connect(broker.addr())?;
    wire::create_topic(&mut conn, topic, 2)?;
    for partition in 0..2 {
        let batch = wire::record_batch(&[b"some bytes, fewer than min_bytes"], 1_700_000_000_000)?;
        assert_eq!(
            wire::produce(&mut conn, topic, partition, batch, -1)?.error_code,
            0
        );
    }
    let wait = Duration::from_secs(3);
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(wait.as_millis() as i32)
        .with_min_bytes(1 << 20)
        .with_max_bytes(8 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(
                (0..2)
                    .map(|p| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(1 << 20)
                    })
                    .collect(),
            )]);
    let pid = broker.pid().context("broker pid")?;
    let cpu_before = cpu_time(pid)?;
    let started = Instant::now();
    let response = conn.request(&request, 11)?;
    let waited = started.elapsed();
    let cpu_used = cpu_time(pid)? - cpu_before;
    let returned: usize = response.responses[0]
        .partitions
        .iter()
        .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
        .sum();
    assert!(returned > 0, "the data there is returned at the deadline");
    assert!(
        waited >= wait - Duration::from_millis(100),
        "answered after {waited:?}"
    );
    // A spinning wait uses the whole poll; an idle one a few ticks.
    if cpu_used > wait / 5 {
        bail!("the long poll used {cpu_used:?} of CPU in {waited:?}");
    }
    Ok(())
}
