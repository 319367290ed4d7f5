//! One consumer's membership of a Kafka consumer group (the classic protocol): JoinGroup (with
//! the v4+ MEMBER_ID_REQUIRED round), SyncGroup, where the leader hands out partitions with the
//! range assignor, Heartbeat and LeaveGroup. Subscriptions and assignments use the embedded
//! consumer protocol: an i16 version, then `ConsumerProtocolSubscription` / `Assignment`.

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ConsumerProtocolAssignment, ConsumerProtocolSubscription, GroupId, HeartbeatRequest,
    JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::connection::Connection;
use crate::error::{check_code, ClientError};
use crate::groups::decode_assignment;

/// The only assignment strategy this client offers.
pub const RANGE_ASSIGNOR: &str = "range";
const CONSUMER_PROTOCOL_VERSION: i16 = 0;

/// A joined member: its id, generation and assigned partitions. Owned by one consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMembership {
    pub group: String,
    pub member_id: String,
    pub generation: i32,
    pub assignment: Vec<(String, Vec<i32>)>,
}

fn strbytes(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn encode_versioned(message: &impl Encodable, version: i16) -> Result<Bytes, ClientError> {
    let mut out = BytesMut::new();
    out.put_i16(version);
    message
        .encode(&mut out, version)
        .map_err(|e| ClientError::Records(format!("consumer protocol: {e}")))?;
    Ok(out.freeze())
}

fn decode_subscription(bytes: &Bytes) -> Result<Vec<String>, ClientError> {
    let mut buf = bytes.clone();
    if buf.len() < 2 {
        return Err(ClientError::Records(
            "subscription shorter than its version".into(),
        ));
    }
    let version = bytes::Buf::get_i16(&mut buf);
    let subscription = ConsumerProtocolSubscription::decode(&mut buf, version.clamp(0, 3))
        .map_err(|e| ClientError::Records(format!("subscription v{version}: {e}")))?;
    Ok(subscription.topics.iter().map(ToString::to_string).collect())
}

/// Kafka's range assignor: per topic, members sorted by id take consecutive partition ranges,
/// the first `count % members` one partition more.
pub fn range_assign(
    subscriptions: &BTreeMap<String, Vec<String>>,
    partition_counts: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<(String, Vec<i32>)>> {
    let mut assignment: BTreeMap<String, Vec<(String, Vec<i32>)>> = subscriptions
        .keys()
        .map(|member| (member.clone(), Vec::new()))
        .collect();
    for (topic, count) in partition_counts {
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(member, _)| member)
            .collect();
        if members.is_empty() {
            continue;
        }
        let (per_member, extra) = (*count / members.len() as i32, *count % members.len() as i32);
        let mut next = 0;
        for (index, member) in members.into_iter().enumerate() {
            let take = per_member + i32::from((index as i32) < extra);
            if take > 0 {
                let partitions: Vec<i32> = (next..next + take).collect();
                assignment
                    .get_mut(member)
                    .expect("every subscriber has an entry")
                    .push((topic.clone(), partitions));
            }
            next += take;
        }
    }
    assignment
}

impl Connection {
    /// Joins `group` subscribed to `topics` and returns the membership once SyncGroup has
    /// delivered this member's partitions. Rejoins (bounded) while the group rebalances.
    pub fn join_group(
        &mut self,
        group: &str,
        topics: &[String],
        session_timeout_ms: i32,
    ) -> Result<GroupMembership, ClientError> {
        let subscription =
            ConsumerProtocolSubscription::default().with_topics(topics.iter().map(|t| strbytes(t)).collect());
        let metadata = encode_versioned(&subscription, CONSUMER_PROTOCOL_VERSION)?;
        let mut member_id = String::new();
        for _attempt in 0..10 {
            let request = JoinGroupRequest::default()
                .with_group_id(GroupId(strbytes(group)))
                .with_session_timeout_ms(session_timeout_ms)
                .with_rebalance_timeout_ms(session_timeout_ms)
                .with_member_id(strbytes(&member_id))
                .with_protocol_type(strbytes("consumer"))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(strbytes(RANGE_ASSIGNOR))
                    .with_metadata(metadata.clone())]);
            let joined = self.request(&request)?;
            let error = ResponseError::try_from_code(joined.error_code);
            if matches!(error, Some(ResponseError::MemberIdRequired)) {
                member_id = joined.member_id.to_string();
                continue;
            }
            if matches!(error, Some(ResponseError::RebalanceInProgress)) {
                continue;
            }
            check_code(ApiKey::JoinGroup, joined.error_code, None, || {
                format!(" group {group}")
            })?;
            member_id = joined.member_id.to_string();
            let assignments = if joined.leader == joined.member_id {
                self.leader_assignments(&joined.members)?
            } else {
                Vec::new()
            };
            let sync = SyncGroupRequest::default()
                .with_group_id(GroupId(strbytes(group)))
                .with_generation_id(joined.generation_id)
                .with_member_id(strbytes(&member_id))
                .with_protocol_type(Some(strbytes("consumer")))
                .with_protocol_name(Some(strbytes(RANGE_ASSIGNOR)))
                .with_assignments(assignments);
            let synced = self.request(&sync)?;
            if ResponseError::try_from_code(synced.error_code) == Some(ResponseError::RebalanceInProgress) {
                continue;
            }
            check_code(ApiKey::SyncGroup, synced.error_code, None, || {
                format!(" group {group}")
            })?;
            return Ok(GroupMembership {
                group: group.to_owned(),
                member_id,
                generation: joined.generation_id,
                assignment: decode_assignment(&synced.assignment)?,
            });
        }
        Err(ClientError::Kafka {
            api: ApiKey::JoinGroup,
            context: format!(" group {group}"),
            error: super::error::KafkaError {
                code: ResponseError::RebalanceInProgress.code(),
                message: Some("the group kept rebalancing over 10 joins".into()),
            },
        })
    }

    fn leader_assignments(
        &mut self,
        members: &[kafka_protocol::messages::join_group_response::JoinGroupResponseMember],
    ) -> Result<Vec<SyncGroupRequestAssignment>, ClientError> {
        let mut subscriptions = BTreeMap::new();
        for member in members {
            subscriptions.insert(
                member.member_id.to_string(),
                decode_subscription(&member.metadata)?,
            );
        }
        let mut wanted: Vec<&str> = subscriptions.values().flatten().map(String::as_str).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let metadata = self.metadata(Some(&wanted), false)?;
        let partition_counts = metadata
            .topics
            .iter()
            .filter(|t| t.error.is_none())
            .map(|t| (t.name.clone(), t.partitions.len() as i32))
            .collect();
        range_assign(&subscriptions, &partition_counts)
            .into_iter()
            .map(|(member, topics)| {
                let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(
                    topics
                        .into_iter()
                        .map(|(topic, partitions)| {
                            AssignedTopic::default()
                                .with_topic(TopicName(strbytes(&topic)))
                                .with_partitions(partitions)
                        })
                        .collect(),
                );
                Ok(SyncGroupRequestAssignment::default()
                    .with_member_id(strbytes(&member))
                    .with_assignment(encode_versioned(&assignment, CONSUMER_PROTOCOL_VERSION)?))
            })
            .collect()
    }

    /// Heartbeats; `Ok(false)` when the group is rebalancing and this member must rejoin.
    pub fn heartbeat(&mut self, membership: &GroupMembership) -> Result<bool, ClientError> {
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(strbytes(&membership.group)))
            .with_generation_id(membership.generation)
            .with_member_id(strbytes(&membership.member_id));
        let response = self.request(&request)?;
        match ResponseError::try_from_code(response.error_code) {
            Some(ResponseError::RebalanceInProgress) => Ok(false),
            _ => {
                check_code(ApiKey::Heartbeat, response.error_code, None, || {
                    format!(" group {}", membership.group)
                })?;
                Ok(true)
            }
        }
    }

    /// Leaves the group, so that the others rebalance at once instead of after a session timeout.
    pub fn leave_group(&mut self, membership: &GroupMembership) -> Result<(), ClientError> {
        // v3 moved the member id into a batch of members.
        let request = LeaveGroupRequest::default().with_group_id(GroupId(strbytes(&membership.group)));
        let request = if self.versions().version(ApiKey::LeaveGroup)? >= 3 {
            request.with_members(vec![
                MemberIdentity::default().with_member_id(strbytes(&membership.member_id))
            ])
        } else {
            request.with_member_id(strbytes(&membership.member_id))
        };
        let response = self.request(&request)?;
        check_code(ApiKey::LeaveGroup, response.error_code, None, || {
            format!(" group {}", membership.group)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_assignor_gives_the_first_members_the_extra_partitions() {
        let subscriptions = BTreeMap::from([
            ("b".to_string(), vec!["t".to_string(), "u".to_string()]),
            ("a".to_string(), vec!["t".to_string()]),
        ]);
        let counts = BTreeMap::from([("t".to_string(), 5), ("u".to_string(), 1)]);
        let assigned = range_assign(&subscriptions, &counts);
        assert_eq!(assigned["a"], vec![("t".to_string(), vec![0, 1, 2])]);
        assert_eq!(
            assigned["b"],
            vec![("t".to_string(), vec![3, 4]), ("u".to_string(), vec![0])]
        );
    }

    #[test]
    fn subscription_and_assignment_round_trip_through_the_consumer_protocol() {
        let subscription =
            ConsumerProtocolSubscription::default().with_topics(vec![strbytes("t1"), strbytes("t2")]);
        let bytes = encode_versioned(&subscription, 0).unwrap();
        assert_eq!(&bytes[..2], &[0, 0], "version 0 first");
        assert_eq!(decode_subscription(&bytes).unwrap(), vec!["t1", "t2"]);
        let assignment =
            ConsumerProtocolAssignment::default().with_assigned_partitions(vec![AssignedTopic::default()
                .with_topic(TopicName(strbytes("t1")))
                .with_partitions(vec![0, 2])]);
        let bytes = encode_versioned(&assignment, 0).unwrap();
        assert_eq!(
            decode_assignment(&bytes).unwrap(),
            vec![("t1".to_string(), vec![0, 2])]
        );
        assert!(decode_assignment(&Bytes::new()).unwrap().is_empty());
    }
}
