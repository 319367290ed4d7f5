//! The consumer groups (KIP-848) one shard coordinates, beside its classic groups.

use kafka_protocol::error::ResponseError;

use super::super::consumer::classic::{ClassicJoin, ClassicJoined};
use super::super::consumer::records::ConsumerGroupRecord;
use super::super::consumer::subscription::TopicLookup;
use super::super::consumer::{ConsumerGroup, HeartbeatArgs, HeartbeatOutcome};
use super::super::records::GroupRecord;
use super::super::state::Group;
use super::GroupCoordinator;

impl GroupCoordinator {
    /// One ConsumerGroupHeartbeat: the answer, and the records to write before giving it.
    /// A classic group of that name becomes a consumer group (`take_over_classic`); one left
    /// with classic members only becomes a classic group again (`downgrade_if_classic_only`).
    pub fn consumer_heartbeat(
        &self,
        group_id: &str,
        args: HeartbeatArgs,
        topics: &dyn TopicLookup,
        now_ms: i64,
    ) -> Result<(HeartbeatOutcome, Vec<GroupRecord>), ResponseError> {
        let joining = args.epoch == 0;
        let leaving = args.epoch < 0;
        self.take_over_classic(group_id, topics, now_ms)?;
        let mut groups = self.consumer_groups.borrow_mut();
        if !groups.contains_key(group_id) {
            if !joining {
                return Err(ResponseError::UnknownMemberId);
            }
            if groups.len() >= self.consumer_groups_max {
                return Err(ResponseError::GroupMaxSizeReached);
            }
            groups.insert(group_id.to_string(), ConsumerGroup::new(group_id.to_string()));
        }
        let group = groups.get_mut(group_id).expect("inserted above");
        let outcome = group.heartbeat(args, topics, &self.consumer_settings, now_ms);
        let mut records: Vec<GroupRecord> = group
            .take_records()
            .into_iter()
            .map(GroupRecord::Consumer)
            .collect();
        if outcome.is_err() && group.is_empty() && group.epoch == 0 {
            groups.remove(group_id);
        }
        drop(groups);
        if leaving {
            records.extend(self.downgrade_if_classic_only(group_id, topics, now_ms));
        }
        self.changed.notify(usize::MAX);
        outcome.map(|outcome| (outcome, records))
    }

    /// Makes way for a consumer group named `group_id`: an empty classic group of that name
    /// goes (its committed offsets stay); a Stable one of consumers becomes a consumer group, its
    /// members staying members of the classic protocol ([`ConsumerGroup::from_classic`]).
    fn take_over_classic(
        &self,
        group_id: &str,
        topics: &dyn TopicLookup,
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        let mut classic = self.groups.borrow_mut();
        let Some(group) = classic.get(group_id) else {
            return Ok(());
        };
        if !group.is_empty() {
            let converted = ConsumerGroup::from_classic(group, topics, now_ms)?;
            tracing::info!(
                group = group_id,
                epoch = converted.epoch,
                "classic group becomes a consumer group"
            );
            self.consumer_groups
                .borrow_mut()
                .insert(group_id.to_string(), converted);
        }
        classic.remove(group_id);
        Ok(())
    }

    /// A classic member's JoinGroup in a consumer group with members; `None` when there is
    /// none (the classic group's own path serves it).
    pub fn classic_join_consumer_group(
        &self,
        group_id: &str,
        join: ClassicJoin,
        topics: &dyn TopicLookup,
        now_ms: i64,
    ) -> Option<Result<(ClassicJoined, Vec<GroupRecord>), ResponseError>> {
        let mut groups = self.consumer_groups.borrow_mut();
        let group = groups.get_mut(group_id).filter(|g| !g.is_empty())?;
        let joined = group.classic_join(join, topics, &self.consumer_settings, now_ms);
        let records = group
            .take_records()
            .into_iter()
            .map(GroupRecord::Consumer)
            .collect();
        drop(groups);
        self.changed.notify(usize::MAX);
        Some(joined.map(|joined| (joined, records)))
    }

