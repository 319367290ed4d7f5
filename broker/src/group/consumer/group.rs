//! One consumer group of KIP-848's protocol: its epoch, members, target assignment, and the
//! heartbeat that moves each member toward its target (docs/ARCHITECTURE.md, "Consumer
//! groups"). Pure logic driven by a clock and the topics it is given; every change returns the
//! records that make it durable, in the order a replay applies them.
//!
//! The group epoch rises whenever what the assignment depends on changes (a member joins or
//! leaves, a subscription or a subscribed topic changes); the target assignment is then made
//! again at that epoch, and each member reaches it through [`super::reconcile`] at its own
//! heartbeats, while the others go on consuming.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::member::{ConsumerMember, HeartbeatArgs, LEAVE_EPOCH, STATIC_LEAVE_EPOCH};
use super::reconcile;
use super::records::{ConsumerGroupRecord, MemberMetadata, MemberState, TopicPartitions};
use super::subscription::TopicLookup;

pub use crate::config::ConsumerGroupSettings;

/// A subscription's expression and the topic names it matched when last resolved.
#[derive(Debug, Clone)]
struct ResolvedRegex {
    regex: regex::Regex,
    topics: BTreeSet<String>,
    resolved_at_ms: i64,
}

/// How often an expression is matched against the topics again: a topic created later joins
/// the subscription within this and one heartbeat.
const REGEX_REFRESH_MS: i64 = 1_000;

/// A heartbeat's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatOutcome {
    pub member_id: String,
    pub epoch: i32,
    /// Sent when it changed, or when the member said what it owns.
    pub assignment: Option<TopicPartitions>,
}

/// One consumer group. Owned by its coordinator shard; not Send.
#[derive(Debug)]
pub struct ConsumerGroup {
    pub id: String,
    pub epoch: i32,
    /// The epoch the target assignment was made at (≤ `epoch`).
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMember>,
    /// Each member's target assignment, made at `assignment_epoch`.
    pub target: BTreeMap<String, TopicPartitions>,
    /// Which member holds each partition (assigned or pending revocation): at most one.
    owners: HashMap<(Uuid, i32), String>,
    regexes: BTreeMap<String, ResolvedRegex>,
    /// Digest of the subscribed topics at the last target assignment.
    pub(in crate::group::consumer) topics_fingerprint: Option<u64>,
    /// Records to write since the last [`Self::take_records`].
    pub(in crate::group::consumer) records: Vec<ConsumerGroupRecord>,
}

