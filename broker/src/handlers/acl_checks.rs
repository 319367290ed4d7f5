//! The ACL checks Kafka makes on a request as a whole, before its handler runs: the group a
//! group request names, the cluster for cluster-wide APIs, the producer's right to write for
//! InitProducerId. A refused request gets its API's answer with Kafka's error code here; the
//! checks on each topic, partition or group a request names are made by its handler, which
//! answers them one by one (docs/ARCHITECTURE.md, "Security").

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_response::DescribeLogDirsResponse;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::*;
use kafka_protocol::messages::{
    AddRaftVoterResponse, DescribeQuorumResponse, RemoveRaftVoterResponse, UnregisterBrokerResponse,
};
use kafka_protocol::protocol::StrBytes;
use laminar_security::Operation;

use crate::authorization::Access;

/// The answer of a request the ACLs refuse as a whole, or `None` to run its handler.
pub fn refused(access: &Access, request: &RequestKind, version: i16) -> Option<ResponseKind> {
    if !access.is_enforced() {
        return None;
    }
    group_refused(access, request, version)
        .or_else(|| cluster_refused(access, request))
        .or_else(|| transaction_refused(access, request, version))
}

/// The transactional producer's APIs: Write on its transactional id; WriteTxnMarkers and
/// AddPartitionsToTxn v4+, which only brokers send: ClusterAction on the cluster.
fn transaction_refused(access: &Access, request: &RequestKind, version: i16) -> Option<ResponseKind> {
    let id_refused = |id: &TransactionalId| {
        !access.allows(
            Operation::Write,
            laminar_security::ResourceType::TransactionalId,
            id,
        )
    };
    let id_error = ResponseError::TransactionalIdAuthorizationFailed.code();
    match request {
        RequestKind::AddOffsetsToTxn(r) if id_refused(&r.transactional_id) => Some(
            ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(id_error)),
        ),
        RequestKind::EndTxn(r) if id_refused(&r.transactional_id) => Some(ResponseKind::EndTxn(
            EndTxnResponse::default().with_error_code(id_error),
        )),
        RequestKind::AddPartitionsToTxn(_) if version >= 4 => {
            (!access.allows_cluster(Operation::ClusterAction)).then(|| {
                ResponseKind::AddPartitionsToTxn(
                    AddPartitionsToTxnResponse::default()
                        .with_error_code(ResponseError::ClusterAuthorizationFailed.code()),
                )
            })
        }
        RequestKind::AddPartitionsToTxn(r) if id_refused(&r.v3_and_below_transactional_id) => {
            let topics = r.v3_and_below_topics.iter().map(|t| {
                let partitions = t.partitions.iter().map(|p| {
                    add_partitions_to_txn_response::AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(*p)
                        .with_partition_error_code(id_error)
                });
                add_partitions_to_txn_response::AddPartitionsToTxnTopicResult::default()
                    .with_name(t.name.clone())
                    .with_results_by_partition(partitions.collect())
            });
            Some(ResponseKind::AddPartitionsToTxn(
                AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics.collect()),
            ))
        }
        RequestKind::WriteTxnMarkers(r) if !access.allows_cluster(Operation::ClusterAction) => {
            Some(ResponseKind::WriteTxnMarkers(
                super::write_txn_markers::refused_whole(r, ResponseError::ClusterAuthorizationFailed),
            ))
        }
        _ => None,
    }
}

