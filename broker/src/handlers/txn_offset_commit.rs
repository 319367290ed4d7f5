//! TxnOffsetCommit (API 28): the offsets a transactional producer commits for a group as part
//! of its transaction, sent to the group's coordinator. On the coordinator shard, in the
//! connection's turn, the member is checked (v3+) and the offsets are appended to the group's
//! `__consumer_offsets` partition as one transactional batch of the producer; the answer comes
//! once the batch is committed. The offsets stay pending until the transaction's marker
//! (`crate::group::transactions`).

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TopicName, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::protocol::StrBytes;

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::clock::now_ms;
use crate::group::records::{OffsetKey, OffsetValue};
use crate::group::{on_coordinator_in_turn, store};
use crate::handlers::partition_answers::push_partition;
use crate::reply::Reply;
use laminar_security::Operation;

/// Kafka's `offset.metadata.max.bytes` default, as OffsetCommit.
const METADATA_BYTES_MAX: usize = 4096;

/// One partition of the request: (topic, partition, offset, leader epoch, metadata).
type Commit = (String, i32, i64, i32, String);

/// The producer's part of the request: (producer id, producer epoch).
type Producer = (i64, i16);

/// The group's part of the request: (group id, member id, group instance id, generation id).
type Membership = (String, String, Option<String>, i32);

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: TxnOffsetCommitRequest,
) -> Reply<TxnOffsetCommitResponse> {
    let commits = commits_of(&request);
    let keys: Vec<(String, i32)> = commits.iter().map(|c| (c.0.clone(), c.1)).collect();
    let producer = (request.producer_id.0, request.producer_epoch);
    if let Err(error) = check_producer(producer) {
        return Reply::Now(response(keys, Err(error)));
    }
    // Kafka's check on each topic: Read (the transactional id's and the group's came before).
    let readable: Vec<bool> = commits
        .iter()
        .map(|c| access.allows_topic(Operation::Read, &c.0))
        .collect();
    let group_id = request.group_id.to_string();
    let membership: Membership = (
        group_id.clone(),
        request.member_id.to_string(),
        request.group_instance_id.as_ref().map(|s| s.to_string()),
        request.generation_id,
    );
    let done = on_coordinator_in_turn(ctx, &group_id, move |there, partition, mut ordered| async move {
        let (id, member_id, instance_id, generation_id) = membership;
        let coordinator = &there.state.groups;
        coordinator.check_txn_commit(&id, &member_id, instance_id.as_deref(), generation_id)?;
        let (mut results, offsets) = offsets_to_write(&there, &id, commits, readable);
        if offsets.is_empty() {
            return Ok(results);
        }
        let slots: Vec<(String, i32)> = offsets
            .iter()
            .map(|(k, _)| (k.topic.clone(), k.partition))
            .collect();
        let written = if coordinator.has_txn_room(&id, producer.0, &slots) {
            let appended = || ordered.finish();
            store::append_txn_offsets(&there, partition, producer, offsets, appended).await
        } else {
            tracing::warn!(
                group_id = id,
                producer_id = producer.0,
                "too many pending transactional offsets"
            );
            Err(ResponseError::InvalidCommitOffsetSize)
        };
        if let Err(error) = written {
            results
                .iter_mut()
                .filter(|r| r.is_none())
                .for_each(|r| *r = Some(error));
        }
        Ok(results)
    })
    .await;
    done.map(move |done| response(keys, done.and_then(|r| r)))
}

/// A producer id and epoch a transaction can have: the pending offsets are kept by producer
/// id, and a marker for a negative one never comes.
fn check_producer((producer_id, producer_epoch): Producer) -> Result<(), ResponseError> {
    if producer_id < 0 {
        return Err(ResponseError::InvalidProducerIdMapping);
    }
    if producer_epoch < 0 {
        return Err(ResponseError::InvalidProducerEpoch);
    }
    Ok(())
}

/// Each partition's error, `None` for those written, and the offsets to write for `group_id`.
fn offsets_to_write(
    ctx: &Rc<BrokerCtx>,
    group_id: &str,
    commits: Vec<Commit>,
    readable: Vec<bool>,
) -> (Vec<Option<ResponseError>>, Vec<(OffsetKey, OffsetValue)>) {
    let topics = ctx.state.shared.metadata.current();
    let now = now_ms();
    let mut results = Vec::with_capacity(commits.len());
    let mut offsets = Vec::new();
    for ((topic, index, offset, leader_epoch, metadata), readable) in commits.into_iter().zip(readable) {
        let known = topics
            .get(&topic)
            .is_some_and(|t| (0..t.partition_count).contains(&index));
        let error = if !readable {
            Some(ResponseError::TopicAuthorizationFailed)
        } else if !known {
            Some(ResponseError::UnknownTopicOrPartition)
        } else if metadata.len() > METADATA_BYTES_MAX {
            Some(ResponseError::OffsetMetadataTooLarge)
        } else {
            let key = OffsetKey {
                group: group_id.to_string(),
                topic,
                partition: index,
            };
            let value = OffsetValue {
                offset,
                leader_epoch,
                metadata,
                commit_timestamp_ms: now,
            };
            offsets.push((key, value));
            None
        };
        results.push(error);
    }
    (results, offsets)
}

