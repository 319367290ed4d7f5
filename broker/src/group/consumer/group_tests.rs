//! The consumer group's state machine against simulated clients: randomised joins, leaves,
//! heartbeats, slow revocations, timeouts and topic changes. At every step no two clients
//! believe they own the same partition; once the changes stop, every member reaches the group's
//! target assignment, which covers every subscribed partition once.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::member::{HeartbeatArgs, LEAVE_EPOCH, STATIC_LEAVE_EPOCH};
use super::reconcile::partitions_of;
use super::records::{MemberState, TopicPartitions};
use super::subscription::TopicList;
use super::{ConsumerGroup, ConsumerGroupSettings};

const SESSION_MS: i64 = 45_000;

fn settings() -> ConsumerGroupSettings {
    ConsumerGroupSettings {
        members_max: 20,
        ..ConsumerGroupSettings::default()
    }
}

/// A client as the coordinator's answers leave it.
#[derive(Debug, Clone, Default)]
struct Client {
    epoch: i32,
    owned: TopicPartitions,
    /// A slow client keeps partitions it was told to give up until it is no longer slow.
    slow: bool,
    instance_id: Option<String>,
}

fn join_args(id: &str, names: &[&str], regex: Option<&str>) -> HeartbeatArgs {
    HeartbeatArgs {
        member_id: id.to_string(),
        epoch: 0,
        rebalance_timeout_ms: 60_000,
        subscribed_topic_names: Some(names.iter().map(|n| n.to_string()).collect()),
        subscribed_topic_regex: regex.map(String::from),
        owned: Some(TopicPartitions::new()),
        client_id: "test".into(),
        ..HeartbeatArgs::default()
    }
}

/// One heartbeat of `client`, applying the answer as a client would.
fn beat(
    group: &mut ConsumerGroup,
    topics: &TopicList,
    id: &str,
    client: &mut Client,
    now_ms: i64,
) -> Result<(), ResponseError> {
    let args = HeartbeatArgs {
        member_id: id.to_string(),
        epoch: client.epoch,
        instance_id: client.instance_id.clone(),
        rebalance_timeout_ms: -1,
        owned: Some(client.owned.clone()),
        client_id: "test".into(),
        ..HeartbeatArgs::default()
    };
    let outcome = group.heartbeat(args, topics, &settings(), now_ms)?;
    client.epoch = outcome.epoch;
    if let Some(assignment) = outcome.assignment {
        if client.slow {
            // Takes what is new, keeps what it lost.
            for (t, p) in partitions_of(&assignment) {
                client.owned.entry(t).or_default().insert(p);
            }
        } else {
            client.owned = assignment;
        }
    }
    Ok(())
}

fn assert_disjoint(clients: &BTreeMap<String, Client>) {
    let mut seen = BTreeMap::new();
    for (id, client) in clients {
        for slot in partitions_of(&client.owned) {
            if let Some(other) = seen.insert(slot, id.clone()) {
                panic!("{slot:?} owned by {other} and {id}");
            }
        }
    }
}

fn topics(counts: &[(&str, i32)]) -> TopicList {
    let mut list = TopicList::default();
    for (i, (name, count)) in counts.iter().enumerate() {
        list.topics
            .insert(name.to_string(), (Uuid::from_u128(i as u128 + 1), *count));
    }
    list
}

