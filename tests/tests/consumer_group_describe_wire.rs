//! A consumer group of KIP-848's protocol, joined with raw ConsumerGroupHeartbeat requests, as
//! every tool sees it: ConsumerGroupDescribe, `laminar group describe | list`, DescribeGroups
//! (GROUP_ID_NOT_FOUND, as Kafka answers) and the admin API's `/v1/groups`.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    DescribeGroupsRequest, GroupId, OffsetCommitRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::cli::{ok_on, rows_starting};
use laminar_tests::http::get_ok;
use laminar_tests::wire::{create_topic, WireConnection};
use laminar_tests::Broker;
use serde_json::Value;

const GROUP: &str = "kip848";
const MEMBER: &str = "member-one-aaaaaaaaaaaa";
/// COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS: asked again.
const NOT_READY: [i16; 2] = [14, 15];
const GROUP_ID_NOT_FOUND: i16 = 69;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// One ConsumerGroupHeartbeat (v1) of `MEMBER` at `epoch`, owning `owned`; asked again while
/// the coordinator is not ready. A join (epoch 0) subscribes to `orders`.
fn heartbeat(
    conn: &mut WireConnection,
    epoch: i32,
    owned: Vec<TopicPartitions>,
) -> Result<ConsumerGroupHeartbeatResponse> {
    let mut request = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_member_id(text(MEMBER))
        .with_member_epoch(epoch)
        .with_topic_partitions(Some(owned));
    if epoch == 0 {
        request = request
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(text("orders"))]));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let response = conn.request(&request, 1)?;
        match response.error_code {
            0 => return Ok(response),
            code if NOT_READY.contains(&code) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            code => bail!(
                "heartbeat at epoch {epoch}: error {code} {:?}",
                response.error_message
            ),
        }
    }
}

/// Commits offset 0 of `orders` partition `partition` as the member at `epoch` (OffsetCommit v9).
fn commit_as_member(conn: &mut WireConnection, epoch: i32, partition: i32) -> Result<()> {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_generation_id_or_member_epoch(epoch)
        .with_member_id(text(MEMBER))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(text("orders")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(0)
                .with_committed_leader_epoch(-1)])]);
    let response = conn.request(&request, 9)?;
    let code = response.topics[0].partitions[0].error_code;
    assert_eq!(code, 0, "OffsetCommit as the member at epoch {epoch}");
    Ok(())
}

/// Joins `MEMBER` to `GROUP` subscribed to `orders` (3 partitions), then heartbeats again owning
/// what it was given: its member epoch.
fn join_and_own_everything(conn: &mut WireConnection) -> Result<i32> {
    create_topic(conn, "orders", 3)?;
    let joined = heartbeat(conn, 0, Vec::new())?;
    assert!(joined.member_epoch >= 1, "{joined:?}");
    let mut epoch = joined.member_epoch;
    let mut owned: Vec<TopicPartitions> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let beat = heartbeat(conn, epoch, owned.clone())?;
        epoch = beat.member_epoch;
        if let Some(assignment) = beat.assignment {
            owned = assignment
                .topic_partitions
                .into_iter()
                .map(|t| {
                    TopicPartitions::default()
                        .with_topic_id(t.topic_id)
                        .with_partitions(t.partitions)
                })
                .collect();
        }
        let count: usize = owned.iter().map(|t| t.partitions.len()).sum();
        if count == 3 || Instant::now() > deadline {
            assert_eq!(count, 3, "one member is given every partition: {owned:?}");
            return Ok(epoch);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_kip848_member_is_described_on_the_wire_by_the_cli_and_over_http() -> Result<()> {
    let broker = Broker::start_default()?;
    let b = broker.bootstrap();
    let mut conn = WireConnection::connect(broker.addr())?;
    let epoch = join_and_own_everything(&mut conn)?;
    commit_as_member(&mut conn, epoch, 1)?;

    let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(GROUP))]);
    let described = conn.request(&request, 1)?;
    let group = &described.groups[0];
    assert_eq!(group.error_code, 0, "{group:?}");
    assert_eq!(group.members.len(), 1, "{group:?}");
    let member = &group.members[0];
    assert_eq!(member.member_id.as_str(), MEMBER);
    assert!(member.member_epoch >= 1, "{member:?}");
    let assigned: Vec<i32> = member
        .assignment
        .topic_partitions
        .iter()
        .flat_map(|t| t.partitions.clone())
        .collect();
    assert_eq!(assigned.len(), 3, "{member:?}");
    assert_eq!(
        member.assignment.topic_partitions[0].topic_name.as_str(),
        "orders"
    );

    let classic = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(GROUP))]);
    let answer = conn.request(&classic, 5)?;
    assert_eq!(answer.groups[0].error_code, GROUP_ID_NOT_FOUND, "{answer:?}");

    check_cli(&b, group.group_state.as_str())?;
    check_http(&broker)
}

/// `laminar group describe` prints the group's epochs and assignor, the MEMBERS table with the
/// member's partitions, and the committed offset owned by it; `laminar group list` lists it.
fn check_cli(b: &str, state: &str) -> Result<()> {
    let out = ok_on(b, &["group", "describe", GROUP], "")?;
    assert!(out.contains("protocol: consumer (KIP-848), assignor "), "{out}");
    assert!(out.contains("epochs:   group "), "{out}");
    assert!(out.contains("members:  1"), "{out}");
    assert!(out.contains("MEMBERS\nMEMBER"), "{out}");
    let members = rows_starting(&out, MEMBER);
    assert_eq!(members.len(), 1, "{out}");
    assert!(members[0].contains(&"orders:0,1,2"), "{out}");
    let offsets = rows_starting(&out, "orders");
    assert_eq!(offsets.len(), 1, "{out}");
    assert_eq!(offsets[0][..2], ["orders", "1"], "{out}");
    assert_eq!(offsets[0][5], MEMBER, "the owner is the member: {out}");

    let listed = ok_on(b, &["group", "list"], "")?;
    assert_eq!(
        rows_starting(&listed, GROUP),
        vec![vec![GROUP, state, "consumer", "consumer"]],
        "{listed}"
    );
    Ok(())
}

/// `GET /v1/groups` lists the group as type "consumer"; `GET /v1/groups/{id}` returns its
/// epochs, assignor and the member with its current and target assignments.
fn check_http(broker: &Broker) -> Result<()> {
    let http = broker.http_addr();
    let listed: Value = serde_json::from_str(&get_ok(http, "/v1/groups")?)?;
    let entry = listed["groups"]
        .as_array()
        .and_then(|groups| groups.iter().find(|g| g["group"] == GROUP))
        .cloned();
    assert_eq!(entry.expect("listed")["type"], "consumer", "{listed}");

    let group: Value = serde_json::from_str(&get_ok(http, &format!("/v1/groups/{GROUP}"))?)?;
    assert_eq!(group["type"], "consumer", "{group}");
    assert!(group["group_epoch"].as_i64() >= Some(1), "{group}");
    assert!(
        group["assignor"].as_str().is_some_and(|a| !a.is_empty()),
        "{group}"
    );
    let member = &group["members"][0];
    assert_eq!(member["member_id"], MEMBER, "{group}");
    assert!(member["member_epoch"].as_i64() >= Some(1), "{group}");
    for which in ["assignment", "target_assignment"] {
        assert_eq!(member[which][0]["topic"], "orders", "{which}: {group}");
        assert_eq!(
            member[which][0]["partitions"],
            serde_json::json!([0, 1, 2]),
            "{which}: {group}"
        );
    }
    assert_eq!(group["offsets"][0]["member_id"], MEMBER, "{group}");
    Ok(())
}