fn commits_of(request: &TxnOffsetCommitRequest) -> Vec<Commit> {
    request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                let metadata = p.committed_metadata.as_ref().map(|m| m.to_string());
                (
                    t.name.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    metadata.unwrap_or_default(),
                )
            })
        })
        .collect()
}

/// The answer for `keys` (topic, partition) in request order: each partition's error, or one
/// error for all.
pub fn response(
    keys: Vec<(String, i32)>,
    results: Result<Vec<Option<ResponseError>>, ResponseError>,
) -> TxnOffsetCommitResponse {
    let errors: Vec<Option<ResponseError>> = match results {
        Ok(errors) => errors,
        Err(error) => vec![Some(error); keys.len()],
    };
    let mut topics: Vec<(String, Vec<TxnOffsetCommitResponsePartition>)> = Vec::new();
    for ((topic, index), error) in keys.into_iter().zip(errors) {
        let partition = TxnOffsetCommitResponsePartition::default()
            .with_partition_index(index)
            .with_error_code(error.map_or(0, |e| e.code()));
        push_partition(&mut topics, &topic, partition);
    }
    let topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(TopicName(StrBytes::from_string(name)))
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, RequestKind, ResponseKind, TransactionalId};
    use laminar_security::{AclBinding, AclSet, PatternType, Permission, Principal, ResourceType};

    use super::*;

    /// Alice's access when the ACLs allow her exactly `allowed` (resource, name, operation).
    pub(crate) fn access(allowed: &[(ResourceType, &str, Operation)]) -> Access {
        let bindings = allowed
            .iter()
            .map(|&(resource_type, name, operation)| AclBinding {
                resource_type,
                resource_name: name.to_string(),
                pattern_type: PatternType::Literal,
                principal: Principal::user("alice"),
                host: "*".into(),
                operation,
                permission: Permission::Allow,
            });
        let acls = AclSet::new(bindings, Vec::new(), false);
        Access::new(
            Some(Arc::new(acls)),
            Arc::new(Principal::user("alice")),
            "127.0.0.1".into(),
        )
    }

    /// Every partition's error code in the answer the ACLs give, or `None` if they let the
    /// request through.
    fn refused_codes(access: &Access) -> Option<Vec<i16>> {
        let partitions =
            [0, 1].map(|index| TxnOffsetCommitRequestPartition::default().with_partition_index(index));
        let request = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_static_str("tx")))
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(partitions.to_vec())]);
        let refused = super::super::acl_checks::refused(access, &RequestKind::TxnOffsetCommit(request), 3)?;
        let ResponseKind::TxnOffsetCommit(response) = refused else {
            panic!("not a TxnOffsetCommit answer: {refused:?}");
        };
        Some(
            response
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect(),
        )
    }

    #[test]
    fn acls_ask_write_on_the_transactional_id_then_read_on_the_group() {
        let write_id = (ResourceType::TransactionalId, "tx", Operation::Write);
        let read_group = (ResourceType::Group, "g", Operation::Read);
        let id_refused = ResponseError::TransactionalIdAuthorizationFailed.code();
        let group_refused = ResponseError::GroupAuthorizationFailed.code();
        assert_eq!(refused_codes(&access(&[read_group])), Some(vec![id_refused; 2]));
        assert_eq!(refused_codes(&access(&[write_id])), Some(vec![group_refused; 2]));
        assert_eq!(refused_codes(&access(&[write_id, read_group])), None);
        assert_eq!(refused_codes(&Access::unrestricted()), None);
    }

    #[test]
    fn answers_keep_partitions_under_their_topics_and_producer_ids_are_checked() {
        let keys = vec![("a".to_string(), 0), ("a".to_string(), 1), ("b".to_string(), 0)];
        let answer = response(
            keys,
            Ok(vec![None, Some(ResponseError::UnknownTopicOrPartition), None]),
        );
        let got: Vec<(String, Vec<(i32, i16)>)> = answer
            .topics
            .iter()
            .map(|t| {
                let partitions = t.partitions.iter().map(|p| (p.partition_index, p.error_code));
                (t.name.to_string(), partitions.collect())
            })
            .collect();
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        assert_eq!(
            got,
            [
                ("a".into(), vec![(0, 0), (1, unknown)]),
                ("b".into(), vec![(0, 0)])
            ]
        );
        assert_eq!(
            check_producer((-1, 0)),
            Err(ResponseError::InvalidProducerIdMapping)
        );
        assert_eq!(check_producer((1, -1)), Err(ResponseError::InvalidProducerEpoch));
        assert_eq!(check_producer((0, 0)), Ok(()));
    }
}
