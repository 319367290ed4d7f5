//! Consumer-group administration: FindCoordinator, ListGroups, DescribeGroups,
//! ConsumerGroupDescribe (KIP-848's groups), DeleteGroups, OffsetFetch and OffsetCommit. Group
//! requests go to the group's coordinator: [`Connection::find_coordinator`] says which broker
//! that is.
//!
//! Versions are capped in [`super::versions::client_versions`] where later ones change the
//! request's shape (FindCoordinator v4 batches keys, OffsetFetch v8 batches groups, OffsetCommit
//! v10 names topics by id), so the fields set here always exist on the wire.

use bytes::Bytes;
use kafka_protocol::messages::consumer_group_describe_response::Assignment;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest,
    GroupId, ListGroupsRequest, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::admin::BrokerInfo;
use crate::connection::Connection;
use crate::error::{check_code, ClientError, KafkaError};

/// A group as ListGroups names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    /// "consumer" for Kafka consumers; empty for groups that only commit offsets.
    pub protocol_type: String,
    /// Empty when the broker's ListGroups version predates states (< v4).
    pub state: String,
    /// "classic" or "consumer" (KIP-848's protocol); empty when the broker's ListGroups version
    /// predates types (< v5).
    pub group_type: String,
}

/// A member of a described group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    pub member_id: String,
    pub client_id: String,
    pub client_host: String,
    /// The partitions the leader assigned it (decoded from the consumer protocol), if any.
    pub assignment: Vec<(String, Vec<i32>)>,
}

/// What DescribeGroups says about one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: String,
    pub protocol_type: String,
    /// The assignment strategy chosen (e.g. "range").
    pub protocol: String,
    pub members: Vec<GroupMember>,
}

/// A member of a consumer group of KIP-848's protocol, as ConsumerGroupDescribe describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    /// The partitions it owns now, by topic name.
    pub assignment: Vec<(String, Vec<i32>)>,
    /// The partitions the group's assignor wants it to own.
    pub target_assignment: Vec<(String, Vec<i32>)>,
}

/// What ConsumerGroupDescribe says about one consumer group of KIP-848's protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupDescription {
    pub group_id: String,
    /// Empty, Assigning, Reconciling or Stable.
    pub state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    /// The server-side assignor (e.g. "uniform").
    pub assignor_name: String,
    pub members: Vec<ConsumerGroupMember>,
}

/// A committed offset of one partition (`offset` -1: none committed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// A group name and what the broker did with it (DeleteGroups).
pub type GroupOutcome = (String, Result<(), KafkaError>);

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_owned()))
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// Decodes a consumer-protocol assignment: i16 version, then `ConsumerProtocolAssignment`.
pub fn decode_assignment(bytes: &Bytes) -> Result<Vec<(String, Vec<i32>)>, ClientError> {
    use kafka_protocol::messages::ConsumerProtocolAssignment;
    use kafka_protocol::protocol::Decodable;
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let mut buf = bytes.clone();
    let version = i16::from_be_bytes(
        buf.get(..2)
            .ok_or_else(|| ClientError::Records("assignment shorter than its version".into()))?
            .try_into()
            .expect("2 bytes"),
    );
    let _ = bytes::Buf::get_i16(&mut buf);
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version.min(3))
        .map_err(|e| ClientError::Records(format!("consumer assignment v{version}: {e}")))?;
    Ok(assignment
        .assigned_partitions
        .into_iter()
        .map(|tp| (tp.topic.0.to_string(), tp.partitions))
        .collect())
}

/// A ConsumerGroupDescribe assignment as `(topic name, partitions)`.
fn named_partitions(assignment: &Assignment) -> Vec<(String, Vec<i32>)> {
    assignment
        .topic_partitions
        .iter()
        .map(|t| (t.topic_name.0.to_string(), t.partitions.clone()))
        .collect()
}

/// FindCoordinator's key types.
const GROUP_KEY: i8 = 0;
pub(crate) const TRANSACTION_KEY: i8 = 1;

impl Connection {
    /// The coordinator broker of consumer group `group`.
    pub fn find_coordinator(&mut self, group: &str) -> Result<BrokerInfo, ClientError> {
        self.find_coordinator_of(group, GROUP_KEY)
    }

