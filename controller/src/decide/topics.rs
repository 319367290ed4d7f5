//! Decisions on topics and partitions (CreateTopics, CreatePartitions, DeleteTopics,
//! AlterPartition, ElectLeaders) and the auto leader rebalance helper. Pure functions run by
//! the active controller's task on its runtime; see `decide`.

use laminar_model::NodeId;
use std::collections::BTreeMap;

use super::brokers::check_broker_epoch;
use super::reassignment::NextState;
use super::*;
use crate::metadata::{ClusterMetadata, PartitionState, TopicState};
use crate::placement::assign_replicas;

pub fn create_topics(md: &ClusterMetadata, topics: &[CreatableTopic], seed: u64) -> Decision {
    let duplicates = distinct_names(topics.iter().map(|t| &t.name));
    let unfenced = unfenced_brokers(md);
    let mut partitions_total: i64 = 0;
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(topics.len());
    for topic in topics {
        partitions_total += if topic.assignments.is_empty() {
            i64::from(topic.num_partitions.max(0))
        } else {
            i64::try_from(topic.assignments.len()).unwrap_or(i64::MAX)
        };
        let result = if duplicates.contains(&topic.name) {
            topic_refused(&topic.name, Refusal::TopicNamedTwice)
        } else if partitions_total > PARTITIONS_PER_REQUEST_MAX {
            topic_refused(&topic.name, Refusal::TooManyPartitions)
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
        let reason = reason.to_string();
        return topic_refused(&topic.name, Refusal::InvalidTopicName { reason });
    }
    if md.topic_ids_by_name.contains_key(&topic.name) {
        return topic_refused(&topic.name, Refusal::TopicAlreadyExists);
    }
    if let Err(reason) = super::configs::configs_error(&topic.configs) {
        return topic_refused(&topic.name, Refusal::InvalidConfig { reason });
    }
    let topic_seed = seed_for(&topic.name, seed);
    let assignment = if topic.assignments.is_empty() {
        placed(topic, unfenced, topic_seed)
    } else {
        manual(md, topic)
    };
    let assignment = match assignment {
        Ok(assignment) => assignment,
        Err(refusal) => return topic_refused(&topic.name, refusal),
    };
    let topic_id = match topic.topic_id {
        None => new_topic_id(md, topic_seed),
        Some(id) if id != [0; 16] && !md.topics.contains_key(&id) => id,
        Some(_) => return topic_refused(&topic.name, Refusal::TopicIdUnusable),
    };
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
        records.push(new_partition(md, topic_id, partition_id, replicas));
    }
    TopicResult {
        name: topic.name.clone(),
        result: Ok(topic_id),
    }
}

/// The replicas of each partition as the controller places them over the unfenced brokers.
fn placed(
    topic: &CreatableTopic,
    unfenced: &[crate::placement::PlacementBroker],
    topic_seed: u64,
) -> Result<Vec<Vec<NodeId>>, Refusal> {
    if topic.num_partitions <= 0 {
        return Err(Refusal::PartitionCountNotPositive);
    }
    // A negative factor is no factor: placement refuses zero.
    let factor = usize::try_from(topic.replication_factor).unwrap_or(0);
    let count = usize::try_from(topic.num_partitions).unwrap_or(0);
    Ok(assign_replicas(unfenced, 0, count, factor, topic_seed)?)
}

/// Kafka's checks of a manual assignment (KRaft's `validateManualPartitionAssignment`):
/// counts left at -1, every partition with the same number of distinct registered brokers,
/// and at least one of them unfenced (it leads).
fn manual(md: &ClusterMetadata, topic: &CreatableTopic) -> Result<Vec<Vec<NodeId>>, Refusal> {
    if topic.num_partitions != -1 || topic.replication_factor != -1 {
        return Err(Refusal::CountsWithManualAssignment);
    }
    let factor = topic.assignments.first().map_or(0, Vec::len);
    for (partition, replicas) in topic.assignments.iter().enumerate() {
        let mut distinct = replicas.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let reason = if replicas.is_empty() || distinct.len() != replicas.len() {
            format!("partition {partition}: an empty replica list or a broker named twice")
        } else if replicas.len() != factor {
            format!(
                "partition {partition} has {} replicas, not {factor}",
                replicas.len()
            )
        } else if let Some(b) = replicas.iter().find(|b| !md.brokers.contains_key(b)) {
            format!("partition {partition}: broker {b} is not registered")
        } else if !replicas.iter().any(|b| md.is_unfenced(*b)) {
            format!("partition {partition}: every broker of its assignment is fenced")
        } else {
            continue;
        };
        return Err(Refusal::InvalidReplicaAssignment { reason });
    }
    Ok(topic.assignments.clone())
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
            None => Err(Refusal::UnknownTopic),
            Some(topic) => {
                add_partitions(md, topic, *count, &unfenced, seed, &mut records).map(|()| topic.topic_id)
            }
        };
        results.push(TopicResult {
            name: name.clone(),
            result,
        });
    }
    Decision {
        records,
        response: ControllerResponse::Topics(results),
    }
}

