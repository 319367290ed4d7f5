//! JoinGroup: a member (re)joins its group and waits, on the group's coordinator shard, until the
//! rebalance completes; the leader's answer lists every member with its protocol metadata.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::BrokerCtx;
use crate::group::consumer::classic::{ClassicJoin, ClassicJoined};
use crate::group::consumer::subscription::BrokerTopics;
use crate::group::member::{JoinArgs, JoinOutcome};
use crate::group::records::GroupRecord;
use crate::group::{on_coordinator_in_turn, store, OrderedPart};
use crate::reply::Reply;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    request: JoinGroupRequest,
    version: i16,
    client_id: String,
) -> Reply<JoinGroupResponse> {
    let group_id = request.group_id.to_string();
    let member_id = request.member_id.to_string();
    if group_id.is_empty() {
        return Reply::Now(response(
            JoinOutcome::failed(ResponseError::InvalidGroupId, &member_id),
            version,
        ));
    }
    let args = JoinArgs {
        member_id: member_id.clone(),
        group_instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
        fresh_member_id: format!("{client_id}-{}", random_uuid()),
        client_id,
        client_host: String::new(),
        session_timeout_ms: request.session_timeout_ms,
        // v0 has no rebalance timeout: the session timeout bounds the rebalance.
        rebalance_timeout_ms: if version >= 1 {
            request.rebalance_timeout_ms
        } else {
            request.session_timeout_ms
        },
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        require_known_member_id: version >= 4,
    };
    let id = group_id.clone();
    let joined = on_coordinator_in_turn(ctx, &group_id, move |there, partition, mut ordered| async move {
        let coordinator = &there.state.groups;
        let now = coordinator.now_ms();
        let create = args.member_id.is_empty();
        let member_id = args.member_id.clone();
        let topics = BrokerTopics::of(&there.state.shared);
        if let Some(joined) = coordinator.classic_join_consumer_group(&id, classic_join(&args), &topics, now)
        {
            return in_consumer_group(&there, partition, joined, (args, ordered)).await;
        }
        if let Err(error) = coordinator.take_over_consumer(&id) {
            ordered.finish();
            return JoinOutcome::failed(error, &member_id);
        }
        let waiting = coordinator.with_group(&id, create, |group| group.join(args, now));
        ordered.finish();
        store::persist_group(&there, partition, &id).await;
        match waiting {
            None => JoinOutcome::failed(ResponseError::UnknownMemberId, &member_id),
            // Dropped when the member sent another JoinGroup meanwhile: that one gets the answer.
            Some(waiting) => waiting
                .await
                .unwrap_or_else(|_| JoinOutcome::failed(ResponseError::RebalanceInProgress, &member_id)),
        }
    })
    .await;
    joined.map(move |joined| {
        let outcome = joined.unwrap_or_else(|error| JoinOutcome::failed(error, &member_id));
        response(outcome, version)
    })
}

/// A classic member's JoinGroup as a consumer group takes it (crate::group::consumer::classic).
fn classic_join(args: &JoinArgs) -> ClassicJoin {
    let member_id = match args.member_id.is_empty() {
        true => args.fresh_member_id.clone(),
        false => args.member_id.clone(),
    };
    ClassicJoin {
        member_id,
        instance_id: args.group_instance_id.clone(),
        client_id: args.client_id.clone(),
        client_host: args.client_host.clone(),
        session_timeout_ms: args.session_timeout_ms,
        rebalance_timeout_ms: args.rebalance_timeout_ms,
        protocols: args.protocols.clone(),
    }
}

/// Answers a classic member of a consumer group once its records are durable: it is no leader
/// (the group's assignor assigns), and SyncGroup hands it its partitions.
async fn in_consumer_group(
    ctx: &Rc<BrokerCtx>,
    partition: i32,
    joined: Result<(ClassicJoined, Vec<GroupRecord>), ResponseError>,
    (args, mut ordered): (JoinArgs, OrderedPart),
) -> JoinOutcome {
    let member_id = classic_join(&args).member_id;
    let joined = match joined {
        Ok(_) if args.protocol_type != "consumer" => Err(ResponseError::InconsistentGroupProtocol),
        joined => joined,
    };
    let (joined, records) = match joined {
        Ok(joined) => joined,
        Err(error) => {
            ordered.finish();
            return JoinOutcome::failed(error, &member_id);
        }
    };
    let written = if records.is_empty() {
        ordered.finish();
        Ok(())
    } else {
        store::append_then_wait(ctx, partition, &records, || ordered.finish()).await
    };
    if let Err(error) = written {
        return JoinOutcome::failed(error, &member_id);
    }
    JoinOutcome {
        error: None,
        generation_id: joined.generation_id,
        protocol_type: Some(args.protocol_type),
        protocol_name: Some(joined.protocol_name),
        leader_id: String::new(),
        member_id,
        members: Vec::new(),
    }
}

/// The wire answer for `outcome` at `version`: fields a version lacks stay at their defaults.
pub fn response(outcome: JoinOutcome, version: i16) -> JoinGroupResponse {
    let members = outcome
        .members
        .into_iter()
        .map(|m| {
            let member = JoinGroupResponseMember::default()
                .with_member_id(StrBytes::from_string(m.member_id))
                .with_metadata(m.metadata);
            if version >= 5 {
                member.with_group_instance_id(m.group_instance_id.map(StrBytes::from_string))
            } else {
                member
            }
        })
        .collect();
    let protocol_name = match outcome.protocol_name {
        Some(name) => Some(StrBytes::from_string(name)),
        // Not nullable before v7.
        None if version < 7 => Some(StrBytes::default()),
        None => None,
    };
    let response = JoinGroupResponse::default()
        .with_error_code(outcome.error.map_or(0, |e| e.code()))
        .with_generation_id(outcome.generation_id)
        .with_protocol_name(protocol_name)
        .with_leader(StrBytes::from_string(outcome.leader_id))
        .with_member_id(StrBytes::from_string(outcome.member_id))
        .with_members(members);
    if version >= 7 {
        response.with_protocol_type(outcome.protocol_type.map(StrBytes::from_string))
    } else {
        response
    }
}

/// A random (version 4) UUID, as Kafka's member ids carry.
fn random_uuid() -> uuid::Uuid {
    let mut raw = [0u8; 16];
    if getrandom::fill(&mut raw).is_err() {
        // No OS randomness: ids need only be unique, so time and a counter do.
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        raw[..8].copy_from_slice(&(crate::clock::now_ms() as u64).to_be_bytes());
        raw[8..].copy_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    }
    raw[6] = (raw[6] & 0x0f) | 0x40;
    raw[8] = (raw[8] & 0x3f) | 0x80;
    uuid::Uuid::from_bytes(raw)
}
