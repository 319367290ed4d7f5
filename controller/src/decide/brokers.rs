//! Decisions on brokers: registration, heartbeats (which unfence), fencing when a session
//! expires, controlled shutdown, and producer-id blocks. Pure functions; see the parent module.

use crate::api::*;
use crate::metadata::{ClusterMetadata, PartitionState, TopicState, PRODUCER_ID_BLOCK_SIZE};
use crate::records::*;
use crate::refusal::Refusal;
use laminar_model::{BrokerEpoch, NodeId};

use super::{Decision, DecisionContext, UNCLEAN_LEADER_ELECTION_KEY};

/// Whether `broker_epoch` is the registered broker's.
pub(super) fn check_broker_epoch(
    md: &ClusterMetadata,
    broker_id: NodeId,
    broker_epoch: BrokerEpoch,
) -> Result<(), Refusal> {
    match md.brokers.get(&broker_id) {
        None => Err(Refusal::BrokerIdNotRegistered),
        Some(b) if b.broker_epoch != broker_epoch => Err(Refusal::StaleBrokerEpoch),
        Some(_) => Ok(()),
    }
}

pub(super) fn register_broker(
    md: &ClusterMetadata,
    record: RegisterBrokerRecord,
    ctx: &DecisionContext,
) -> Decision {
    let broker_id = record.broker_id;
    if broker_id.get() < 0 {
        return Decision::answer(ControllerResponse::RegisterBroker {
            broker_epoch: Err(Refusal::NegativeBrokerId),
        });
    }
    let mut records = Vec::new();
    if let Some(existing) = md.brokers.get(&broker_id) {
        // Kafka's rule: another incarnation may take the id only once the old session ended.
        if existing.incarnation_id != record.incarnation_id
            && (ctx.session_alive)(broker_id)
            && !existing.fenced
        {
            let response = ControllerResponse::RegisterBroker {
                broker_epoch: Err(Refusal::DuplicateBrokerRegistration),
            };
            return Decision::answer(response);
        }
        records = leave_partitions(md, broker_id, ctx.unclean_leader_election_default).0;
    }
    records.push(MetadataRecord::RegisterBroker(record));
    // The epoch is the entry's log index, filled in once it is committed.
    Decision {
        records,
        response: ControllerResponse::RegisterBroker {
            broker_epoch: Ok(BrokerEpoch::new(-1)),
        },
    }
}

/// UnregisterBroker: removes a broker that holds no replica (its replicas are moved first, by a
/// reassignment). A broker still running registers again at its next heartbeat, as in Kafka.
pub(super) fn unregister_broker(md: &ClusterMetadata, broker_id: NodeId) -> Decision {
    let Some(broker) = md.brokers.get(&broker_id) else {
        return Decision::answer(ControllerResponse::BrokerUnregistered(Err(
            Refusal::BrokerIdNotRegistered,
        )));
    };
    let count = md.replica_count(broker_id);
    if count > 0 {
        let refusal = Refusal::BrokerHoldsReplicas {
            broker_id: broker_id.get(),
            count,
        };
        return Decision::answer(ControllerResponse::BrokerUnregistered(Err(refusal)));
    }
    let record = UnregisterBrokerRecord {
        broker_id,
        broker_epoch: broker.broker_epoch,
    };
    Decision {
        records: vec![MetadataRecord::UnregisterBroker(record)],
        response: ControllerResponse::BrokerUnregistered(Ok(())),
    }
}

pub(super) fn heartbeat(md: &ClusterMetadata, broker_id: NodeId, broker_epoch: BrokerEpoch) -> Decision {
    if let Err(refusal) = check_broker_epoch(md, broker_id, broker_epoch) {
        return Decision::answer(ControllerResponse::BrokerHeartbeat {
            is_fenced: Err(refusal),
            metadata_version: 0,
        });
    }
    let mut records = Vec::new();
    if !md.is_unfenced(broker_id) {
        records.push(MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
            broker_id,
            broker_epoch,
        }));
        records.extend(rejoin_partitions(md, broker_id));
    }
    Decision {
        records,
        // The version is the written entry's, filled in once it is applied (active.rs).
        response: ControllerResponse::BrokerHeartbeat {
            is_fenced: Ok(false),
            metadata_version: 0,
        },
    }
}

