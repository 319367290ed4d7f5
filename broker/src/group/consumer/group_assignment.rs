//! The target assignment, each member's way to it, and the group rebuilt from its records.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::super::assignor::{self, AssignorKind, AssignorMember};
use super::super::member::ConsumerMember;
use super::super::reconcile;
use super::super::records::{ConsumerGroupRecord, MemberState, TopicPartitions};
use super::super::subscription::{self, TopicLookup};
use super::{ConsumerGroup, ConsumerGroupSettings};

impl ConsumerGroup {
    /// Makes the target assignment at the group's epoch, and records what changed.
    pub(super) fn assign(&mut self, topics: &dyn TopicLookup, settings: &ConsumerGroupSettings) {
        let members: BTreeMap<String, AssignorMember> = self
            .members
            .values()
            .map(|m| {
                let member = AssignorMember {
                    rack_id: m.metadata.rack_id.clone(),
                    subscribed: m.subscribed.clone(),
                    current: self.target.get(&m.id).cloned().unwrap_or_default(),
                };
                (m.id.clone(), member)
            })
            .collect();
        let ids = members
            .values()
            .flat_map(|m| m.subscribed.iter().copied())
            .collect();
        let described = subscription::assignor_topics(&ids, topics, self.racks_wanted());
        let targets = assignor::assign(self.assignor(settings), &members, &described);
        for (member_id, partitions) in targets {
            if self.target.get(&member_id) != Some(&partitions) {
                self.set_target(&member_id, partitions);
            }
        }
        self.assignment_epoch = self.epoch;
        self.records.push(ConsumerGroupRecord::TargetAssignmentMetadata {
            group: self.id.clone(),
            assignment_epoch: Some(self.assignment_epoch),
        });
    }

