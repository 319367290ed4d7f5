//! `ClusterMetadata`: the state the metadata records build, and how each record applies.
//!
//! Every controller node holds one, owned by its state machine on the node's controller
//! runtime (tokio thread); readers get immutable copies ([`MetadataImage`]) through a watch
//! channel. Topics are behind `Arc` so that publishing a copy after each applied batch clones
//! pointers, not partitions.
//!
//! Applying a record that does not fit the state (an unknown topic, a leader outside the ISR,
//! a fenced leader, ...) returns [`ApplyError`] and changes nothing. The active controller
//! checks every record it decides against the state it will apply to, so on a committed
//! record an error is a bug, and the state machine treats it as one (`state_machine.rs`: the
//! node stops, saying which record). The invariants kept, for every partition:
//! `leader ∈ isr ⊆ replicas` (or no leader), replicas distinct and registered, epochs only
//! grow, and a fenced broker leads nothing; [`ClusterMetadata::check_invariants`] checks them
//! all at once (the model test runs it after every step).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use laminar_model::{BrokerEpoch, LeaderEpoch, NodeId, PartitionEpoch, ProducerId};
use serde::{Deserialize, Serialize};

use crate::records::*;

/// Ids handed out per ProducerIdsRecord: blocks keep idempotent producer ids unique across
/// brokers while each broker writes to the quorum once per thousand producers.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
    pub incarnation_id: [u8; 16],
    pub endpoints: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    pub fenced: bool,
}

/// One partition as KRaft's PartitionRegistration holds it. During a reassignment `replicas`
/// is the union, target replicas first, then those being removed (`removing_replicas`);
/// `adding_replicas` are the target's replicas that were not replicas before. Both empty when
/// no reassignment is in progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    pub replicas: Vec<NodeId>,
    pub isr: Vec<NodeId>,
    pub leader: NodeId,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
    // The defaults serve self-describing encodings; bincode snapshots written before these
    // fields are read through `snapshot_format::decode_metadata` instead.
    #[serde(default)]
    pub adding_replicas: Vec<NodeId>,
    #[serde(default)]
    pub removing_replicas: Vec<NodeId>,
}

impl PartitionState {
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// The replicas the partition will have: all of them unless a reassignment removes some.
    pub fn target_replicas(&self) -> Vec<NodeId> {
        let each = self.replicas.iter().copied();
        each.filter(|b| !self.removing_replicas.contains(b)).collect()
    }

    /// The replicas it had before the reassignment: all of them unless one adds some.
    pub fn original_replicas(&self) -> Vec<NodeId> {
        let each = self.replicas.iter().copied();
        each.filter(|b| !self.adding_replicas.contains(b)).collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicState {
    pub name: String,
    pub topic_id: TopicId,
    /// Topic config overrides in Kafka's names (`retention.ms`, ...).
    pub configs: BTreeMap<String, String>,
    /// Partition index → state; indexes are dense from 0.
    pub partitions: BTreeMap<i32, PartitionState>,
}

/// The cluster's metadata as the applied records left it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMetadata {
    pub brokers: BTreeMap<NodeId, BrokerRegistration>,
    pub topics: BTreeMap<TopicId, Arc<TopicState>>,
    pub topic_ids_by_name: BTreeMap<String, TopicId>,
    /// Broker config overrides; key `""` holds the cluster-wide defaults.
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// No producer id at or above this has been handed out.
    pub next_producer_id: ProducerId,
    /// Set once, by the first entry the first active controller wrote (`ClusterIdRecord`).
    pub cluster_id: Option<String>,
    /// SCRAM users: `(name, mechanism)` → credential. Snapshot format 3 (`snapshot_format.rs`).
    pub scram_credentials: BTreeMap<(String, i8), UserScramCredentialRecord>,
    /// The ACLs. Behind `Arc` so that a broker tells a changed set from the one it built its
    /// authorizer from by pointer. Snapshot format 3.
    pub acls: Arc<BTreeSet<AccessControlEntryRecord>>,
    /// Client quotas (Kafka's AlterClientQuotas): entity → quota name → value; an entity with
    /// no quota left is not held. Behind `Arc` so that a broker tells a changed map by
    /// pointer, as `acls`. Snapshot format 4.
    pub client_quotas: Arc<BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>>,
}

/// A client quota's entity: its parts sorted by type, so that the same entity compares equal
/// whatever order a request named its parts in (Kafka's ClientQuotaEntity is a map).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct QuotaEntity(Vec<QuotaEntityPart>);

impl QuotaEntity {
    pub fn new(mut parts: Vec<QuotaEntityPart>) -> Self {
        parts.sort_unstable();
        QuotaEntity(parts)
    }

