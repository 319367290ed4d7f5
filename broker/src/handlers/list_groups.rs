//! ListGroups: every group on every shard, filtered by state (v4+) and type (v5+).

use std::rc::Rc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::group::coordinator;
use laminar_security::Operation;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    let per_shard = (0..ctx.shard_count())
        .map(|shard| ctx.submit_to(shard, |there| async move { there.state.groups.list() }));
    let mut groups: Vec<coordinator::ListedGroup> = futures::future::join_all(per_shard)
        .await
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    // Kafka lists every group to Describe on the cluster, else those the principal may describe.
    if !access.allows_cluster(Operation::Describe) {
        groups.retain(|g| access.allows_group(Operation::Describe, &g.group_id));
    }
    response(groups, &request, version)
}

pub fn response(
    groups: Vec<coordinator::ListedGroup>,
    request: &ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    let state_wanted = |state: &str| {
        request.states_filter.is_empty()
            || request
                .states_filter
                .iter()
                .any(|s| s.eq_ignore_ascii_case(state))
    };
    let type_wanted = |group_type: &str| {
        request.types_filter.is_empty()
            || request
                .types_filter
                .iter()
                .any(|t| t.eq_ignore_ascii_case(group_type))
    };
    let listed = groups
        .into_iter()
        .filter(|g| type_wanted(g.group_type) && state_wanted(g.state))
        .map(|g| {
            let listed = ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(g.group_id)))
                .with_protocol_type(StrBytes::from_string(g.protocol_type));
            let listed = if version >= 4 {
                listed.with_group_state(StrBytes::from_static_str(g.state))
            } else {
                listed
            };
            if version >= 5 {
                listed.with_group_type(StrBytes::from_static_str(g.group_type))
            } else {
                listed
            }
        })
        .collect();
    ListGroupsResponse::default().with_groups(listed)
}
