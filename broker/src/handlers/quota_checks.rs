//! Client quotas on the request path (`crate::client_quotas` measures them): who a request
//! counts against, which requests are exempt, the controller mutations a request makes, and
//! the `throttle_time_ms` its answer carries.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use laminar_security::Principal;

use crate::broker::BrokerShared;
use crate::client_quotas::{throttle_ms, Client};

/// Who a request counts against: its connection's principal and its client id.
pub struct QuotaClient {
    pub principal: Arc<Principal>,
    pub client_id: Option<StrBytes>,
}

impl QuotaClient {
    pub fn client(&self) -> Client<'_> {
        Client {
            user: &self.principal.name,
            client_id: self.client_id.as_deref().unwrap_or(""),
        }
    }
}

/// Requests no quota counts: those that come before a client is known.
pub fn is_exempt(api_key: ApiKey) -> bool {
    matches!(
        api_key,
        ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
    )
}

/// Request time as `request_percentage` counts it: percent of one thread for a second.
pub fn percent_seconds(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 100.0
}

/// The partitions a topic-admin request would create or delete (what
/// `controller_mutation_rate` counts); `None` for other requests.
pub fn mutated_partitions(shared: &BrokerShared, request: &RequestKind) -> Option<u32> {
    // The topic table only for the requests that name existing topics: Metadata and the other
    // requests that come through here take no reference to it.
    let count_of = |name: &str| {
        let table = shared.metadata.current();
        table.topics.get(name).map_or(0, |t| t.partition_count)
    };
    let partitions: i64 = match request {
        RequestKind::CreateTopics(r) if r.validate_only => 0,
        RequestKind::CreateTopics(r) => r
            .topics
            .iter()
            .map(|t| match (t.assignments.len(), t.num_partitions) {
                (0, -1) => i64::from(shared.config.num_partitions),
                (0, count) => i64::from(count),
                (assigned, _) => assigned as i64,
            })
            .sum(),
        RequestKind::CreatePartitions(r) if r.validate_only => 0,
        RequestKind::CreatePartitions(r) => r
            .topics
            .iter()
            .map(|t| i64::from(t.count.saturating_sub(count_of(&t.name))).max(0))
            .sum(),
        RequestKind::DeleteTopics(r) => {
            let names = r.topic_names.iter().map(|n| n.as_str());
            let named = r
                .topics
                .iter()
                .filter_map(|t| t.name.as_ref().map(|n| n.as_str()));
            names.chain(named).map(|n| i64::from(count_of(n))).sum()
        }
        _ => return None,
    };
    Some(u32::try_from(partitions.max(0)).unwrap_or(u32::MAX))
}

/// Whether a throttled mutation is refused (THROTTLING_QUOTA_EXCEEDED) rather than made and
/// throttled: the versions of KIP-599 (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+).
pub fn is_strict(api_key: ApiKey, version: i16) -> bool {
    match api_key {
        ApiKey::CreateTopics => version >= 6,
        ApiKey::CreatePartitions => version >= 3,
        ApiKey::DeleteTopics => version >= 5,
        _ => false,
    }
}

/// The answer to a mutation refused for its quota: every topic THROTTLING_QUOTA_EXCEEDED.
pub fn mutation_refused(request: &RequestKind, wait: Duration) -> Option<ResponseKind> {
    use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
    use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
    use kafka_protocol::messages::*;
    let code = ResponseError::ThrottlingQuotaExceeded.code();
    let message = || {
        Some(StrBytes::from_static_str(
            "the controller mutation quota is exceeded",
        ))
    };
    let mut response = match request {
        RequestKind::CreateTopics(r) => ResponseKind::CreateTopics(
            CreateTopicsResponse::default().with_topics(
                r.topics
                    .iter()
                    .map(|t| {
                        CreatableTopicResult::default()
                            .with_name(t.name.clone())
                            .with_error_code(code)
                            .with_error_message(message())
                    })
                    .collect(),
            ),
        ),
        RequestKind::CreatePartitions(r) => ResponseKind::CreatePartitions(
            CreatePartitionsResponse::default().with_results(
                r.topics
                    .iter()
                    .map(|t| {
                        CreatePartitionsTopicResult::default()
                            .with_name(t.name.clone())
                            .with_error_code(code)
                            .with_error_message(message())
                    })
                    .collect(),
            ),
        ),
        RequestKind::DeleteTopics(r) => {
            let names = r.topic_names.iter().cloned().map(Some);
            let named = r.topics.iter().map(|t| t.name.clone());
            let results = names.chain(named).map(|name| {
                DeletableTopicResult::default()
                    .with_name(name)
                    .with_error_code(code)
                    .with_error_message(message())
            });
            ResponseKind::DeleteTopics(DeleteTopicsResponse::default().with_responses(results.collect()))
        }
        _ => return None,
    };
    set_throttle(&mut response, wait);
    Some(response)
}

/// Sets the answer's `throttle_time_ms` (encoded by the versions that have it).
pub fn set_throttle(response: &mut ResponseKind, wait: Duration) {
    if wait.is_zero() {
        return;
    }
    let ms = throttle_ms(wait);
    macro_rules! throttled {
        ($($kind:ident),* $(,)?) => {
            match response {
                $(ResponseKind::$kind(r) => r.throttle_time_ms = ms,)*
                _ => {}
            }
        };
    }
    throttled!(
        Produce,
        ListOffsets,
        Metadata,
        OffsetForLeaderEpoch,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        DescribeConfigs,
        AlterConfigs,
        IncrementalAlterConfigs,
        CreatePartitions,
        DescribeCluster,
        ElectLeaders,
        UnregisterBroker,
        AddRaftVoter,
        RemoveRaftVoter,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        DescribeLogDirs,
        InitProducerId,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        DescribeProducers,
        DescribeTransactions,
        ListTransactions,
        AlterUserScramCredentials,
        DescribeUserScramCredentials,
        CreateAcls,
        DescribeAcls,
        DeleteAcls,
        DescribeClientQuotas,
        AlterClientQuotas,
        FindCoordinator,
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
        OffsetCommit,
        TxnOffsetCommit,
        OffsetFetch,
        ListGroups,
        DescribeGroups,
        DeleteGroups,
        OffsetDelete,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
    );
}
