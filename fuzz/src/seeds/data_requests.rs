//! Valid, populated requests of the data and admin APIs, for any version the broker serves:
//! two topics of three partitions, record batches, configs, so that mutations reach past
//! decoding into the handlers.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use laminar_protocol::records::{encode_batch, plain_record};

use super::Marks;

/// Topics the in-process target creates before fuzzing (three partitions each).
pub const TOPICS: [&str; 2] = ["fuzz-a", "fuzz-b"];
/// Topics that CreateTopics seeds create and DeleteTopics seeds delete.
pub const DOOMED: [&str; 2] = ["fuzz-doomed-1", "fuzz-doomed-2"];

pub fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

pub fn topic(text: &str) -> TopicName {
    TopicName(s(text))
}

/// A v2 batch of three records; variant 1 is lz4-compressed.
pub fn record_batch(variant: usize) -> Bytes {
    let records: Vec<_> = (0..3)
        .map(|i| {
            let key = Bytes::from(format!("key-{i}"));
            let value = Bytes::from(format!("value-{i}-{}", "x".repeat(i as usize * 8)));
            plain_record(i, 1_700_000_000_000 + i, Some(key), Some(value))
        })
        .collect();
    let compression = if variant == 1 {
        Compression::Lz4
    } else {
        Compression::None
    };
    let mut out = BytesMut::new();
    encode_batch(&mut out, &records, compression).expect("a plain batch encodes");
    out.freeze()
}

/// Variants: acks 1, acks -1 (compressed batch), acks 0.
pub fn produce(variant: usize, marks: &Marks) -> ProduceRequest {
    let acks = [1, -1, 0][variant];
    let topic_data = TOPICS
        .iter()
        .map(|name| {
            let partition_data = marks
                .partitions
                .iter()
                .map(|&index| {
                    produce_request::PartitionProduceData::default()
                        .with_index(index)
                        .with_records(Some(record_batch(variant % 2)))
                })
                .collect();
            produce_request::TopicProduceData::default()
                .with_name(topic(name))
                .with_partition_data(partition_data)
        })
        .collect();
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(marks.wait_ms)
        .with_topic_data(topic_data)
}

/// A topic's id in Fetch v13+ seeds: the name's bytes, padded. No broker holds it, so those seeds
/// reach the unknown-id path; mutations reach the rest.
fn seed_topic_id(name: &str) -> uuid::Uuid {
    let mut id = [0u8; 16];
    for (byte, name_byte) in id.iter_mut().zip(name.bytes()) {
        *byte = name_byte;
    }
    uuid::Uuid::from_bytes(id)
}

