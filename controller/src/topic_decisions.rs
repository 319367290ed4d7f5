//! Decisions on topics and partitions (CreateTopics, CreatePartitions, DeleteTopics,
//! AlterPartition, ElectLeaders) and the auto leader rebalance helper. Pure functions run by
//! the active controller's task on its runtime; see `decisions.rs`.

use std::collections::BTreeMap;

use crate::api::error_code::*;
use crate::api::*;
use crate::decisions::*;
use crate::metadata::{ClusterMetadata, PartitionState, TopicState};
use crate::placement::assign_replicas;
use crate::records::*;

pub fn create_topics(md: &ClusterMetadata, topics: &[CreatableTopic], seed: u64) -> Decision {
    let duplicates = distinct_names(topics.iter().map(|t| &t.name));
    let unfenced = unfenced_brokers(md);
    let mut partitions_total: i64 = 0;
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(topics.len());
    for topic in topics {
        partitions_total += i64::from(topic.num_partitions.max(0));
        let result = if duplicates.contains(&topic.name) {
            topic_error(&topic.name, INVALID_REQUEST, "named twice in the request")
        } else if partitions_total > PARTITIONS_PER_REQUEST_MAX {
            topic_error(
                &topic.name,
                INVALID_PARTITIONS,
                "too many partitions in one request",
            )
        } else {
            create_topic(md, topic, &unfenced, seed, &mut records)
        };
        results.push(result);
    }
    Decision {
        records,
        response: ControllerResponse::Topics(results),
    }
}

fn create_topic(
    md: &ClusterMetadata,
    topic: &CreatableTopic,
    unfenced: &[crate::placement::PlacementBroker],
    seed: u64,
    records: &mut Vec<MetadataRecord>,
) -> TopicResult {
    if let Some(reason) = topic_name_error(&topic.name) {
        return topic_error(&topic.name, INVALID_TOPIC_EXCEPTION, reason);
    }
    if md.topic_ids_by_name.contains_key(&topic.name) {
        return topic_error(&topic.name, TOPIC_ALREADY_EXISTS, "topic already exists");
    }
    if topic.num_partitions <= 0 {
        return topic_error(
            &topic.name,
            INVALID_PARTITIONS,
            "partition count must be positive",
        );
    }
    let factor = usize::try_from(topic.replication_factor).unwrap_or(0);
    if factor == 0 || factor > unfenced.len() {
        let message = format!(
            "replication factor {} with {} unfenced brokers",
            topic.replication_factor,
            unfenced.len()
        );
        return topic_error(&topic.name, INVALID_REPLICATION_FACTOR, message);
    }
    let topic_seed = seed_for(&topic.name, seed);
    let count = usize::try_from(topic.num_partitions).unwrap_or(0);
    let assignment = match assign_replicas(unfenced, 0, count, factor, topic_seed) {
        Ok(assignment) => assignment,
        Err(e) => return topic_error(&topic.name, INVALID_REPLICATION_FACTOR, e.to_string()),
    };
    let topic_id = new_topic_id(md, topic_seed);
    records.push(MetadataRecord::Topic(TopicRecord {
        name: topic.name.clone(),
        topic_id,
    }));
    for (name, value) in &topic.configs {
        records.push(MetadataRecord::Config(ConfigRecord {
            resource_type: ConfigResourceType::Topic,
            resource_name: topic.name.clone(),
            name: name.clone(),
            value: Some(value.clone()),
        }));
    }
    for (partition_id, replicas) in (0i32..).zip(assignment) {
        records.push(new_partition(topic_id, partition_id, replicas));
    }
    TopicResult {
        name: topic.name.clone(),
        error_code: NONE,
        error_message: None,
        topic_id,
    }
}

/// A random id that no topic has (and is not all zeros, Kafka's "no id").
fn new_topic_id(md: &ClusterMetadata, seed: u64) -> TopicId {
    loop {
        let mut id: TopicId = rand::random();
        // Mixing in the seed keeps ids distinct even if two controllers' RNGs agreed.
        for (byte, seed_byte) in id.iter_mut().zip(seed.to_le_bytes()) {
            *byte ^= seed_byte;
        }
        if id != [0; 16] && !md.topics.contains_key(&id) {
            return id;
        }
    }
}

