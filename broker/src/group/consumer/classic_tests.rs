//! A classic group moving to KIP-848's protocol and back, driven by hand: the classic member
//! keeps its partitions through the conversion, gives up what the new member gets only by
//! joining again without it, and the group becomes classic again when the new member leaves.

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition;
use kafka_protocol::messages::{ConsumerProtocolSubscription, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use uuid::Uuid;

use super::classic::{encode_assignment, ClassicJoin};
use super::member::{HeartbeatArgs, LEAVE_EPOCH};
use super::records::{MemberState, TopicPartitions};
use super::subscription::TopicList;
use super::{ConsumerGroup, ConsumerGroupSettings};
use crate::group::member::JoinArgs;
use crate::group::state::{Group, GroupSettings, GroupState};

const TOPIC: u128 = 7;

fn topics() -> TopicList {
    let mut list = TopicList::default();
    list.topics.insert("orders".into(), (Uuid::from_u128(TOPIC), 4));
    list
}

fn partitions(set: &[i32]) -> TopicPartitions {
    [(Uuid::from_u128(TOPIC), set.iter().copied().collect())].into()
}

/// A consumer protocol subscription (v1) to "orders", saying it owns `owned`.
fn subscription(owned: &[i32]) -> Bytes {
    let owned = TopicPartition::default()
        .with_topic(TopicName(StrBytes::from_static_str("orders")))
        .with_partitions(owned.to_vec());
    let subscription = ConsumerProtocolSubscription::default()
        .with_topics(vec![StrBytes::from_static_str("orders")])
        .with_owned_partitions(vec![owned]);
    let mut out = BytesMut::new();
    out.extend_from_slice(&1i16.to_be_bytes());
    subscription.encode(&mut out, 1).expect("encodes");
    out.freeze()
}

fn join_args(owned: &[i32]) -> JoinArgs {
    JoinArgs {
        member_id: String::new(),
        group_instance_id: None,
        client_id: "classic".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), subscription(owned))],
        require_known_member_id: false,
        fresh_member_id: "a".into(),
    }
}

/// A Stable classic group whose only member "a" owns every partition of "orders".
fn stable_classic_group() -> Group {
    let mut group = Group::new(
        "g".into(),
        GroupSettings {
            initial_rebalance_delay_ms: 0,
        },
    );
    let joined = group.join(join_args(&[]), 0);
    assert!(futures::FutureExt::now_or_never(joined).is_some());
    let all = encode_assignment(&partitions(&[0, 1, 2, 3]), &topics());
    let synced = group.sync("a", None, 1, (None, None), vec![("a".into(), all)], 0);
    assert!(futures::FutureExt::now_or_never(synced).is_some());
    assert_eq!(group.state, GroupState::Stable);
    group
}

fn classic_join(owned: &[i32]) -> ClassicJoin {
    let args = join_args(owned);
    ClassicJoin {
        member_id: "a".into(),
        instance_id: None,
        client_id: args.client_id,
        client_host: args.client_host,
        session_timeout_ms: args.session_timeout_ms,
        rebalance_timeout_ms: args.rebalance_timeout_ms,
        protocols: args.protocols,
    }
}

fn new_member(epoch: i32, owned: &[i32]) -> HeartbeatArgs {
    HeartbeatArgs {
        member_id: "n".into(),
        epoch,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: (epoch == 0).then(|| vec!["orders".to_string()]),
        owned: Some(partitions(owned)),
        client_id: "new".into(),
        ..HeartbeatArgs::default()
    }
}

#[test]
fn a_classic_member_hands_partitions_over_only_by_joining_again_without_them() {
    let (list, settings) = (topics(), ConsumerGroupSettings::default());
    let mut group = ConsumerGroup::from_classic(&stable_classic_group(), &list, 0).expect("converts");
    assert_eq!(
        (group.epoch, group.members["a"].assignment.assigned.clone()),
        (1, partitions(&[0, 1, 2, 3]))
    );
    assert_eq!(group.classic_heartbeat("a", 1, 10), Ok(()));

    let joined = group
        .heartbeat(new_member(0, &[]), &list, &settings, 20)
        .expect("joins");
    assert_eq!(
        joined.assignment,
        Some(TopicPartitions::new()),
        "nothing is free yet"
    );
    assert_eq!(
        group.classic_heartbeat("a", 1, 30),
        Err(ResponseError::RebalanceInProgress)
    );

    // A cooperative member joins again still owning everything: it is told to keep half.
    let rejoined = group
        .classic_join(classic_join(&[0, 1, 2, 3]), &list, &settings, 40)
        .expect("rejoins");
    assert_eq!(
        group.members["a"].assignment.state,
        MemberState::UnrevokedPartitions
    );
    let kept = group
        .classic_sync("a", rejoined.generation_id, &list)
        .expect("syncs");
    let kept_partitions = group.members["a"].assignment.assigned.clone();
    assert_eq!(kept, encode_assignment(&kept_partitions, &list));
    assert_eq!(kept_partitions.values().map(|s| s.len()).sum::<usize>(), 2);

    // It let go: it reaches the group's epoch, and the new member gets the rest.
    let owned: Vec<i32> = kept_partitions.values().flatten().copied().collect();
    let settled = group
        .classic_join(classic_join(&owned), &list, &settings, 50)
        .expect("rejoins");
    assert_eq!(settled.generation_id, group.assignment_epoch);
    assert_eq!(group.classic_heartbeat("a", settled.generation_id, 60), Ok(()));
    let beat = group
        .heartbeat(new_member(joined.epoch, &[]), &list, &settings, 70)
        .expect("beats");
    let got: Vec<i32> = beat
        .assignment
        .expect("its partitions")
        .values()
        .flatten()
        .copied()
        .collect();
    assert_eq!(got.len(), 2);
    assert!(
        got.iter().all(|p| !owned.contains(p)),
        "no partition has two owners"
    );
}

#[test]
fn the_group_becomes_classic_again_when_its_last_new_member_leaves() {
    let (list, settings) = (topics(), ConsumerGroupSettings::default());
    let mut group = ConsumerGroup::from_classic(&stable_classic_group(), &list, 0).expect("converts");
    group
        .heartbeat(new_member(0, &[]), &list, &settings, 10)
        .expect("joins");
    assert!(!group.only_classic_members());
    let leave = HeartbeatArgs {
        member_id: "n".into(),
        epoch: LEAVE_EPOCH,
        ..HeartbeatArgs::default()
    };
    group.heartbeat(leave, &list, &settings, 20).expect("leaves");
    assert!(group.only_classic_members());
    let members = group.into_classic_members(&list, 30);
    assert_eq!(members.len(), 1);
    assert_eq!(
        members[0].assignment,
        encode_assignment(&partitions(&[0, 1, 2, 3]), &list)
    );
    let classic = Group::downgraded(
        "g".into(),
        GroupSettings {
            initial_rebalance_delay_ms: 0,
        },
        group.epoch,
        members,
        30,
    );
    assert_eq!(
        classic.state,
        GroupState::PreparingRebalance,
        "its members join again"
    );
    assert_eq!(classic.protocol_name.as_deref(), Some("range"));
}