pub fn fetch(version: i16, marks: &Marks) -> FetchRequest {
    let by_id = version >= 13;
    let partition = |index: i32| {
        let mut p = fetch_request::FetchPartition::default()
            .with_partition(index)
            .with_fetch_offset(0)
            .with_partition_max_bytes(65_536);
        if version >= 5 {
            p.log_start_offset = -1;
        }
        if version >= 9 {
            p.current_leader_epoch = -1;
        }
        if version >= 12 {
            p.last_fetched_epoch = -1;
        }
        p
    };
    let topics = TOPICS
        .iter()
        .map(|name| {
            let named = match by_id {
                true => fetch_request::FetchTopic::default().with_topic_id(seed_topic_id(name)),
                false => fetch_request::FetchTopic::default().with_topic(topic(name)),
            };
            named.with_partitions(marks.partitions.iter().map(|&i| partition(i)).collect())
        })
        .collect();
    let mut request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(marks.wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(topics);
    if version >= 7 {
        request.session_epoch = -1;
        let forgotten = match by_id {
            true => fetch_request::ForgottenTopic::default().with_topic_id(seed_topic_id(DOOMED[0])),
            false => fetch_request::ForgottenTopic::default().with_topic(topic(DOOMED[0])),
        };
        request.forgotten_topics_data = vec![forgotten.with_partitions(marks.partitions.to_vec())];
    }
    if version >= 11 {
        request.rack_id = s("rack-1");
    }
    request
}

pub fn list_offsets(version: i16, marks: &Marks) -> ListOffsetsRequest {
    let topics = TOPICS
        .iter()
        .map(|name| {
            let partitions = marks
                .partitions
                .iter()
                .enumerate()
                .map(|(n, &index)| {
                    let mut p = list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(index)
                        .with_timestamp([-1, -2, 1_700_000_000_001][n]);
                    if version >= 4 {
                        p.current_leader_epoch = -1;
                    }
                    p
                })
                .collect();
            list_offsets_request::ListOffsetsTopic::default()
                .with_name(topic(name))
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(topics)
}

/// Variants: two named topics; all topics (v1+: null array).
pub fn metadata(version: i16, variant: usize) -> MetadataRequest {
    let named = TOPICS
        .iter()
        .map(|name| metadata_request::MetadataRequestTopic::default().with_name(Some(topic(name))))
        .collect();
    let topics = if variant == 1 && version >= 1 {
        None
    } else {
        Some(named)
    };
    let mut request = MetadataRequest::default().with_topics(topics);
    if version >= 4 {
        request.allow_auto_topic_creation = variant == 0;
    }
    request
}

pub fn api_versions(version: i16) -> ApiVersionsRequest {
    let mut request = ApiVersionsRequest::default();
    if version >= 3 {
        request.client_software_name = s("laminar-fuzz");
        request.client_software_version = s("0.1.0");
    }
    request
}

pub fn create_topics(version: i16, marks: &Marks) -> CreateTopicsRequest {
    let config = |name: &str, value: &str| {
        create_topics_request::CreatableTopicConfig::default()
            .with_name(s(name))
            .with_value(Some(s(value)))
    };
    let first = create_topics_request::CreatableTopic::default()
        .with_name(topic(DOOMED[0]))
        .with_num_partitions(2)
        .with_replication_factor(1)
        .with_configs(vec![
            config("retention.ms", "60000"),
            config("cleanup.policy", "delete"),
        ]);
    let defaults = if version >= 4 { -1 } else { 1 };
    let second = create_topics_request::CreatableTopic::default()
        .with_name(topic(DOOMED[1]))
        .with_num_partitions(defaults)
        .with_replication_factor(defaults as i16);
    CreateTopicsRequest::default()
        .with_topics(vec![first, second])
        .with_timeout_ms(marks.wait_ms)
}

pub fn delete_topics(version: i16, marks: &Marks) -> DeleteTopicsRequest {
    let mut request = DeleteTopicsRequest::default().with_timeout_ms(marks.wait_ms);
    if version >= 6 {
        request.topics = DOOMED
            .iter()
            .map(|name| delete_topics_request::DeleteTopicState::default().with_name(Some(topic(name))))
            .collect();
    } else {
        request.topic_names = DOOMED.iter().map(|name| topic(name)).collect();
    }
    request
}

pub fn delete_records(marks: &Marks) -> DeleteRecordsRequest {
    let partitions = marks
        .partitions
        .iter()
        .map(|&index| {
            delete_records_request::DeleteRecordsPartition::default()
                .with_partition_index(index)
                .with_offset(0)
        })
        .collect();
    DeleteRecordsRequest::default()
        .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
            .with_name(topic(TOPICS[0]))
            .with_partitions(partitions)])
        .with_timeout_ms(marks.wait_ms)
}

pub fn describe_configs(version: i16) -> DescribeConfigsRequest {
    let topic_resource = describe_configs_request::DescribeConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(s(TOPICS[0]))
        .with_configuration_keys(Some(vec![s("retention.ms"), s("cleanup.policy")]));
    let broker_resource = describe_configs_request::DescribeConfigsResource::default()
        .with_resource_type(4)
        .with_resource_name(s("1"));
    let mut request = DescribeConfigsRequest::default()
        .with_resources(vec![topic_resource, broker_resource])
        .with_include_synonyms(true);
    if version >= 3 {
        request.include_documentation = true;
    }
    request
}

pub fn alter_configs() -> AlterConfigsRequest {
    let config = |name: &str, value: &str| {
        alter_configs_request::AlterableConfig::default()
            .with_name(s(name))
            .with_value(Some(s(value)))
    };
    let resource = alter_configs_request::AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(s(TOPICS[1]))
        .with_configs(vec![
            config("retention.ms", "86400000"),
            config("max.message.bytes", "1048588"),
        ]);
    AlterConfigsRequest::default().with_resources(vec![resource])
}

pub fn incremental_alter_configs() -> IncrementalAlterConfigsRequest {
    let config = |name: &str, operation: i8, value: &str| {
        incremental_alter_configs_request::AlterableConfig::default()
            .with_name(s(name))
            .with_config_operation(operation)
            .with_value(Some(s(value)))
    };
    let resource = incremental_alter_configs_request::AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(s(TOPICS[1]))
        .with_configs(vec![
            config("retention.ms", 0, "3600000"),
            config("cleanup.policy", 2, "compact"),
            config("segment.ms", 1, ""),
        ]);
    IncrementalAlterConfigsRequest::default().with_resources(vec![resource])
}

pub fn create_partitions(marks: &Marks) -> CreatePartitionsRequest {
    let grow = |name: &str, count: i32| {
        create_partitions_request::CreatePartitionsTopic::default()
            .with_name(topic(name))
            .with_count(count)
    };
    CreatePartitionsRequest::default()
        .with_topics(vec![grow(DOOMED[0], 3), grow(DOOMED[1], 4)])
        .with_timeout_ms(marks.wait_ms)
}

/// Every partition asked for epoch 0, each with a different current leader epoch: none
/// (-1), the broker's (0) and a newer one (UNKNOWN_LEADER_EPOCH).
pub fn offset_for_leader_epoch(marks: &Marks) -> OffsetForLeaderEpochRequest {
    let topics = TOPICS
        .iter()
        .map(|name| {
            let partitions = marks
                .partitions
                .iter()
                .enumerate()
                .map(|(n, &index)| {
                    offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                        .with_partition(index)
                        .with_current_leader_epoch([-1, 0, 5][n % 3])
                        .with_leader_epoch(0)
                })
                .collect();
            offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                .with_topic(topic(name))
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(topics)
}

/// A PLAIN token: on the fuzzed (PLAINTEXT) connection it meets no handshake and fails.
pub fn sasl_authenticate() -> SaslAuthenticateRequest {
    SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0alice\0alice-secret"))
}

/// One named user, so that both the found and the unknown path are a mutation away.
pub fn describe_user_scram_credentials() -> DescribeUserScramCredentialsRequest {
    let user = describe_user_scram_credentials_request::UserName::default().with_name(s("fuzz-user"));
    DescribeUserScramCredentialsRequest::default().with_users(Some(vec![user]))
}

/// One upsertion (SCRAM-SHA-256, 4096 iterations, a 32-byte salted password) and one deletion.
pub fn alter_user_scram_credentials() -> AlterUserScramCredentialsRequest {
    use alter_user_scram_credentials_request::{ScramCredentialDeletion, ScramCredentialUpsertion};
    let upsertion = ScramCredentialUpsertion::default()
        .with_name(s("fuzz-user"))
        .with_mechanism(1)
        .with_iterations(4096)
        .with_salt(Bytes::from_static(b"0123456789abcdef"))
        .with_salted_password(Bytes::from(vec![7u8; 32]));
    let deletion = ScramCredentialDeletion::default()
        .with_name(s("fuzz-gone"))
        .with_mechanism(2);
    AlterUserScramCredentialsRequest::default()
        .with_upsertions(vec![upsertion])
        .with_deletions(vec![deletion])
}

/// Read on a prefixed topic for one user: the fuzzed broker has no authorizer (SECURITY_DISABLED),
/// a mutation away from every code and field.
pub fn create_acls() -> CreateAclsRequest {
    let creation = create_acls_request::AclCreation::default()
        .with_resource_type(2)
        .with_resource_name(s("fuzz-"))
        .with_resource_pattern_type(4)
        .with_principal(s("User:fuzz"))
        .with_host(s("*"))
        .with_operation(3)
        .with_permission_type(3);
    CreateAclsRequest::default().with_creations(vec![creation])
}

/// One user's quotas.
pub fn describe_client_quotas() -> DescribeClientQuotasRequest {
    let component = describe_client_quotas_request::ComponentData::default()
        .with_entity_type(s("user"))
        .with_match_type(0)
        .with_match(Some(s("fuzz")));
    DescribeClientQuotasRequest::default().with_components(vec![component])
}

/// A byte rate for a user no fuzzing client is, only validated: a mutation that makes it apply
/// holds the fuzzer back for at most the windows' span (the fuzzed brokers keep it short).
pub fn alter_client_quotas() -> AlterClientQuotasRequest {
    let entity = alter_client_quotas_request::EntityData::default()
        .with_entity_type(s("user"))
        .with_entity_name(Some(s("fuzz-nobody")));
    let op = alter_client_quotas_request::OpData::default()
        .with_key(s("producer_byte_rate"))
        .with_value(1_048_576.0);
    let entry = alter_client_quotas_request::EntryData::default()
        .with_entity(vec![entity])
        .with_ops(vec![op]);
    AlterClientQuotasRequest::default()
        .with_entries(vec![entry])
        .with_validate_only(true)
}

/// Every ACL that would apply to one topic (MATCH).
pub fn describe_acls() -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_type_filter(2)
        .with_resource_name_filter(Some(s("fuzz-topic")))
        .with_pattern_type_filter(2)
        .with_operation(1)
        .with_permission_type(1)
}

/// One user's ACLs of any kind.
pub fn delete_acls() -> DeleteAclsRequest {
    let filter = delete_acls_request::DeleteAclsFilter::default()
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_principal_filter(Some(s("User:fuzz")))
        .with_operation(1)
        .with_permission_type(1);
    DeleteAclsRequest::default().with_filters(vec![filter])
}

pub fn describe_cluster(version: i16) -> DescribeClusterRequest {
    let mut request = DescribeClusterRequest::default();
    if version >= 1 {
        request.endpoint_type = 1;
    }
    request
}

/// Variants: no transactional id; a transactional id.
pub fn init_producer_id(version: i16, variant: usize) -> InitProducerIdRequest {
    let mut request = InitProducerIdRequest::default().with_transaction_timeout_ms(60_000);
    if variant == 1 {
        request.transactional_id = Some(TransactionalId(s("fuzz-tx")));
    }
    if version >= 3 {
        request.producer_id = ProducerId(-1);
        request.producer_epoch = -1;
    }
    request
}

/// Every partition of the first topic, and the second topic with all of its partitions (the
/// marks are the indexes).
pub fn describe_log_dirs(marks: &Marks) -> DescribeLogDirsRequest {
    let named = describe_log_dirs_request::DescribableLogDirTopic::default()
        .with_topic(topic(TOPICS[0]))
        .with_partitions(marks.partitions.to_vec());
    let other = describe_log_dirs_request::DescribableLogDirTopic::default()
        .with_topic(topic(TOPICS[1]))
        .with_partitions(vec![0]);
    DescribeLogDirsRequest::default().with_topics(Some(vec![named, other]))
}

/// A move of partition 0 to broker 1, and a cancel of the other partitions (the broker
/// answers these in cluster mode only).
pub fn alter_partition_reassignments(version: i16, marks: &Marks) -> AlterPartitionReassignmentsRequest {
    let each = marks.partitions.iter().enumerate().map(|(i, &index)| {
        let replicas = (i == 0).then(|| vec![BrokerId(1)]);
        alter_partition_reassignments_request::ReassignablePartition::default()
            .with_partition_index(index)
            .with_replicas(replicas)
    });
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(marks.wait_ms)
        .with_topics(vec![
            alter_partition_reassignments_request::ReassignableTopic::default()
                .with_name(topic(TOPICS[0]))
                .with_partitions(each.collect()),
        ]);
    // v1 carries KIP-860's flag; false is not encodable in v0.
    request.with_allow_replication_factor_change(version == 0)
}

pub fn list_partition_reassignments(marks: &Marks) -> ListPartitionReassignmentsRequest {
    ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(marks.wait_ms)
        .with_topics(Some(vec![
            list_partition_reassignments_request::ListPartitionReassignmentsTopics::default()
                .with_name(topic(TOPICS[0]))
                .with_partition_indexes(marks.partitions.to_vec()),
        ]))
}

/// DescribeQuorum of Kafka's metadata partition, `__cluster_metadata-0`.
pub fn describe_quorum() -> DescribeQuorumRequest {
    let partition = describe_quorum_request::PartitionData::default().with_partition_index(0);
    DescribeQuorumRequest::default().with_topics(vec![describe_quorum_request::TopicData::default()
        .with_topic_name(topic("__cluster_metadata"))
        .with_partitions(vec![partition])])
}

/// A preferred (v1+: type 0) election of the first topic's partitions.
pub fn elect_leaders(version: i16, marks: &Marks) -> ElectLeadersRequest {
    let partitions = elect_leaders_request::TopicPartitions::default()
        .with_topic(topic(TOPICS[0]))
        .with_partitions(marks.partitions.to_vec());
    let request = ElectLeadersRequest::default()
        .with_timeout_ms(marks.wait_ms)
        .with_topic_partitions(Some(vec![partitions]));
    if version >= 1 {
        request.with_election_type(0)
    } else {
        request
    }
}