    /// The coordinator broker of `key`, a group or (`TRANSACTION_KEY`) a transactional id.
    pub(crate) fn find_coordinator_of(&mut self, key: &str, key_type: i8) -> Result<BrokerInfo, ClientError> {
        let request = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(key.to_owned()))
            .with_key_type(key_type);
        let response = self.request(&request)?;
        let kind = if key_type == TRANSACTION_KEY {
            "transactional id"
        } else {
            "group"
        };
        check_code(
            ApiKey::FindCoordinator,
            response.error_code,
            response.error_message.as_deref(),
            || format!(" {kind} {key}"),
        )?;
        Ok(BrokerInfo {
            node_id: response.node_id.0,
            host: response.host.to_string(),
            port: response.port,
        })
    }

    /// Every group this broker coordinates.
    pub fn list_groups(&mut self) -> Result<Vec<ListedGroup>, ClientError> {
        let response = self.request(&ListGroupsRequest::default())?;
        check_code(ApiKey::ListGroups, response.error_code, None, String::new)?;
        Ok(response
            .groups
            .iter()
            .map(|g| ListedGroup {
                group_id: g.group_id.0.to_string(),
                protocol_type: g.protocol_type.to_string(),
                state: g.group_state.to_string(),
                group_type: g.group_type.to_string(),
            })
            .collect())
    }

    /// Describes `group`; an unknown group is reported by Kafka as state "Dead" with no members.
    pub fn describe_group(&mut self, group: &str) -> Result<GroupDescription, ClientError> {
        let request = DescribeGroupsRequest::default().with_groups(vec![group_id(group)]);
        let response = self.request(&request)?;
        let described = response
            .groups
            .first()
            .ok_or_else(|| ClientError::MissingInResponse {
                api: ApiKey::DescribeGroups,
                what: group.to_owned(),
            })?;
        check_code(
            ApiKey::DescribeGroups,
            described.error_code,
            described.error_message.as_deref(),
            || format!(" group {group}"),
        )?;
        let members = described
            .members
            .iter()
            .map(|m| {
                Ok(GroupMember {
                    member_id: m.member_id.to_string(),
                    client_id: m.client_id.to_string(),
                    client_host: m.client_host.to_string(),
                    assignment: if described.protocol_type.as_str() == "consumer" {
                        decode_assignment(&m.member_assignment)?
                    } else {
                        Vec::new()
                    },
                })
            })
            .collect::<Result<Vec<_>, ClientError>>()?;
        Ok(GroupDescription {
            group_id: described.group_id.0.to_string(),
            state: described.group_state.to_string(),
            protocol_type: described.protocol_type.to_string(),
            protocol: described.protocol_data.to_string(),
            members,
        })
    }

    /// Describes consumer group `group` of KIP-848's protocol (ConsumerGroupDescribe); a group
    /// that is not one (unknown, or classic) is GROUP_ID_NOT_FOUND.
    pub fn describe_consumer_group(&mut self, group: &str) -> Result<ConsumerGroupDescription, ClientError> {
        let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![group_id(group)]);
        let response = self.request(&request)?;
        let described = response
            .groups
            .first()
            .ok_or_else(|| ClientError::MissingInResponse {
                api: ApiKey::ConsumerGroupDescribe,
                what: group.to_owned(),
            })?;
        check_code(
            ApiKey::ConsumerGroupDescribe,
            described.error_code,
            described.error_message.as_deref(),
            || format!(" group {group}"),
        )?;
        let text = |s: &Option<StrBytes>| s.as_ref().map(ToString::to_string);
        let members = described
            .members
            .iter()
            .map(|m| ConsumerGroupMember {
                member_id: m.member_id.to_string(),
                instance_id: text(&m.instance_id),
                rack_id: text(&m.rack_id),
                member_epoch: m.member_epoch,
                client_id: m.client_id.to_string(),
                client_host: m.client_host.to_string(),
                subscribed_topic_names: m.subscribed_topic_names.iter().map(|t| t.0.to_string()).collect(),
                subscribed_topic_regex: text(&m.subscribed_topic_regex),
                assignment: named_partitions(&m.assignment),
                target_assignment: named_partitions(&m.target_assignment),
            })
            .collect();
        Ok(ConsumerGroupDescription {
            group_id: described.group_id.0.to_string(),
            state: described.group_state.to_string(),
            group_epoch: described.group_epoch,
            assignment_epoch: described.assignment_epoch,
            assignor_name: described.assignor_name.to_string(),
            members,
        })
    }

    /// Deletes groups; returns each group's outcome in request order.
    pub fn delete_groups(&mut self, groups: &[&str]) -> Result<Vec<GroupOutcome>, ClientError> {
        let request =
            DeleteGroupsRequest::default().with_groups_names(groups.iter().map(|g| group_id(g)).collect());
        let response = self.request(&request)?;
        groups
            .iter()
            .map(|g| {
                let result = response
                    .results
                    .iter()
                    .find(|r| r.group_id.0.as_str() == *g)
                    .ok_or_else(|| ClientError::MissingInResponse {
                        api: ApiKey::DeleteGroups,
                        what: (*g).to_owned(),
                    })?;
                let outcome = match KafkaError::from_code(result.error_code, None) {
                    None => Ok(()),
                    Some(error) => Err(error),
                };
                Ok(((*g).to_owned(), outcome))
            })
            .collect()
    }

    /// Committed offsets of `group` (`topics` None: every partition it committed).
    pub fn offset_fetch(
        &mut self,
        group: &str,
        topics: Option<&[(String, Vec<i32>)]>,
    ) -> Result<Vec<CommittedOffset>, ClientError> {
        let request = OffsetFetchRequest::default()
            .with_group_id(group_id(group))
            .with_topics(topics.map(|topics| {
                topics
                    .iter()
                    .map(|(topic, partitions)| {
                        OffsetFetchRequestTopic::default()
                            .with_name(topic_name(topic))
                            .with_partition_indexes(partitions.clone())
                    })
                    .collect()
            }));
        let response = self.request(&request)?;
        check_code(ApiKey::OffsetFetch, response.error_code, None, || {
            format!(" group {group}")
        })?;
        let mut offsets = Vec::new();
        for topic in &response.topics {
            for partition in &topic.partitions {
                check_code(ApiKey::OffsetFetch, partition.error_code, None, || {
                    format!(" {}-{}", topic.name.0, partition.partition_index)
                })?;
                offsets.push(CommittedOffset {
                    topic: topic.name.0.to_string(),
                    partition: partition.partition_index,
                    offset: partition.committed_offset,
                });
            }
        }
        Ok(offsets)
    }

    /// Commits `offsets` for `group`. Outside a generation (`generation` -1, empty member id)
    /// this is an admin commit, which Kafka accepts only while the group has no members.
    pub fn offset_commit(
        &mut self,
        group: &str,
        generation: i32,
        member_id: &str,
        offsets: &[CommittedOffset],
    ) -> Result<(), ClientError> {
        let response = self.request(&offset_commit_request(group, (generation, member_id), offsets))?;
        check_offset_commit(&response)
    }
}

/// The OffsetCommit of `offsets` for `group` by the member (`generation`, `member_id`); see
/// [`Connection::offset_commit`]. For callers that pipeline commits.
pub fn offset_commit_request(
    group: &str,
    (generation, member_id): (i32, &str),
    offsets: &[CommittedOffset],
) -> OffsetCommitRequest {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for offset in offsets {
        let partition = OffsetCommitRequestPartition::default()
            .with_partition_index(offset.partition)
            .with_committed_offset(offset.offset)
            .with_committed_leader_epoch(-1);
        match topics.iter_mut().find(|t| t.name.0.as_str() == offset.topic) {
            Some(topic) => topic.partitions.push(partition),
            None => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(topic_name(&offset.topic))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(StrBytes::from_string(member_id.to_owned()))
        .with_retention_time_ms(-1)
        .with_topics(topics)
}

/// The first partition error of an OffsetCommit answer, if any.
pub fn check_offset_commit(response: &OffsetCommitResponse) -> Result<(), ClientError> {
    for topic in &response.topics {
        for partition in &topic.partitions {
            check_code(ApiKey::OffsetCommit, partition.error_code, None, || {
                format!(" {}-{}", topic.name.0, partition.partition_index)
            })?;
        }
    }
    Ok(())
}
