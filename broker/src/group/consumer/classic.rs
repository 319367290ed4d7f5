//! Members of the classic protocol in a consumer group: how a group moves online from the
//! classic protocol to KIP-848's, as Kafka's `group.consumer.migration.policy` does. A classic
//! group whose members are consumers becomes a consumer group when a member of the new protocol
//! joins it; its classic members go on with JoinGroup, SyncGroup, Heartbeat and LeaveGroup,
//! their assignments made by the group's assignor: a Heartbeat answers REBALANCE_IN_PROGRESS
//! when the member's assignment must change, its JoinGroup reports what it still owns (the
//! consumer protocol's subscription) and moves it one step, as a heartbeat does, and SyncGroup
//! hands it what it owns now.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::member::{ClassicMember, ConsumerMember, HeartbeatArgs};
use super::reconcile::MemberAssignment;
use super::records::ConsumerGroupRecord;
use super::records::{MemberMetadata, MemberState, TopicPartitions};
use super::subscription::TopicLookup;
use super::{ConsumerGroup, ConsumerGroupSettings};
use crate::group::member::{JoinArgs, Member};
use crate::group::state::{Group, GroupState};

/// The protocol type of classic groups of consumers: the only ones that can change protocol.
const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// A classic member's JoinGroup, as a consumer group takes it.
#[derive(Debug, Clone)]
pub struct ClassicJoin {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocols: Vec<(String, Bytes)>,
}

/// The answer to a classic member's JoinGroup in a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicJoined {
    pub generation_id: i32,
    pub protocol_name: String,
}

/// A consumer protocol subscription: its topics, the partitions it says it owns (v1+), its rack
/// (v3+). INCONSISTENT_GROUP_PROTOCOL when it does not decode.
fn subscription(metadata: &Bytes) -> Result<ConsumerProtocolSubscription, ResponseError> {
    let mut buf = metadata.clone();
    if buf.remaining() < 2 {
        return Err(ResponseError::InconsistentGroupProtocol);
    }
    // Newer versions keep the older fields first: read what this broker knows.
    let version = buf.get_i16().clamp(0, 3);
    ConsumerProtocolSubscription::decode(&mut buf, version)
        .map_err(|_| ResponseError::InconsistentGroupProtocol)
}

/// The partitions a consumer protocol assignment names, by topic id (unknown topics left out).
fn assignment_of(bytes: &Bytes, topics: &dyn TopicLookup) -> TopicPartitions {
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return TopicPartitions::new();
    }
    let version = buf.get_i16().clamp(0, 3);
    let Ok(assignment) = ConsumerProtocolAssignment::decode(&mut buf, version) else {
        return TopicPartitions::new();
    };
    by_id(
        assignment
            .assigned_partitions
            .iter()
            .map(|t| (t.topic.as_str(), &t.partitions)),
        topics,
    )
}

fn by_id<'a>(
    named: impl Iterator<Item = (&'a str, &'a Vec<i32>)>,
    topics: &dyn TopicLookup,
) -> TopicPartitions {
    let mut out = TopicPartitions::new();
    for (name, partitions) in named {
        if let Some((id, count)) = topics.by_name(name) {
            let valid = partitions.iter().copied().filter(|p| (0..count).contains(p));
            out.entry(id).or_default().extend(valid);
        }
    }
    out.retain(|_, set| !set.is_empty());
    out
}

/// `partitions` as a consumer protocol assignment (v0), topics by name.
pub fn encode_assignment(partitions: &TopicPartitions, topics: &dyn TopicLookup) -> Bytes {
    let assigned = partitions.iter().filter_map(|(id, set)| {
        let (name, _) = topics.by_id(*id)?;
        Some(
            AssignedTopic::default()
                .with_topic(TopicName(StrBytes::from_string(name)))
                .with_partitions(set.iter().copied().collect()),
        )
    });
    let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(assigned.collect());
    let mut out = BytesMut::new();
    out.extend_from_slice(&0i16.to_be_bytes());
    // A message this broker built from its own topics always encodes.
    let _ = assignment.encode(&mut out, 0);
    out.freeze()
}

