//! OffsetForLeaderEpoch (API 23) against a real single-node broker, as a consumer validating
//! its position after a leader change asks it (KIP-320): the broker leads every partition at
//! epoch 0 (as Metadata says), so epoch 0 ends at the log end offset; a newer current epoch is
//! UNKNOWN_LEADER_EPOCH, a partition that does not exist UNKNOWN_TOPIC_OR_PARTITION.

use anyhow::Result;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::EpochEndOffset;
use kafka_protocol::messages::{BrokerId, OffsetForLeaderEpochRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::Broker;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

/// (partition, current leader epoch, asked epoch) of `topic`, answered in request order.
fn ask(
    conn: &mut WireConnection,
    topic: &str,
    asks: &[(i32, i32, i32)],
    version: i16,
) -> Result<Vec<EpochEndOffset>> {
    let partitions = asks
        .iter()
        .map(|&(partition, current, asked)| {
            OffsetForLeaderPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(current)
                .with_leader_epoch(asked)
        })
        .collect();
    let topic = OffsetForLeaderTopic::default()
        .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
        .with_partitions(partitions);
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![topic]);
    let response = conn.request(&request, version)?;
    Ok(response.topics.into_iter().flat_map(|t| t.partitions).collect())
}

#[test]
fn epoch_zero_ends_at_the_log_end_and_epochs_are_checked() -> Result<()> {
    let broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let topic = laminar_tests::rdkafka_client::unique_topic("ofle-wire");
    wire::create_topic(&mut conn, &topic, 2)?;
    for _ in 0..2 {
        let values: Vec<&[u8]> = vec![b"a", b"b", b"c"];
        let answer = wire::produce(&mut conn, &topic, 0, wire::record_batch(&values, 1_000)?, -1)?;
        assert_eq!(answer.error_code, 0);
    }
    for version in 2..=4 {
        let answers = ask(
            &mut conn,
            &topic,
            &[(0, 0, 0), (0, -1, 0), (0, 0, 3), (0, 1, 0), (999, 0, 0)],
            version,
        )?;
        let got: Vec<(i16, i32, i64)> = answers
            .iter()
            .map(|a| (a.error_code, a.leader_epoch, a.end_offset))
            .collect();
        assert_eq!(
            got,
            [
                (0, 0, 6),
                (0, 0, 6),
                (0, -1, -1),
                (UNKNOWN_LEADER_EPOCH, -1, -1),
                (UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
            ],
            "v{version}"
        );
    }
    // A partition never written answers its current epoch at offset 0.
    let answers = ask(&mut conn, &topic, &[(1, 0, 0)], 4)?;
    assert_eq!(
        (
            answers[0].error_code,
            answers[0].leader_epoch,
            answers[0].end_offset
        ),
        (0, 0, 0)
    );
    Ok(())
}