/// What an unfenced broker gets back: the leadership of partitions left leaderless with it as
/// their last ISR member. Its place in other ISRs is its leaders' to give back (AlterPartition),
/// once it has caught up with them: a replica back from the dead is behind until it fetched.
fn rejoin_partitions(md: &ClusterMetadata, broker_id: NodeId) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in md.topics.values() {
        for (partition_id, p) in &topic.partitions {
            if p.leader == NO_LEADER && p.isr.contains(&broker_id) {
                records.push(change(topic, *partition_id, None, Some(broker_id)));
            }
        }
    }
    records
}

fn change(
    topic: &TopicState,
    partition_id: i32,
    isr: Option<Vec<NodeId>>,
    leader: Option<NodeId>,
) -> MetadataRecord {
    MetadataRecord::PartitionChange(PartitionChangeRecord {
        topic_id: topic.topic_id,
        partition_id,
        replicas: None,
        isr,
        leader,
    })
}

fn unclean_allowed(md: &ClusterMetadata, topic: &TopicState, default: bool) -> bool {
    md.topic_config(topic, UNCLEAN_LEADER_ELECTION_KEY)
        .map_or(default, |v| v.eq_ignore_ascii_case("true"))
}

/// The records that take `broker_id` out of every partition's leadership and (where others
/// remain) ISR, and the partitions left without a leader.
pub fn leave_partitions(
    md: &ClusterMetadata,
    broker_id: NodeId,
    unclean_default: bool,
) -> (Vec<MetadataRecord>, Vec<TopicPartition>) {
    let mut records = Vec::new();
    let mut leaderless = Vec::new();
    for topic in md.topics.values() {
        for (partition_id, p) in &topic.partitions {
            if !p.replicas.contains(&broker_id) {
                continue;
            }
            let (isr, leader) = partition_without(md, topic, p, broker_id, unclean_default);
            if leader == NO_LEADER {
                leaderless.push(TopicPartition {
                    topic: topic.name.as_str().into(),
                    partition: *partition_id,
                });
            }
            let isr_change = (isr != p.isr).then_some(isr);
            let leader_change = (leader != p.leader).then_some(leader);
            if isr_change.is_some() || leader_change.is_some() {
                records.push(change(topic, *partition_id, isr_change, leader_change));
            }
        }
    }
    (records, leaderless)
}

/// A partition's ISR and leader once `broker_id` cannot serve it: the leader moves to the next
/// unfenced ISR member; with none, to any unfenced replica only when unclean election is on;
/// else no leader. The broker leaves the ISR unless it is the last member (Kafka keeps the
/// last one so that it can lead again when it returns).
fn partition_without(
    md: &ClusterMetadata,
    topic: &TopicState,
    p: &PartitionState,
    broker_id: NodeId,
    unclean_default: bool,
) -> (Vec<NodeId>, NodeId) {
    let others: Vec<NodeId> = p.isr.iter().copied().filter(|b| *b != broker_id).collect();
    let mut isr = if others.is_empty() { p.isr.clone() } else { others };
    let mut leader = p.leader;
    if leader == broker_id || leader == NO_LEADER {
        leader = isr
            .iter()
            .copied()
            .find(|b| *b != broker_id && md.is_unfenced(*b))
            .unwrap_or(NO_LEADER);
    }
    if leader == NO_LEADER && unclean_allowed(md, topic, unclean_default) {
        if let Some(b) = p
            .replicas
            .iter()
            .copied()
            .find(|b| *b != broker_id && md.is_unfenced(*b))
        {
            leader = b;
            isr = vec![b];
        }
    }
    (isr, leader)
}

/// The records the active controller writes when a broker's session expires.
pub fn fence_broker(md: &ClusterMetadata, broker_id: NodeId, unclean_default: bool) -> Vec<MetadataRecord> {
    let Some(broker) = md.brokers.get(&broker_id) else {
        return Vec::new();
    };
    let mut records = leave_partitions(md, broker_id, unclean_default).0;
    records.push(MetadataRecord::FenceBroker(FenceBrokerRecord {
        broker_id,
        broker_epoch: broker.broker_epoch,
    }));
    records
}

pub(super) fn controlled_shutdown(
    md: &ClusterMetadata,
    broker_id: NodeId,
    broker_epoch: BrokerEpoch,
    unclean_default: bool,
) -> Decision {
    if let Err(refusal) = check_broker_epoch(md, broker_id, broker_epoch) {
        return Decision::answer(ControllerResponse::ControlledShutdown {
            partitions_remaining: Err(refusal),
        });
    }
    let (mut records, partitions_remaining) = leave_partitions(md, broker_id, unclean_default);
    records.push(MetadataRecord::FenceBroker(FenceBrokerRecord {
        broker_id,
        broker_epoch,
    }));
    Decision {
        records,
        response: ControllerResponse::ControlledShutdown {
            partitions_remaining: Ok(partitions_remaining),
        },
    }
}