impl ConsumerGroup {
    /// The consumer group a Stable classic group of consumers becomes: its members keep their
    /// partitions, at the generation's epoch. GROUP_ID_NOT_FOUND for another kind of group;
    /// while it rebalances, COORDINATOR_LOAD_IN_PROGRESS, which clients retry (the members
    /// waiting in the rebalance would otherwise be told to join again).
    pub fn from_classic(
        classic: &Group,
        topics: &dyn TopicLookup,
        now_ms: i64,
    ) -> Result<ConsumerGroup, ResponseError> {
        if classic.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return Err(ResponseError::GroupIdNotFound);
        }
        match classic.state {
            GroupState::Stable => {}
            GroupState::PreparingRebalance | GroupState::CompletingRebalance => {
                return Err(ResponseError::CoordinatorLoadInProgress)
            }
            GroupState::Empty | GroupState::Dead => return Err(ResponseError::GroupIdNotFound),
        }
        let protocol = classic.protocol_name.clone().unwrap_or_default();
        let generation = classic.generation_id;
        let mut group = ConsumerGroup::new(classic.id.clone());
        group.epoch = generation;
        group.assignment_epoch = generation;
        for m in &classic.members {
            let subscribed = subscription(&m.metadata_for(&protocol))?;
            let assigned = assignment_of(&m.assignment, topics);
            let mut member =
                ConsumerMember::new(m.member_id.clone(), classic_metadata(m, &subscribed), now_ms);
            member.assignment = MemberAssignment {
                epoch: generation,
                previous_epoch: generation - 1,
                state: MemberState::Stable,
                assigned: assigned.clone(),
                pending_revocation: TopicPartitions::new(),
            };
            member.classic = Some(ClassicMember {
                protocols: m.protocols.clone(),
                session_timeout_ms: m.session_timeout_ms,
            });
            member.session_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
            group.set_target(&m.member_id, assigned);
            group.put_member(member);
        }
        group.records.push(ConsumerGroupRecord::Metadata {
            group: group.id.clone(),
            epoch: Some(group.epoch),
        });
        group.records.push(ConsumerGroupRecord::TargetAssignmentMetadata {
            group: group.id.clone(),
            assignment_epoch: Some(group.assignment_epoch),
        });
        for id in group.members.keys().cloned().collect::<Vec<_>>() {
            group.resolve_subscription(&id, topics, now_ms);
        }
        group.topics_fingerprint = Some(group.subscribed_fingerprint(topics));
        Ok(group)
    }

    /// A classic member's JoinGroup: it joins, or rejoins saying what it still owns, and moves
    /// one step toward its target assignment.
    pub fn classic_join(
        &mut self,
        join: ClassicJoin,
        topics: &dyn TopicLookup,
        settings: &ConsumerGroupSettings,
        now_ms: i64,
    ) -> Result<ClassicJoined, ResponseError> {
        let (protocol_name, metadata) = join
            .protocols
            .first()
            .cloned()
            .ok_or(ResponseError::InconsistentGroupProtocol)?;
        let subscribed = subscription(&metadata)?;
        let owned = subscribed
            .owned_partitions
            .iter()
            .map(|t| (t.topic.as_str(), &t.partitions));
        let args = HeartbeatArgs {
            member_id: join.member_id.clone(),
            epoch: 0,
            instance_id: join.instance_id.clone(),
            rack_id: subscribed.rack_id.as_ref().map(|r| r.to_string()),
            rebalance_timeout_ms: join.rebalance_timeout_ms,
            subscribed_topic_names: Some(subscribed.topics.iter().map(|t| t.to_string()).collect()),
            subscribed_topic_regex: Some(String::new()),
            server_assignor: None,
            owned: Some(by_id(owned, topics)),
            client_id: join.client_id.clone(),
            client_host: join.client_host.clone(),
        };
        let outcome = self.heartbeat(args, topics, settings, now_ms)?;
        let member = self.member_mut(&outcome.member_id);
        member.classic = Some(ClassicMember {
            protocols: join.protocols,
            session_timeout_ms: join.session_timeout_ms,
        });
        member.session_deadline_ms = now_ms + i64::from(join.session_timeout_ms);
        Ok(ClassicJoined {
            generation_id: outcome.epoch,
            protocol_name,
        })
    }

    /// A classic member's SyncGroup: the partitions it owns now, as a consumer protocol
    /// assignment.
    pub fn classic_sync(
        &self,
        member_id: &str,
        generation_id: i32,
        topics: &dyn TopicLookup,
    ) -> Result<Bytes, ResponseError> {
        let member = self.classic_member(member_id, generation_id)?;
        Ok(encode_assignment(&member.assignment.assigned, topics))
    }

    /// A classic member's Heartbeat: REBALANCE_IN_PROGRESS while its assignment must change.
    pub fn classic_heartbeat(
        &mut self,
        member_id: &str,
        generation_id: i32,
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        let assignment_epoch = self.assignment_epoch;
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        self.classic_member(member_id, generation_id)?;
        let member = self.member_mut(member_id);
        let session_ms = member.classic.as_ref().map_or(0, |c| c.session_timeout_ms);
        member.session_deadline_ms = member.session_deadline_ms.max(now_ms + i64::from(session_ms));
        let settled = member.assignment.state == MemberState::Stable
            && member.assignment.epoch == assignment_epoch
            && member.assignment.assigned == target;
        match settled {
            true => Ok(()),
            false => Err(ResponseError::RebalanceInProgress),
        }
    }

    /// UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION unless `member_id` is in the group at
    /// `generation_id`.
    fn classic_member(&self, member_id: &str, generation_id: i32) -> Result<&ConsumerMember, ResponseError> {
        let member = self
            .members
            .get(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        match member.assignment.epoch == generation_id {
            true => Ok(member),
            false => Err(ResponseError::IllegalGeneration),
        }
    }
}