pub fn create_partitions(md: &ClusterMetadata, topics: &[(String, i32)], seed: u64) -> Decision {
    let unfenced = unfenced_brokers(md);
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(topics.len());
    for (name, count) in topics {
        let result = match md.topic_by_name(name) {
            None => topic_error(name, UNKNOWN_TOPIC_OR_PARTITION, "unknown topic"),
            Some(topic) => add_partitions(topic, *count, &unfenced, seed, &mut records),
        };
        results.push(result);
    }
    Decision {
        records,
        response: ControllerResponse::Topics(results),
    }
}

fn add_partitions(
    topic: &TopicState,
    count: i32,
    unfenced: &[crate::placement::PlacementBroker],
    seed: u64,
    records: &mut Vec<MetadataRecord>,
) -> TopicResult {
    let current = topic.partitions.len();
    let wanted = usize::try_from(count).unwrap_or(0);
    if wanted <= current || (wanted - current) as i64 > PARTITIONS_PER_REQUEST_MAX {
        return topic_error(
            &topic.name,
            INVALID_PARTITIONS,
            format!("topic has {current} partitions"),
        );
    }
    let factor = topic.partitions.values().next().map_or(1, |p| p.replicas.len());
    let assignment = match assign_replicas(
        unfenced,
        current,
        wanted - current,
        factor,
        seed_for(&topic.name, seed),
    ) {
        Ok(assignment) => assignment,
        Err(e) => return topic_error(&topic.name, INVALID_REPLICATION_FACTOR, e.to_string()),
    };
    for (partition_id, replicas) in (i32::try_from(current).unwrap_or(i32::MAX)..).zip(assignment) {
        records.push(new_partition(topic.topic_id, partition_id, replicas));
    }
    TopicResult {
        name: topic.name.clone(),
        error_code: NONE,
        error_message: None,
        topic_id: topic.topic_id,
    }
}

pub fn delete_topics(md: &ClusterMetadata, names: &[String]) -> Decision {
    let duplicates = distinct_names(names.iter());
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(names.len());
    for name in names {
        let result = match md.topic_by_name(name) {
            _ if duplicates.contains(name) => {
                topic_error(name, INVALID_REQUEST, "named twice in the request")
            }
            None => topic_error(name, UNKNOWN_TOPIC_OR_PARTITION, "unknown topic"),
            Some(topic) => {
                records.push(MetadataRecord::RemoveTopic(RemoveTopicRecord {
                    topic_id: topic.topic_id,
                }));
                TopicResult {
                    name: name.clone(),
                    error_code: NONE,
                    error_message: None,
                    topic_id: topic.topic_id,
                }
            }
        };
        results.push(result);
    }
    Decision {
        records,
        response: ControllerResponse::Topics(results),
    }
}

fn alter_error(error_code: i16) -> Decision {
    let result = AlterPartitionResult {
        error_code,
        leader: NO_LEADER,
        leader_epoch: -1,
        partition_epoch: -1,
        isr: Vec::new(),
    };
    Decision {
        records: Vec::new(),
        response: ControllerResponse::AlterPartition(result),
    }
}

/// Kafka's AlterPartition rules: the sender must be the registered leader at the current
/// leader epoch (else FENCED_LEADER_EPOCH) and know the current partition epoch (else
/// INVALID_UPDATE_VERSION); the new ISR holds the leader, only replicas, only unfenced brokers.
pub fn alter_partition(md: &ClusterMetadata, request: &ControllerRequest) -> Decision {
    let ControllerRequest::AlterPartition {
        broker_id,
        broker_epoch,
        topic_id,
        partition,
        leader_epoch,
        partition_epoch,
        new_isr,
    } = request
    else {
        return alter_error(INVALID_REQUEST);
    };
    let error_code = match md.brokers.get(broker_id) {
        None => BROKER_ID_NOT_REGISTERED,
        Some(b) if b.broker_epoch != *broker_epoch => STALE_BROKER_EPOCH,
        Some(_) => NONE,
    };
    if error_code != NONE {
        return alter_error(error_code);
    }
    let Some(topic) = md.topics.get(topic_id) else {
        return alter_error(UNKNOWN_TOPIC_ID);
    };
    let Some(p) = topic.partitions.get(partition) else {
        return alter_error(UNKNOWN_TOPIC_OR_PARTITION);
    };
    let error_code = if p.leader != *broker_id || *leader_epoch != p.leader_epoch {
        FENCED_LEADER_EPOCH
    } else if *partition_epoch != p.partition_epoch {
        INVALID_UPDATE_VERSION
    } else if !new_isr.contains(broker_id) || new_isr.iter().any(|b| !p.replicas.contains(b)) {
        INVALID_REQUEST
    } else if new_isr.iter().any(|b| !md.is_unfenced(*b)) {
        INELIGIBLE_REPLICA
    } else {
        NONE
    };
    if error_code != NONE {
        return alter_error(error_code);
    }
    let mut isr = new_isr.clone();
    isr.dedup();
    let changed = isr != p.isr;
    let result = AlterPartitionResult {
        error_code: NONE,
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: if changed {
            p.partition_epoch + 1
        } else {
            p.partition_epoch
        },
        isr: isr.clone(),
    };
    let record = PartitionChangeRecord {
        topic_id: *topic_id,
        partition_id: *partition,
        replicas: None,
        isr: Some(isr),
        leader: None,
    };
    let records = if changed {
        vec![MetadataRecord::PartitionChange(record)]
    } else {
        Vec::new()
    };
    Decision {
        records,
        response: ControllerResponse::AlterPartition(result),
    }
}