/// The group APIs: Read on the group to take part in it, Describe to find or read it, Delete
/// to delete offsets.
fn group_refused(access: &Access, request: &RequestKind, version: i16) -> Option<ResponseKind> {
    let group = |op, group: &GroupId| !access.allows_group(op, group);
    let group_error = ResponseError::GroupAuthorizationFailed.code();
    match request {
        RequestKind::FindCoordinator(r) => find_coordinator(access, r, version),
        RequestKind::JoinGroup(r) if group(Operation::Read, &r.group_id) => Some(ResponseKind::JoinGroup(
            JoinGroupResponse::default().with_error_code(group_error),
        )),
        RequestKind::SyncGroup(r) if group(Operation::Read, &r.group_id) => Some(ResponseKind::SyncGroup(
            SyncGroupResponse::default().with_error_code(group_error),
        )),
        RequestKind::Heartbeat(r) if group(Operation::Read, &r.group_id) => Some(ResponseKind::Heartbeat(
            HeartbeatResponse::default().with_error_code(group_error),
        )),
        RequestKind::ConsumerGroupHeartbeat(r) if group(Operation::Read, &r.group_id) => {
            Some(ResponseKind::ConsumerGroupHeartbeat(
                super::consumer_group_heartbeat::refused(ResponseError::GroupAuthorizationFailed, None),
            ))
        }
        RequestKind::LeaveGroup(r) if group(Operation::Read, &r.group_id) => Some(ResponseKind::LeaveGroup(
            LeaveGroupResponse::default().with_error_code(group_error),
        )),
        RequestKind::OffsetCommit(r) if group(Operation::Read, &r.group_id) => {
            let keys = r
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| (t.name.to_string(), p.partition_index))
                })
                .collect();
            let refused = Err(ResponseError::GroupAuthorizationFailed);
            Some(ResponseKind::OffsetCommit(super::offset_commit::response(
                keys, refused,
            )))
        }
        RequestKind::TxnOffsetCommit(r) => txn_offset_commit(access, r),
        RequestKind::OffsetFetch(r) if version < 8 && group(Operation::Describe, &r.group_id) => {
            let refused = Err(ResponseError::GroupAuthorizationFailed);
            Some(ResponseKind::OffsetFetch(
                super::offset_fetch::single_group_response(refused, version),
            ))
        }
        RequestKind::OffsetDelete(r) if group(Operation::Delete, &r.group_id) => Some(
            ResponseKind::OffsetDelete(OffsetDeleteResponse::default().with_error_code(group_error)),
        ),
        _ => None,
    }
}

/// The cluster-wide APIs: Describe on the cluster to read, Alter to change; and InitProducerId.
/// DescribeCluster, like Metadata's broker list, is open to every principal, as in Kafka.
fn cluster_refused(access: &Access, request: &RequestKind) -> Option<ResponseKind> {
    let cluster = |op| !access.allows_cluster(op);
    let cluster_error = ResponseError::ClusterAuthorizationFailed.code();
    match request {
        RequestKind::DescribeLogDirs(_) if cluster(Operation::Describe) => Some(
            ResponseKind::DescribeLogDirs(DescribeLogDirsResponse::default().with_error_code(cluster_error)),
        ),
        RequestKind::ElectLeaders(_) if cluster(Operation::Alter) => Some(ResponseKind::ElectLeaders(
            ElectLeadersResponse::default().with_error_code(cluster_error),
        )),
        RequestKind::AlterPartitionReassignments(_) if cluster(Operation::Alter) => {
            Some(ResponseKind::AlterPartitionReassignments(
                AlterPartitionReassignmentsResponse::default().with_error_code(cluster_error),
            ))
        }
        RequestKind::UnregisterBroker(_) if cluster(Operation::Alter) => {
            Some(ResponseKind::UnregisterBroker(
                UnregisterBrokerResponse::default().with_error_code(cluster_error),
            ))
        }
        RequestKind::AddRaftVoter(_) if cluster(Operation::Alter) => Some(ResponseKind::AddRaftVoter(
            AddRaftVoterResponse::default().with_error_code(cluster_error),
        )),
        RequestKind::RemoveRaftVoter(_) if cluster(Operation::Alter) => Some(ResponseKind::RemoveRaftVoter(
            RemoveRaftVoterResponse::default().with_error_code(cluster_error),
        )),
        RequestKind::DescribeQuorum(_) if cluster(Operation::Describe) => Some(ResponseKind::DescribeQuorum(
            DescribeQuorumResponse::default().with_error_code(cluster_error),
        )),
        RequestKind::ListPartitionReassignments(_) if cluster(Operation::Describe) => {
            Some(ResponseKind::ListPartitionReassignments(
                ListPartitionReassignmentsResponse::default().with_error_code(cluster_error),
            ))
        }
        RequestKind::DescribeUserScramCredentials(_) if cluster(Operation::Describe) => {
            Some(ResponseKind::DescribeUserScramCredentials(
                DescribeUserScramCredentialsResponse::default().with_error_code(cluster_error),
            ))
        }
        RequestKind::AlterUserScramCredentials(r) if cluster(Operation::Alter) => {
            Some(ResponseKind::AlterUserScramCredentials(scram_refused(r)))
        }
        RequestKind::DescribeClientQuotas(_) if cluster(Operation::DescribeConfigs) => {
            Some(ResponseKind::DescribeClientQuotas(
                DescribeClientQuotasResponse::default()
                    .with_error_code(cluster_error)
                    .with_error_message(Some(StrBytes::from_static_str(
                        "DescribeConfigs on the cluster is needed",
                    ))),
            ))
        }
        RequestKind::AlterClientQuotas(r) if cluster(Operation::AlterConfigs) => Some(
            ResponseKind::AlterClientQuotas(super::alter_client_quotas::refused_whole(r, cluster_error)),
        ),
        RequestKind::InitProducerId(r) => init_producer_id(access, r),
        _ => None,
    }
}

