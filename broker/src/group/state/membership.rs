//! The rest of a generation's life: SyncGroup, heartbeats, leaving, and the session and
//! rebalance deadlines that [`Group::tick`] applies.

use bytes::Bytes;
use futures::channel::oneshot;
use kafka_protocol::error::ResponseError;

use super::{answer_sync, Group, GroupState};
use crate::group::member::SyncOutcome;

impl Group {
    pub fn sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        protocol: (Option<&str>, Option<&str>),
        assignments: Vec<(String, Bytes)>,
        now_ms: i64,
    ) -> oneshot::Receiver<SyncOutcome> {
        if let Err(error) = self.check_member(member_id, instance_id, generation_id) {
            return answer_sync(SyncOutcome::failed(error));
        }
        let (protocol_type, protocol_name) = protocol;
        let type_differs = protocol_type.is_some_and(|t| Some(t) != self.protocol_type.as_deref());
        let name_differs = protocol_name.is_some_and(|n| Some(n) != self.protocol_name.as_deref());
        if type_differs || name_differs {
            return answer_sync(SyncOutcome::failed(ResponseError::InconsistentGroupProtocol));
        }
        let done = |group: &Group, assignment: Bytes| SyncOutcome {
            error: None,
            protocol_type: group.protocol_type.clone(),
            protocol_name: group.protocol_name.clone(),
            assignment,
        };
        let state = self.state;
        let is_leader = self.leader_id.as_deref() == Some(member_id);
        let member = self.member_mut(member_id).expect("checked above");
        member.heartbeat(now_ms);
        member.synced = true;
        match state {
            GroupState::Stable => {
                let assignment = member.assignment.clone();
                answer_sync(done(self, assignment))
            }
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                member.sync_waiter = Some(tx);
                if is_leader {
                    for member in &mut self.members {
                        member.assignment = assignments
                            .iter()
                            .find(|(id, _)| *id == member.member_id)
                            .map(|(_, a)| a.clone())
                            .unwrap_or_default();
                    }
                    self.become_state(GroupState::Stable);
                    self.sync_deadline_ms = None;
                    self.persist_wanted = true;
                    let outcomes: Vec<SyncOutcome> = self
                        .members
                        .iter()
                        .map(|m| done(self, m.assignment.clone()))
                        .collect();
                    for (member, outcome) in self.members.iter_mut().zip(outcomes) {
                        member.answer_sync(outcome);
                    }
                }
                rx
            }
            GroupState::PreparingRebalance => {
                answer_sync(SyncOutcome::failed(ResponseError::RebalanceInProgress))
            }
            GroupState::Empty | GroupState::Dead => {
                answer_sync(SyncOutcome::failed(ResponseError::UnknownMemberId))
            }
        }
    }

    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        if self.state == GroupState::Empty {
            return Err(ResponseError::UnknownMemberId);
        }
        self.check_member(member_id, instance_id, generation_id)?;
        self.member_mut(member_id).expect("checked").heartbeat(now_ms);
        match self.state {
            GroupState::PreparingRebalance => Err(ResponseError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// LeaveGroup for one member (v3+ names members by id, instance id or both).
    pub fn leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        let target = match instance_id {
            Some(instance_id) => match self.member_by_instance(instance_id) {
                Some(m) if !member_id.is_empty() && m.member_id != member_id => {
                    return Err(ResponseError::FencedInstanceId)
                }
                Some(m) => m.member_id.clone(),
                None => return Err(ResponseError::UnknownMemberId),
            },
            None => member_id.to_string(),
        };
        if let Some(at) = self.pending_members.iter().position(|(id, _)| *id == target) {
            self.pending_members.remove(at);
            self.maybe_complete_join(now_ms);
            return Ok(());
        }
        if self.member(&target).is_none() {
            return Err(ResponseError::UnknownMemberId);
        }
        self.remove_member(&target, now_ms);
        Ok(())
    }

    fn remove_member(&mut self, member_id: &str, now_ms: i64) {
        let Some(at) = self.members.iter().position(|m| m.member_id == member_id) else {
            return;
        };
        let mut member = self.members.remove(at);
        member.fail_waiters(ResponseError::UnknownMemberId);
        if self.leader_id.as_deref() == Some(member_id) {
            self.leader_id = self.members.first().map(|m| m.member_id.clone());
        }
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => self.prepare_rebalance(now_ms),
            GroupState::PreparingRebalance => self.maybe_complete_join(now_ms),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// Applies every deadline that has passed by `now_ms`.
    pub fn tick(&mut self, now_ms: i64) {
        self.pending_members.retain(|(_, lapses)| *lapses > now_ms);
        if self.state == GroupState::PreparingRebalance {
            if self.initial_delay_until_ms.is_some_and(|t| t <= now_ms) {
                // The initial delay ends the first rebalance outright (Kafka's InitialDelayedJoin).
                self.complete_join(now_ms);
            } else if self.join_deadline_ms.is_some_and(|t| t <= now_ms) {
                self.complete_join(now_ms);
            } else {
                self.maybe_complete_join(now_ms);
            }
        }
        if self.state == GroupState::CompletingRebalance && self.sync_deadline_ms.is_some_and(|t| t <= now_ms)
        {
            let silent: Vec<String> = self
                .members
                .iter()
                .filter(|m| !m.synced)
                .map(|m| m.member_id.clone())
                .collect();
            self.sync_deadline_ms = None;
            for member_id in silent {
                self.remove_member(&member_id, now_ms);
            }
        }
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|m| !m.is_waiting() && m.session_deadline_ms <= now_ms)
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in expired {
            tracing::info!(group = self.id, member_id, "session timed out");
            self.remove_member(&member_id, now_ms);
        }
    }

    /// The next time [`Group::tick`] has work to do.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        let sessions = self
            .members
            .iter()
            .filter(|m| !m.is_waiting())
            .map(|m| m.session_deadline_ms);
        let pending = self.pending_members.iter().map(|(_, t)| *t);
        let rebalance = match self.state {
            GroupState::PreparingRebalance => self.initial_delay_until_ms.or(self.join_deadline_ms),
            GroupState::CompletingRebalance => self.sync_deadline_ms,
            _ => None,
        };
        sessions.chain(pending).chain(rebalance).min()
    }

    /// The consumer-protocol topics members subscribe to (for OffsetDelete), or None when the
    /// group does not use the consumer protocol.
    pub fn subscribed_topics(&self) -> Option<Vec<String>> {
        use kafka_protocol::messages::ConsumerProtocolSubscription;
        use kafka_protocol::protocol::Decodable;
        if self.protocol_type.as_deref() != Some("consumer") || self.members.is_empty() {
            return None;
        }
        let protocol = self.protocol_name.clone()?;
        let mut topics = Vec::new();
        for member in &self.members {
            let mut metadata = member.metadata_for(&protocol);
            if metadata.len() < 2 {
                continue;
            }
            let version = i16::from_be_bytes([metadata[0], metadata[1]]);
            let _ = bytes::Buf::get_i16(&mut metadata);
            let version = version.clamp(0, 3);
            if let Ok(subscription) = ConsumerProtocolSubscription::decode(&mut metadata, version) {
                topics.extend(subscription.topics.iter().map(|t| t.to_string()));
            }
        }
        Some(topics)
    }
}
