//! Cluster and topic administration helpers: Metadata, CreateTopics, DeleteTopics,
//! DescribeConfigs, partition reassignments and DescribeLogDirs.

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, ApiKey, BrokerId, CreateTopicsRequest, DeleteTopicsRequest,
    DescribeClusterRequest, DescribeConfigsRequest, DescribeLogDirsRequest,
    ListPartitionReassignmentsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::connection::Connection;
use crate::error::{check_code, ClientError, KafkaError};

/// A broker as Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// node.id
    pub node_id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: i32,
}

/// One partition's leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// Partition index.
    pub partition: i32,
    /// Leader node id (-1: none).
    pub leader: i32,
    /// Replica node ids.
    pub replicas: Vec<i32>,
    /// In-sync replica node ids.
    pub isr: Vec<i32>,
    /// The partition's error, if any.
    pub error: Option<KafkaError>,
}

/// One topic's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Topic name.
    pub name: String,
    /// The topic's error (e.g. UnknownTopicOrPartition), if any.
    pub error: Option<KafkaError>,
    /// Partitions by index order as the broker sent them.
    pub partitions: Vec<PartitionMetadata>,
}

/// A broker as DescribeCluster describes it (fenced ones included from v2 on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedBroker {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    /// DescribeCluster v2's `IsFenced`; always false from older brokers (they list unfenced
    /// brokers only).
    pub fenced: bool,
}

/// What DescribeCluster returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDescription {
    pub cluster_id: String,
    pub controller_id: i32,
    pub brokers: Vec<DescribedBroker>,
}

/// What Metadata returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterMetadata {
    /// Brokers in the cluster.
    pub brokers: Vec<BrokerInfo>,
    /// Controller node id (-1: unknown).
    pub controller_id: i32,
    /// The cluster id (Metadata v2+; `None` from older brokers).
    pub cluster_id: Option<String>,
    /// The topics asked for (or all).
    pub topics: Vec<TopicMetadata>,
}

impl ClusterMetadata {
    /// The topic named `name`, if present.
    pub fn topic(&self, name: &str) -> Option<&TopicMetadata> {
        self.topics.iter().find(|t| t.name == name)
    }

    /// The `host:port` of node `node_id`.
    pub fn broker_address(&self, node_id: i32) -> Option<String> {
        self.brokers
            .iter()
            .find(|b| b.node_id == node_id)
            .map(|b| format!("{}:{}", b.host, b.port))
    }
}

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// Topic name.
    pub name: String,
    /// Partition count (-1: the broker's num.partitions).
    pub partitions: i32,
    /// Replication factor (-1: the broker's default.replication.factor).
    pub replication_factor: i16,
    /// Topic configs, e.g. `("retention.ms", "60000")`.
    pub configs: Vec<(String, String)>,
}

/// A topic name and what the broker did with it (CreateTopics, DeleteTopics).
pub type TopicOutcome = (String, Result<(), KafkaError>);

/// One config entry of DescribeConfigs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Config key.
    pub name: String,
    /// Value (None when sensitive or unset).
    pub value: Option<String>,
    /// Whether the value cannot be altered.
    pub read_only: bool,
    /// Where the value comes from (Kafka's ConfigSource codes; 5 = default).
    pub source: i8,
}

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_owned()))
}