    /// A classic member's SyncGroup in a consumer group; `None` when `group_id` is not one.
    pub fn classic_sync_consumer_group(
        &self,
        group_id: &str,
        (member_id, generation_id): (&str, i32),
        topics: &dyn TopicLookup,
    ) -> Option<Result<bytes::Bytes, ResponseError>> {
        let groups = self.consumer_groups.borrow();
        Some(
            groups
                .get(group_id)?
                .classic_sync(member_id, generation_id, topics),
        )
    }

    /// A classic member's Heartbeat in a consumer group; `None` when `group_id` is not one.
    pub fn classic_heartbeat_consumer_group(
        &self,
        group_id: &str,
        (member_id, generation_id): (&str, i32),
        now_ms: i64,
    ) -> Option<Result<(), ResponseError>> {
        let mut groups = self.consumer_groups.borrow_mut();
        let beat = groups
            .get_mut(group_id)?
            .classic_heartbeat(member_id, generation_id, now_ms);
        drop(groups);
        self.changed.notify(usize::MAX);
        Some(beat)
    }

    /// A classic member's LeaveGroup in a consumer group: the records to write, or
    /// UNKNOWN_MEMBER_ID; `None` when `group_id` is not one.
    pub fn classic_leave_consumer_group(
        &self,
        group_id: &str,
        member_id: &str,
        (topics, now_ms): (&dyn TopicLookup, i64),
    ) -> Option<Result<Vec<GroupRecord>, ResponseError>> {
        let mut groups = self.consumer_groups.borrow_mut();
        let group = groups.get_mut(group_id)?;
        if !group.members.contains_key(member_id) {
            return Some(Err(ResponseError::UnknownMemberId));
        }
        group.remove_member(member_id);
        let mut records: Vec<GroupRecord> = group
            .take_records()
            .into_iter()
            .map(GroupRecord::Consumer)
            .collect();
        drop(groups);
        records.extend(self.downgrade_if_classic_only(group_id, topics, now_ms));
        self.changed.notify(usize::MAX);
        Some(Ok(records))
    }

    /// A consumer group whose members are all of the classic protocol becomes a classic group
    /// again (Kafka's downgrade when the last member of the new protocol leaves), which starts a
    /// rebalance; returns the records that say so (the consumer group's tombstones, the classic
    /// group's metadata).
    fn downgrade_if_classic_only(
        &self,
        group_id: &str,
        topics: &dyn TopicLookup,
        now_ms: i64,
    ) -> Vec<GroupRecord> {
        let mut groups = self.consumer_groups.borrow_mut();
        let Some(group) = groups.get_mut(group_id).filter(|g| g.only_classic_members()) else {
            return Vec::new();
        };
        let epoch = group.epoch;
        let members = group.into_classic_members(topics, now_ms);
        let mut records: Vec<GroupRecord> = group
            .take_records()
            .into_iter()
            .map(GroupRecord::Consumer)
            .collect();
        groups.remove(group_id);
        drop(groups);
        tracing::info!(group = group_id, epoch, "consumer group becomes a classic group");
        let classic = Group::downgraded(group_id.to_string(), self.settings, epoch, members, now_ms);
        records.push(super::group_record(&classic, crate::clock::now_ms()));
        self.groups.borrow_mut().insert(group_id.to_string(), classic);
        records
    }

