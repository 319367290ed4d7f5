//! One member of a consumer group and what its heartbeat carries.

use std::collections::BTreeSet;

use bytes::Bytes;
use uuid::Uuid;

use super::reconcile::MemberAssignment;
use super::records::{CurrentAssignment, MemberMetadata, TopicPartitions};

/// A member's epoch in a heartbeat that leaves the group.
pub const LEAVE_EPOCH: i32 = -1;
/// A static member's epoch in a heartbeat that leaves for now, keeping its partitions for its
/// return within the session timeout.
pub const STATIC_LEAVE_EPOCH: i32 = -2;

/// What a ConsumerGroupHeartbeat says; `None` fields did not change since the last one.
#[derive(Debug, Clone, Default)]
pub struct HeartbeatArgs {
    pub member_id: String,
    pub epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// The partitions the member owns now.
    pub owned: Option<TopicPartitions>,
    pub client_id: String,
    pub client_host: String,
}

/// A member of a consumer group. Owned by the group's coordinator shard.
#[derive(Debug, Clone)]
pub struct ConsumerMember {
    pub id: String,
    pub metadata: MemberMetadata,
    pub assignment: MemberAssignment,
    /// The member is removed unless it heartbeats by then.
    pub session_deadline_ms: i64,
    /// Set while it must revoke partitions: it is removed if it has not by then.
    pub revocation_deadline_ms: Option<i64>,
    /// Its subscription in topic ids, as last resolved.
    pub subscribed: BTreeSet<Uuid>,
    /// Set for a member of the classic protocol (JoinGroup, SyncGroup, Heartbeat) in a group
    /// moving between protocols ([`super::classic`]).
    pub classic: Option<ClassicMember>,
}

/// What a classic member said in its JoinGroup. Not written to the log: after a restart the
/// member's next JoinGroup says it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMember {
    /// Protocol names with their metadata, in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub session_timeout_ms: i32,
}

impl ConsumerMember {
    pub fn new(id: String, metadata: MemberMetadata, now_ms: i64) -> Self {
        ConsumerMember {
            id,
            metadata,
            assignment: MemberAssignment::joining(),
            session_deadline_ms: now_ms,
            revocation_deadline_ms: None,
            subscribed: BTreeSet::new(),
            classic: None,
        }
    }

    /// Left for now by a static member's leave (epoch -2), keeping its partitions.
    pub fn is_away(&self) -> bool {
        self.assignment.epoch == STATIC_LEAVE_EPOCH
    }

    pub fn next_deadline_ms(&self) -> i64 {
        let revocation = self.revocation_deadline_ms.unwrap_or(i64::MAX);
        self.session_deadline_ms.min(revocation)
    }

    pub fn current_assignment_record(&self) -> CurrentAssignment {
        let a = &self.assignment;
        CurrentAssignment {
            member_epoch: a.epoch,
            previous_member_epoch: a.previous_epoch,
            state: a.state,
            assigned: a.assigned.clone(),
            pending_revocation: a.pending_revocation.clone(),
        }
    }

    pub fn restore_assignment(&mut self, record: CurrentAssignment) {
        self.assignment = MemberAssignment {
            epoch: record.member_epoch,
            previous_epoch: record.previous_member_epoch,
            state: record.state,
            assigned: record.assigned,
            pending_revocation: record.pending_revocation,
        };
    }
}
