//! The group state machine driven with a fake clock (plain milliseconds).

use bytes::Bytes;
use futures::channel::oneshot::Receiver;
use kafka_protocol::error::ResponseError;

use super::member::{JoinArgs, JoinOutcome, SyncOutcome};
use super::state::{Group, GroupSettings, GroupState};

const SESSION_MS: i32 = 10_000;
const REBALANCE_MS: i32 = 30_000;

fn group(initial_delay_ms: i64) -> Group {
    Group::new(
        "g".into(),
        GroupSettings {
            initial_rebalance_delay_ms: initial_delay_ms,
        },
    )
}

fn args(member_id: &str, fresh: &str, protocols: &[&str]) -> JoinArgs {
    JoinArgs {
        member_id: member_id.into(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from(format!("meta-{p}"))))
            .collect(),
        require_known_member_id: false,
        fresh_member_id: fresh.into(),
    }
}

fn ready<T>(mut rx: Receiver<T>) -> T {
    rx.try_recv().expect("not cancelled").expect("answered")
}

fn pending<T>(rx: &mut Receiver<T>) {
    assert!(matches!(rx.try_recv(), Ok(None)), "still waiting");
}

fn sync(
    g: &mut Group,
    member: &str,
    generation: i32,
    assignments: &[(&str, &str)],
    now: i64,
) -> Receiver<SyncOutcome> {
    let assignments = assignments
        .iter()
        .map(|(m, a)| (m.to_string(), Bytes::from(a.to_string())))
        .collect();
    g.sync(member, None, generation, (None, None), assignments, now)
}

/// Two members join (the second triggers a rebalance the first must rejoin), sync, beat, leave.
#[test]
fn join_sync_heartbeat_leave() {
    let mut g = group(0);
    let a = ready(g.join(args("", "a", &["range"]), 0));
    assert_eq!((a.error, a.generation_id, a.leader_id.as_str()), (None, 1, "a"));
    assert_eq!(a.members.len(), 1, "the leader sees the members");
    assert_eq!(g.state, GroupState::CompletingRebalance);
    let s = ready(sync(&mut g, "a", 1, &[("a", "p0-3")], 10));
    assert_eq!(s.assignment, Bytes::from("p0-3"));
    assert_eq!(g.state, GroupState::Stable);
    assert!(g.take_persist_wanted());

    let mut b = g.join(args("", "b", &["range"]), 100);
    pending(&mut b);
    assert_eq!(
        g.heartbeat("a", None, 1, 150),
        Err(ResponseError::RebalanceInProgress)
    );
    let a = ready(g.join(args("a", "", &["range"]), 200));
    let b = ready(b);
    assert_eq!((a.generation_id, b.generation_id), (2, 2));
    assert_eq!(a.members.len(), 2);
    assert!(b.members.is_empty(), "followers do not see the members");
    let mut sb = sync(&mut g, "b", 2, &[], 210);
    pending(&mut sb);
    let sa = ready(sync(&mut g, "a", 2, &[("a", "p0-1"), ("b", "p2-3")], 220));
    assert_eq!(sa.assignment, Bytes::from("p0-1"));
    assert_eq!(ready(sb).assignment, Bytes::from("p2-3"));
    assert_eq!(g.heartbeat("b", None, 2, 300), Ok(()));

    g.leave("a", None, 400).unwrap();
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(
        g.heartbeat("b", None, 2, 410),
        Err(ResponseError::RebalanceInProgress)
    );
    let b = ready(g.join(args("b", "", &["range"]), 420));
    assert_eq!((b.generation_id, b.leader_id.as_str()), (3, "b"));
    g.leave("b", None, 500).unwrap();
    assert_eq!((g.state, g.generation_id), (GroupState::Empty, 4));
    assert_eq!(g.leave("b", None, 510), Err(ResponseError::UnknownMemberId));
}

#[test]
fn v4_members_first_get_member_id_required() {
    let mut g = group(0);
    let mut first = args("", "m-1", &["range"]);
    first.require_known_member_id = true;
    let answer = ready(g.join(first, 0));
    assert_eq!(answer.error, Some(ResponseError::MemberIdRequired));
    assert_eq!(answer.member_id, "m-1");
    assert!(g.is_empty());
    let mut again = args("m-1", "m-2", &["range"]);
    again.require_known_member_id = true;
    let joined = ready(g.join(again, 10));
    assert_eq!((joined.error, joined.member_id.as_str()), (None, "m-1"));
    // An id that was never handed out is unknown.
    assert_eq!(
        ready(g.join(args("forged", "", &["range"]), 20)).error,
        Some(ResponseError::UnknownMemberId)
    );
}

