//! ConsumerGroupDescribe (KIP-848): each named consumer group's epochs, assignor and members,
//! with their current and target assignments. Each group is read on its coordinator shard.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, GroupId, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::group::consumer::subscription::TopicLookup;
use crate::group::consumer::{records, ConsumerGroup};
use crate::group::on_coordinator;
use laminar_security::Operation;

/// Kafka's member type for a member of the consumer protocol (v1).
const MEMBER_TYPE_CONSUMER: i8 = 1;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let mut groups = Vec::with_capacity(request.group_ids.len());
    for group_id in request.group_ids {
        if !access.allows_group(Operation::Describe, &group_id) {
            groups.push(failed(group_id, ResponseError::GroupAuthorizationFailed));
            continue;
        }
        groups.push(describe_one(ctx, group_id).await);
    }
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

async fn describe_one(ctx: &Rc<BrokerCtx>, group_id: GroupId) -> DescribedGroup {
    if group_id.is_empty() {
        return failed(group_id, ResponseError::InvalidGroupId);
    }
    let id = group_id.to_string();
    let described = on_coordinator(ctx, &id.clone(), move |there, _| async move {
        let topics = there.state.shared.metadata.current();
        let settings = there.state.groups.consumer_settings.clone();
        there
            .state
            .groups
            .with_consumer_group(&id, |group| described(group, topics.as_ref(), &settings))
            .ok_or(ResponseError::GroupIdNotFound)
    })
    .await;
    match described.and_then(|d| d) {
        Ok(described) => described,
        Err(error) => failed(group_id, error),
    }
}

fn failed(group_id: GroupId, error: ResponseError) -> DescribedGroup {
    DescribedGroup::default()
        .with_group_id(group_id)
        .with_error_code(error.code())
        .with_authorized_operations(i32::MIN)
}

fn described(
    group: &ConsumerGroup,
    topics: &dyn TopicLookup,
    settings: &crate::group::consumer::ConsumerGroupSettings,
) -> DescribedGroup {
    let members = group.members.values().map(|m| {
        let target = group.target.get(&m.id).cloned().unwrap_or_default();
        let metadata = &m.metadata;
        Member::default()
            .with_member_id(StrBytes::from_string(m.id.clone()))
            .with_instance_id(metadata.instance_id.clone().map(StrBytes::from_string))
            .with_rack_id(metadata.rack_id.clone().map(StrBytes::from_string))
            .with_member_epoch(m.assignment.epoch)
            .with_client_id(StrBytes::from_string(metadata.client_id.clone()))
            .with_client_host(StrBytes::from_string(metadata.client_host.clone()))
            .with_subscribed_topic_names(
                metadata
                    .subscribed_topic_names
                    .iter()
                    .map(|n| TopicName(StrBytes::from_string(n.clone())))
                    .collect(),
            )
            .with_subscribed_topic_regex(metadata.subscribed_topic_regex.clone().map(StrBytes::from_string))
            .with_assignment(assignment(&m.assignment.assigned, topics))
            .with_target_assignment(assignment(&target, topics))
            .with_member_type(MEMBER_TYPE_CONSUMER)
    });
    DescribedGroup::default()
        .with_group_id(GroupId(StrBytes::from_string(group.id.clone())))
        .with_group_state(StrBytes::from_static_str(group.state_name()))
        .with_group_epoch(group.epoch)
        .with_assignment_epoch(group.assignment_epoch)
        .with_assignor_name(StrBytes::from_static_str(group.assignor(settings).name()))
        .with_members(members.collect())
        .with_authorized_operations(i32::MIN)
}

fn assignment(partitions: &records::TopicPartitions, topics: &dyn TopicLookup) -> Assignment {
    let named = ConsumerGroup::named(partitions, topics)
        .into_iter()
        .map(|(id, name, partitions)| {
            TopicPartitions::default()
                .with_topic_id(id)
                .with_topic_name(TopicName(StrBytes::from_string(name)))
                .with_partitions(partitions)
        });
    Assignment::default().with_topic_partitions(named.collect())
}
