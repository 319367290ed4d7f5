//! DescribeGroups: state, protocol, members and (when Stable) their metadata and assignments.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, GroupId};
use kafka_protocol::protocol::StrBytes;

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::group::on_coordinator;
use crate::group::state::{Group, GroupState};
use laminar_security::Operation;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let mut groups = Vec::with_capacity(request.groups.len());
    for group_id in request.groups {
        if !access.allows_group(Operation::Describe, &group_id) {
            let refused = kafka_protocol::error::ResponseError::GroupAuthorizationFailed;
            groups.push(
                DescribedGroup::default()
                    .with_group_id(group_id)
                    .with_error_code(refused.code()),
            );
            continue;
        }
        let id = group_id.to_string();
        let home = id.clone();
        let described = on_coordinator(ctx, &home, move |there, _| async move {
            let groups = &there.state.groups;
            // A consumer group is described by ConsumerGroupDescribe, as in Kafka.
            match groups.is_consumer_group(&id) {
                true => Err(ResponseError::GroupIdNotFound),
                false => Ok(groups.with_group(&id, false, |group| describe(group, version))),
            }
        })
        .await
        .and_then(|d| d);
        groups.push(match described {
            Ok(Some(described)) => described,
            Ok(None) => dead(group_id, version),
            Err(error) => DescribedGroup::default()
                .with_group_id(group_id)
                .with_error_code(error.code())
                .with_group_state(StrBytes::from_static_str(GroupState::Dead.name())),
        });
    }
    DescribeGroupsResponse::default().with_groups(groups)
}

/// What Kafka answers for a group it does not know: no error, state Dead.
pub fn dead(group_id: GroupId, _version: i16) -> DescribedGroup {
    DescribedGroup::default()
        .with_group_id(group_id)
        .with_group_state(StrBytes::from_static_str(GroupState::Dead.name()))
}

pub fn describe(group: &Group, version: i16) -> DescribedGroup {
    // Kafka shows member metadata and assignments only once the group is Stable.
    let stable = group.state == GroupState::Stable;
    let protocol = group.protocol_name.clone().unwrap_or_default();
    let members = group
        .members
        .iter()
        .map(|m| {
            let member = DescribedGroupMember::default()
                .with_member_id(StrBytes::from_string(m.member_id.clone()))
                .with_client_id(StrBytes::from_string(m.client_id.clone()))
                .with_client_host(StrBytes::from_string(m.client_host.clone()));
            let member = if stable {
                member
                    .with_member_metadata(m.metadata_for(&protocol))
                    .with_member_assignment(m.assignment.clone())
            } else {
                member
            };
            if version >= 4 {
                member.with_group_instance_id(m.group_instance_id.clone().map(StrBytes::from_string))
            } else {
                member
            }
        })
        .collect();
    let shown_protocol = if stable || group.state == GroupState::CompletingRebalance {
        protocol
    } else {
        String::new()
    };
    DescribedGroup::default()
        .with_group_id(GroupId(StrBytes::from_string(group.id.clone())))
        .with_group_state(StrBytes::from_static_str(group.state.name()))
        .with_protocol_type(StrBytes::from_string(
            group.protocol_type.clone().unwrap_or_default(),
        ))
        .with_protocol_data(StrBytes::from_string(shown_protocol))
        .with_members(members)
}
