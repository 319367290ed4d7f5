//! Requests whose answers come late (an acks=all produce or an OffsetCommit waiting for its
//! fdatasync, a long-poll fetch waiting for data, a JoinGroup waiting for its rebalance, a
//! SyncGroup) pipelined on one connection, many more than the broker owes at once: every one is
//! answered, in order, and the connection stays open. And an answer never waits for a later
//! request on the same connection: a long poll does not hold back the produce answer before it.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    FetchRequest, GroupId, JoinGroupRequest, OffsetCommitRequest, ProduceRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};
use laminar_tests::rdkafka_client::unique_topic;
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::{Broker, BrokerOptions};

/// Far more than the answers the broker owes one connection at once (16).
const PIPELINED: usize = 200;
/// Long enough for a JoinGroup of a new group not to be answered at once, short enough for
/// 200 of them to take little time.
const REBALANCE_DELAY_MS: &str = "50";

fn broker() -> Result<Broker> {
    Broker::start(
        BrokerOptions::default().with_override("group.initial.rebalance.delay.ms", REBALANCE_DELAY_MS),
    )
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Sends every request before reading any answer, then reads the answers in order (each within
/// the connection's 10 s read timeout). The requests are small: they all fit in the socket's
/// buffers, so the writes never wait for the broker.
fn pipelined<R: Request>(
    conn: &mut WireConnection,
    requests: &[R],
    version: i16,
) -> Result<Vec<R::Response>> {
    let ids: Vec<i32> = requests
        .iter()
        .map(|r| conn.send(r, version))
        .collect::<Result<_>>()?;
    ids.iter()
        .enumerate()
        .map(|(at, id)| {
            conn.receive::<R>(*id, version)
                .with_context(|| format!("the answer to pipelined request {at} of {}", ids.len()))
        })
        .collect()
}

fn commit_request(group: &str, topic: &str, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(str_bytes(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(str_bytes(topic)))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])])
}

#[test]
fn two_hundred_pipelined_offset_commits_are_all_answered_and_the_last_is_committed() -> Result<()> {
    let broker = broker()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let (group, topic) = (unique_topic("late-commit-group"), unique_topic("late-commit"));
    wire::create_topic(&mut conn, &topic, 1)?;
    let commits: Vec<OffsetCommitRequest> = (1..=PIPELINED as i64)
        .map(|offset| commit_request(&group, &topic, offset))
        .collect();
    for (at, answer) in pipelined(&mut conn, &commits, 2)?.iter().enumerate() {
        let code = answer.topics[0].partitions[0].error_code;
        ensure!(code == 0, "commit {at} answered error {code}");
    }
    let committed = wire::committed_offset(&mut conn, &group, (&topic, 0))?;
    ensure!(committed == PIPELINED as i64, "committed {committed}");
    Ok(())
}

#[test]
fn two_hundred_pipelined_acks_all_produces_are_all_answered_in_offset_order() -> Result<()> {
    let broker = broker()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let topic = unique_topic("late-produce");
    wire::create_topic(&mut conn, &topic, 1)?;
    let batch = wire::record_batch(&[b"one record"], 1_700_000_000_000)?;
    let produces: Vec<ProduceRequest> = (0..PIPELINED)
        .map(|_| wire::produce_request((&topic, 0), batch.clone(), -1))
        .collect();
    for (at, answer) in pipelined(&mut conn, &produces, 8)?.iter().enumerate() {
        let partition = &answer.responses[0].partition_responses[0];
        ensure!(
            partition.error_code == 0,
            "produce {at}: error {}",
            partition.error_code
        );
        ensure!(
            partition.base_offset == at as i64,
            "produce {at} at {}",
            partition.base_offset
        );
    }
    Ok(())
}

#[test]
fn two_hundred_pipelined_long_poll_fetches_each_wait_and_are_all_answered() -> Result<()> {
    let broker = broker()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let topic = unique_topic("late-fetch");
    wire::create_topic(&mut conn, &topic, 1)?;
    // At the log end of an empty partition: each waits its 100 ms for data that never comes.
    let fetches: Vec<FetchRequest> = (0..PIPELINED)
        .map(|_| wire::fetch_request((&topic, 0), 0, 100))
        .collect();
    let started = Instant::now();
    for (at, answer) in pipelined(&mut conn, &fetches, 11)?.iter().enumerate() {
        let partition = &answer.responses[0].partitions[0];
        ensure!(
            partition.error_code == 0,
            "fetch {at}: error {}",
            partition.error_code
        );
        ensure!(
            partition.records.as_ref().is_none_or(|r| r.is_empty()),
            "fetch {at} found records"
        );
    }
    // Each waited: the broker did not answer them all at once without waiting.
    let waited = started.elapsed();
    ensure!(
        waited >= Duration::from_millis(100),
        "200 long polls answered in {waited:?}"
    );
    Ok(())
}

