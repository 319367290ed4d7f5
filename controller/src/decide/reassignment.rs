//! Partition reassignment, as KRaft does it (`ReplicationControlManager.
//! alterPartitionReassignments`, `PartitionReassignmentReplicas`, `PartitionChangeBuilder`).
//!
//! A reassignment to `target` sets the partition's replicas to the union: `target` first, then
//! the current replicas not in it (`removing_replicas`); `adding_replicas` are the target's
//! replicas that were not replicas. The new replicas catch up from the leader, which adds each
//! to the ISR with AlterPartition; once every adding replica is in the ISR the reassignment
//! completes: replicas = target, ISR = ISR ∩ target, a new leader (the first target replica in
//! the ISR, unfenced) if the leader is being removed. Completion is checked where the ISR may
//! have grown (an AlterPartition) and when the reassignment is requested. A cancel reverts to
//! the original replicas (the union without the adding ones). Pure functions run by the active
//! controller's task, like the rest of `decide`.

use super::Decision;
use crate::api::*;
use crate::metadata::{ClusterMetadata, PartitionState, TopicState};
use crate::records::*;
use crate::refusal::Refusal;
use laminar_model::{LeaderEpoch, NodeId, PartitionEpoch};

/// A partition's next state as a record, from its current one (`p`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextState {
    pub replicas: Vec<NodeId>,
    pub isr: Vec<NodeId>,
    pub leader: NodeId,
    pub adding: Vec<NodeId>,
    pub removing: Vec<NodeId>,
}

impl NextState {
    pub fn of(p: &PartitionState) -> Self {
        NextState {
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            leader: p.leader,
            adding: p.adding_replicas.clone(),
            removing: p.removing_replicas.clone(),
        }
    }

    /// The record that takes `p` to this state: every field that differs is set.
    pub fn record(&self, topic_id: TopicId, partition_id: i32, p: &PartitionState) -> MetadataRecord {
        let change = PartitionChangeRecord {
            topic_id,
            partition_id,
            replicas: (self.replicas != p.replicas).then(|| self.replicas.clone()),
            isr: (self.isr != p.isr).then(|| self.isr.clone()),
            leader: (self.leader != p.leader).then_some(self.leader),
        };
        if self.adding == p.adding_replicas && self.removing == p.removing_replicas {
            return MetadataRecord::PartitionChange(change);
        }
        MetadataRecord::PartitionReassignmentChange(PartitionReassignmentChangeRecord {
            change,
            adding_replicas: (self.adding != p.adding_replicas).then(|| self.adding.clone()),
            removing_replicas: (self.removing != p.removing_replicas).then(|| self.removing.clone()),
        })
    }

    /// The epochs the state machine gives the partition when it applies [`Self::record`].
    pub fn epochs_after(&self, p: &PartitionState) -> (LeaderEpoch, PartitionEpoch) {
        if *self == NextState::of(p) {
            return (p.leader_epoch, p.partition_epoch);
        }
        let replica_left = p.replicas.iter().any(|b| !self.replicas.contains(b));
        let leader_epoch = if self.leader != p.leader || replica_left {
            p.leader_epoch.next()
        } else {
            p.leader_epoch
        };
        (leader_epoch, p.partition_epoch.next())
    }

    /// Completes the reassignment in progress if every adding replica is in the ISR
    /// (KRaft's `maybeCompleteReassignment`): replicas = target, ISR = ISR ∩ target, and a new
    /// leader when the current one is removed. Stays as it is when no target replica of the
    /// ISR is unfenced to lead (the ISR must not lose its last usable member).
    pub fn complete_if_caught_up(&mut self, md: &ClusterMetadata) {
        if self.adding.is_empty() && self.removing.is_empty() {
            return;
        }
        if !self.adding.iter().all(|b| self.isr.contains(b)) {
            return;
        }
        let target: Vec<NodeId> = self
            .replicas
            .iter()
            .copied()
            .filter(|b| !self.removing.contains(b))
            .collect();
        let isr: Vec<NodeId> = self.isr.iter().copied().filter(|b| target.contains(b)).collect();
        let leader = if isr.contains(&self.leader) {
            self.leader
        } else {
            match target
                .iter()
                .copied()
                .find(|b| isr.contains(b) && md.is_unfenced(*b))
            {
                Some(b) => b,
                None => return,
            }
        };
        *self = NextState {
            replicas: target,
            isr,
            leader,
            adding: Vec::new(),
            removing: Vec::new(),
        };
    }
}

pub fn alter_partition_reassignments(
    md: &ClusterMetadata,
    partitions: &[PartitionReassignment],
    rf_change: ReplicationFactorChange,
) -> Decision {
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(partitions.len());
    let mut seen = std::collections::BTreeSet::new();
    for wanted in partitions {
        let outcome = if seen.insert((wanted.topic.as_str(), wanted.partition)) {
            reassign(md, wanted, rf_change)
        } else {
            Err(Refusal::PartitionNamedTwice)
        };
        let result = outcome.map(|record| records.extend(record));
        results.push(ReassignmentResult {
            topic: wanted.topic.clone(),
            partition: wanted.partition,
            result,
        });
    }
    Decision {
        records,
        response: ControllerResponse::Reassignments(results),
    }
}

