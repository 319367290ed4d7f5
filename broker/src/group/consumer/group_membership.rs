//! Members joining, changing their subscription, leaving and timing out.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;

use super::super::assignor::AssignorKind;
use super::super::member::{ConsumerMember, HeartbeatArgs, STATIC_LEAVE_EPOCH};
use super::super::records::{ConsumerGroupRecord, MemberState, TopicPartitions};
use super::super::subscription::{self, TopicLookup};
use super::{ConsumerGroup, ConsumerGroupSettings, HeartbeatOutcome, ResolvedRegex, REGEX_REFRESH_MS};

impl ConsumerGroup {
    /// A member leaves (epoch -1), or a static member leaves for now (epoch -2), keeping its
    /// partitions for its return until its session times out.
    pub(super) fn leave(&mut self, args: &HeartbeatArgs) -> Result<HeartbeatOutcome, ResponseError> {
        let Some(member) = self.members.get_mut(&args.member_id) else {
            return Err(ResponseError::UnknownMemberId);
        };
        let static_leave = args.epoch == STATIC_LEAVE_EPOCH && member.metadata.instance_id.is_some();
        if static_leave {
            let assignment = &mut member.assignment;
            assignment.epoch = STATIC_LEAVE_EPOCH;
            assignment.state = MemberState::Stable;
            assignment.pending_revocation = TopicPartitions::new();
            member.revocation_deadline_ms = None;
            let record = member.current_assignment_record();
            let kept: Vec<_> = member.assignment.owned().collect();
            self.release_all(&args.member_id);
            self.hold(&args.member_id, kept);
            self.records.push(ConsumerGroupRecord::CurrentAssignment {
                group: self.id.clone(),
                member_id: args.member_id.clone(),
                value: Some(record),
            });
        } else {
            self.remove_member(&args.member_id);
        }
        Ok(HeartbeatOutcome {
            member_id: args.member_id.clone(),
            epoch: args.epoch,
            assignment: None,
        })
    }

    /// Removes a member (it left, its session ended, or it failed to revoke in time): its
    /// partitions are free, and the group needs a new target assignment.
    pub fn remove_member(&mut self, member_id: &str) {
        if self.members.remove(member_id).is_none() {
            return;
        }
        self.release_all(member_id);
        self.target.remove(member_id);
        self.remove_member_records(member_id);
        self.bump_epoch();
    }

    /// Tombstones for a member's records.
    pub(in crate::group::consumer) fn remove_member_records(&mut self, member_id: &str) {
        let (group, member_id) = (self.id.clone(), member_id.to_string());
        self.records.extend([
            ConsumerGroupRecord::CurrentAssignment {
                group: group.clone(),
                member_id: member_id.clone(),
                value: None,
            },
            ConsumerGroupRecord::TargetAssignmentMember {
                group: group.clone(),
                member_id: member_id.clone(),
                partitions: None,
            },
            ConsumerGroupRecord::Member {
                group,
                member_id,
                value: None,
            },
        ]);
    }

    /// Adds `member` with its partitions held, and records it.
    pub(in crate::group::consumer) fn put_member(&mut self, member: ConsumerMember) {
        let owned: Vec<_> = member.assignment.owned().collect();
        self.hold(&member.id, owned);
        self.records.extend([
            ConsumerGroupRecord::Member {
                group: self.id.clone(),
                member_id: member.id.clone(),
                value: Some(member.metadata.clone()),
            },
            ConsumerGroupRecord::CurrentAssignment {
                group: self.id.clone(),
                member_id: member.id.clone(),
                value: Some(member.current_assignment_record()),
            },
        ]);
        self.members.insert(member.id.clone(), member);
    }

    pub(super) fn bump_epoch(&mut self) {
        self.epoch += 1;
        self.records.push(ConsumerGroupRecord::Metadata {
            group: self.id.clone(),
            epoch: Some(self.epoch),
        });
    }