impl ConsumerGroup {
    pub fn new(id: String) -> Self {
        ConsumerGroup {
            id,
            epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            owners: HashMap::new(),
            regexes: BTreeMap::new(),
            topics_fingerprint: None,
            records: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Kafka's names for the group's state, as ConsumerGroupDescribe and ListGroups say them.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.epoch > self.assignment_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.assignment.epoch != self.assignment_epoch || m.assignment.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// The records that make the changes so far durable, in order.
    pub fn take_records(&mut self) -> Vec<ConsumerGroupRecord> {
        std::mem::take(&mut self.records)
    }

    /// One heartbeat of a member (ConsumerGroupHeartbeat).
    pub fn heartbeat(
        &mut self,
        args: HeartbeatArgs,
        topics: &dyn TopicLookup,
        settings: &ConsumerGroupSettings,
        now_ms: i64,
    ) -> Result<HeartbeatOutcome, ResponseError> {
        if args.epoch == LEAVE_EPOCH || args.epoch == STATIC_LEAVE_EPOCH {
            return self.leave(&args);
        }
        let (member_id, joined) = self.find_or_join(&args, settings, now_ms)?;
        // Epoch 0 is a member (re)joining owning nothing; any other must be the member's.
        if args.epoch != 0 {
            self.check_epoch(&member_id, args.epoch, args.owned.as_ref())?;
        }
        let mut bump = joined;
        bump |= self.update_metadata(&member_id, &args, settings)?;
        bump |= self.resolve_subscription(&member_id, topics, now_ms);
        let fingerprint = self.subscribed_fingerprint(topics);
        bump |= self.topics_fingerprint != Some(fingerprint);
        if bump {
            self.bump_epoch();
        }
        if self.epoch > self.assignment_epoch {
            self.assign(topics, settings);
            self.topics_fingerprint = Some(fingerprint);
        }
        let changed = self.reconcile_member(&member_id, args.owned.as_ref(), now_ms);
        let member = self.member_mut(&member_id);
        member.session_deadline_ms = now_ms + i64::from(settings.session_timeout_ms);
        let send = joined || changed || args.owned.is_some();
        let assignment = send.then(|| member.assignment.assigned.clone());
        let epoch = member.assignment.epoch;
        Ok(HeartbeatOutcome {
            member_id,
            epoch,
            assignment,
        })
    }

    pub(in crate::group::consumer) fn member_mut(&mut self, member_id: &str) -> &mut ConsumerMember {
        let member = self.members.get_mut(member_id);
        member.expect("the heartbeat's member is in its group")
    }

    /// The member a heartbeat is for, made if it joins (epoch 0). Returns its id and whether
    /// it is new.
    fn find_or_join(
        &mut self,
        args: &HeartbeatArgs,
        settings: &ConsumerGroupSettings,
        now_ms: i64,
    ) -> Result<(String, bool), ResponseError> {
        if args.epoch != 0 {
            return match self.members.contains_key(&args.member_id) {
                true => Ok((args.member_id.clone(), false)),
                false => Err(ResponseError::UnknownMemberId),
            };
        }
        if let Some(instance_id) = &args.instance_id {
            if let Some(replaced) = self.replace_static_member(instance_id, &args.member_id)? {
                return Ok((replaced, false));
            }
        }
        if self.members.contains_key(&args.member_id) {
            // A member that lost its epoch and joins again under the same id.
            return Ok((args.member_id.clone(), false));
        }
        if self.members.len() >= settings.members_max {
            return Err(ResponseError::GroupMaxSizeReached);
        }
        let metadata = MemberMetadata {
            instance_id: args.instance_id.clone(),
            rack_id: args.rack_id.clone(),
            client_id: args.client_id.clone(),
            client_host: args.client_host.clone(),
            subscribed_topic_names: Vec::new(),
            subscribed_topic_regex: None,
            server_assignor: None,
            rebalance_timeout_ms: args.rebalance_timeout_ms,
        };
        let member = ConsumerMember::new(args.member_id.clone(), metadata, now_ms);
        self.members.insert(args.member_id.clone(), member);
        Ok((args.member_id.clone(), true))
    }

    /// A static member back under a new member id takes over its old self, partitions and
    /// epoch included; one whose old self has not left answers UNRELEASED_INSTANCE_ID.
    fn replace_static_member(
        &mut self,
        instance_id: &str,
        member_id: &str,
    ) -> Result<Option<String>, ResponseError> {
        let old = self
            .members
            .values()
            .find(|m| m.metadata.instance_id.as_deref() == Some(instance_id));
        let Some(old) = old.map(|m| m.id.clone()) else {
            return Ok(None);
        };
        if old == member_id {
            return Ok(Some(old));
        }
        let mut member = self.members[&old].clone();
        if !member.is_away() {
            return Err(ResponseError::UnreleasedInstanceId);
        }
        self.remove_member_records(&old);
        self.members.remove(&old);
        self.release_all(&old);
        let target = self.target.remove(&old).unwrap_or_default();
        member.id = member_id.to_string();
        // Epoch 0 again: the reconciliation that follows hands it its partitions at the
        // group's current assignment epoch.
        member.assignment.epoch = 0;
        self.set_target(member_id, target);
        self.put_member(member);
        Ok(Some(member_id.to_string()))
    }

    /// FENCED_MEMBER_EPOCH for a heartbeat at an epoch the member is not at, unless it is the
    /// member's previous epoch and it owns nothing it lost (its last answer went missing).
    fn check_epoch(
        &self,
        member_id: &str,
        epoch: i32,
        owned: Option<&TopicPartitions>,
    ) -> Result<(), ResponseError> {
        let member = &self.members[member_id];
        let current = &member.assignment;
        if epoch == current.epoch {
            return Ok(());
        }
        let subset = owned.is_none_or(|o| reconcile::difference(o, &current.assigned).is_empty());
        if epoch < current.epoch && epoch == current.previous_epoch && subset {
            return Ok(());
        }
        Err(ResponseError::FencedMemberEpoch)
    }
}

#[path = "group_assignment.rs"]
mod assignment;
#[path = "group_membership.rs"]
mod membership;