/// The record one partition's reassignment (or cancel) writes, `None` when nothing changes.
fn reassign(
    md: &ClusterMetadata,
    wanted: &PartitionReassignment,
    rf_change: ReplicationFactorChange,
) -> Result<Option<MetadataRecord>, Refusal> {
    let topic: &TopicState = md
        .topic_by_name(&wanted.topic)
        .ok_or(Refusal::UnknownTopicOrPartition)?;
    let p = topic
        .partitions
        .get(&wanted.partition)
        .ok_or(Refusal::UnknownTopicOrPartition)?;
    let next = match &wanted.replicas {
        None => cancelled(md, p)?,
        Some(target) => {
            check_target(md, target)?;
            let from = p.original_replicas().len();
            if rf_change == ReplicationFactorChange::Refused && target.len() != from {
                return Err(Refusal::ReplicationFactorWouldChange {
                    from,
                    to: target.len(),
                });
            }
            reassigned(md, p, target)
        }
    };
    if next == NextState::of(p) {
        return Ok(None);
    }
    Ok(Some(next.record(topic.topic_id, wanted.partition, p)))
}

/// KRaft's `validateManualPartitionAssignment`: not empty, no broker twice, all registered.
fn check_target(md: &ClusterMetadata, target: &[NodeId]) -> Result<(), Refusal> {
    let refuse = |reason: String| Err(Refusal::InvalidReplicaAssignment { reason });
    if target.is_empty() {
        return refuse("the replica list is empty".into());
    }
    let mut distinct = target.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() != target.len() {
        return refuse("a broker is named twice in the replica list".into());
    }
    if let Some(b) = target.iter().find(|b| !md.brokers.contains_key(b)) {
        return refuse(format!("broker {b} is not registered"));
    }
    Ok(())
}

/// The union state of a reassignment from the current replicas (the union, if one is in
/// progress, as in KRaft) to `target`, completed at once when nothing needs to catch up.
fn reassigned(md: &ClusterMetadata, p: &PartitionState, target: &[NodeId]) -> NextState {
    let removing: Vec<NodeId> = p
        .replicas
        .iter()
        .copied()
        .filter(|b| !target.contains(b))
        .collect();
    let adding: Vec<NodeId> = target
        .iter()
        .copied()
        .filter(|b| !p.replicas.contains(b))
        .collect();
    let mut replicas = target.to_vec();
    replicas.extend(&removing);
    let mut next = NextState {
        replicas,
        isr: p.isr.clone(),
        leader: p.leader,
        adding,
        removing,
    };
    next.complete_if_caught_up(md);
    next
}

/// KRaft's `PartitionReassignmentRevert`: the adding replicas leave the replicas and the ISR.
/// If that would empty the ISR, the first unfenced original replica becomes the ISR and
/// leads (Kafka's unclean revert), else the partition waits leaderless on the first one.
fn cancelled(md: &ClusterMetadata, p: &PartitionState) -> Result<NextState, Refusal> {
    if !p.is_reassigning() {
        return Err(Refusal::NoReassignmentInProgress);
    }
    let replicas = p.original_replicas();
    let mut isr: Vec<NodeId> = p.isr.iter().copied().filter(|b| replicas.contains(b)).collect();
    if isr.is_empty() {
        let first = replicas.iter().copied().find(|b| md.is_unfenced(*b));
        isr = vec![first.unwrap_or(replicas.first().copied().unwrap_or(NO_LEADER))];
    }
    let leader = if isr.contains(&p.leader) {
        p.leader
    } else {
        replicas
            .iter()
            .copied()
            .find(|b| isr.contains(b) && md.is_unfenced(*b))
            .unwrap_or(NO_LEADER)
    };
    Ok(NextState {
        replicas,
        isr,
        leader,
        adding: Vec::new(),
        removing: Vec::new(),
    })
}

/// One ongoing reassignment as ListPartitionReassignments answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OngoingReassignment {
    pub topic: String,
    pub partition: i32,
    pub replicas: Vec<NodeId>,
    pub adding_replicas: Vec<NodeId>,
    pub removing_replicas: Vec<NodeId>,
}

/// The ongoing reassignments: all of them (`None`), or those of the named partitions (a
/// partition without one, or unknown, is left out, as in Kafka), by topic name and index.
pub fn list_reassignments(
    md: &ClusterMetadata,
    wanted: Option<&[TopicPartition]>,
) -> Vec<OngoingReassignment> {
    let wanted: Option<std::collections::BTreeSet<(&str, i32)>> =
        wanted.map(|list| list.iter().map(|w| (&*w.topic, w.partition)).collect());
    let each = md.reassignments().into_iter().filter(|(topic, partition, _)| {
        wanted
            .as_ref()
            .is_none_or(|set| set.contains(&(*topic, *partition)))
    });
    each.map(|(topic, partition, p)| OngoingReassignment {
        topic: topic.to_string(),
        partition,
        replicas: p.replicas.clone(),
        adding_replicas: p.adding_replicas.clone(),
        removing_replicas: p.removing_replicas.clone(),
    })
    .collect()
}