/// The leader (and ISR) an election would give `p`, or the error code why none.
fn elect(
    md: &ClusterMetadata,
    p: &PartitionState,
    election_type: ElectionType,
) -> Result<(i32, Vec<i32>), i16> {
    match election_type {
        ElectionType::Preferred => {
            let preferred = p.replicas.first().copied().unwrap_or(NO_LEADER);
            if p.leader == preferred {
                Err(ELECTION_NOT_NEEDED)
            } else if p.isr.contains(&preferred) && md.is_unfenced(preferred) {
                Ok((preferred, p.isr.clone()))
            } else {
                Err(PREFERRED_LEADER_NOT_AVAILABLE)
            }
        }
        ElectionType::Unclean => {
            if p.leader != NO_LEADER {
                return Err(ELECTION_NOT_NEEDED);
            }
            if let Some(b) = p.isr.iter().copied().find(|b| md.is_unfenced(*b)) {
                return Ok((b, p.isr.clone()));
            }
            let b = p
                .replicas
                .iter()
                .copied()
                .find(|b| md.is_unfenced(*b))
                .ok_or(ELIGIBLE_LEADERS_NOT_AVAILABLE)?;
            Ok((b, vec![b]))
        }
    }
}

pub fn elect_leaders(
    md: &ClusterMetadata,
    election_type: ElectionType,
    partitions: Option<&[TopicPartition]>,
) -> Decision {
    let wanted: Vec<TopicPartition> = match partitions {
        Some(list) => list.to_vec(),
        None => all_partitions(md),
    };
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(wanted.len());
    for tp in wanted {
        let found = md
            .topic_by_name(&tp.topic)
            .and_then(|t| t.partitions.get(&tp.partition).map(|p| (t, p)));
        let error_code = match found {
            None => UNKNOWN_TOPIC_OR_PARTITION,
            Some((topic, p)) => match elect(md, p, election_type) {
                Ok((leader, isr)) => {
                    let isr = (isr != p.isr).then_some(isr);
                    records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                        topic_id: topic.topic_id,
                        partition_id: tp.partition,
                        replicas: None,
                        isr,
                        leader: Some(leader),
                    }));
                    NONE
                }
                Err(code) => code,
            },
        };
        results.push(PartitionResult {
            topic: tp.topic,
            partition: tp.partition,
            error_code,
        });
    }
    Decision {
        records,
        response: ControllerResponse::Partitions(results),
    }
}

fn all_partitions(md: &ClusterMetadata) -> Vec<TopicPartition> {
    let each = md.topics.values().flat_map(|t| {
        t.partitions.keys().map(|p| TopicPartition {
            topic: t.name.clone(),
            partition: *p,
        })
    });
    each.collect()
}

/// The partitions whose leader is not their preferred replica while the preferred one is in
/// the ISR and unfenced: what an auto leader rebalance (`auto.leader.rebalance.enable`) would
/// hand to `elect_leaders` with [`ElectionType::Preferred`].
pub fn preferred_leader_imbalance(md: &ClusterMetadata) -> Vec<TopicPartition> {
    let mut out = Vec::new();
    let topics: BTreeMap<&String, &TopicState> = md.topics.values().map(|t| (&t.name, t.as_ref())).collect();
    for (name, topic) in topics {
        for (partition, p) in &topic.partitions {
            if elect(md, p, ElectionType::Preferred).is_ok() {
                out.push(TopicPartition {
                    topic: name.clone(),
                    partition: *partition,
                });
            }
        }
    }
    out
}
