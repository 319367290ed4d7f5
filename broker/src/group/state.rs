//! The classic group state machine (JoinGroup / SyncGroup / Heartbeat / LeaveGroup), pure logic
//! driven by the caller's clock: every call takes `now_ms`, and [`Group::tick`] applies the
//! deadlines that passed. Requests that must wait (a JoinGroup until the rebalance completes, a
//! SyncGroup until the leader's assignment) get a oneshot receiver that a later call answers.
//!
//! States follow Kafka's: Empty → PreparingRebalance (members (re)join) → CompletingRebalance
//! (the leader assigns) → Stable; any membership change goes back to PreparingRebalance.

use bytes::Bytes;
use futures::channel::oneshot;
use kafka_protocol::error::ResponseError;

use super::member::{JoinArgs, JoinOutcome, JoinedMember, Member, SyncOutcome};

mod membership;

/// Kafka's `group.min.session.timeout.ms` and `group.max.session.timeout.ms` defaults.
pub const SESSION_TIMEOUT_MS_MIN: i32 = 6_000;
pub const SESSION_TIMEOUT_MS_MAX: i32 = 1_800_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The names DescribeGroups and ListGroups use.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// Whether a group may go from `self` to `next` (Kafka's `validPreviousStates`): a
    /// rebalance starts from a settled group, ends in a new generation's sync or with no one
    /// left, and only a completed sync makes the group Stable.
    pub fn may_become(self, next: GroupState) -> bool {
        use GroupState::*;
        match next {
            PreparingRebalance => matches!(self, Empty | CompletingRebalance | Stable),
            CompletingRebalance | Empty => self == PreparingRebalance,
            Stable => self == CompletingRebalance,
            Dead => true,
        }
    }
}

/// Broker settings the state machine needs.
#[derive(Debug, Clone, Copy)]
pub struct GroupSettings {
    /// `group.initial.rebalance.delay.ms`.
    pub initial_rebalance_delay_ms: i64,
}

/// One classic group. Owned by its coordinator shard; not Send.
#[derive(Debug)]
pub struct Group {
    pub id: String,
    pub state: GroupState,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader_id: Option<String>,
    /// In join order.
    pub members: Vec<Member>,
    /// Ids handed out with MEMBER_ID_REQUIRED, with the time they lapse unless used.
    pending_members: Vec<(String, i64)>,
    /// PreparingRebalance ends by this time whoever has rejoined.
    join_deadline_ms: Option<i64>,
    /// First rebalance of an empty group: wait until then for more members.
    initial_delay_until_ms: Option<i64>,
    /// CompletingRebalance: members that have not sent SyncGroup by then are dropped.
    sync_deadline_ms: Option<i64>,
    settings: GroupSettings,
    /// The persisted group record is out of date (see [`Group::take_persist_wanted`]).
    persist_wanted: bool,
}

fn answer(outcome: JoinOutcome) -> oneshot::Receiver<JoinOutcome> {
    let (tx, rx) = oneshot::channel();
    let _ = tx.send(outcome);
    rx
}

fn answer_sync(outcome: SyncOutcome) -> oneshot::Receiver<SyncOutcome> {
    let (tx, rx) = oneshot::channel();
    let _ = tx.send(outcome);
    rx
}

impl Group {
    pub fn new(id: String, settings: GroupSettings) -> Self {
        Group {
            id,
            state: GroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: Vec::new(),
            pending_members: Vec::new(),
            join_deadline_ms: None,
            initial_delay_until_ms: None,
            sync_deadline_ms: None,
            settings,
            persist_wanted: false,
        }
    }

    /// A group rebuilt from its persisted record: members are unknown after a restart, so it
    /// starts Empty with the generation and protocol type it had.
    pub fn restored(
        id: String,
        settings: GroupSettings,
        generation_id: i32,
        protocol_type: Option<String>,
    ) -> Self {
        let mut group = Group::new(id, settings);
        group.generation_id = generation_id;
        group.protocol_type = protocol_type;
        group
    }