    /// The parts, sorted by type.
    pub fn parts(&self) -> &[QuotaEntityPart] {
        &self.0
    }

    /// The name of the entity's part of type `entity_type`: `None` when it has no such part,
    /// `Some(None)` when that part is the type's default entity.
    pub fn name_of(&self, entity_type: &str) -> Option<Option<&str>> {
        let part = self.0.iter().find(|p| p.entity_type == entity_type)?;
        Some(part.entity_name.as_deref())
    }
}

impl std::fmt::Display for QuotaEntity {
    /// Kafka's form: `user=alice, client-id=<default>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (at, part) in self.0.iter().enumerate() {
            let separator = if at == 0 { "" } else { ", " };
            let name = part.entity_name.as_deref().unwrap_or("<default>");
            write!(f, "{separator}{}={name}", part.entity_type)?;
        }
        Ok(())
    }
}

/// A client quota's value: Kafka's double, compared by its bits so that the metadata is `Eq`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for QuotaValue {}

/// Adding and removing replicas are distinct replicas, never both, and the target (the
/// replicas not being removed) is not empty.
fn check_reassignment_fields(p: &PartitionState) -> Result<(), ApplyError> {
    use ApplyError::InvalidPartitionState as Invalid;
    let listed = |list: &[NodeId]| list.iter().all(|b| p.replicas.contains(b));
    if !listed(&p.adding_replicas) || !listed(&p.removing_replicas) {
        return Err(Invalid("adding or removing replicas outside the replicas"));
    }
    if p.adding_replicas.iter().any(|b| p.removing_replicas.contains(b)) {
        return Err(Invalid("a replica both added and removed"));
    }
    let distinct = |list: &[NodeId]| {
        let mut sorted = list.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        sorted.len() == list.len()
    };
    if !distinct(&p.adding_replicas) || !distinct(&p.removing_replicas) {
        return Err(Invalid("duplicate adding or removing replicas"));
    }
    if p.removing_replicas.len() >= p.replicas.len() {
        return Err(Invalid("a reassignment removing every replica"));
    }
    Ok(())
}

