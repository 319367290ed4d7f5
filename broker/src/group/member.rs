//! One member of a classic consumer group, and what the group hands back to waiting requests.

use bytes::Bytes;
use futures::channel::oneshot;
use kafka_protocol::error::ResponseError;

/// What a JoinGroup request carries into the state machine.
#[derive(Debug, Clone)]
pub struct JoinArgs {
    /// Empty for a member that has no id yet.
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// Protocol names with their metadata, in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED and its id.
    pub require_known_member_id: bool,
    /// The id a new member gets (made by the caller, so the state machine stays deterministic).
    pub fresh_member_id: String,
}

/// A member as the JoinGroup leader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

/// The answer to a JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinOutcome {
    pub error: Option<ResponseError>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader_id: String,
    pub member_id: String,
    /// Filled for the leader only.
    pub members: Vec<JoinedMember>,
}

impl JoinOutcome {
    pub fn failed(error: ResponseError, member_id: &str) -> Self {
        JoinOutcome {
            error: Some(error),
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader_id: String::new(),
            member_id: member_id.to_string(),
            members: Vec::new(),
        }
    }
}

/// The answer to a SyncGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncOutcome {
    pub error: Option<ResponseError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncOutcome {
    pub fn failed(error: ResponseError) -> Self {
        SyncOutcome {
            error: Some(error),
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// One group member. Owned by one shard; not Send (it holds the waiting requests' senders).
#[derive(Debug)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// What the leader assigned in the current generation.
    pub assignment: Bytes,
    /// A JoinGroup waiting for the rebalance to complete.
    pub join_waiter: Option<oneshot::Sender<JoinOutcome>>,
    /// A SyncGroup waiting for the leader's assignment.
    pub sync_waiter: Option<oneshot::Sender<SyncOutcome>>,
    /// The member is evicted when this passes without a heartbeat (unless a request waits).
    pub session_deadline_ms: i64,
    /// Sent SyncGroup in the current generation (members that do not are dropped).
    pub synced: bool,
}

impl Member {
    pub fn new(member_id: String, args: &JoinArgs, now_ms: i64) -> Self {
        Member {
            member_id,
            group_instance_id: args.group_instance_id.clone(),
            client_id: args.client_id.clone(),
            client_host: args.client_host.clone(),
            session_timeout_ms: args.session_timeout_ms,
            rebalance_timeout_ms: args.rebalance_timeout_ms,
            protocol_type: args.protocol_type.clone(),
            protocols: args.protocols.clone(),
            assignment: Bytes::new(),
            join_waiter: None,
            sync_waiter: None,
            session_deadline_ms: now_ms + i64::from(args.session_timeout_ms),
            synced: false,
        }
    }

    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata.clone())
            .unwrap_or_default()
    }

    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(name, _)| name == protocol)
    }

    pub fn same_protocols(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    pub fn heartbeat(&mut self, now_ms: i64) {
        self.session_deadline_ms = now_ms + i64::from(self.session_timeout_ms);
    }

    /// A member with a request parked on the coordinator is alive by definition.
    pub fn is_waiting(&self) -> bool {
        self.join_waiter.is_some() || self.sync_waiter.is_some()
    }

    pub fn answer_join(&mut self, outcome: JoinOutcome) {
        if let Some(waiter) = self.join_waiter.take() {
            let _ = waiter.send(outcome);
        }
    }

    pub fn answer_sync(&mut self, outcome: SyncOutcome) {
        if let Some(waiter) = self.sync_waiter.take() {
            let _ = waiter.send(outcome);
        }
    }

    /// Tells whatever this member left waiting that it is no longer part of the group.
    pub fn fail_waiters(&mut self, error: ResponseError) {
        let member_id = self.member_id.clone();
        self.answer_join(JoinOutcome::failed(error, &member_id));
        self.answer_sync(SyncOutcome::failed(error));
    }
}
