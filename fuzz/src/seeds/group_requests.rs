//! Valid, populated requests of the consumer-group APIs, for any version the broker serves.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;

use super::data_requests::{s, topic, TOPICS};
use super::Marks;

pub const GROUP: &str = "fuzz-group";
const MEMBER: &str = "fuzz-member";

/// The consumer protocol's subscription (v0): the two topics, no user data.
fn subscription() -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i32(TOPICS.len() as i32);
    for name in TOPICS {
        out.put_i16(name.len() as i16);
        out.put_slice(name.as_bytes());
    }
    out.put_i32(-1);
    out.freeze()
}

/// The consumer protocol's assignment (v0): partitions of the first topic.
fn assignment(marks: &Marks) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i32(1);
    out.put_i16(TOPICS[0].len() as i16);
    out.put_slice(TOPICS[0].as_bytes());
    out.put_i32(marks.partitions.len() as i32);
    for partition in marks.partitions {
        out.put_i32(partition);
    }
    out.put_i32(-1);
    out.freeze()
}

pub fn find_coordinator(version: i16) -> FindCoordinatorRequest {
    let mut request = FindCoordinatorRequest::default();
    if version >= 4 {
        request.coordinator_keys = vec![s(GROUP), s("fuzz-group-2")];
    } else {
        request.key = s(GROUP);
    }
    request
}

/// Variants: a new member (empty id); a known-looking member id; a static member (v5+).
pub fn join_group(version: i16, variant: usize, marks: &Marks) -> JoinGroupRequest {
    let protocols = ["range", "roundrobin"]
        .iter()
        .map(|name| {
            join_group_request::JoinGroupRequestProtocol::default()
                .with_name(s(name))
                .with_metadata(subscription())
        })
        .collect();
    let mut request = JoinGroupRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_session_timeout_ms(6_000)
        .with_member_id(s(if variant == 1 { MEMBER } else { "" }))
        .with_protocol_type(s("consumer"))
        .with_protocols(protocols);
    if version >= 1 {
        request.rebalance_timeout_ms = marks.wait_ms;
    }
    if version >= 5 && variant == 2 {
        request.group_instance_id = Some(s("fuzz-static"));
    }
    if version >= 8 {
        request.reason = Some(s("fuzzing"));
    }
    request
}

pub fn sync_group(version: i16, marks: &Marks) -> SyncGroupRequest {
    let assignments = [MEMBER, "fuzz-member-2"]
        .iter()
        .map(|member| {
            sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(s(member))
                .with_assignment(assignment(marks))
        })
        .collect();
    let mut request = SyncGroupRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id(1)
        .with_member_id(s(MEMBER))
        .with_assignments(assignments);
    if version >= 5 {
        request.protocol_type = Some(s("consumer"));
        request.protocol_name = Some(s("range"));
    }
    request
}

pub fn heartbeat() -> HeartbeatRequest {
    HeartbeatRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id(1)
        .with_member_id(s(MEMBER))
}

pub fn leave_group(version: i16) -> LeaveGroupRequest {
    let mut request = LeaveGroupRequest::default().with_group_id(GroupId(s(GROUP)));
    if version >= 3 {
        request.members = [MEMBER, "fuzz-member-2"]
            .iter()
            .map(|member| {
                let mut identity = leave_group_request::MemberIdentity::default().with_member_id(s(member));
                if version >= 5 {
                    identity.reason = Some(s("fuzzing"));
                }
                identity
            })
            .collect();
    } else {
        request.member_id = s(MEMBER);
    }
    request
}

pub fn offset_commit(version: i16, marks: &Marks) -> OffsetCommitRequest {
    let partitions: Vec<_> = marks
        .partitions
        .iter()
        .map(|&index| {
            let mut p = offset_commit_request::OffsetCommitRequestPartition::default()
                .with_partition_index(index)
                .with_committed_offset(1)
                .with_committed_metadata(Some(s("meta")));
            if version >= 6 {
                p.committed_leader_epoch = -1;
            }
            p
        })
        .collect();
    let topics = TOPICS
        .iter()
        .map(|name| {
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(topic(name))
                .with_partitions(partitions.clone())
        })
        .collect();
    let mut request = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(topics);
    if version <= 4 {
        request.retention_time_ms = -1;
    }
    request
}

/// A transactional producer's offsets for the group, as one outside its generations sends
/// them (v3: generation -1, no member id).
pub fn txn_offset_commit(version: i16, marks: &Marks) -> TxnOffsetCommitRequest {
    let partitions: Vec<_> = marks
        .partitions
        .iter()
        .map(|&index| {
            let mut p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                .with_partition_index(index)
                .with_committed_offset(1)
                .with_committed_metadata(Some(s("meta")));
            if version >= 2 {
                p.committed_leader_epoch = -1;
            }
            p
        })
        .collect();
    let topics = TOPICS
        .iter()
        .map(|name| {
            txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(topic(name))
                .with_partitions(partitions.clone())
        })
        .collect();
    TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s("fuzz-tx")))
        .with_group_id(GroupId(s(GROUP)))
        .with_producer_id(ProducerId(1))
        .with_producer_epoch(0)
        .with_topics(topics)
}