impl Connection {
    /// Metadata for `topics` (`None`: every topic). `auto_create` asks the broker to create
    /// missing topics when it allows that.
    pub fn metadata(
        &mut self,
        topics: Option<&[&str]>,
        auto_create: bool,
    ) -> Result<ClusterMetadata, ClientError> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|topics| {
                topics
                    .iter()
                    .map(|t| MetadataRequestTopic::default().with_name(Some(name(t))))
                    .collect()
            }))
            .with_allow_auto_topic_creation(auto_create);
        let response = self.request(&request)?;
        Ok(ClusterMetadata {
            brokers: response
                .brokers
                .iter()
                .map(|b| BrokerInfo {
                    node_id: b.node_id.0,
                    host: b.host.to_string(),
                    port: b.port,
                })
                .collect(),
            controller_id: response.controller_id.0,
            cluster_id: response.cluster_id.as_ref().map(|id| id.to_string()),
            topics: response
                .topics
                .iter()
                .map(|t| TopicMetadata {
                    name: t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                    error: KafkaError::from_code(t.error_code, None),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| PartitionMetadata {
                            partition: p.partition_index,
                            leader: p.leader_id.0,
                            replicas: p.replica_nodes.iter().map(|n| n.0).collect(),
                            isr: p.isr_nodes.iter().map(|n| n.0).collect(),
                            error: KafkaError::from_code(p.error_code, None),
                        })
                        .collect(),
                })
                .collect(),
        })
    }

    /// Removes broker `broker_id`'s registration (UnregisterBroker, cluster mode): refused while
    /// it holds replicas.
    pub fn unregister_broker(&mut self, broker_id: i32) -> Result<(), ClientError> {
        let request = kafka_protocol::messages::UnregisterBrokerRequest::default()
            .with_broker_id(kafka_protocol::messages::BrokerId(broker_id));
        let response = self.request(&request)?;
        let message = response.error_message.as_ref().map(|m| m.to_string());
        check_code(
            ApiKey::UnregisterBroker,
            response.error_code,
            message.as_deref(),
            || format!(" broker {broker_id}"),
        )
    }

    /// DescribeCluster, with the fenced brokers when the broker serves v2 (KIP-1073).
    pub fn describe_cluster(&mut self) -> Result<ClusterDescription, ClientError> {
        let request = DescribeClusterRequest::default().with_include_fenced_brokers(true);
        let response = self.request(&request)?;
        let message = response.error_message.as_ref().map(|m| m.to_string());
        check_code(
            ApiKey::DescribeCluster,
            response.error_code,
            message.as_deref(),
            String::new,
        )?;
        let brokers = response
            .brokers
            .iter()
            .map(|b| DescribedBroker {
                node_id: b.broker_id.0,
                host: b.host.to_string(),
                port: b.port,
                rack: b.rack.as_ref().map(|r| r.to_string()),
                fenced: b.is_fenced,
            })
            .collect();
        Ok(ClusterDescription {
            cluster_id: response.cluster_id.to_string(),
            controller_id: response.controller_id.0,
            brokers,
        })
    }

    /// Creates topics; returns each topic's outcome in request order.
    pub fn create_topics(
        &mut self,
        topics: &[NewTopic],
        timeout_ms: i32,
    ) -> Result<Vec<TopicOutcome>, ClientError> {
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(timeout_ms)
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        CreatableTopic::default()
                            .with_name(name(&t.name))
                            .with_num_partitions(t.partitions)
                            .with_replication_factor(t.replication_factor)
                            .with_configs(
                                t.configs
                                    .iter()
                                    .map(|(key, value)| {
                                        CreatableTopicConfig::default()
                                            .with_name(StrBytes::from_string(key.clone()))
                                            .with_value(Some(StrBytes::from_string(value.clone())))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let response = self.request(&request)?;
        topics
            .iter()
            .map(|t| {
                let result = response
                    .topics
                    .iter()
                    .find(|r| r.name.0.as_str() == t.name)
                    .ok_or_else(|| ClientError::MissingInResponse {
                        api: ApiKey::CreateTopics,
                        what: t.name.clone(),
                    })?;
                let outcome = match KafkaError::from_code(result.error_code, result.error_message.as_deref())
                {
                    None => Ok(()),
                    Some(error) => Err(error),
                };
                Ok((t.name.clone(), outcome))
            })
            .collect()
    }

    /// Deletes topics by name; returns each topic's outcome in request order.
    pub fn delete_topics(
        &mut self,
        topics: &[&str],
        timeout_ms: i32,
    ) -> Result<Vec<TopicOutcome>, ClientError> {
        let version = self.versions().version(ApiKey::DeleteTopics)?;
        // v6 moved names into `topics` (which may also carry ids); earlier versions use `topic_names`.
        let request = if version >= 6 {
            DeleteTopicsRequest::default().with_topics(
                topics
                    .iter()
                    .map(|t| DeleteTopicState::default().with_name(Some(name(t))))
                    .collect(),
            )
        } else {
            DeleteTopicsRequest::default().with_topic_names(topics.iter().map(|t| name(t)).collect())
        }
        .with_timeout_ms(timeout_ms);
        let response = self.request(&request)?;
        topics
            .iter()
            .map(|t| {
                let result = response
                    .responses
                    .iter()
                    .find(|r| r.name.as_ref().is_some_and(|n| n.0.as_str() == *t))
                    .ok_or_else(|| ClientError::MissingInResponse {
                        api: ApiKey::DeleteTopics,
                        what: (*t).to_owned(),
                    })?;
                let outcome = match KafkaError::from_code(result.error_code, result.error_message.as_deref())
                {
                    None => Ok(()),
                    Some(error) => Err(error),
                };
                Ok(((*t).to_owned(), outcome))
            })
            .collect()
    }

    /// Every config of a topic (`keys`: `None` for all).
    pub fn describe_topic_configs(
        &mut self,
        topic: &str,
        keys: Option<&[&str]>,
    ) -> Result<Vec<ConfigEntry>, ClientError> {
        self.describe_configs(2, topic, keys)
    }

    /// Every config of a resource (`resource_type`: 2 topic, 4 broker).
    pub fn describe_configs(
        &mut self,
        resource_type: i8,
        resource_name: &str,
        keys: Option<&[&str]>,
    ) -> Result<Vec<ConfigEntry>, ClientError> {
        let request =
            DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(StrBytes::from_string(resource_name.to_owned()))
                .with_configuration_keys(keys.map(|keys| {
                    keys.iter()
                        .map(|k| StrBytes::from_string((*k).to_owned()))
                        .collect()
                }))]);
        let response = self.request(&request)?;
        let result = response
            .results
            .first()
            .ok_or_else(|| ClientError::MissingInResponse {
                api: ApiKey::DescribeConfigs,
                what: resource_name.to_owned(),
            })?;
        check_code(
            ApiKey::DescribeConfigs,
            result.error_code,
            result.error_message.as_deref(),
            || format!(" {resource_name}"),
        )?;
        Ok(result
            .configs
            .iter()
            .map(|c| ConfigEntry {
                name: c.name.to_string(),
                value: c.value.as_ref().map(|v| v.to_string()),
                read_only: c.read_only,
                source: c.config_source,
            })
            .collect())
    }
}

