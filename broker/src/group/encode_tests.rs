//! Every group API answer, in its usual shapes (success and error), encodes at every version
//! Laminar advertises: the codec refuses a non-default value in a field a version lacks.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, DeleteGroupsResponse, FindCoordinatorRequest, GroupId, ListGroupsRequest, OffsetDeleteResponse,
    ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::coordinator::ListedGroup;
use super::member::{JoinArgs, JoinOutcome, JoinedMember, SyncOutcome};
use super::records::OffsetValue;
use super::state::{Group, GroupSettings, GroupState};
use crate::handlers::{
    describe_groups, find_coordinator, heartbeat, join_group, leave_group, list_groups, offset_commit,
    offset_fetch, sync_group,
};
use laminar_protocol::codec::{encode_response, supported};

fn versions(key: ApiKey) -> std::ops::RangeInclusive<i16> {
    let support = supported(key).unwrap_or_else(|| panic!("{key:?} is advertised"));
    support.min..=support.max
}

fn encodes(key: ApiKey, version: i16, response: ResponseKind) {
    if let Err(e) = encode_response(key, version, 7, &response) {
        panic!("{key:?} v{version}: {e}");
    }
}

fn stable_group() -> Group {
    let mut group = Group::new(
        "g".into(),
        GroupSettings {
            initial_rebalance_delay_ms: 0,
        },
    );
    let args = JoinArgs {
        member_id: String::new(),
        group_instance_id: Some("i".into()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"m"))],
        require_known_member_id: false,
        fresh_member_id: "m".into(),
    };
    drop(group.join(args, 0));
    drop(group.sync(
        "m",
        Some("i"),
        1,
        (None, None),
        vec![("m".into(), Bytes::from_static(b"a"))],
        0,
    ));
    assert_eq!(group.state, GroupState::Stable);
    group
}

#[test]
fn find_coordinator_answers_encode_at_every_advertised_version() {
    for v in versions(ApiKey::FindCoordinator) {
        for key_type in [0, 1, 9] {
            let request = FindCoordinatorRequest::default()
                .with_key(StrBytes::from_static_str("g"))
                .with_key_type(key_type)
                .with_coordinator_keys(vec![StrBytes::from_static_str("g")]);
            let response = find_coordinator::response(&request, v, 1, "localhost", 9092);
            encodes(
                ApiKey::FindCoordinator,
                v,
                ResponseKind::FindCoordinator(response),
            );
        }
    }
}

#[test]
fn join_and_sync_answers_encode_at_every_advertised_version() {
    for v in versions(ApiKey::JoinGroup) {
        let leader = JoinOutcome {
            error: None,
            generation_id: 3,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            leader_id: "m".into(),
            member_id: "m".into(),
            members: vec![JoinedMember {
                member_id: "m".into(),
                group_instance_id: Some("i".into()),
                metadata: Bytes::from_static(b"meta"),
            }],
        };
        for outcome in [leader, JoinOutcome::failed(ResponseError::MemberIdRequired, "m")] {
            encodes(
                ApiKey::JoinGroup,
                v,
                ResponseKind::JoinGroup(join_group::response(outcome, v)),
            );
        }
    }
    for v in versions(ApiKey::SyncGroup) {
        let done = SyncOutcome {
            error: None,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignment: Bytes::from_static(b"a"),
        };
        for outcome in [done, SyncOutcome::failed(ResponseError::RebalanceInProgress)] {
            encodes(
                ApiKey::SyncGroup,
                v,
                ResponseKind::SyncGroup(sync_group::response(outcome, v)),
            );
        }
    }
}

#[test]
fn heartbeat_and_leave_answers_encode_at_every_advertised_version() {
    for v in versions(ApiKey::Heartbeat) {
        for result in [Ok(()), Err(ResponseError::IllegalGeneration)] {
            encodes(
                ApiKey::Heartbeat,
                v,
                ResponseKind::Heartbeat(heartbeat::response(result)),
            );
        }
    }
    for v in versions(ApiKey::LeaveGroup) {
        let left = Ok(vec![
            (("m".to_string(), Some("i".to_string())), None),
            (("x".to_string(), None), Some(ResponseError::UnknownMemberId)),
        ]);
        for result in [left, Err(ResponseError::CoordinatorLoadInProgress)] {
            encodes(
                ApiKey::LeaveGroup,
                v,
                ResponseKind::LeaveGroup(leave_group::response(result, v)),
            );
        }
    }
}