impl ConsumerGroup {
    /// Whether every member left is one of the classic protocol (the last member of the new
    /// protocol left): Kafka then turns the group back into a classic group.
    pub fn only_classic_members(&self) -> bool {
        !self.members.is_empty() && self.members.values().all(|m| m.classic.is_some())
    }

    /// The classic members this group hands to the classic group it becomes, each with its
    /// partitions as a consumer protocol assignment; the group's records are tombstoned.
    pub fn into_classic_members(&mut self, topics: &dyn TopicLookup, now_ms: i64) -> Vec<Member> {
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in &ids {
            self.remove_member_records(id);
        }
        let group = self.id.clone();
        self.records.extend([
            ConsumerGroupRecord::TargetAssignmentMetadata {
                group: group.clone(),
                assignment_epoch: None,
            },
            ConsumerGroupRecord::Metadata { group, epoch: None },
        ]);
        let members = std::mem::take(&mut self.members);
        members
            .into_values()
            .filter_map(|m| classic_member(m, topics, now_ms))
            .collect()
    }
}

/// A consumer group's classic member as a member of a classic group.
fn classic_member(member: ConsumerMember, topics: &dyn TopicLookup, now_ms: i64) -> Option<Member> {
    let classic = member.classic?;
    let args = JoinArgs {
        member_id: member.id.clone(),
        group_instance_id: member.metadata.instance_id.clone(),
        client_id: member.metadata.client_id.clone(),
        client_host: member.metadata.client_host.clone(),
        session_timeout_ms: classic.session_timeout_ms,
        rebalance_timeout_ms: member.metadata.rebalance_timeout_ms,
        protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(),
        protocols: classic.protocols,
        require_known_member_id: false,
        fresh_member_id: String::new(),
    };
    let mut classic_member = Member::new(member.id, &args, now_ms);
    classic_member.assignment = encode_assignment(&member.assignment.assigned, topics);
    classic_member.synced = true;
    Some(classic_member)
}

/// A classic member's metadata in a consumer group, from its JoinGroup's subscription.
fn classic_metadata(
    m: &crate::group::member::Member,
    subscribed: &ConsumerProtocolSubscription,
) -> MemberMetadata {
    MemberMetadata {
        instance_id: m.group_instance_id.clone(),
        rack_id: subscribed.rack_id.as_ref().map(|r| r.to_string()),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_topic_names: subscribed.topics.iter().map(|t| t.to_string()).collect(),
        subscribed_topic_regex: None,
        server_assignor: None,
        rebalance_timeout_ms: m.rebalance_timeout_ms,
    }
}