fn join_request(group: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(str_bytes(group)))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(str_bytes("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default().with_name(str_bytes("range"))
        ])
}

/// JoinGroup v3 takes a new member without a member id round trip (v4+ asks for one first), so
/// each join waits for its group's initial rebalance delay. Then each (sole, so leading) member
/// syncs its group: answered once the group's record is durable.
#[test]
fn two_hundred_pipelined_joins_then_syncs_of_as_many_groups_are_all_answered() -> Result<()> {
    let broker = broker()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let prefix = unique_topic("late-join");
    let groups: Vec<String> = (0..PIPELINED).map(|at| format!("{prefix}-{at}")).collect();
    let joins: Vec<JoinGroupRequest> = groups.iter().map(|g| join_request(g)).collect();
    let joined = pipelined(&mut conn, &joins, 3)?;
    for (at, answer) in joined.iter().enumerate() {
        ensure!(answer.error_code == 0, "join {at}: error {}", answer.error_code);
        ensure!(
            answer.leader == answer.member_id,
            "join {at}: the sole member leads"
        );
    }
    let syncs: Vec<SyncGroupRequest> = groups
        .iter()
        .zip(&joined)
        .map(|(group, join)| {
            let assignment = SyncGroupRequestAssignment::default()
                .with_member_id(join.member_id.clone())
                .with_assignment(bytes::Bytes::from_static(b"assigned"));
            SyncGroupRequest::default()
                .with_group_id(GroupId(str_bytes(group)))
                .with_generation_id(join.generation_id)
                .with_member_id(join.member_id.clone())
                .with_assignments(vec![assignment])
        })
        .collect();
    for (at, answer) in pipelined(&mut conn, &syncs, 3)?.iter().enumerate() {
        ensure!(answer.error_code == 0, "sync {at}: error {}", answer.error_code);
        ensure!(&answer.assignment[..] == b"assigned", "sync {at}: its assignment");
    }
    Ok(())
}

/// A produce, then a fetch that waits 5 s for data that never comes, on one connection: the
/// produce's answer leaves at once, not after the fetch's wait.
#[test]
fn a_long_poll_fetch_does_not_hold_back_the_answer_to_the_request_before_it() -> Result<()> {
    let broker = broker()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let (written, watched) = (unique_topic("late-written"), unique_topic("late-watched"));
    wire::create_topic(&mut conn, &written, 1)?;
    wire::create_topic(&mut conn, &watched, 1)?;
    let batch = wire::record_batch(&[b"answered at once"], 1_700_000_000_000)?;
    let started = Instant::now();
    let produce_id = conn.send(&wire::produce_request((&written, 0), batch, -1), 8)?;
    let fetch_id = conn.send(&wire::fetch_request((&watched, 0), 0, 5_000), 11)?;
    let produced = conn.receive::<ProduceRequest>(produce_id, 8)?;
    let produce_answered = started.elapsed();
    ensure!(
        produced.responses[0].partition_responses[0].error_code == 0,
        "{produced:?}"
    );
    ensure!(
        produce_answered < Duration::from_millis(2_500),
        "the produce was answered after {produce_answered:?}, behind the fetch's 5 s wait"
    );
    let fetched = conn.receive::<FetchRequest>(fetch_id, 11)?;
    ensure!(fetched.responses[0].partitions[0].error_code == 0, "{fetched:?}");
    Ok(())
}

/// A JoinGroup that waits longer than `connections.max.idle.ms` for its rebalance: the client
/// is quiet meanwhile, but the connection owes it an answer, so it is not idle.
#[test]
fn a_connection_that_owes_an_answer_is_not_closed_as_idle() -> Result<()> {
    let options = BrokerOptions::default()
        .with_override("connections.max.idle.ms", "1000")
        .with_override("group.initial.rebalance.delay.ms", "3000");
    let broker = Broker::start(options)?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let joined = conn.request(&join_request(&unique_topic("late-idle-group")), 3)?;
    ensure!(joined.error_code == 0, "{joined:?}");
    Ok(())
}