/// An immutable copy of the metadata and the log index it reflects (its version).
#[derive(Debug, Clone, Default)]
pub struct MetadataImage {
    pub metadata: ClusterMetadata,
    /// The applied log index: grows with every applied entry.
    pub version: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("broker {0} is not registered")]
    UnknownBroker(NodeId),
    #[error("broker {broker_id}: epoch {record_epoch} is not the registered {registered_epoch}")]
    StaleBrokerEpoch {
        broker_id: NodeId,
        record_epoch: BrokerEpoch,
        registered_epoch: BrokerEpoch,
    },
    #[error("broker {0} still leads partitions")]
    FencedBrokerLeads(NodeId),
    #[error("broker {0} still holds replicas")]
    BrokerHoldsReplicas(NodeId),
    #[error("unknown topic id")]
    UnknownTopic,
    #[error("topic '{0}' (or its id) already exists")]
    TopicExists(String),
    #[error("partition {0} does not fit the topic")]
    BadPartitionIndex(i32),
    #[error("invalid partition state: {0}")]
    InvalidPartitionState(&'static str),
    #[error("producer id block does not advance")]
    ProducerIdsBackwards,
    #[error("the cluster id is set already")]
    ClusterIdSet,
    #[error("no SCRAM credential of user {name} for mechanism {mechanism}")]
    UnknownScramCredential { name: String, mechanism: i8 },
    #[error("the ACL {0:?} is not held")]
    UnknownAcl(Box<AccessControlEntryRecord>),
    #[error("no client quota {key} for {entity}")]
    UnknownClientQuota { entity: QuotaEntity, key: String },
    /// A whole-state check found a topic whose state disagrees with itself.
    #[error("topic {topic}: {reason}")]
    InconsistentTopic { topic: String, reason: &'static str },
    /// A whole-state check found a partition that breaks an invariant.
    #[error("{topic}-{partition}: {error} ({state:?})")]
    InconsistentPartition {
        topic: String,
        partition: i32,
        error: Box<ApplyError>,
        state: Box<PartitionState>,
    },
}

impl ClusterMetadata {
    pub fn topic_by_name(&self, name: &str) -> Option<&Arc<TopicState>> {
        self.topic_ids_by_name
            .get(name)
            .and_then(|id| self.topics.get(id))
    }

    /// Partition `partition` of topic `topic`, if both exist.
    pub fn partition_by_name(&self, topic: &str, partition: i32) -> Option<&PartitionState> {
        self.topic_by_name(topic)
            .and_then(|t| t.partitions.get(&partition))
    }

    pub fn is_unfenced(&self, broker_id: NodeId) -> bool {
        self.brokers.get(&broker_id).is_some_and(|b| !b.fenced)
    }

    /// Applies one record carried by the entry at `log_index`.
    pub fn apply(&mut self, record: &MetadataRecord, log_index: u64) -> Result<(), ApplyError> {
        match record {
            MetadataRecord::RegisterBroker(r) => self.apply_register_broker(r, log_index),
            MetadataRecord::FenceBroker(r) => self.apply_fence(r.broker_id, r.broker_epoch, true),
            MetadataRecord::UnfenceBroker(r) => self.apply_fence(r.broker_id, r.broker_epoch, false),
            MetadataRecord::Topic(r) => self.apply_topic(r),
            MetadataRecord::Partition(r) => self.apply_partition(r),
            MetadataRecord::PartitionChange(r) => self.apply_partition_change(r, None),
            MetadataRecord::PartitionReassignmentChange(r) => self.apply_partition_change(&r.change, Some(r)),
            MetadataRecord::Config(r) => self.apply_config(r),
            MetadataRecord::RemoveTopic(r) => self.apply_remove_topic(r),
            MetadataRecord::ProducerIds(r) => self.apply_producer_ids(r),
            MetadataRecord::UserScramCredential(r) => {
                self.scram_credentials
                    .insert((r.name.clone(), r.mechanism), r.clone());
                Ok(())
            }
            MetadataRecord::AccessControlEntry(r) => {
                Arc::make_mut(&mut self.acls).insert(r.clone());
                Ok(())
            }
            MetadataRecord::RemoveAccessControlEntry(r) => match self.acls.contains(&r.entry) {
                true => {
                    Arc::make_mut(&mut self.acls).remove(&r.entry);
                    Ok(())
                }
                false => Err(ApplyError::UnknownAcl(Box::new(r.entry.clone()))),
            },
            MetadataRecord::ClientQuota(r) => self.apply_client_quota(r),
            MetadataRecord::UnregisterBroker(r) => self.apply_unregister_broker(r),
            MetadataRecord::RemoveUserScramCredential(r) => {
                let key = (r.name.clone(), r.mechanism);
                match self.scram_credentials.remove(&key) {
                    Some(_) => Ok(()),
                    None => Err(ApplyError::UnknownScramCredential {
                        name: r.name.clone(),
                        mechanism: r.mechanism,
                    }),
                }
            }
            MetadataRecord::ClusterId(r) => {
                // Once set it never changes: brokers compare it with their meta.properties.
                if self.cluster_id.is_some() {
                    return Err(ApplyError::ClusterIdSet);
                }
                self.cluster_id = Some(r.cluster_id.clone());
                Ok(())
            }
        }
    }

    /// Sets a client quota, or removes it (and its entity with its last quota).
    fn apply_client_quota(&mut self, r: &ClientQuotaRecord) -> Result<(), ApplyError> {
        let entity = QuotaEntity::new(r.entity.clone());
        if !r.remove {
            let quotas = Arc::make_mut(&mut self.client_quotas);
            let values = quotas.entry(entity).or_default();
            values.insert(r.key.clone(), QuotaValue(r.value));
            return Ok(());
        }
        let held = self.client_quotas.get(&entity);
        if !held.is_some_and(|values| values.contains_key(&r.key)) {
            let key = r.key.clone();
            return Err(ApplyError::UnknownClientQuota { entity, key });
        }
        let quotas = Arc::make_mut(&mut self.client_quotas);
        if let Some(values) = quotas.get_mut(&entity) {
            values.remove(&r.key);
            if values.is_empty() {
                quotas.remove(&entity);
            }
        }
        Ok(())
    }

    fn apply_register_broker(&mut self, r: &RegisterBrokerRecord, log_index: u64) -> Result<(), ApplyError> {
        // A re-registration replaces the old one; the controller moved its leaderships first.
        if self.leads_any(r.broker_id) {
            return Err(ApplyError::FencedBrokerLeads(r.broker_id));
        }
        let broker_epoch = broker_epoch_at(log_index);
        let registration = BrokerRegistration {
            broker_id: r.broker_id,
            broker_epoch,
            incarnation_id: r.incarnation_id,
            endpoints: r.endpoints.clone(),
            rack: r.rack.clone(),
            // As in Kafka: a broker starts fenced and is unfenced by a heartbeat.
            fenced: true,
        };
        self.brokers.insert(r.broker_id, registration);
        Ok(())
    }

    fn apply_fence(
        &mut self,
        broker_id: NodeId,
        broker_epoch: BrokerEpoch,
        fenced: bool,
    ) -> Result<(), ApplyError> {
        if fenced && self.leads_any(broker_id) {
            return Err(ApplyError::FencedBrokerLeads(broker_id));
        }
        self.check_registered(broker_id, broker_epoch)?;
        if let Some(broker) = self.brokers.get_mut(&broker_id) {
            broker.fenced = fenced;
        }
        Ok(())
    }

    /// Whether a record naming broker `broker_id` at `broker_epoch` fits the state: the broker
    /// is registered, with that epoch.
    fn check_registered(&self, broker_id: NodeId, broker_epoch: BrokerEpoch) -> Result<(), ApplyError> {
        let broker = self
            .brokers
            .get(&broker_id)
            .ok_or(ApplyError::UnknownBroker(broker_id))?;
        if broker.broker_epoch != broker_epoch {
            return Err(ApplyError::StaleBrokerEpoch {
                broker_id,
                record_epoch: broker_epoch,
                registered_epoch: broker.broker_epoch,
            });
        }
        Ok(())
    }

    fn apply_unregister_broker(&mut self, r: &UnregisterBrokerRecord) -> Result<(), ApplyError> {
        self.check_registered(r.broker_id, r.broker_epoch)?;
        if self.replica_count(r.broker_id) > 0 {
            return Err(ApplyError::BrokerHoldsReplicas(r.broker_id));
        }
        self.brokers.remove(&r.broker_id);
        Ok(())
    }

    /// How many partitions list `broker_id` among their replicas (a reassignment's added and
    /// removed ones included).
    pub fn replica_count(&self, broker_id: NodeId) -> usize {
        let partitions = self.topics.values().flat_map(|t| t.partitions.values());
        partitions.filter(|p| p.replicas.contains(&broker_id)).count()
    }

    /// Whether `broker_id` leads any partition.
    pub fn leads_any(&self, broker_id: NodeId) -> bool {
        self.topics
            .values()
            .any(|t| t.partitions.values().any(|p| p.leader == broker_id))
    }

    fn apply_topic(&mut self, r: &TopicRecord) -> Result<(), ApplyError> {
        if self.topic_ids_by_name.contains_key(&r.name) || self.topics.contains_key(&r.topic_id) {
            return Err(ApplyError::TopicExists(r.name.clone()));
        }
        let topic = TopicState {
            name: r.name.clone(),
            topic_id: r.topic_id,
            configs: BTreeMap::new(),
            partitions: BTreeMap::new(),
        };
        self.topic_ids_by_name.insert(r.name.clone(), r.topic_id);
        self.topics.insert(r.topic_id, Arc::new(topic));
        Ok(())
    }

    fn apply_partition(&mut self, r: &PartitionRecord) -> Result<(), ApplyError> {
        let state = PartitionState {
            replicas: r.replicas.clone(),
            isr: r.isr.clone(),
            leader: r.leader,
            leader_epoch: r.leader_epoch,
            partition_epoch: r.partition_epoch,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        };
        self.check_partition_state(&state)?;
        let topic = self.topics.get_mut(&r.topic_id).ok_or(ApplyError::UnknownTopic)?;
        // Partitions are dense: the next one is the only one that may be added.
        let next_index = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        if r.partition_id != next_index {
            return Err(ApplyError::BadPartitionIndex(r.partition_id));
        }
        Arc::make_mut(topic).partitions.insert(r.partition_id, state);
        Ok(())
    }

    /// A [`PartitionChangeRecord`], with the reassignment fields of `reassignment` if given.
    fn apply_partition_change(
        &mut self,
        r: &PartitionChangeRecord,
        reassignment: Option<&PartitionReassignmentChangeRecord>,
    ) -> Result<(), ApplyError> {
        let topic = self.topics.get(&r.topic_id).ok_or(ApplyError::UnknownTopic)?;
        let old = topic
            .partitions
            .get(&r.partition_id)
            .ok_or(ApplyError::BadPartitionIndex(r.partition_id))?;
        let mut new = old.clone();
        if let Some(replicas) = &r.replicas {
            new.replicas.clone_from(replicas);
        }
        if let Some(isr) = &r.isr {
            new.isr.clone_from(isr);
        }
        if let Some(leader) = r.leader {
            new.leader = leader;
        }
        if let Some(adding) = reassignment.and_then(|r| r.adding_replicas.as_ref()) {
            new.adding_replicas.clone_from(adding);
        }
        if let Some(removing) = reassignment.and_then(|r| r.removing_replicas.as_ref()) {
            new.removing_replicas.clone_from(removing);
        }
        if new == *old {
            return Ok(());
        }
        self.check_partition_state(&new)?;
        // As KRaft (`triggerLeaderEpochBumpForReplicaReassignmentIfNeeded`): a replica that
        // leaves the replica list must see a new leader epoch, or it could keep fetching.
        let replica_left = old.replicas.iter().any(|b| !new.replicas.contains(b));
        if new.leader != old.leader || replica_left {
            new.leader_epoch = old.leader_epoch.next();
        }
        new.partition_epoch = old.partition_epoch.next();
        assert!(
            new.leader_epoch >= old.leader_epoch && new.partition_epoch > old.partition_epoch,
            "a partition change moves its epochs forward"
        );
        if let Some(topic) = self.topics.get_mut(&r.topic_id) {
            Arc::make_mut(topic).partitions.insert(r.partition_id, new);
        }
        Ok(())
    }

    /// Every invariant of the whole state at once (see the module comment): each partition's
    /// state, dense partition indexes, topic names and ids mapping one to one. For tests and
    /// checks after the fact: applying a record checks the part it changes.
    pub fn check_invariants(&self) -> Result<(), ApplyError> {
        let inconsistent = |topic: &str, reason| ApplyError::InconsistentTopic {
            topic: topic.to_string(),
            reason,
        };
        if self.topic_ids_by_name.len() != self.topics.len() {
            return Err(inconsistent("*", "topic names and ids differ in number"));
        }
        for (name, id) in &self.topic_ids_by_name {
            let topic = self
                .topics
                .get(id)
                .ok_or(inconsistent(name, "no state for its id"))?;
            if &topic.name != name || topic.topic_id != *id {
                return Err(inconsistent(name, "its state names another"));
            }
            for (at, (index, partition)) in topic.partitions.iter().enumerate() {
                if usize::try_from(*index).ok() != Some(at) {
                    return Err(inconsistent(name, "partition indexes are not dense"));
                }
                self.check_partition_state(partition)
                    .map_err(|error| ApplyError::InconsistentPartition {
                        topic: name.clone(),
                        partition: *index,
                        error: Box::new(error),
                        state: Box::new(partition.clone()),
                    })?;
            }
        }
        Ok(())
    }

    /// `leader ∈ isr ⊆ replicas`, replicas distinct registered brokers, the leader unfenced.
    fn check_partition_state(&self, p: &PartitionState) -> Result<(), ApplyError> {
        use ApplyError::InvalidPartitionState as Invalid;
        if p.replicas.is_empty() {
            return Err(Invalid("no replicas"));
        }
        let mut sorted = p.replicas.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != p.replicas.len() {
            return Err(Invalid("duplicate replicas"));
        }
        if p.replicas.iter().any(|b| !self.brokers.contains_key(b)) {
            return Err(Invalid("replica on an unregistered broker"));
        }
        if p.isr.is_empty() || p.isr.iter().any(|b| !p.replicas.contains(b)) {
            return Err(Invalid("isr empty or not a subset of the replicas"));
        }
        let mut isr_sorted = p.isr.clone();
        isr_sorted.sort_unstable();
        isr_sorted.dedup();
        if isr_sorted.len() != p.isr.len() {
            return Err(Invalid("duplicate isr members"));
        }
        if p.leader != NO_LEADER && (!p.isr.contains(&p.leader) || !self.is_unfenced(p.leader)) {
            return Err(Invalid("leader outside the isr or fenced"));
        }
        if p.leader_epoch.get() < 0 || p.partition_epoch.get() < 0 {
            return Err(Invalid("negative epoch"));
        }
        check_reassignment_fields(p)
    }

    /// The partitions of every topic with a reassignment in progress, by topic name.
    pub fn reassignments(&self) -> Vec<(&str, i32, &PartitionState)> {
        let mut out: Vec<(&str, i32, &PartitionState)> = Vec::new();
        for topic in self.topics.values() {
            let ongoing = topic.partitions.iter().filter(|(_, p)| p.is_reassigning());
            out.extend(ongoing.map(|(index, p)| (topic.name.as_str(), *index, p)));
        }
        out.sort_unstable_by_key(|(name, index, _)| (*name, *index));
        out
    }

    fn apply_config(&mut self, r: &ConfigRecord) -> Result<(), ApplyError> {
        let configs = match r.resource_type {
            ConfigResourceType::Topic => {
                let id = self
                    .topic_ids_by_name
                    .get(&r.resource_name)
                    .ok_or(ApplyError::UnknownTopic)?;
                let topic = self.topics.get_mut(id).ok_or(ApplyError::UnknownTopic)?;
                &mut Arc::make_mut(topic).configs
            }
            ConfigResourceType::Broker => self.broker_configs.entry(r.resource_name.clone()).or_default(),
        };
        match &r.value {
            Some(value) => configs.insert(r.name.clone(), value.clone()),
            None => configs.remove(&r.name),
        };
        Ok(())
    }

    fn apply_remove_topic(&mut self, r: &RemoveTopicRecord) -> Result<(), ApplyError> {
        let topic = self.topics.remove(&r.topic_id).ok_or(ApplyError::UnknownTopic)?;
        self.topic_ids_by_name.remove(&topic.name);
        Ok(())
    }

    fn apply_producer_ids(&mut self, r: &ProducerIdsRecord) -> Result<(), ApplyError> {
        self.check_registered(r.broker_id, r.broker_epoch)?;
        if r.next_producer_id <= self.next_producer_id {
            return Err(ApplyError::ProducerIdsBackwards);
        }
        self.next_producer_id = r.next_producer_id;
        Ok(())
    }

    /// The value of a config key for a topic: the topic's override, else the cluster default.
    pub fn topic_config(&self, topic: &TopicState, name: &str) -> Option<String> {
        topic
            .configs
            .get(name)
            .or_else(|| self.broker_configs.get("").and_then(|c| c.get(name)))
            .cloned()
    }
}
