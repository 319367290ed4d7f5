//! Partition reassignment in the controller (`decide/reassignment.rs`): requests become records, the
//! leader's AlterPartition completes them, cancels revert them, with Kafka's epochs and codes.

use kafka_protocol::error::ResponseError;
use laminar_controller::api::*;
use laminar_controller::decide::reassignment::list_reassignments;
use laminar_controller::decide::{decide, fence_broker, Decision, DecisionContext};
use laminar_controller::*;
use laminar_model::{BrokerEpoch, LeaderEpoch, NodeId, PartitionEpoch};

/// Brokers 1–4 registered (epoch 10 + id) and unfenced; topic "t" with partition 0 on
/// [1, 2, 3], all in sync, led by 1.
fn four_broker_state() -> ClusterMetadata {
    let mut md = ClusterMetadata::default();
    for number in 1..=4 {
        let id = NodeId::new(number);
        let index = 10 + number as u64;
        let record = RegisterBrokerRecord {
            broker_id: id,
            incarnation_id: [0; 16],
            endpoints: vec![],
            rack: None,
        };
        md.apply(&MetadataRecord::RegisterBroker(record), index).unwrap();
        let unfence = UnfenceBrokerRecord {
            broker_id: id,
            broker_epoch: BrokerEpoch::new(index as i64),
        };
        md.apply(&MetadataRecord::UnfenceBroker(unfence), 20).unwrap();
    }
    let topic = TopicRecord {
        name: "t".into(),
        topic_id: [1; 16],
    };
    md.apply(&MetadataRecord::Topic(topic), 21).unwrap();
    let partition = PartitionRecord {
        topic_id: [1; 16],
        partition_id: 0,
        replicas: ids(&[1, 2, 3]),
        isr: ids(&[1, 2, 3]),
        leader: NodeId::new(1),
        leader_epoch: LeaderEpoch::new(0),
        partition_epoch: PartitionEpoch::new(0),
    };
    md.apply(&MetadataRecord::Partition(partition), 22).unwrap();
    md
}

fn ids(list: &[i32]) -> Vec<NodeId> {
    list.iter().copied().map(NodeId::new).collect()
}

fn plain(list: &[NodeId]) -> Vec<i32> {
    list.iter().map(|id| id.get()).collect()
}

fn decide_now(md: &ClusterMetadata, request: ControllerRequest) -> Decision {
    let ctx = DecisionContext {
        session_alive: Box::new(|_| true),
        unclean_leader_election_default: false,
        seed: 7,
    };
    decide(md, request, &ctx)
}

/// Decides and applies; the per-partition codes.
fn reassign_with(
    md: &mut ClusterMetadata,
    wanted: Vec<(&str, i32, Option<Vec<i32>>)>,
    rf_change: ReplicationFactorChange,
) -> Vec<Option<ResponseError>> {
    let partitions = wanted
        .into_iter()
        .map(|(topic, partition, replicas)| PartitionReassignment {
            topic: topic.into(),
            partition,
            replicas: replicas.map(|list| ids(&list)),
        })
        .collect();
    let request = ControllerRequest::AlterPartitionReassignments {
        partitions,
        replication_factor_change: rf_change,
    };
    let decision = decide_now(md, request);
    apply(md, &decision);
    match decision.response {
        ControllerResponse::Reassignments(results) => {
            let each = results.iter().map(|r| r.result.as_ref().err());
            each.map(|refusal| refusal.map(Refusal::response_error)).collect()
        }
        other => panic!("{other:?}"),
    }
}

/// The Kafka error of the reassignment, `None` when it is accepted.
fn reassign(md: &mut ClusterMetadata, replicas: Option<Vec<i32>>) -> Option<ResponseError> {
    reassign_with(md, vec![("t", 0, replicas)], ReplicationFactorChange::Allowed)[0]
}

fn apply(md: &mut ClusterMetadata, decision: &Decision) {
    for record in &decision.records {
        md.apply(record, 30).unwrap();
    }
}

fn partition(md: &ClusterMetadata) -> PartitionState {
    md.partition_by_name("t", 0).unwrap().clone()
}