/// Heartbeats every client until nothing changes; asserts the group settled.
fn settle(group: &mut ConsumerGroup, list: &TopicList, clients: &mut BTreeMap<String, Client>, now_ms: i64) {
    for _ in 0..6 {
        for (id, client) in clients.iter_mut() {
            client.slow = false;
            beat(group, list, id, client, now_ms).expect("a settling member's heartbeat is accepted");
        }
        assert_disjoint(clients);
    }
    assert_eq!(
        group.state_name(),
        if clients.is_empty() { "Empty" } else { "Stable" }
    );
    let mut covered = BTreeSet::new();
    for (id, client) in clients.iter() {
        let member = &group.members[id];
        assert_eq!(member.assignment.state, MemberState::Stable);
        assert_eq!(member.assignment.epoch, group.assignment_epoch);
        assert_eq!(client.owned, member.assignment.assigned);
        assert_eq!(
            Some(&client.owned),
            group.target.get(id).or(Some(&TopicPartitions::new()))
        );
        covered.extend(partitions_of(&client.owned));
    }
    let subscribed: BTreeSet<_> = group
        .members
        .values()
        .flat_map(|m| m.subscribed.iter().copied())
        .collect();
    let expected: BTreeSet<_> = subscribed
        .iter()
        .flat_map(|id| {
            let (_, count) = list
                .topics
                .values()
                .find(|(t, _)| t == id)
                .copied()
                .expect("listed");
            (0..count).map(move |p| (*id, p))
        })
        .collect();
    assert_eq!(covered, expected, "every subscribed partition is assigned once");
}

#[test]
fn members_join_and_leave_one_at_a_time_without_sharing_a_partition() {
    let list = topics(&[("orders", 6)]);
    let mut group = ConsumerGroup::new("g".into());
    let mut clients = BTreeMap::new();
    for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
        group
            .heartbeat(join_args(id, &["orders"], None), &list, &settings(), 0)
            .expect("joins");
        clients.insert(id.to_string(), Client::default());
        settle(&mut group, &list, &mut clients, 0);
        assert_eq!(group.epoch, i as i32 + 1);
    }
    assert!(clients.values().all(|c| partitions_of(&c.owned).count() == 2));
    let leave = HeartbeatArgs {
        member_id: "b".into(),
        epoch: LEAVE_EPOCH,
        ..HeartbeatArgs::default()
    };
    group.heartbeat(leave, &list, &settings(), 0).expect("leaves");
    clients.remove("b");
    settle(&mut group, &list, &mut clients, 0);
    assert!(clients.values().all(|c| partitions_of(&c.owned).count() == 3));
}

#[test]
fn stale_and_unknown_members_are_fenced() {
    let list = topics(&[("orders", 2)]);
    let mut group = ConsumerGroup::new("g".into());
    group
        .heartbeat(join_args("a", &["orders"], None), &list, &settings(), 0)
        .expect("joins");
    let mut wrong = HeartbeatArgs {
        member_id: "a".into(),
        epoch: 7,
        ..HeartbeatArgs::default()
    };
    assert_eq!(
        group.heartbeat(wrong.clone(), &list, &settings(), 0),
        Err(ResponseError::FencedMemberEpoch)
    );
    wrong.member_id = "nobody".into();
    assert_eq!(
        group.heartbeat(wrong, &list, &settings(), 0),
        Err(ResponseError::UnknownMemberId)
    );
    let bad = HeartbeatArgs {
        server_assignor: Some("sticky".into()),
        ..join_args("b", &["orders"], None)
    };
    assert_eq!(
        group.heartbeat(bad, &list, &settings(), 0),
        Err(ResponseError::UnsupportedAssignor)
    );
    let bad = join_args("b", &[], Some("(unclosed"));
    assert_eq!(
        group.heartbeat(bad, &list, &settings(), 0),
        Err(ResponseError::InvalidRegularExpression)
    );
}

