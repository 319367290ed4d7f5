//! TxnOffsetCommit (API 28) against a real single-node broker: the offsets a transactional
//! producer commits for a group stay pending until its transaction ends, so OffsetFetch asking
//! for stable offsets (v7+) answers UNSTABLE_OFFSET_COMMIT for them, and without it the last
//! committed offset. The member (v3, KIP-447), the topics and the producer are checked first.
//! Then a whole transaction through the transaction coordinator: its COMMIT marker makes the
//! offsets committed, an ABORT marker drops them.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, ApiKey, ApiVersionsRequest, GroupId, OffsetFetchRequest, ProducerId, TopicName,
    TransactionalId, TxnOffsetCommitRequest,
};
use laminar_tests::rdkafka_client::unique_topic;
use laminar_tests::transactions::{self, str_bytes, until_settled, SETTLE_WITHIN};
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::Broker;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
const UNSTABLE_OFFSET_COMMIT: i16 = 88;

/// A TxnOffsetCommit of `offset` for `(topic, partition)` by producer `producer_id` (epoch 0),
/// as a producer outside the group's generations sends it.
fn txn_commit(
    group: &str,
    producer_id: i64,
    (topic, partition): (&str, i32),
    offset: i64,
) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(str_bytes("txn-wire")))
        .with_group_id(GroupId(str_bytes(group)))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(0)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(str_bytes(topic)))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(offset)])])
}

/// The error code of the request's one partition.
fn commit_code(conn: &mut WireConnection, request: &TxnOffsetCommitRequest, version: i16) -> Result<i16> {
    let response = conn.request(request, version)?;
    let partition = response.topics.first().and_then(|t| t.partitions.first());
    partition
        .map(|p| p.error_code)
        .context("TxnOffsetCommit named no partition")
}

/// OffsetFetch v7 of one partition: (error code, committed offset).
fn fetch_v7(
    conn: &mut WireConnection,
    group: &str,
    (topic, partition): (&str, i32),
    stable: bool,
) -> Result<(i16, i64)> {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(str_bytes(group)))
        .with_require_stable(stable)
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(str_bytes(topic)))
            .with_partition_indexes(vec![partition])]));
    let response = conn.request(&request, 7)?;
    let found = response.topics.first().and_then(|t| t.partitions.first());
    found
        .map(|p| (p.error_code, p.committed_offset))
        .context("OffsetFetch named no partition")
}

/// OffsetFetch v8 (groups in a list) of one partition: (error code, committed offset).
fn fetch_v8(
    conn: &mut WireConnection,
    group: &str,
    (topic, partition): (&str, i32),
    stable: bool,
) -> Result<(i16, i64)> {
    let asked = OffsetFetchRequestGroup::default()
        .with_group_id(GroupId(str_bytes(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
            .with_name(TopicName(str_bytes(topic)))
            .with_partition_indexes(vec![partition])]));
    let request = OffsetFetchRequest::default()
        .with_require_stable(stable)
        .with_groups(vec![asked]);
    let response = conn.request(&request, 8)?;
    let found = response
        .groups
        .first()
        .and_then(|g| g.topics.first())
        .and_then(|t| t.partitions.first());
    found
        .map(|p| (p.error_code, p.committed_offset))
        .context("OffsetFetch named no partition")
}

#[test]
fn txn_offset_commit_is_advertised_and_checks_member_topics_and_producer() -> Result<()> {
    let broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let versions = conn.request(&ApiVersionsRequest::default(), 3)?;
    let advertised = versions
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::TxnOffsetCommit as i16)
        .map(|k| (k.min_version, k.max_version));
    assert_eq!(advertised, Some((0, 3)));

    let topic = unique_topic("txn-commit-checks");
    wire::create_topic(&mut conn, &topic, 1)?;
    let group = unique_topic("txn-commit-checks-group");
    let stranger = txn_commit(&group, 1_000, (&topic, 0), 1).with_member_id(str_bytes("nobody"));
    assert_eq!(commit_code(&mut conn, &stranger, 3)?, UNKNOWN_MEMBER_ID);
    let old_generation = txn_commit(&group, 1_000, (&topic, 0), 1).with_generation_id(5);
    assert_eq!(commit_code(&mut conn, &old_generation, 3)?, ILLEGAL_GENERATION);
    let unknown = txn_commit(&group, 1_000, (&topic, 9), 1);
    assert_eq!(commit_code(&mut conn, &unknown, 3)?, UNKNOWN_TOPIC_OR_PARTITION);
    let no_producer = txn_commit(&group, -1, (&topic, 0), 1);
    assert_eq!(
        commit_code(&mut conn, &no_producer, 0)?,
        INVALID_PRODUCER_ID_MAPPING
    );
    // Nothing was written: the group has no pending offset and no committed one.
    assert_eq!(fetch_v7(&mut conn, &group, (&topic, 0), true)?, (0, -1));
    Ok(())
}