/// The AlterPartition the current leader sends when `isr` is in sync; applied, and its result.
fn isr_change(md: &mut ClusterMetadata, isr: Vec<i32>) -> AlterPartitionResult {
    let p = partition(md);
    let request = ControllerRequest::AlterPartition(AlterPartitionRequest {
        broker_id: p.leader,
        broker_epoch: BrokerEpoch::new(10 + i64::from(p.leader.get())),
        topic_id: [1; 16],
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: ids(&isr),
    });
    let decision = decide_now(md, request);
    apply(md, &decision);
    match decision.response {
        ControllerResponse::AlterPartition(Ok(result)) => result,
        other => panic!("{other:?}"),
    }
}

/// (replicas, adding, removing, isr, leader, leader epoch, partition epoch)
type Shape = (Vec<i32>, Vec<i32>, Vec<i32>, Vec<i32>, i32, i32, i32);

fn shape(md: &ClusterMetadata) -> Shape {
    let p = partition(md);
    (
        plain(&p.replicas),
        plain(&p.adding_replicas),
        plain(&p.removing_replicas),
        plain(&p.isr),
        p.leader.get(),
        p.leader_epoch.get(),
        p.partition_epoch.get(),
    )
}

#[test]
fn a_reassignment_completes_once_the_new_replica_is_in_the_isr() {
    let mut md = four_broker_state();
    assert_eq!(reassign(&mut md, Some(vec![1, 2, 4])), None);
    // The union, target first; no replica left yet, so the leader epoch stays.
    assert_eq!(
        shape(&md),
        (vec![1, 2, 4, 3], vec![4], vec![3], vec![1, 2, 3], 1, 0, 1)
    );
    let listed = list_reassignments(&md, None);
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (plain(&listed[0].replicas), plain(&listed[0].adding_replicas)),
        (vec![1, 2, 4, 3], vec![4])
    );
    // An ISR change that does not take broker 4 in completes nothing.
    isr_change(&mut md, vec![1, 2]);
    assert_eq!(shape(&md).0, vec![1, 2, 4, 3]);
    // Broker 4 caught up: the leader adds it, and the reassignment completes in that change.
    let result = isr_change(&mut md, vec![1, 2, 4]);
    assert_eq!(
        shape(&md),
        (vec![1, 2, 4], vec![], vec![], vec![1, 2, 4], 1, 1, 3)
    );
    let answered = (
        result.leader.get(),
        result.leader_epoch.get(),
        result.partition_epoch.get(),
        plain(&result.isr),
    );
    assert_eq!(
        answered,
        (1, 1, 3, vec![1, 2, 4]),
        "the answer is the applied state"
    );
    assert!(list_reassignments(&md, None).is_empty());
}

#[test]
fn the_leader_moves_when_the_reassignment_removes_it() {
    let mut md = four_broker_state();
    assert_eq!(reassign(&mut md, Some(vec![4, 2, 3])), None);
    assert_eq!(plain(&partition(&md).replicas), vec![4, 2, 3, 1]);
    let result = isr_change(&mut md, vec![1, 2, 3, 4]);
    // The first target replica in the ISR leads; broker 1 left, so both epochs move.
    assert_eq!(
        shape(&md),
        (vec![4, 2, 3], vec![], vec![], vec![2, 3, 4], 4, 1, 2)
    );
    assert_eq!((result.leader.get(), result.leader_epoch.get()), (4, 1));
}

#[test]
fn a_reassignment_with_nothing_to_catch_up_completes_when_requested() {
    let mut md = four_broker_state();
    assert_eq!(reassign(&mut md, Some(vec![2, 1])), None);
    assert_eq!(shape(&md), (vec![2, 1], vec![], vec![], vec![1, 2], 1, 1, 1));
    // The same target again changes nothing.
    let version = md.clone();
    assert_eq!(reassign(&mut md, Some(vec![2, 1])), None);
    assert_eq!(md, version);
}

#[test]
fn a_cancel_reverts_to_the_original_replicas() {
    let mut md = four_broker_state();
    assert_eq!(reassign(&mut md, Some(vec![1, 2, 4])), None);
    assert_eq!(reassign(&mut md, None), None);
    // Replica 4 left the list: a new leader epoch, as in KRaft.
    assert_eq!(
        shape(&md),
        (vec![1, 2, 3], vec![], vec![], vec![1, 2, 3], 1, 1, 2)
    );
    assert_eq!(
        reassign(&mut md, None),
        Some(ResponseError::NoReassignmentInProgress)
    );
    assert!(list_reassignments(&md, None).is_empty());
}