pub(super) fn allocate_producer_ids(
    md: &ClusterMetadata,
    broker_id: NodeId,
    broker_epoch: BrokerEpoch,
) -> Decision {
    let start = md.next_producer_id;
    let next = (start.get())
        .checked_add(PRODUCER_ID_BLOCK_SIZE)
        .map(laminar_model::ProducerId::new)
        .ok_or(Refusal::ProducerIdsExhausted)
        .and_then(|next| check_broker_epoch(md, broker_id, broker_epoch).map(|()| next));
    let next = match next {
        Ok(next) => next,
        Err(refusal) => {
            return Decision::answer(ControllerResponse::AllocateProducerIds {
                producer_ids: Err(refusal),
            })
        }
    };
    let record = ProducerIdsRecord {
        broker_id,
        broker_epoch,
        next_producer_id: next,
    };
    let response = ControllerResponse::AllocateProducerIds {
        producer_ids: Ok((start, PRODUCER_ID_BLOCK_SIZE as i32)),
    };
    Decision {
        records: vec![MetadataRecord::ProducerIds(record)],
        response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use laminar_model::{LeaderEpoch, PartitionEpoch};

    /// Brokers 1 and 2 registered (unfenced), and topic `t` with one partition on broker 1 only.
    fn two_brokers_one_replica() -> ClusterMetadata {
        let mut md = ClusterMetadata::default();
        let mut records: Vec<MetadataRecord> = [1, 2]
            .map(|id| {
                MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                    broker_id: NodeId::new(id),
                    incarnation_id: [id as u8; 16],
                    endpoints: Vec::new(),
                    rack: None,
                })
            })
            .into();
        records.push(MetadataRecord::Topic(TopicRecord {
            name: "t".into(),
            topic_id: [5; 16],
        }));
        for (index, record) in records.iter().enumerate() {
            md.apply(record, index as u64 + 1).unwrap();
        }
        for id in [1, 2] {
            let epoch = md.brokers[&NodeId::new(id)].broker_epoch;
            let unfence = MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
                broker_id: NodeId::new(id),
                broker_epoch: epoch,
            });
            md.apply(&unfence, 10).unwrap();
        }
        let partition = MetadataRecord::Partition(PartitionRecord {
            topic_id: [5; 16],
            partition_id: 0,
            replicas: vec![NodeId::new(1)],
            isr: vec![NodeId::new(1)],
            leader: NodeId::new(1),
            leader_epoch: LeaderEpoch::new(0),
            partition_epoch: PartitionEpoch::new(0),
        });
        md.apply(&partition, 11).unwrap();
        md
    }

    fn answer(decision: &Decision) -> Result<(), Refusal> {
        match &decision.response {
            ControllerResponse::BrokerUnregistered(result) => result.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_broker_without_replicas_is_unregistered_and_one_with_replicas_is_not() {
        let mut md = two_brokers_one_replica();
        let holding = unregister_broker(&md, NodeId::new(1));
        assert_eq!(
            answer(&holding),
            Err(Refusal::BrokerHoldsReplicas {
                broker_id: 1,
                count: 1
            })
        );
        assert!(holding.records.is_empty());
        let unknown = unregister_broker(&md, NodeId::new(9));
        assert_eq!(answer(&unknown), Err(Refusal::BrokerIdNotRegistered));
        let empty = unregister_broker(&md, NodeId::new(2));
        assert_eq!(answer(&empty), Ok(()));
        for record in &empty.records {
            md.apply(record, 12).unwrap();
        }
        assert!(!md.brokers.contains_key(&NodeId::new(2)));
        md.check_invariants().unwrap();
    }

    #[test]
    fn the_state_refuses_to_unregister_a_broker_that_holds_replicas() {
        let mut md = two_brokers_one_replica();
        let record = MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
            broker_id: NodeId::new(1),
            broker_epoch: md.brokers[&NodeId::new(1)].broker_epoch,
        });
        assert!(md.apply(&record, 12).is_err());
        assert!(md.brokers.contains_key(&NodeId::new(1)));
    }
}