#[test]
fn protocol_is_chosen_by_votes_among_common_protocols() {
    let mut g = group(0);
    ready(g.join(args("", "a", &["range", "roundrobin", "sticky"]), 0));
    ready(sync(&mut g, "a", 1, &[], 0));
    let mut b = g.join(args("", "b", &["roundrobin", "range"]), 1);
    let mut c = g.join(args("", "c", &["roundrobin", "range"]), 2);
    pending(&mut b);
    pending(&mut c);
    let a = ready(g.join(args("a", "", &["range", "roundrobin", "sticky"]), 3));
    assert_eq!(a.protocol_name.as_deref(), Some("roundrobin"));
    assert_eq!(a.members[1].metadata, Bytes::from("meta-roundrobin"));
    // A member sharing no protocol with the group cannot join.
    let d = ready(g.join(args("", "d", &["cooperative-sticky"]), 4));
    assert_eq!(d.error, Some(ResponseError::InconsistentGroupProtocol));
    let mut e = args("", "e", &["range"]);
    e.protocol_type = "connect".into();
    assert_eq!(
        ready(g.join(e, 5)).error,
        Some(ResponseError::InconsistentGroupProtocol)
    );
}

#[test]
fn stale_generations_and_unknown_members_are_fenced() {
    let mut g = group(0);
    ready(g.join(args("", "a", &["range"]), 0));
    ready(sync(&mut g, "a", 1, &[], 0));
    assert_eq!(
        g.heartbeat("a", None, 0, 1),
        Err(ResponseError::IllegalGeneration)
    );
    assert_eq!(g.heartbeat("x", None, 1, 1), Err(ResponseError::UnknownMemberId));
    assert_eq!(
        ready(sync(&mut g, "a", 7, &[], 1)).error,
        Some(ResponseError::IllegalGeneration)
    );
    let wrong_protocol = g.sync("a", None, 1, (Some("consumer"), Some("sticky")), vec![], 1);
    assert_eq!(
        ready(wrong_protocol).error,
        Some(ResponseError::InconsistentGroupProtocol)
    );
    let mut bad_timeout = args("", "b", &["range"]);
    bad_timeout.session_timeout_ms = 10;
    assert_eq!(
        ready(g.join(bad_timeout, 1)).error,
        Some(ResponseError::InvalidSessionTimeout)
    );
}

#[test]
fn static_member_restart_takes_over_without_rebalance_and_fences_old_id() {
    let mut g = group(0);
    let static_args = |member_id: &str, fresh: &str| JoinArgs {
        group_instance_id: Some("instance-1".into()),
        ..args(member_id, fresh, &["range"])
    };
    ready(g.join(args("", "leader", &["range"]), 0));
    ready(sync(&mut g, "leader", 1, &[], 0));
    let mut s = g.join(static_args("", "s-1"), 10);
    pending(&mut s);
    ready(g.join(args("leader", "", &["range"]), 20));
    assert_eq!(ready(s).generation_id, 2);
    let waiting = sync(&mut g, "s-1", 2, &[], 30);
    ready(sync(&mut g, "leader", 2, &[("s-1", "mine")], 30));
    assert_eq!(ready(waiting).assignment, Bytes::from("mine"));

    // Restart: same instance id, no member id. Same generation, new id, old id fenced.
    let back = ready(g.join(static_args("", "s-2"), 40));
    assert_eq!(
        (back.error, back.generation_id, back.member_id.as_str()),
        (None, 2, "s-2")
    );
    assert_eq!(g.state, GroupState::Stable);
    assert_eq!(
        ready(sync(&mut g, "s-2", 2, &[], 50)).assignment,
        Bytes::from("mine")
    );
    assert_eq!(
        g.heartbeat("s-1", Some("instance-1"), 2, 60),
        Err(ResponseError::FencedInstanceId)
    );
    assert_eq!(
        ready(g.join(static_args("s-1", ""), 70)).error,
        Some(ResponseError::FencedInstanceId)
    );
    assert_eq!(
        g.leave("s-1", Some("instance-1"), 80),
        Err(ResponseError::FencedInstanceId)
    );
    g.leave("", Some("instance-1"), 90).unwrap();
    assert_eq!(g.members.len(), 1);
}

#[test]
fn silent_members_expire_and_the_rest_rebalance() {
    let mut g = group(0);
    ready(g.join(args("", "a", &["range"]), 0));
    ready(sync(&mut g, "a", 1, &[], 0));
    let b = g.join(args("", "b", &["range"]), 1_000);
    ready(g.join(args("a", "", &["range"]), 1_000));
    ready(b);
    let sb = sync(&mut g, "b", 2, &[], 1_000);
    ready(sync(&mut g, "a", 2, &[], 1_000));
    ready(sb);
    // a heartbeats, b falls silent.
    for now in (2_000..=11_000).step_by(2_000) {
        assert_eq!(g.heartbeat("a", None, 2, now), Ok(()));
        g.tick(now);
    }
    assert_eq!(
        g.next_deadline_ms(),
        Some(11_000),
        "b's session ends 10 s after its sync"
    );
    g.tick(11_000);
    assert!(g.member("b").is_none(), "b was evicted");
    assert_eq!(g.state, GroupState::PreparingRebalance);
    let a = ready(g.join(args("a", "", &["range"]), 11_500));
    assert_eq!((a.generation_id, a.members.len()), (3, 1));
}