#[test]
fn pending_txn_offsets_are_unstable_and_the_last_committed_one_is_answered_meanwhile() -> Result<()> {
    let mut broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let topic = unique_topic("txn-commit-pending");
    wire::create_topic(&mut conn, &topic, 2)?;
    let group = unique_topic("txn-commit-pending-group");
    assert_eq!(wire::commit_offset(&mut conn, &group, (&topic, 0), 5)?, 0);
    assert_eq!(wire::commit_offset(&mut conn, &group, (&topic, 1), 6)?, 0);

    for version in 0..=3 {
        let commit = txn_commit(&group, 2_000 + i64::from(version), (&topic, 0), 42);
        assert_eq!(commit_code(&mut conn, &commit, version)?, 0, "v{version}");
    }
    assert_eq!(
        fetch_v7(&mut conn, &group, (&topic, 0), true)?,
        (UNSTABLE_OFFSET_COMMIT, -1)
    );
    assert_eq!(fetch_v7(&mut conn, &group, (&topic, 0), false)?, (0, 5));
    assert_eq!(
        fetch_v8(&mut conn, &group, (&topic, 0), true)?,
        (UNSTABLE_OFFSET_COMMIT, -1)
    );
    assert_eq!(fetch_v8(&mut conn, &group, (&topic, 0), false)?, (0, 5));
    // Only the partition the transaction wrote is unstable.
    assert_eq!(fetch_v7(&mut conn, &group, (&topic, 1), true)?, (0, 6));
    assert_eq!(wire::committed_offset(&mut conn, &group, (&topic, 0))?, 5);

    // Still pending after a restart: the replay keeps a transaction without its marker open.
    broker.restart()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    assert_eq!(
        fetch_v7(&mut conn, &group, (&topic, 0), true)?,
        (UNSTABLE_OFFSET_COMMIT, -1)
    );
    assert_eq!(fetch_v7(&mut conn, &group, (&topic, 0), false)?, (0, 5));
    Ok(())
}

/// One transaction of `transactional_id` that commits `offset` for the group's partition `tp`
/// (pending meanwhile) and ends with `commit`.
fn transaction(
    conn: &mut WireConnection,
    transactional_id: &str,
    group: &str,
    tp: (&str, i32),
    offset: i64,
    commit: bool,
) -> Result<()> {
    let id = TransactionalId(str_bytes(transactional_id));
    let (producer_id, epoch) = transactions::init_producer(conn, transactional_id, 60_000)?;
    let producer_id = ProducerId(producer_id);
    let add = AddOffsetsToTxnRequest::default()
        .with_transactional_id(id.clone())
        .with_producer_id(producer_id)
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(str_bytes(group)));
    let (code, ()) = until_settled(|| Ok((conn.request(&add, 3)?.error_code, ())))?;
    assert_eq!(code, 0, "AddOffsetsToTxn");
    let commit_offsets = txn_commit(group, producer_id.0, tp, offset)
        .with_transactional_id(id.clone())
        .with_producer_epoch(epoch);
    assert_eq!(commit_code(conn, &commit_offsets, 3)?, 0, "TxnOffsetCommit");
    assert_eq!(fetch_v7(conn, group, tp, true)?.0, UNSTABLE_OFFSET_COMMIT);
    let code = transactions::end(conn, transactional_id, (producer_id.0, epoch), commit)?;
    assert_eq!(code, 0, "EndTxn");
    Ok(())
}

/// The stable offset once the transaction's marker has settled the pending one.
fn stable_offset(conn: &mut WireConnection, group: &str, tp: (&str, i32)) -> Result<i64> {
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        match fetch_v7(conn, group, tp, true)? {
            (UNSTABLE_OFFSET_COMMIT, _) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50))
            }
            (0, offset) => return Ok(offset),
            other => bail!("OffsetFetch answered {other:?}"),
        }
    }
}

#[test]
fn a_commit_marker_makes_the_offsets_committed_and_an_abort_marker_drops_them() -> Result<()> {
    let mut broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let topic = unique_topic("txn-commit-markers");
    wire::create_topic(&mut conn, &topic, 1)?;
    let group = unique_topic("txn-commit-markers-group");
    let transactional_id = unique_topic("txn-commit-markers-id");
    assert_eq!(wire::commit_offset(&mut conn, &group, (&topic, 0), 5)?, 0);

    transaction(&mut conn, &transactional_id, &group, (&topic, 0), 42, true)?;
    assert_eq!(stable_offset(&mut conn, &group, (&topic, 0))?, 42);
    transaction(&mut conn, &transactional_id, &group, (&topic, 0), 50, false)?;
    assert_eq!(stable_offset(&mut conn, &group, (&topic, 0))?, 42, "aborted");
    // A plain commit after the transactions wins over them.
    assert_eq!(wire::commit_offset(&mut conn, &group, (&topic, 0), 60)?, 0);
    assert_eq!(stable_offset(&mut conn, &group, (&topic, 0))?, 60);

    // The replay finds the same: markers in the log end the transactions there too.
    broker.restart()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    assert_eq!(stable_offset(&mut conn, &group, (&topic, 0))?, 60);
    transaction(&mut conn, &transactional_id, &group, (&topic, 0), 70, true)?;
    assert_eq!(stable_offset(&mut conn, &group, (&topic, 0))?, 70);
    Ok(())
}