pub fn offset_fetch(version: i16, marks: &Marks) -> OffsetFetchRequest {
    if version >= 8 {
        let topics = TOPICS
            .iter()
            .map(|name| {
                offset_fetch_request::OffsetFetchRequestTopics::default()
                    .with_name(topic(name))
                    .with_partition_indexes(marks.partitions.to_vec())
            })
            .collect();
        let mut group = offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_topics(Some(topics));
        if version >= 9 {
            group.member_epoch = -1;
        }
        return OffsetFetchRequest::default().with_groups(vec![group]);
    }
    let topics = TOPICS
        .iter()
        .map(|name| {
            offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(topic(name))
                .with_partition_indexes(marks.partitions.to_vec())
        })
        .collect();
    OffsetFetchRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_topics(Some(topics))
}

pub fn list_groups(version: i16) -> ListGroupsRequest {
    let mut request = ListGroupsRequest::default();
    if version >= 4 {
        request.states_filter = vec![s("Stable"), s("Empty")];
    }
    if version >= 5 {
        request.types_filter = vec![s("classic")];
    }
    request
}

pub fn describe_groups() -> DescribeGroupsRequest {
    DescribeGroupsRequest::default().with_groups(vec![GroupId(s(GROUP)), GroupId(s("fuzz-group-2"))])
}

pub fn delete_groups() -> DeleteGroupsRequest {
    DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("fuzz-group-doomed")), GroupId(s(GROUP))])
}

pub fn offset_delete(marks: &Marks) -> OffsetDeleteRequest {
    let partitions = marks
        .partitions
        .iter()
        .map(|&index| {
            offset_delete_request::OffsetDeleteRequestPartition::default().with_partition_index(index)
        })
        .collect();
    OffsetDeleteRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_topics(vec![offset_delete_request::OffsetDeleteRequestTopic::default()
            .with_name(topic(TOPICS[0]))
            .with_partitions(partitions)])
}

/// A member of a KIP-848 consumer group: joining (variant 0, epoch 0, subscribing by name, or
/// from v1 by expression), heartbeating at an epoch it does not have (1), or leaving (2).
pub fn consumer_group_heartbeat(
    version: i16,
    variant: usize,
    marks: &Marks,
) -> ConsumerGroupHeartbeatRequest {
    let owned = consumer_group_heartbeat_request::TopicPartitions::default()
        .with_topic_id(uuid::Uuid::from_u128(0x5a5a))
        .with_partitions(marks.partitions.to_vec());
    let request = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_member_id(s(MEMBER))
        .with_rebalance_timeout_ms(marks.wait_ms)
        .with_server_assignor(Some(s("uniform")))
        .with_rack_id(Some(s("fuzz-rack")));
    match variant {
        0 => {
            let names = TOPICS.iter().map(|t| topic(t)).collect();
            let request = request
                .with_member_epoch(0)
                .with_topic_partitions(Some(Vec::new()));
            match version {
                0 => request.with_subscribed_topic_names(Some(names)),
                _ => request.with_subscribed_topic_regex(Some(s("fuzz.*"))),
            }
        }
        1 => request
            .with_member_epoch(marks.wait_ms)
            .with_topic_partitions(Some(vec![owned])),
        _ => request.with_member_epoch(-1),
    }
}

pub fn consumer_group_describe() -> ConsumerGroupDescribeRequest {
    ConsumerGroupDescribeRequest::default()
        .with_group_ids(vec![GroupId(s(GROUP)), GroupId(s("fuzz-unknown"))])
        .with_include_authorized_operations(true)
}

/// The seed of a consumer-group API, `None` for another API.
pub fn request(api: ApiKey, v: i16, variant: usize, marks: &Marks) -> Option<RequestKind> {
    Some(match api {
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(find_coordinator(v)),
        ApiKey::JoinGroup => RequestKind::JoinGroup(join_group(v, variant, marks)),
        ApiKey::SyncGroup => RequestKind::SyncGroup(sync_group(v, marks)),
        ApiKey::Heartbeat => RequestKind::Heartbeat(heartbeat()),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(leave_group(v)),
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(offset_commit(v, marks)),
        ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(txn_offset_commit(v, marks)),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(offset_fetch(v, marks)),
        ApiKey::ListGroups => RequestKind::ListGroups(list_groups(v)),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(describe_groups()),
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(delete_groups()),
        ApiKey::OffsetDelete => RequestKind::OffsetDelete(offset_delete(marks)),
        ApiKey::ConsumerGroupHeartbeat => {
            RequestKind::ConsumerGroupHeartbeat(consumer_group_heartbeat(v, variant, marks))
        }
        ApiKey::ConsumerGroupDescribe => RequestKind::ConsumerGroupDescribe(consumer_group_describe()),
        _ => return None,
    })
}