fn add_partitions(
    md: &ClusterMetadata,
    topic: &TopicState,
    count: i32,
    unfenced: &[crate::placement::PlacementBroker],
    seed: u64,
    records: &mut Vec<MetadataRecord>,
) -> Result<(), Refusal> {
    let current = topic.partitions.len();
    let wanted = usize::try_from(count).unwrap_or(0);
    if wanted <= current {
        return Err(Refusal::PartitionCountNotIncreased { current });
    }
    if (wanted - current) as i64 > PARTITIONS_PER_REQUEST_MAX {
        return Err(Refusal::TooManyPartitions);
    }
    // The target's size: a reassignment in progress lists the replicas it removes too.
    let factor = topic
        .partitions
        .values()
        .next()
        .map_or(1, |p| p.target_replicas().len());
    let assignment = assign_replicas(
        unfenced,
        current,
        wanted - current,
        factor,
        seed_for(&topic.name, seed),
    )?;
    for (partition_id, replicas) in (i32::try_from(current).unwrap_or(i32::MAX)..).zip(assignment) {
        records.push(new_partition(md, topic.topic_id, partition_id, replicas));
    }
    Ok(())
}

pub fn delete_topics(md: &ClusterMetadata, names: &[String]) -> Decision {
    let duplicates = distinct_names(names.iter());
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(names.len());
    for name in names {
        let result = match md.topic_by_name(name) {
            _ if duplicates.contains(name) => Err(Refusal::TopicNamedTwice),
            None => Err(Refusal::UnknownTopic),
            Some(topic) => {
                records.push(MetadataRecord::RemoveTopic(RemoveTopicRecord {
                    topic_id: topic.topic_id,
                }));
                Ok(topic.topic_id)
            }
        };
        results.push(TopicResult {
            name: name.clone(),
            result,
        });
    }
    Decision {
        records,
        response: ControllerResponse::Topics(results),
    }
}

/// Kafka's AlterPartition rules: the sender must be the registered leader at the current
/// leader epoch (else FENCED_LEADER_EPOCH) and know the current partition epoch (else
/// INVALID_UPDATE_VERSION); the new ISR holds the leader, only replicas, only unfenced brokers.
pub fn alter_partition(md: &ClusterMetadata, change: &AlterPartitionRequest) -> Decision {
    match changed_isr(md, change) {
        Ok((records, result)) => Decision {
            records,
            response: ControllerResponse::AlterPartition(Ok(result)),
        },
        Err(refusal) => Decision::answer(ControllerResponse::AlterPartition(Err(refusal))),
    }
}

/// The record (none when nothing changes) and the answer of an ISR change Kafka's rules allow.
fn changed_isr(
    md: &ClusterMetadata,
    change: &AlterPartitionRequest,
) -> Result<(Vec<MetadataRecord>, AlterPartitionResult), Refusal> {
    check_broker_epoch(md, change.broker_id, change.broker_epoch)?;
    let topic = md.topics.get(&change.topic_id).ok_or(Refusal::UnknownTopicId)?;
    let p = topic
        .partitions
        .get(&change.partition)
        .ok_or(Refusal::UnknownTopicOrPartition)?;
    let new_isr = &change.new_isr;
    if p.leader != change.broker_id || change.leader_epoch != p.leader_epoch {
        return Err(Refusal::FencedLeaderEpoch);
    }
    if change.partition_epoch != p.partition_epoch {
        return Err(Refusal::InvalidUpdateVersion);
    }
    if !new_isr.contains(&change.broker_id) || new_isr.iter().any(|b| !p.replicas.contains(b)) {
        return Err(Refusal::IsrNotOfReplicas);
    }
    if new_isr.iter().any(|b| !md.is_unfenced(*b)) {
        return Err(Refusal::IneligibleReplica);
    }
    // Each member once, in the sender's order (a duplicate later in the list would otherwise
    // reach the state machine, which refuses the record after this answered success).
    let mut seen = std::collections::BTreeSet::new();
    let mut isr = new_isr.clone();
    isr.retain(|b| seen.insert(*b));
    // A grown ISR may complete a reassignment in progress (KRaft checks it on every
    // AlterPartition): then the record also sets the target replicas, and maybe a new leader.
    let mut next = NextState::of(p);
    next.isr = isr;
    next.complete_if_caught_up(md);
    let (leader_epoch, partition_epoch) = next.epochs_after(p);
    let result = AlterPartitionResult {
        leader: next.leader,
        leader_epoch,
        partition_epoch,
        isr: next.isr.clone(),
    };
    let records = if next == NextState::of(p) {
        Vec::new()
    } else {
        vec![next.record(change.topic_id, change.partition, p)]
    };
    Ok((records, result))
}