/// FindCoordinator: Describe on the group (or transactional id) its key names. v4+ names several
/// keys: see [`take_denied_coordinator_keys`].
fn find_coordinator(access: &Access, request: &FindCoordinatorRequest, version: i16) -> Option<ResponseKind> {
    let error = coordinator_key_refusal(access, request.key_type, &request.key);
    match error {
        Some(error) if version < 4 => Some(ResponseKind::FindCoordinator(
            FindCoordinatorResponse::default()
                .with_error_code(error.code())
                .with_node_id(BrokerId(-1)),
        )),
        _ => None,
    }
}

/// v4+ FindCoordinator: removes the keys the principal may not describe from the request and
/// returns their answers, refused; the handler answers the others.
pub fn take_denied_coordinator_keys(
    access: &Access,
    request: &mut FindCoordinatorRequest,
) -> Vec<Coordinator> {
    let key_type = request.key_type;
    let mut denied = Vec::new();
    request
        .coordinator_keys
        .retain(|key| match coordinator_key_refusal(access, key_type, key) {
            Some(error) => {
                denied.push(
                    Coordinator::default()
                        .with_key(key.clone())
                        .with_node_id(BrokerId(-1))
                        .with_port(-1)
                        .with_error_code(error.code()),
                );
                false
            }
            None => true,
        });
    denied
}

/// Why the principal may not find the coordinator of `key`: Describe on the group, or on the
/// transactional id (key type 1).
fn coordinator_key_refusal(access: &Access, key_type: i8, key: &str) -> Option<ResponseError> {
    let (resource, error) = match key_type {
        1 => (
            laminar_security::ResourceType::TransactionalId,
            ResponseError::TransactionalIdAuthorizationFailed,
        ),
        _ => (
            laminar_security::ResourceType::Group,
            ResponseError::GroupAuthorizationFailed,
        ),
    };
    (!access.allows(Operation::Describe, resource, key)).then_some(error)
}

/// TxnOffsetCommit: Write on the transactional id, then Read on the group; a refusal answers
/// every partition.
fn txn_offset_commit(access: &Access, request: &TxnOffsetCommitRequest) -> Option<ResponseKind> {
    let transactional_id = laminar_security::ResourceType::TransactionalId;
    let error = if !access.allows(Operation::Write, transactional_id, &request.transactional_id) {
        ResponseError::TransactionalIdAuthorizationFailed
    } else if !access.allows_group(Operation::Read, &request.group_id) {
        ResponseError::GroupAuthorizationFailed
    } else {
        return None;
    };
    let keys = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.partition_index))
        })
        .collect();
    Some(ResponseKind::TxnOffsetCommit(super::txn_offset_commit::response(
        keys,
        Err(error),
    )))
}

/// InitProducerId: Write on the transactional id; without one (an idempotent producer),
/// IdempotentWrite on the cluster or Write on some topic (KIP-679).
fn init_producer_id(access: &Access, request: &InitProducerIdRequest) -> Option<ResponseKind> {
    let error = match &request.transactional_id {
        Some(id)
            if !access.allows(
                Operation::Write,
                laminar_security::ResourceType::TransactionalId,
                id,
            ) =>
        {
            ResponseError::TransactionalIdAuthorizationFailed
        }
        Some(_) => return None,
        None if access.allows_cluster(Operation::IdempotentWrite)
            || access.allows_some_topic(Operation::Write) =>
        {
            return None
        }
        None => ResponseError::ClusterAuthorizationFailed,
    };
    Some(ResponseKind::InitProducerId(
        InitProducerIdResponse::default()
            .with_error_code(error.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    ))
}

fn scram_refused(request: &AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse {
    let users = request
        .deletions
        .iter()
        .map(|d| &d.name)
        .chain(request.upsertions.iter().map(|u| &u.name));
    let mut named: Vec<&kafka_protocol::protocol::StrBytes> = users.collect();
    named.sort();
    named.dedup();
    let results = named
        .into_iter()
        .map(|user| {
            alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default()
                .with_user(user.clone())
                .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}