    /// Applies what the heartbeat changed in the member's metadata; returns whether the
    /// assignment depends on the change. INVALID_REQUEST, UNSUPPORTED_ASSIGNOR and
    /// INVALID_REGULAR_EXPRESSION refuse it before anything changes.
    pub(super) fn update_metadata(
        &mut self,
        member_id: &str,
        args: &HeartbeatArgs,
        settings: &ConsumerGroupSettings,
    ) -> Result<bool, ResponseError> {
        if let Some(name) = &args.server_assignor {
            let known = AssignorKind::from_name(name).is_some_and(|k| settings.assignors.contains(&k));
            if !known {
                return Err(ResponseError::UnsupportedAssignor);
            }
        }
        if let Some(expression) = args.subscribed_topic_regex.as_deref().filter(|e| !e.is_empty()) {
            self.check_regex(expression, settings)?;
        }
        let member = self
            .members
            .get_mut(member_id)
            .expect("heartbeat's member exists");
        let before = member.metadata.clone();
        let metadata = &mut member.metadata;
        if let Some(names) = &args.subscribed_topic_names {
            metadata.subscribed_topic_names = names.clone();
        }
        if let Some(expression) = &args.subscribed_topic_regex {
            metadata.subscribed_topic_regex = (!expression.is_empty()).then(|| expression.clone());
        }
        if args.server_assignor.is_some() {
            metadata.server_assignor = args.server_assignor.clone();
        }
        if args.rebalance_timeout_ms > 0 {
            metadata.rebalance_timeout_ms = args.rebalance_timeout_ms;
        }
        metadata.rack_id = args.rack_id.clone().or(metadata.rack_id.take());
        metadata.client_id = args.client_id.clone();
        metadata.client_host = args.client_host.clone();
        if *metadata == before {
            return Ok(false);
        }
        let affects =
            metadata.rack_id != before.rack_id || metadata.server_assignor != before.server_assignor;
        self.records.push(ConsumerGroupRecord::Member {
            group: self.id.clone(),
            member_id: member_id.to_string(),
            value: Some(metadata.clone()),
        });
        Ok(affects)
    }

    /// INVALID_REGULAR_EXPRESSION for an expression that does not compile, or one more than the
    /// group's bound of distinct expressions.
    fn check_regex(&self, expression: &str, settings: &ConsumerGroupSettings) -> Result<(), ResponseError> {
        if self.regexes.contains_key(expression) {
            return Ok(());
        }
        if subscription::compile(expression).is_none() {
            return Err(ResponseError::InvalidRegularExpression);
        }
        let in_use: BTreeSet<&str> = self
            .members
            .values()
            .filter_map(|m| m.metadata.subscribed_topic_regex.as_deref())
            .collect();
        if !in_use.contains(expression) && in_use.len() >= settings.regexes_max {
            return Err(ResponseError::InvalidRegularExpression);
        }
        Ok(())
    }

    /// The member's subscription in topic ids now; returns whether it changed.
    pub(in crate::group::consumer) fn resolve_subscription(
        &mut self,
        member_id: &str,
        topics: &dyn TopicLookup,
        now_ms: i64,
    ) -> bool {
        let metadata = self.members[member_id].metadata.clone();
        let mut names: BTreeSet<String> = metadata.subscribed_topic_names.iter().cloned().collect();
        if let Some(expression) = &metadata.subscribed_topic_regex {
            names.extend(self.regex_topics(expression, topics, now_ms));
        }
        let ids = subscription::ids_of(&names, topics);
        let member = self.member_mut(member_id);
        let changed = member.subscribed != ids;
        member.subscribed = ids;
        changed
    }

    /// The topics `expression` matches, matched again when older than [`REGEX_REFRESH_MS`].
    fn regex_topics(&mut self, expression: &str, topics: &dyn TopicLookup, now_ms: i64) -> BTreeSet<String> {
        let in_use: BTreeSet<String> = self
            .members
            .values()
            .filter_map(|m| m.metadata.subscribed_topic_regex.clone())
            .collect();
        self.regexes.retain(|e, _| in_use.contains(e));
        if !self.regexes.contains_key(expression) {
            let Some(regex) = subscription::compile(expression) else {
                return BTreeSet::new();
            };
            let resolved = ResolvedRegex {
                regex,
                topics: BTreeSet::new(),
                resolved_at_ms: i64::MIN,
            };
            self.regexes.insert(expression.to_string(), resolved);
        }
        let resolved = self.regexes.get_mut(expression).expect("inserted above");
        if now_ms.saturating_sub(resolved.resolved_at_ms) >= REGEX_REFRESH_MS {
            resolved.topics = subscription::matching(&resolved.regex, topics);
            resolved.resolved_at_ms = now_ms;
        }
        resolved.topics.clone()
    }

    /// Digest of the topics any member subscribes to.
    pub(in crate::group::consumer) fn subscribed_fingerprint(&self, topics: &dyn TopicLookup) -> u64 {
        let ids: BTreeSet<_> = self
            .members
            .values()
            .flat_map(|m| m.subscribed.iter().copied())
            .collect();
        subscription::fingerprint(&ids, topics, self.racks_wanted())
    }

    /// Whether the assignment looks at racks: some member named its rack.
    pub(in crate::group::consumer) fn racks_wanted(&self) -> bool {
        self.members.values().any(|m| m.metadata.rack_id.is_some())
    }

    /// Removes the members whose session ended, or that did not revoke in time. Returns
    /// whether any was.
    pub fn expire(&mut self, now_ms: i64) -> bool {
        let due: Vec<String> = self
            .members
            .values()
            .filter(|m| m.next_deadline_ms() <= now_ms)
            .map(|m| m.id.clone())
            .collect();
        due.iter().for_each(|id| self.remove_member(id));
        !due.is_empty()
    }

    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.members.values().map(ConsumerMember::next_deadline_ms).min()
    }
}