    /// Makes way for a classic group named `group_id`: an empty consumer group of that name
    /// goes; one with members answers INCONSISTENT_GROUP_PROTOCOL.
    pub fn take_over_consumer(&self, group_id: &str) -> Result<(), ResponseError> {
        let mut groups = self.consumer_groups.borrow_mut();
        match groups.get(group_id) {
            Some(group) if !group.is_empty() => Err(ResponseError::InconsistentGroupProtocol),
            Some(_) => {
                groups.remove(group_id);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Whether `group_id` is a consumer group here.
    pub fn is_consumer_group(&self, group_id: &str) -> bool {
        self.consumer_groups.borrow().contains_key(group_id)
    }

    /// Runs `look` on the consumer group, if there is one.
    pub fn with_consumer_group<R>(
        &self,
        group_id: &str,
        look: impl FnOnce(&mut ConsumerGroup) -> R,
    ) -> Option<R> {
        let result = self.consumer_groups.borrow_mut().get_mut(group_id).map(look);
        self.changed.notify(usize::MAX);
        result
    }

    /// OffsetCommit's check for a consumer group: the member exists and commits at its epoch,
    /// or at its previous one for partitions it still holds (a commit sent just before the
    /// heartbeat that moved it on; STALE_MEMBER_EPOCH otherwise); a commit without a member only
    /// while nobody is in the group. `None` if `group_id` is not a consumer group.
    pub fn check_consumer_commit(
        &self,
        group_id: &str,
        (member_id, epoch): (&str, i32),
        committed: &[(String, i32)],
        topics: &dyn TopicLookup,
    ) -> Option<Result<(), ResponseError>> {
        let groups = self.consumer_groups.borrow();
        let group = groups.get(group_id)?;
        if epoch < 0 && member_id.is_empty() {
            return Some(match group.is_empty() {
                true => Ok(()),
                false => Err(ResponseError::UnknownMemberId),
            });
        }
        let Some(member) = group.members.get(member_id) else {
            return Some(Err(ResponseError::UnknownMemberId));
        };
        let assignment = &member.assignment;
        if epoch == assignment.epoch {
            return Some(Ok(()));
        }
        let holds_all = committed
            .iter()
            .all(|(topic, partition)| match topics.by_name(topic) {
                Some((id, _)) => group.owner_of(id, *partition) == Some(member_id),
                None => true,
            });
        let previous = epoch < assignment.epoch && epoch >= assignment.previous_epoch;
        Some(match previous && holds_all {
            true => Ok(()),
            false => Err(ResponseError::StaleMemberEpoch),
        })
    }

    /// Removes members whose session or revocation time ran out; returns each changed group's
    /// records to write.
    pub fn tick_consumer_groups(
        &self,
        topics: &dyn TopicLookup,
        now_ms: i64,
    ) -> Vec<(String, Vec<GroupRecord>)> {
        let mut changed = Vec::new();
        for (id, group) in self.consumer_groups.borrow_mut().iter_mut() {
            if group.next_deadline_ms().is_some_and(|t| t <= now_ms) && group.expire(now_ms) {
                let records: Vec<GroupRecord> = group
                    .take_records()
                    .into_iter()
                    .map(GroupRecord::Consumer)
                    .collect();
                changed.push((id.clone(), records));
            }
        }
        for (id, records) in &mut changed {
            records.extend(self.downgrade_if_classic_only(id, topics, now_ms));
        }
        changed
    }

    pub(super) fn next_consumer_deadline_ms(&self) -> Option<i64> {
        let groups = self.consumer_groups.borrow();
        groups.values().filter_map(ConsumerGroup::next_deadline_ms).min()
    }

    /// A replayed consumer group record; the group becomes a consumer group (a classic group
    /// of its name, which only an empty one can be, goes).
    pub(super) fn replay_consumer_record(&self, record: ConsumerGroupRecord) {
        let group_id = record.group().to_string();
        let mut groups = self.consumer_groups.borrow_mut();
        if let ConsumerGroupRecord::Metadata { epoch: None, .. } = record {
            // The group was deleted.
            groups.remove(&group_id);
            return;
        }
        if !groups.contains_key(&group_id) {
            self.groups.borrow_mut().remove(&group_id);
            groups.insert(group_id.clone(), ConsumerGroup::new(group_id.clone()));
        }
        groups.get_mut(&group_id).expect("inserted above").replay(record);
    }

    /// After `partition` was replayed: its consumer groups' members start their sessions now.
    pub fn finish_consumer_replay(&self, partition: i32, topics: &dyn TopicLookup, now_ms: i64) {
        let count = self.offsets_partition_count;
        let mut groups = self.consumer_groups.borrow_mut();
        for (id, group) in groups.iter_mut() {
            if super::super::partition_for(id, count) == partition {
                group.finish_replay(topics, &self.consumer_settings, now_ms);
            }
        }
        drop(groups);
        self.changed.notify(usize::MAX);
    }

    /// The consumer groups' summaries for ListGroups: (id, state name).
    pub fn list_consumer_groups(&self) -> Vec<(String, &'static str)> {
        let groups = self.consumer_groups.borrow();
        groups.values().map(|g| (g.id.clone(), g.state_name())).collect()
    }
}