#[test]
fn members_that_do_not_rejoin_in_time_are_dropped() {
    let mut g = group(0);
    ready(g.join(args("", "a", &["range"]), 0));
    ready(sync(&mut g, "a", 1, &[], 0));
    let mut b = g.join(args("", "b", &["range"]), 100);
    // a keeps heart-beating but never rejoins: the rebalance timeout ends the round without it.
    for now in (5_000..30_000).step_by(5_000) {
        assert_eq!(
            g.heartbeat("a", None, 1, now),
            Err(ResponseError::RebalanceInProgress)
        );
        g.tick(now);
    }
    g.tick(100 + i64::from(REBALANCE_MS) - 1);
    pending(&mut b);
    g.tick(100 + i64::from(REBALANCE_MS));
    let b = ready(b);
    assert_eq!((b.generation_id, b.leader_id.as_str()), (2, "b"));
    assert!(g.member("a").is_none());
}

#[test]
fn first_rebalance_of_an_empty_group_waits_for_the_initial_delay() {
    let mut g = group(3_000);
    let mut a = g.join(args("", "a", &["range"]), 0);
    g.tick(2_000);
    pending(&mut a);
    let b = g.join(args("", "b", &["range"]), 2_000);
    assert_eq!(
        g.next_deadline_ms(),
        Some(5_000),
        "each new member extends the delay"
    );
    g.tick(4_999);
    pending(&mut a);
    g.tick(5_000);
    let (a, b) = (ready(a), ready(b));
    assert_eq!((a.generation_id, a.members.len(), b.generation_id), (1, 2, 1));
}

#[test]
fn the_leader_that_leaves_mid_sync_sends_followers_back_to_join() {
    let mut g = group(0);
    ready(g.join(args("", "a", &["range"]), 0));
    ready(sync(&mut g, "a", 1, &[], 0));
    let b = g.join(args("", "b", &["range"]), 1);
    ready(g.join(args("a", "", &["range"]), 2));
    ready(b);
    let sb = sync(&mut g, "b", 2, &[], 3);
    g.leave("a", None, 4).unwrap();
    let outcome: SyncOutcome = ready(sb);
    assert_eq!(outcome.error, Some(ResponseError::RebalanceInProgress));
    let rejoined: JoinOutcome = ready(g.join(args("b", "", &["range"]), 5));
    assert_eq!((rejoined.generation_id, rejoined.leader_id.as_str()), (3, "b"));
}

#[test]
fn group_states_move_only_as_kafka_allows() {
    use GroupState::*;
    let all = [Empty, PreparingRebalance, CompletingRebalance, Stable, Dead];
    let allowed: Vec<(GroupState, GroupState)> = all
        .iter()
        .flat_map(|from| all.iter().map(move |to| (*from, *to)))
        .filter(|(from, to)| from.may_become(*to))
        .collect();
    let mut expected = vec![
        (Empty, PreparingRebalance),
        (PreparingRebalance, CompletingRebalance),
        (PreparingRebalance, Empty),
        (CompletingRebalance, PreparingRebalance),
        (CompletingRebalance, Stable),
        (Stable, PreparingRebalance),
    ];
    expected.extend(all.iter().map(|from| (*from, Dead)));
    let sorted = |mut v: Vec<(GroupState, GroupState)>| {
        v.sort_by_key(|(a, b)| (*a as u8, *b as u8));
        v
    };
    assert_eq!(sorted(allowed), sorted(expected));
}

#[test]
fn txn_commits_check_only_the_member_and_generation_they_name() {
    let mut g = group(0);
    assert_eq!(
        g.check_txn_member("", None, -1),
        Ok(()),
        "a producer outside the group"
    );
    let static_args = JoinArgs {
        group_instance_id: Some("instance-1".into()),
        ..args("", "s-1", &["range"])
    };
    ready(g.join(static_args, 0));
    assert_eq!(g.check_txn_member("", None, -1), Ok(()));
    assert_eq!(g.check_txn_member("s-1", Some("instance-1"), 1), Ok(()));
    assert_eq!(g.check_txn_member("", None, 1), Ok(()), "generation alone");
    assert_eq!(
        g.check_txn_member("s-1", None, 2),
        Err(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        g.check_txn_member("gone", None, 1),
        Err(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        g.check_txn_member("s-0", Some("instance-1"), 1),
        Err(ResponseError::FencedInstanceId)
    );
}