#[test]
fn a_static_member_that_returns_keeps_its_partitions() {
    let list = topics(&[("orders", 4)]);
    let mut group = ConsumerGroup::new("g".into());
    let mut clients = BTreeMap::new();
    for id in ["a", "b"] {
        let args = HeartbeatArgs {
            instance_id: Some(format!("i-{id}")),
            ..join_args(id, &["orders"], None)
        };
        group.heartbeat(args, &list, &settings(), 0).expect("joins");
        clients.insert(
            id.to_string(),
            Client {
                instance_id: Some(format!("i-{id}")),
                ..Client::default()
            },
        );
        settle(&mut group, &list, &mut clients, 0);
    }
    let before = clients["a"].owned.clone();
    let epoch = group.epoch;
    let leave = HeartbeatArgs {
        member_id: "a".into(),
        epoch: STATIC_LEAVE_EPOCH,
        ..HeartbeatArgs::default()
    };
    group
        .heartbeat(leave, &list, &settings(), 0)
        .expect("leaves for now");
    clients.remove("a");
    let mut again = HeartbeatArgs {
        instance_id: Some("i-a".into()),
        ..join_args("a2", &["orders"], None)
    };
    let other = HeartbeatArgs {
        member_id: "x".into(),
        ..again.clone()
    };
    group
        .heartbeat(again.clone(), &list, &settings(), 10)
        .expect("returns");
    assert_eq!(group.epoch, epoch, "a static member's return is no rebalance");
    again.member_id = "a3".into();
    assert_eq!(
        group.heartbeat(other, &list, &settings(), 10),
        Err(ResponseError::UnreleasedInstanceId)
    );
    clients.insert(
        "a2".into(),
        Client {
            instance_id: Some("i-a".into()),
            epoch: group.members["a2"].assignment.epoch,
            ..Client::default()
        },
    );
    settle(&mut group, &list, &mut clients, 10);
    assert_eq!(clients["a2"].owned, before);
}

#[test]
fn a_regex_subscription_picks_up_a_topic_created_later() {
    let mut list = topics(&[("orders-eu", 2), ("payments", 2)]);
    let mut group = ConsumerGroup::new("g".into());
    let mut clients = BTreeMap::new();
    group
        .heartbeat(join_args("a", &[], Some("orders-.*")), &list, &settings(), 0)
        .expect("joins");
    clients.insert("a".to_string(), Client::default());
    settle(&mut group, &list, &mut clients, 0);
    assert_eq!(partitions_of(&clients["a"].owned).count(), 2);
    list.topics.insert("orders-us".into(), (Uuid::from_u128(99), 3));
    settle(&mut group, &list, &mut clients, 5_000);
    assert_eq!(partitions_of(&clients["a"].owned).count(), 5);
}