#[test]
fn a_new_target_replaces_the_one_in_progress() {
    let mut md = four_broker_state();
    assert_eq!(reassign(&mut md, Some(vec![1, 2, 4])), None);
    // As KRaft: the current replicas (the union) are the starting point, so broker 4 is no
    // longer being added but a replica; nothing is added, and the new target applies at once
    // (broker 4 stays out of the ISR until the leader takes it in).
    assert_eq!(reassign(&mut md, Some(vec![1, 4, 3])), None);
    assert_eq!(shape(&md), (vec![1, 4, 3], vec![], vec![], vec![1, 3], 1, 1, 2));
}

#[test]
fn reassignment_requests_get_kafkas_error_codes() {
    let mut md = four_broker_state();
    let before = md.clone();
    let requests = [
        ("nope", 0, Some(vec![1])),
        ("t", 5, Some(vec![1])),
        ("t", 0, Some(vec![1, 9])),
        ("t", 0, Some(vec![1, 1])),
        ("t", 0, Some(vec![])),
        ("t", 0, None),
    ];
    let each = requests
        .into_iter()
        .map(|wanted| reassign_with(&mut md, vec![wanted], ReplicationFactorChange::Allowed)[0]);
    let errors: Vec<Option<ResponseError>> = each.collect();
    let expected = vec![
        Some(ResponseError::UnknownTopicOrPartition),
        Some(ResponseError::UnknownTopicOrPartition),
        Some(ResponseError::InvalidReplicaAssignment),
        Some(ResponseError::InvalidReplicaAssignment),
        Some(ResponseError::InvalidReplicaAssignment),
        Some(ResponseError::NoReassignmentInProgress),
    ];
    assert_eq!(errors, expected);
    assert_eq!(md, before, "refusals write nothing");
    // KIP-860's allowReplicationFactorChange=false; a partition named twice is refused.
    let errors = reassign_with(
        &mut md,
        vec![("t", 0, Some(vec![1, 2])), ("t", 0, Some(vec![1, 2, 4]))],
        ReplicationFactorChange::Refused,
    );
    assert_eq!(
        errors,
        vec![
            Some(ResponseError::InvalidReplicationFactor),
            Some(ResponseError::InvalidRequest)
        ]
    );
    let errors = reassign_with(
        &mut md,
        vec![("t", 0, Some(vec![1, 2, 4]))],
        ReplicationFactorChange::Refused,
    );
    assert_eq!(errors, vec![None]);
}

#[test]
fn a_replica_being_added_rejoins_no_isr_when_unfenced() {
    let mut md = four_broker_state();
    assert_eq!(reassign(&mut md, Some(vec![1, 2, 4])), None);
    for record in fence_broker(&md, NodeId::new(4), false) {
        md.apply(&record, 40).unwrap();
    }
    let heartbeat = ControllerRequest::BrokerHeartbeat {
        broker_id: NodeId::new(4),
        broker_epoch: BrokerEpoch::new(14),
    };
    let decision = decide_now(&md, heartbeat);
    apply(&mut md, &decision);
    // Unfenced, but out of the ISR: it has to catch up before the reassignment completes.
    assert!(md.is_unfenced(NodeId::new(4)));
    assert_eq!(plain(&partition(&md).adding_replicas), vec![4]);
    assert_eq!(plain(&partition(&md).isr), vec![1, 2, 3]);
}

#[test]
fn old_and_new_partition_change_records_keep_their_encoding() {
    let old = MetadataRecord::PartitionChange(PartitionChangeRecord {
        topic_id: [1; 16],
        partition_id: 0,
        replicas: None,
        isr: None,
        leader: Some(NodeId::new(2)),
    });
    let bytes = bincode::serialize(&old).unwrap();
    assert_eq!(
        bytes[..4],
        5u32.to_le_bytes(),
        "PartitionChange is still variant 5"
    );
    let new = MetadataRecord::PartitionReassignmentChange(PartitionReassignmentChangeRecord {
        change: PartitionChangeRecord {
            topic_id: [1; 16],
            partition_id: 0,
            replicas: None,
            isr: None,
            leader: None,
        },
        adding_replicas: Some(ids(&[4])),
        removing_replicas: None,
    });
    assert_eq!(bincode::serialize(&new).unwrap()[..4], 10u32.to_le_bytes());
}