    /// The classic group a consumer group of classic members only becomes (the last member of
    /// the new protocol left): its members keep their assignments at `generation_id` until the
    /// rebalance that starts now, which each joins at its next Heartbeat.
    pub fn downgraded(
        id: String,
        settings: GroupSettings,
        generation_id: i32,
        members: Vec<Member>,
        now_ms: i64,
    ) -> Self {
        assert!(
            !members.is_empty(),
            "a group moves back to the classic protocol with members"
        );
        let mut group = Group::new(id, settings);
        group.generation_id = generation_id;
        group.protocol_type = Some(members[0].protocol_type.clone());
        group.leader_id = Some(members[0].member_id.clone());
        group.members = members;
        group.protocol_name = group.select_protocol();
        group.state = GroupState::Stable;
        group.persist_wanted = true;
        group.prepare_rebalance(now_ms);
        group
    }

    pub fn member(&self, member_id: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.member_id == member_id)
    }

    fn member_mut(&mut self, member_id: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.member_id == member_id)
    }

    fn member_by_instance(&self, instance_id: &str) -> Option<&Member> {
        self.members
            .iter()
            .find(|m| m.group_instance_id.as_deref() == Some(instance_id))
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// True once after each change the group record should be written for.
    pub fn take_persist_wanted(&mut self) -> bool {
        std::mem::take(&mut self.persist_wanted)
    }

    /// Protocols every member supports, in the first member's order of preference.
    fn common_protocols(&self) -> Vec<String> {
        let Some(first) = self.members.first() else {
            return Vec::new();
        };
        first
            .protocols
            .iter()
            .map(|(name, _)| name.clone())
            .filter(|name| self.members.iter().all(|m| m.supports(name)))
            .collect()
    }

    /// Kafka's rule: each member votes for its most preferred common protocol; most votes wins,
    /// ties go to the first member's preference.
    fn select_protocol(&self) -> Option<String> {
        let candidates = self.common_protocols();
        let votes = |candidate: &String| {
            self.members
                .iter()
                .filter(|m| {
                    m.protocols
                        .iter()
                        .map(|(name, _)| name)
                        .find(|name| candidates.contains(name))
                        == Some(candidate)
                })
                .count()
        };
        let mut best: Option<(&String, usize)> = None;
        for candidate in &candidates {
            let count = votes(candidate);
            match best {
                Some((_, most)) if count <= most => {}
                _ => best = Some((candidate, count)),
            }
        }
        best.map(|(name, _)| name.clone())
    }

    /// Can a member with these protocols join the group as it is?
    fn accepts_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|(name, _)| self.members.iter().all(|m| m.supports(name)))
    }

    pub fn join(&mut self, args: JoinArgs, now_ms: i64) -> oneshot::Receiver<JoinOutcome> {
        let fail = |error| answer(JoinOutcome::failed(error, &args.member_id));
        if self.state == GroupState::Dead {
            return fail(ResponseError::CoordinatorNotAvailable);
        }
        if !(SESSION_TIMEOUT_MS_MIN..=SESSION_TIMEOUT_MS_MAX).contains(&args.session_timeout_ms) {
            return fail(ResponseError::InvalidSessionTimeout);
        }
        if !self.accepts_protocols(&args.protocol_type, &args.protocols) {
            return fail(ResponseError::InconsistentGroupProtocol);
        }
        if let Some(instance_id) = args.group_instance_id.clone() {
            return self.join_static(args, &instance_id, now_ms);
        }
        if args.member_id.is_empty() {
            if args.require_known_member_id {
                let member_id = args.fresh_member_id.clone();
                let lapses = now_ms + i64::from(args.session_timeout_ms);
                self.pending_members.push((member_id.clone(), lapses));
                return answer(JoinOutcome::failed(ResponseError::MemberIdRequired, &member_id));
            }
            let member_id = args.fresh_member_id.clone();
            return self.add_member(member_id, &args, now_ms);
        }
        if let Some(at) = self
            .pending_members
            .iter()
            .position(|(id, _)| *id == args.member_id)
        {
            self.pending_members.remove(at);
            return self.add_member(args.member_id.clone(), &args, now_ms);
        }
        if self.member(&args.member_id).is_none() {
            return fail(ResponseError::UnknownMemberId);
        }
        self.rejoin(args, now_ms)
    }

    fn join_static(
        &mut self,
        args: JoinArgs,
        instance_id: &str,
        now_ms: i64,
    ) -> oneshot::Receiver<JoinOutcome> {
        let Some(existing) = self.member_by_instance(instance_id) else {
            if !args.member_id.is_empty() {
                return answer(JoinOutcome::failed(
                    ResponseError::UnknownMemberId,
                    &args.member_id,
                ));
            }
            return self.add_member(args.fresh_member_id.clone(), &args, now_ms);
        };
        if !args.member_id.is_empty() {
            if existing.member_id != args.member_id {
                return answer(JoinOutcome::failed(
                    ResponseError::FencedInstanceId,
                    &args.member_id,
                ));
            }
            return self.rejoin(args, now_ms);
        }
        // A restarted static member: it takes over the old member id's place and assignment; the
        // old id is fenced.
        let old_id = existing.member_id.clone();
        let new_id = args.fresh_member_id.clone();
        let was_leader = self.leader_id.as_deref() == Some(old_id.as_str());
        let member = self.member_mut(&old_id).expect("found above");
        member.fail_waiters(ResponseError::FencedInstanceId);
        member.member_id = new_id.clone();
        let unchanged = member.same_protocols(&args.protocols);
        if was_leader {
            self.leader_id = Some(new_id.clone());
        }
        let rejoin = JoinArgs {
            member_id: new_id,
            ..args
        };
        if self.state == GroupState::Stable && unchanged && !was_leader {
            let member = self.member_mut(&rejoin.member_id).expect("renamed above");
            member.heartbeat(now_ms);
            member.synced = false;
            return answer(self.outcome_for(&rejoin.member_id, false));
        }
        self.rejoin(rejoin, now_ms)
    }

    fn add_member(
        &mut self,
        member_id: String,
        args: &JoinArgs,
        now_ms: i64,
    ) -> oneshot::Receiver<JoinOutcome> {
        let (tx, rx) = oneshot::channel();
        let mut member = Member::new(member_id, args, now_ms);
        member.join_waiter = Some(tx);
        if self.members.is_empty() {
            self.protocol_type = Some(args.protocol_type.clone());
        }
        self.members.push(member);
        if self.state == GroupState::PreparingRebalance {
            if let Some(until) = self.initial_delay_until_ms {
                let limit = self.join_deadline_ms.unwrap_or(until);
                self.initial_delay_until_ms =
                    Some((now_ms + self.settings.initial_rebalance_delay_ms).min(limit));
            }
        }
        self.prepare_rebalance(now_ms);
        rx
    }

    /// A known member joins again: during a rebalance it is counted in; otherwise a change of
    /// protocols (or the leader rejoining) starts a rebalance.
    fn rejoin(&mut self, args: JoinArgs, now_ms: i64) -> oneshot::Receiver<JoinOutcome> {
        let is_leader = self.leader_id.as_deref() == Some(args.member_id.as_str());
        let state = self.state;
        let member = self.member_mut(&args.member_id).expect("caller checked");
        let unchanged = member.same_protocols(&args.protocols);
        member.heartbeat(now_ms);
        let current = match state {
            GroupState::CompletingRebalance => unchanged,
            GroupState::Stable => unchanged && !is_leader,
            _ => false,
        };
        if current {
            return answer(self.outcome_for(&args.member_id, is_leader));
        }
        let (tx, rx) = oneshot::channel();
        let member = self.member_mut(&args.member_id).expect("caller checked");
        member.protocols = args.protocols;
        member.session_timeout_ms = args.session_timeout_ms;
        member.rebalance_timeout_ms = args.rebalance_timeout_ms;
        member.client_id = args.client_id;
        member.client_host = args.client_host;
        // A second JoinGroup from the same member replaces the first; the first learns nothing.
        member.join_waiter = Some(tx);
        self.prepare_rebalance(now_ms);
        rx
    }

    /// The current generation as `member_id` sees it.
    fn outcome_for(&self, member_id: &str, with_members: bool) -> JoinOutcome {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        JoinOutcome {
            error: None,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader_id: self.leader_id.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members: if with_members {
                self.members
                    .iter()
                    .map(|m| JoinedMember {
                        member_id: m.member_id.clone(),
                        group_instance_id: m.group_instance_id.clone(),
                        metadata: m.metadata_for(&protocol),
                    })
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .iter()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// Moves the group to `next`; a move Kafka's state machine does not allow is a bug.
    fn become_state(&mut self, next: GroupState) {
        assert!(
            self.state.may_become(next),
            "group {}: {:?} cannot become {next:?}",
            self.id,
            self.state
        );
        self.state = next;
    }

    fn prepare_rebalance(&mut self, now_ms: i64) {
        match self.state {
            GroupState::PreparingRebalance => {}
            GroupState::Empty => {
                let timeout = self.rebalance_timeout_ms();
                let delay = self.settings.initial_rebalance_delay_ms.min(timeout);
                self.join_deadline_ms = Some(now_ms + timeout);
                self.initial_delay_until_ms = (delay > 0).then_some(now_ms + delay);
                self.become_state(GroupState::PreparingRebalance);
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                for member in &mut self.members {
                    member.answer_sync(SyncOutcome::failed(ResponseError::RebalanceInProgress));
                }
                self.sync_deadline_ms = None;
                self.join_deadline_ms = Some(now_ms + self.rebalance_timeout_ms());
                self.become_state(GroupState::PreparingRebalance);
            }
            GroupState::Dead => return,
        }
        self.maybe_complete_join(now_ms);
    }

    fn maybe_complete_join(&mut self, now_ms: i64) {
        let all_joined =
            self.members.iter().all(|m| m.join_waiter.is_some()) && self.pending_members.is_empty();
        if self.state == GroupState::PreparingRebalance && self.initial_delay_until_ms.is_none() && all_joined
        {
            self.complete_join(now_ms);
        }
    }

    /// Ends PreparingRebalance: members that did not rejoin are dropped (static members stay
    /// until their session lapses), a new generation starts and every waiting JoinGroup is told.
    fn complete_join(&mut self, now_ms: i64) {
        self.members
            .retain(|m| m.join_waiter.is_some() || m.group_instance_id.is_some());
        self.join_deadline_ms = None;
        self.initial_delay_until_ms = None;
        assert_eq!(
            self.state,
            GroupState::PreparingRebalance,
            "a generation ends a rebalance"
        );
        self.generation_id += 1;
        self.persist_wanted = true;
        if self.members.is_empty() {
            self.become_state(GroupState::Empty);
            self.protocol_name = None;
            self.leader_id = None;
            return;
        }
        self.protocol_name = self.select_protocol();
        let leader_rejoined = self
            .leader_id
            .as_deref()
            .and_then(|id| self.member(id))
            .is_some_and(|m| m.join_waiter.is_some());
        if !leader_rejoined {
            let first_joined = self.members.iter().find(|m| m.join_waiter.is_some());
            self.leader_id = first_joined.map(|m| m.member_id.clone());
        }
        self.become_state(GroupState::CompletingRebalance);
        self.sync_deadline_ms = Some(now_ms + self.rebalance_timeout_ms());
        let leader = self.leader_id.clone().unwrap_or_default();
        let outcomes: Vec<JoinOutcome> = self
            .members
            .iter()
            .map(|m| self.outcome_for(&m.member_id, m.member_id == leader))
            .collect();
        for (member, outcome) in self.members.iter_mut().zip(outcomes) {
            member.assignment = Bytes::new();
            member.synced = false;
            if member.join_waiter.is_some() {
                member.heartbeat(now_ms);
                member.answer_join(outcome);
            }
        }
    }

    /// Checks that `member_id` (and `instance_id`) name a current member of `generation_id`.
    pub fn check_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), ResponseError> {
        if let Some(instance_id) = instance_id {
            if let Some(existing) = self.member_by_instance(instance_id) {
                if existing.member_id != member_id {
                    return Err(ResponseError::FencedInstanceId);
                }
            }
        }
        if self.state == GroupState::Dead || self.member(member_id).is_none() {
            return Err(ResponseError::UnknownMemberId);
        }
        if generation_id != self.generation_id {
            return Err(ResponseError::IllegalGeneration);
        }
        Ok(())
    }

    /// TxnOffsetCommit's membership check (v3+, KIP-447): a producer outside the group (no
    /// member id, generation -1) may commit; a named member must be the group's, a static one
    /// not replaced, and a generation given must be the group's.
    pub fn check_txn_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), ResponseError> {
        if self.state == GroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        let replaced = instance_id
            .and_then(|instance_id| self.member_by_instance(instance_id))
            .is_some_and(|existing| existing.member_id != member_id);
        if replaced {
            return Err(ResponseError::FencedInstanceId);
        }
        if !member_id.is_empty() && self.member(member_id).is_none() {
            return Err(ResponseError::UnknownMemberId);
        }
        if generation_id >= 0 && generation_id != self.generation_id {
            return Err(ResponseError::IllegalGeneration);
        }
        Ok(())
    }

    /// Marks the group deleted; callers drop it afterwards.
    pub fn mark_dead(&mut self) {
        self.become_state(GroupState::Dead);
    }
}