#[test]
fn a_member_that_stops_heartbeating_is_removed_after_its_session() {
    let list = topics(&[("orders", 4)]);
    let mut group = ConsumerGroup::new("g".into());
    let mut clients = BTreeMap::new();
    for id in ["a", "b"] {
        group
            .heartbeat(join_args(id, &["orders"], None), &list, &settings(), 0)
            .expect("joins");
        clients.insert(id.to_string(), Client::default());
    }
    settle(&mut group, &list, &mut clients, 0);
    assert!(!group.expire(SESSION_MS - 1));
    clients.remove("b");
    beat(
        &mut group,
        &list,
        "a",
        clients.get_mut("a").expect("a"),
        SESSION_MS - 1,
    )
    .expect("beats");
    assert!(group.expire(SESSION_MS));
    assert!(!group.members.contains_key("b"));
    settle(&mut group, &list, &mut clients, SESSION_MS);
    assert_eq!(partitions_of(&clients["a"].owned).count(), 4);
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One random step of the model: join, leave, heartbeat (maybe slow), a topic grows, time.
fn random_step(
    rng: &mut u64,
    group: &mut ConsumerGroup,
    list: &mut TopicList,
    clients: &mut BTreeMap<String, Client>,
    next_id: &mut u32,
    now: &mut i64,
) {
    let ids: Vec<String> = clients.keys().cloned().collect();
    let pick = |r: u64| ids.get(r as usize % ids.len().max(1)).cloned();
    match splitmix(rng) % 10 {
        0 | 1 => {
            let id = format!("m{next_id}");
            *next_id += 1;
            let names: &[&str] = if splitmix(rng).is_multiple_of(2) {
                &["t1"]
            } else {
                &["t1", "t2"]
            };
            if group
                .heartbeat(join_args(&id, names, None), list, &settings(), *now)
                .is_ok()
            {
                clients.insert(id, Client::default());
            }
        }
        2 => {
            if let Some(id) = pick(splitmix(rng)) {
                let leave = HeartbeatArgs {
                    member_id: id.clone(),
                    epoch: LEAVE_EPOCH,
                    ..HeartbeatArgs::default()
                };
                group
                    .heartbeat(leave, list, &settings(), *now)
                    .expect("a member leaves");
                clients.remove(&id);
            }
        }
        3 => {
            let t = if splitmix(rng).is_multiple_of(2) {
                "t1"
            } else {
                "t2"
            };
            let (_, count) = list.topics.get_mut(t).expect("listed");
            *count = (*count + 1).min(24);
        }
        4 => *now += 1_000,
        _ => {
            if let Some(id) = pick(splitmix(rng)) {
                let client = clients.get_mut(&id).expect("picked");
                client.slow = splitmix(rng).is_multiple_of(3);
                if beat(group, list, &id, client, *now).is_err() {
                    // Fenced: the client drops everything and leaves the model.
                    clients.remove(&id);
                }
            }
        }
    }
}

#[test]
fn randomised_members_never_share_a_partition_and_settle_on_the_target() {
    for seed in 0..200u64 {
        let mut rng = seed;
        let mut list = topics(&[("t1", 1 + (seed % 7) as i32), ("t2", 3)]);
        let mut group = ConsumerGroup::new("g".into());
        let mut clients = BTreeMap::new();
        let (mut next_id, mut now) = (0, 0);
        for _ in 0..120 {
            random_step(
                &mut rng,
                &mut group,
                &mut list,
                &mut clients,
                &mut next_id,
                &mut now,
            );
            assert_disjoint(&clients);
            // Every member the group holds is a live client (none was lost from the model).
            assert!(
                group.members.keys().all(|id| clients.contains_key(id)),
                "seed {seed}"
            );
        }
        settle(&mut group, &list, &mut clients, now);
    }
}

#[test]
fn members_that_name_their_rack_get_the_partitions_replicated_there() {
    let mut list = topics(&[("orders", 4)]);
    let rack = |r: &str| BTreeSet::from([r.to_string()]);
    list.racks.insert(
        Uuid::from_u128(1),
        vec![rack("r1"), rack("r2"), rack("r1"), rack("r2")],
    );
    let mut group = ConsumerGroup::new("g".into());
    let mut clients = BTreeMap::new();
    for (id, r) in [("a", "r2"), ("b", "r1")] {
        let args = HeartbeatArgs {
            rack_id: Some(r.to_string()),
            ..join_args(id, &["orders"], None)
        };
        group.heartbeat(args, &list, &settings(), 0).expect("joins");
        clients.insert(id.to_string(), Client::default());
    }
    settle(&mut group, &list, &mut clients, 0);
    let owned = |id: &str| {
        partitions_of(&clients[id].owned)
            .map(|(_, p)| p)
            .collect::<Vec<_>>()
    };
    assert_eq!((owned("a"), owned("b")), (vec![1, 3], vec![0, 2]));
}

#[test]
fn a_member_that_does_not_revoke_within_its_rebalance_timeout_is_removed() {
    let list = topics(&[("orders", 4)]);
    let mut group = ConsumerGroup::new("g".into());
    let mut clients = BTreeMap::new();
    group
        .heartbeat(join_args("a", &["orders"], None), &list, &settings(), 0)
        .expect("joins");
    clients.insert("a".to_string(), Client::default());
    settle(&mut group, &list, &mut clients, 0);
    group
        .heartbeat(join_args("b", &["orders"], None), &list, &settings(), 1_000)
        .expect("joins");
    clients.insert("b".to_string(), Client::default());
    let slow = clients.get_mut("a").expect("a");
    slow.slow = true;
    beat(&mut group, &list, "a", slow, 1_000).expect("told to revoke");
    assert_eq!(
        group.members["a"].assignment.state,
        MemberState::UnrevokedPartitions
    );
    // It keeps heartbeating, so its session never ends; it still holds what it must give up.
    for now in [30_000, 60_000] {
        for (id, client) in clients.iter_mut() {
            beat(&mut group, &list, id, client, now).expect("beats");
        }
        assert!(!group.expire(now));
    }
    assert!(group.expire(61_000), "60 s of rebalance timeout passed");
    assert!(!group.members.contains_key("a"));
    clients.remove("a");
    settle(&mut group, &list, &mut clients, 61_000);
    assert_eq!(partitions_of(&clients["b"].owned).count(), 4);
}