    /// The assignor most members ask for; the broker's first when none asks.
    pub fn assignor(&self, settings: &ConsumerGroupSettings) -> AssignorKind {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some(name) = &member.metadata.server_assignor {
                *votes.entry(name.as_str()).or_default() += 1;
            }
        }
        let default = settings
            .assignors
            .first()
            .copied()
            .unwrap_or(AssignorKind::Uniform);
        let most = votes
            .into_iter()
            .max_by_key(|(name, count)| (*count, std::cmp::Reverse(*name)));
        most.and_then(|(name, _)| AssignorKind::from_name(name))
            .unwrap_or(default)
    }

    pub(in crate::group::consumer) fn set_target(&mut self, member_id: &str, partitions: TopicPartitions) {
        self.records.push(ConsumerGroupRecord::TargetAssignmentMember {
            group: self.id.clone(),
            member_id: member_id.to_string(),
            partitions: Some(partitions.clone()),
        });
        self.target.insert(member_id.to_string(), partitions);
    }

    /// Moves the member one step toward its target; returns whether its assignment changed.
    pub(super) fn reconcile_member(
        &mut self,
        member_id: &str,
        owned: Option<&TopicPartitions>,
        now_ms: i64,
    ) -> bool {
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let member = &self.members[member_id];
        let next = reconcile::reconcile(
            &member.assignment,
            &target,
            self.assignment_epoch,
            owned,
            |t, p| self.owners.get(&(t, p)).is_none_or(|owner| owner == member_id),
        );
        if next == member.assignment {
            return false;
        }
        self.release_all(member_id);
        self.hold(member_id, next.owned().collect());
        let member = self.members.get_mut(member_id).expect("reconciled member exists");
        let revoking = next.state == MemberState::UnrevokedPartitions;
        let rebalance_timeout_ms = i64::from(member.metadata.rebalance_timeout_ms.max(0));
        member.revocation_deadline_ms = match (revoking, member.revocation_deadline_ms) {
            (true, Some(deadline)) => Some(deadline),
            (true, None) => Some(now_ms + rebalance_timeout_ms),
            (false, _) => None,
        };
        member.assignment = next;
        let record = member.current_assignment_record();
        self.records.push(ConsumerGroupRecord::CurrentAssignment {
            group: self.id.clone(),
            member_id: member_id.to_string(),
            value: Some(record),
        });
        true
    }

    /// Marks `partitions` as held by `member_id`.
    pub(super) fn hold(&mut self, member_id: &str, partitions: Vec<(Uuid, i32)>) {
        for slot in partitions {
            let previous = self.owners.insert(slot, member_id.to_string());
            assert!(
                previous.as_ref().is_none_or(|p| p == member_id),
                "partition {slot:?} of group {} held by {previous:?} and {member_id}",
                self.id
            );
        }
    }

    /// Frees every partition `member_id` holds.
    pub(super) fn release_all(&mut self, member_id: &str) {
        self.owners.retain(|_, owner| owner != member_id);
    }

    /// Who holds a partition now.
    pub fn owner_of(&self, topic: Uuid, partition: i32) -> Option<&str> {
        self.owners.get(&(topic, partition)).map(String::as_str)
    }

    /// Applies one replayed record (last record per key wins, tombstones delete).
    pub fn replay(&mut self, record: ConsumerGroupRecord) {
        match record {
            ConsumerGroupRecord::Metadata { epoch, .. } => self.epoch = epoch.unwrap_or(0),
            ConsumerGroupRecord::TargetAssignmentMetadata { assignment_epoch, .. } => {
                self.assignment_epoch = assignment_epoch.unwrap_or(0)
            }
            ConsumerGroupRecord::Member { member_id, value, .. } => match value {
                Some(metadata) => match self.members.get_mut(&member_id) {
                    Some(member) => member.metadata = metadata,
                    None => {
                        let member = ConsumerMember::new(member_id.clone(), metadata, 0);
                        self.members.insert(member_id, member);
                    }
                },
                None => {
                    self.members.remove(&member_id);
                }
            },
            ConsumerGroupRecord::TargetAssignmentMember {
                member_id,
                partitions,
                ..
            } => match partitions {
                Some(partitions) => {
                    self.target.insert(member_id, partitions);
                }
                None => {
                    self.target.remove(&member_id);
                }
            },
            ConsumerGroupRecord::CurrentAssignment { member_id, value, .. } => {
                if let (Some(member), Some(value)) = (self.members.get_mut(&member_id), value) {
                    member.restore_assignment(value);
                }
            }
            ConsumerGroupRecord::PartitionMetadata { .. } | ConsumerGroupRecord::RegularExpression { .. } => {
            }
        }
    }

    /// After a replay: the members' sessions start now, and who holds what is rebuilt. A
    /// record set that names a partition twice (which a correct coordinator never writes)
    /// keeps the first holder.
    pub fn finish_replay(&mut self, topics: &dyn TopicLookup, settings: &ConsumerGroupSettings, now_ms: i64) {
        self.target.retain(|id, _| self.members.contains_key(id));
        self.owners.clear();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let member = self.members.get_mut(&id).expect("listed above");
            member.session_deadline_ms = now_ms + i64::from(settings.session_timeout_ms);
            let revoking = member.assignment.state == MemberState::UnrevokedPartitions;
            let rebalance_timeout_ms = i64::from(member.metadata.rebalance_timeout_ms.max(0));
            member.revocation_deadline_ms = revoking.then_some(now_ms + rebalance_timeout_ms);
            let owned: Vec<_> = member.assignment.owned().collect();
            for slot in owned {
                self.owners.entry(slot).or_insert_with(|| id.clone());
            }
            self.resolve_subscription(&id, topics, now_ms);
        }
        self.topics_fingerprint = Some(self.subscribed_fingerprint(topics));
        self.records.clear();
    }

    /// Each member's assignment with topic names, for describing the group.
    pub fn named(partitions: &TopicPartitions, topics: &dyn TopicLookup) -> Vec<(Uuid, String, Vec<i32>)> {
        partitions
            .iter()
            .map(|(id, set)| {
                let name = topics.by_id(*id).map(|(name, _)| name).unwrap_or_default();
                (*id, name, set.iter().copied().collect())
            })
            .collect()
    }
}