/// One partition's wanted replicas for [`Connection::alter_partition_reassignments`]:
/// `None` cancels the reassignment in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reassignment {
    pub topic: String,
    pub partition: i32,
    pub replicas: Option<Vec<i32>>,
}

/// A reassignment in progress (ListPartitionReassignments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OngoingReassignment {
    pub topic: String,
    pub partition: i32,
    /// Every replica: the target's first, then those being removed.
    pub replicas: Vec<i32>,
    pub adding_replicas: Vec<i32>,
    pub removing_replicas: Vec<i32>,
}

/// A partition's local replica in a log dir (DescribeLogDirs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirReplica {
    pub topic: String,
    pub partition: i32,
    pub size_bytes: i64,
    pub offset_lag: i64,
}

/// One log dir of a broker (DescribeLogDirs); the byte counts are -1 when unknown (before v4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDir {
    pub path: String,
    pub error: Option<KafkaError>,
    pub total_bytes: i64,
    pub usable_bytes: i64,
    pub replicas: Vec<LogDirReplica>,
}

/// One partition's outcome of a reassignment request.
pub type PartitionOutcome = (String, i32, Result<(), KafkaError>);

fn broker_ids(ids: &[BrokerId]) -> Vec<i32> {
    ids.iter().map(|b| b.0).collect()
}