#[test]
fn offset_commit_and_fetch_answers_encode_at_every_advertised_version() {
    for v in versions(ApiKey::OffsetCommit) {
        let keys = vec![("t".to_string(), 0), ("t".to_string(), 1), ("u".to_string(), 0)];
        let results = Ok(vec![None, Some(ResponseError::OffsetMetadataTooLarge), None]);
        for results in [results, Err(ResponseError::IllegalGeneration)] {
            let response = offset_commit::response(keys.clone(), results);
            encodes(ApiKey::OffsetCommit, v, ResponseKind::OffsetCommit(response));
        }
    }
    let committed = || {
        let value = OffsetValue {
            offset: 5,
            leader_epoch: 2,
            metadata: "md".into(),
            commit_timestamp_ms: 1,
        };
        let all = [(("t".to_string(), 0), value)].into_iter().collect();
        offset_fetch::select(&all, Some(vec![("t".into(), vec![0, 1])]))
    };
    for v in versions(ApiKey::OffsetFetch) {
        for found in [Ok(committed()), Err(ResponseError::CoordinatorLoadInProgress)] {
            let response = if v < 8 {
                offset_fetch::single_group_response(found, v)
            } else {
                let group = offset_fetch::group_response(GroupId(StrBytes::from_static_str("g")), found);
                kafka_protocol::messages::OffsetFetchResponse::default().with_groups(vec![group])
            };
            encodes(ApiKey::OffsetFetch, v, ResponseKind::OffsetFetch(response));
        }
    }
}

#[test]
fn group_listing_and_deletion_answers_encode_at_every_advertised_version() {
    for v in versions(ApiKey::ListGroups) {
        let groups = vec![ListedGroup {
            group_id: "g".into(),
            protocol_type: "consumer".into(),
            state: GroupState::Stable.name(),
            group_type: "classic",
        }];
        let response = list_groups::response(groups, &ListGroupsRequest::default(), v);
        assert_eq!(response.groups.len(), 1);
        encodes(ApiKey::ListGroups, v, ResponseKind::ListGroups(response));
    }
    let group = stable_group();
    for v in versions(ApiKey::DescribeGroups) {
        let described = vec![
            describe_groups::describe(&group, v),
            describe_groups::dead(GroupId(StrBytes::from_static_str("x")), v),
        ];
        let response = kafka_protocol::messages::DescribeGroupsResponse::default().with_groups(described);
        encodes(ApiKey::DescribeGroups, v, ResponseKind::DescribeGroups(response));
    }
    for v in versions(ApiKey::DeleteGroups) {
        let result = DeletableGroupResult::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_error_code(ResponseError::NonEmptyGroup.code());
        let response = DeleteGroupsResponse::default().with_results(vec![result]);
        encodes(ApiKey::DeleteGroups, v, ResponseKind::DeleteGroups(response));
    }
    for v in versions(ApiKey::OffsetDelete) {
        let topic = OffsetDeleteResponseTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![OffsetDeleteResponsePartition::default()
                .with_error_code(ResponseError::GroupSubscribedToTopic.code())]);
        let response = OffsetDeleteResponse::default().with_topics(vec![topic]);
        encodes(ApiKey::OffsetDelete, v, ResponseKind::OffsetDelete(response));
    }
}

#[test]
fn subscribed_topics_come_from_consumer_protocol_metadata() {
    use kafka_protocol::messages::ConsumerProtocolSubscription;
    use kafka_protocol::protocol::Encodable;
    let mut metadata = bytes::BytesMut::new();
    bytes::BufMut::put_i16(&mut metadata, 1);
    ConsumerProtocolSubscription::default()
        .with_topics(vec![StrBytes::from_static_str("orders")])
        .encode(&mut metadata, 1)
        .unwrap();
    let mut group = Group::new(
        "g".into(),
        GroupSettings {
            initial_rebalance_delay_ms: 0,
        },
    );
    let args = JoinArgs {
        member_id: String::new(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: String::new(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), metadata.freeze())],
        require_known_member_id: false,
        fresh_member_id: "m".into(),
    };
    drop(group.join(args, 0));
    assert_eq!(group.subscribed_topics(), Some(vec!["orders".to_string()]));
}