/// The leader (and ISR) an election would give `p`, or why none.
fn elect(
    md: &ClusterMetadata,
    p: &PartitionState,
    election_type: ElectionType,
) -> Result<(NodeId, Vec<NodeId>), Refusal> {
    match election_type {
        ElectionType::Preferred => {
            let preferred = p.replicas.first().copied().unwrap_or(NO_LEADER);
            if p.leader == preferred {
                Err(Refusal::ElectionNotNeeded)
            } else if p.isr.contains(&preferred) && md.is_unfenced(preferred) {
                Ok((preferred, p.isr.clone()))
            } else {
                Err(Refusal::PreferredLeaderNotAvailable)
            }
        }
        ElectionType::Unclean => {
            if p.leader != NO_LEADER {
                return Err(Refusal::ElectionNotNeeded);
            }
            if let Some(b) = p.isr.iter().copied().find(|b| md.is_unfenced(*b)) {
                return Ok((b, p.isr.clone()));
            }
            let b = p
                .replicas
                .iter()
                .copied()
                .find(|b| md.is_unfenced(*b))
                .ok_or(Refusal::EligibleLeadersNotAvailable)?;
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
        let result = match found {
            None => Err(Refusal::UnknownTopicOrPartition),
            Some((topic, p)) => elect(md, p, election_type).map(|(leader, isr)| {
                let isr = (isr != p.isr).then_some(isr);
                records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                    topic_id: topic.topic_id,
                    partition_id: tp.partition,
                    replicas: None,
                    isr,
                    leader: Some(leader),
                }));
            }),
        };
        results.push(PartitionResult {
            topic: tp.topic.to_string(),
            partition: tp.partition,
            result,
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
            topic: t.name.as_str().into(),
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
                    topic: name.as_str().into(),
                    partition: *partition,
                });
            }
        }
    }
    out
}

/// Kafka's auto leader rebalance (`auto.leader.rebalance.enable`): for each broker, the share
/// of the partitions it is the preferred (first) replica of that another broker leads; where
/// that share passes `percentage` (`leader.imbalance.per.broker.percentage`), those of its
/// partitions whose preferred replica can lead now (in the ISR, unfenced), in name order.
pub fn leaders_to_rebalance(md: &ClusterMetadata, percentage: u32) -> Vec<TopicPartition> {
    // Preferred broker → (partitions it is preferred for, those another leads, electable ones).
    let mut brokers: BTreeMap<NodeId, (u64, u64, Vec<TopicPartition>)> = BTreeMap::new();
    let topics: BTreeMap<&String, &TopicState> = md.topics.values().map(|t| (&t.name, t.as_ref())).collect();
    for (name, topic) in topics {
        for (partition, p) in &topic.partitions {
            let Some(preferred) = p.replicas.first() else {
                continue;
            };
            let entry = brokers.entry(*preferred).or_default();
            entry.0 += 1;
            if p.leader == *preferred {
                continue;
            }
            entry.1 += 1;
            if elect(md, p, ElectionType::Preferred).is_ok() {
                entry.2.push(TopicPartition {
                    topic: name.as_str().into(),
                    partition: *partition,
                });
            }
        }
    }
    brokers
        .into_values()
        .filter(|(total, imbalanced, _)| imbalanced * 100 > total * u64::from(percentage))
        .flat_map(|(_, _, electable)| electable)
        .collect()
}