impl Connection {
    /// Starts, changes or cancels reassignments; each partition's outcome in request order.
    pub fn alter_partition_reassignments(
        &mut self,
        wanted: &[Reassignment],
        timeout_ms: i32,
    ) -> Result<Vec<PartitionOutcome>, ClientError> {
        let mut topics: Vec<ReassignableTopic> = Vec::new();
        for w in wanted {
            let replicas = w
                .replicas
                .as_ref()
                .map(|r| r.iter().map(|b| BrokerId(*b)).collect());
            let partition = ReassignablePartition::default()
                .with_partition_index(w.partition)
                .with_replicas(replicas);
            match topics.last_mut() {
                Some(last) if last.name.as_str() == w.topic => last.partitions.push(partition),
                _ => topics.push(
                    ReassignableTopic::default()
                        .with_name(name(&w.topic))
                        .with_partitions(vec![partition]),
                ),
            }
        }
        let request = AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(timeout_ms)
            .with_topics(topics);
        let response = self.request(&request)?;
        let message = response.error_message.as_ref().map(|m| m.to_string());
        check_code(
            ApiKey::AlterPartitionReassignments,
            response.error_code,
            message.as_deref(),
            String::new,
        )?;
        let each = response.responses.iter().flat_map(|t| {
            t.partitions.iter().map(|p| {
                let error = KafkaError::from_code(p.error_code, p.error_message.as_deref());
                (t.name.to_string(), p.partition_index, error.map_or(Ok(()), Err))
            })
        });
        Ok(each.collect())
    }

    /// The reassignments in progress: all (`None`) or those of the named partitions.
    pub fn list_partition_reassignments(
        &mut self,
        partitions: Option<&[(String, Vec<i32>)]>,
        timeout_ms: i32,
    ) -> Result<Vec<OngoingReassignment>, ClientError> {
        let topics = partitions.map(|list| {
            let each = list.iter().map(|(topic, indexes)| {
                ListPartitionReassignmentsTopics::default()
                    .with_name(name(topic))
                    .with_partition_indexes(indexes.clone())
            });
            each.collect()
        });
        let request = ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(timeout_ms)
            .with_topics(topics);
        let response = self.request(&request)?;
        let message = response.error_message.as_ref().map(|m| m.to_string());
        check_code(
            ApiKey::ListPartitionReassignments,
            response.error_code,
            message.as_deref(),
            String::new,
        )?;
        let each = response.topics.iter().flat_map(|t| {
            t.partitions.iter().map(|p| OngoingReassignment {
                topic: t.name.to_string(),
                partition: p.partition_index,
                replicas: broker_ids(&p.replicas),
                adding_replicas: broker_ids(&p.adding_replicas),
                removing_replicas: broker_ids(&p.removing_replicas),
            })
        });
        Ok(each.collect())
    }

    /// The log dirs of the connected broker and its local replicas: of `topics` only, or all.
    pub fn describe_log_dirs(
        &mut self,
        topics: Option<&[(String, Vec<i32>)]>,
    ) -> Result<Vec<LogDir>, ClientError> {
        let wanted = topics.map(|list| {
            let each = list.iter().map(|(topic, partitions)| {
                DescribableLogDirTopic::default()
                    .with_topic(name(topic))
                    .with_partitions(partitions.clone())
            });
            each.collect()
        });
        let response = self.request(&DescribeLogDirsRequest::default().with_topics(wanted))?;
        check_code(ApiKey::DescribeLogDirs, response.error_code, None, String::new)?;
        let dirs = response.results.iter().map(|dir| {
            let replicas = dir.topics.iter().flat_map(|t| {
                t.partitions.iter().map(|p| LogDirReplica {
                    topic: t.name.to_string(),
                    partition: p.partition_index,
                    size_bytes: p.partition_size,
                    offset_lag: p.offset_lag,
                })
            });
            LogDir {
                path: dir.log_dir.to_string(),
                error: KafkaError::from_code(dir.error_code, None),
                total_bytes: dir.total_bytes,
                usable_bytes: dir.usable_bytes,
                replicas: replicas.collect(),
            }
        });
        Ok(dirs.collect())
    }
}
