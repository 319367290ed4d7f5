//! The state machine, placement, decisions and the entry encoding, without a quorum.

use laminar_model::{BrokerEpoch, LeaderEpoch, NodeId, PartitionEpoch};
use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use laminar_controller::api::{AlterPartitionRequest, ControllerRequest, ElectionType};
use laminar_controller::decide::{alter_partition, elect_leaders, fence_broker, UNCLEAN_LEADER_ELECTION_KEY};
use laminar_controller::disk_format::{decode_entry, encode_entry, Entry};
use laminar_controller::placement::{assign_replicas, PlacementBroker};
use laminar_controller::*;

fn id(n: i32) -> NodeId {
    NodeId::new(n)
}

fn ids(list: &[i32]) -> Vec<NodeId> {
    list.iter().copied().map(NodeId::new).collect()
}

#[test]
fn entry_encoding_matches_the_documented_bytes() {
    let log_id = openraft::LogId::new(openraft::CommittedLeaderId::new(2, 1), 7);
    let batch = RecordBatch {
        records: vec![MetadataRecord::RemoveTopic(RemoveTopicRecord {
            topic_id: [0xAB; 16],
        })],
    };
    let entry = Entry {
        log_id,
        payload: openraft::EntryPayload::Normal(batch),
    };
    let frame = encode_entry(&entry).unwrap();
    let mut payload = Vec::new();
    payload.extend(2u64.to_le_bytes()); // term
    payload.extend(1u64.to_le_bytes()); // node id
    payload.extend(7u64.to_le_bytes()); // index
    payload.extend(1u32.to_le_bytes()); // EntryPayload::Normal
    payload.extend(1u64.to_le_bytes()); // one record
    payload.extend(7u32.to_le_bytes()); // MetadataRecord::RemoveTopic
    payload.extend([0xAB; 16]); // topic id
    let mut expected = Vec::new();
    expected.extend((payload.len() as u32).to_le_bytes());
    expected.extend(crc32c::crc32c(&payload).to_le_bytes());
    expected.extend(&payload);
    assert_eq!(frame, expected);
    assert_eq!(frame.len(), 8 + 56);
    let (decoded, len) = decode_entry(&frame).unwrap();
    assert_eq!((decoded, len), (entry, frame.len()));
    // Every truncation and every flipped byte is refused, never a panic.
    for cut in 0..frame.len() {
        assert!(decode_entry(&frame[..cut]).is_err());
    }
    for i in 0..frame.len() {
        let mut bad = frame.clone();
        bad[i] ^= 0x40;
        assert!(decode_entry(&bad).is_err(), "byte {i}");
    }
}

fn brokers(racks: &[&str]) -> Vec<PlacementBroker> {
    let each = racks.iter().enumerate();
    each.map(|(i, r)| PlacementBroker {
        broker_id: NodeId::new(i as i32 + 1),
        rack: (!r.is_empty()).then(|| r.to_string()),
    })
    .collect()
}

#[test]
fn placement_spreads_leaders_and_replicas_evenly() {
    let assignment = assign_replicas(&brokers(&["", "", ""]), 0, 30, 3, 42).unwrap();
    let mut leaders = BTreeMap::new();
    let mut replicas = BTreeMap::new();
    for partition in &assignment {
        *leaders.entry(partition[0]).or_insert(0) += 1;
        for b in partition {
            *replicas.entry(*b).or_insert(0) += 1;
        }
        let mut distinct = partition.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 3);
    }
    assert_eq!(leaders.values().copied().collect::<Vec<_>>(), vec![10, 10, 10]);
    assert_eq!(replicas.values().copied().collect::<Vec<_>>(), vec![30, 30, 30]);
    assert_eq!(
        assignment,
        assign_replicas(&brokers(&["", "", ""]), 0, 30, 3, 42).unwrap(),
        "deterministic"
    );
}

#[test]
fn placement_puts_replicas_on_distinct_racks() {
    let six = brokers(&["a", "a", "b", "b", "c", "c"]);
    let rack_of = |id: NodeId| six[(id.get() - 1) as usize].rack.clone();
    let assignment = assign_replicas(&six, 0, 60, 3, 7).unwrap();
    let mut leaders = BTreeMap::new();
    for partition in &assignment {
        let mut racks: Vec<_> = partition.iter().map(|b| rack_of(*b)).collect();
        racks.sort();
        racks.dedup();
        assert_eq!(racks.len(), 3, "{partition:?}");
        *leaders.entry(partition[0]).or_insert(0) += 1;
    }
    assert!(leaders.values().all(|n| *n == 10), "{leaders:?}");
    assert!(assign_replicas(&six, 0, 1, 7, 1).is_err());
}

/// Two unfenced brokers and a topic "t" of one partition on both, led by broker 1.
fn two_broker_state() -> ClusterMetadata {
    let mut md = ClusterMetadata::default();
    for (index, id) in [(10, id(1)), (11, id(2))] {
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
        md.apply(&MetadataRecord::UnfenceBroker(unfence), 12).unwrap();
    }
    md.apply(
        &MetadataRecord::Topic(TopicRecord {
            name: "t".into(),
            topic_id: [1; 16],
        }),
        13,
    )
    .unwrap();
    let partition = PartitionRecord {
        topic_id: [1; 16],
        partition_id: 0,
        replicas: ids(&[1, 2]),
        isr: ids(&[1, 2]),
        leader: id(1),
        leader_epoch: LeaderEpoch::new(0),
        partition_epoch: PartitionEpoch::new(0),
    };
    md.apply(&MetadataRecord::Partition(partition), 14).unwrap();
    md
}

fn apply_all(md: &mut ClusterMetadata, records: &[MetadataRecord]) {
    for record in records {
        md.apply(record, 20).unwrap();
    }
}

#[test]
fn alter_partition_follows_kafkas_epoch_rules_and_unclean_election_stays_off() {
    let mut md = two_broker_state();
    let shrink = |leader_epoch, partition_epoch| AlterPartitionRequest {
        broker_id: id(1),
        broker_epoch: BrokerEpoch::new(10),
        topic_id: [1; 16],
        partition: 0,
        leader_epoch: LeaderEpoch::new(leader_epoch),
        partition_epoch: PartitionEpoch::new(partition_epoch),
        new_isr: ids(&[1]),
    };
    let refusal = |d: laminar_controller::decide::Decision| match d.response {
        api::ControllerResponse::AlterPartition(r) => r.err(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        refusal(alter_partition(&md, &shrink(1, 0))),
        Some(Refusal::FencedLeaderEpoch)
    );
    assert_eq!(
        refusal(alter_partition(&md, &shrink(0, 5))),
        Some(Refusal::InvalidUpdateVersion)
    );
    let accepted = alter_partition(&md, &shrink(0, 0));
    apply_all(&mut md, &accepted.records);
    let p = md.topic_by_name("t").unwrap().partitions[&0].clone();
    assert_eq!(
        (p.isr.clone(), p.leader_epoch.get(), p.partition_epoch.get()),
        (ids(&[1]), 0, 1)
    );
    // Broker 1, the only in-sync replica, is fenced: broker 2 is out of sync, so no leader.
    let mut clean = md.clone();
    apply_all(&mut clean, &fence_broker(&md, id(1), false));
    let p = clean.topic_by_name("t").unwrap().partitions[&0].clone();
    assert_eq!(
        (p.leader, p.isr.clone(), p.leader_epoch.get()),
        (NO_LEADER, ids(&[1]), 1)
    );
    // With the topic's unclean.leader.election.enable, broker 2 leads alone.
    let config = ConfigRecord {
        resource_type: ConfigResourceType::Topic,
        resource_name: "t".into(),
        name: UNCLEAN_LEADER_ELECTION_KEY.into(),
        value: Some("true".into()),
    };
    md.apply(&MetadataRecord::Config(config), 21).unwrap();
    let mut unclean = md.clone();
    apply_all(&mut unclean, &fence_broker(&md, id(1), false));
    let p = unclean.topic_by_name("t").unwrap().partitions[&0].clone();
    assert_eq!((p.leader, p.isr.clone()), (id(2), ids(&[2])));
    let preferred = elect_leaders(&clean, ElectionType::Preferred, None);
    assert!(preferred.records.is_empty());
}

/// A small deterministic generator (xorshift) for the randomized test.
struct Random(u64);

impl Random {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
    fn broker(&mut self) -> NodeId {
        NodeId::new(self.next(5) as i32)
    }
    fn brokers(&mut self) -> Vec<NodeId> {
        (0..self.next(4)).map(|_| self.broker()).collect()
    }
}

fn random_record(r: &mut Random) -> MetadataRecord {
    let topic_id = [r.next(3) as u8; 16];
    let partition_id = r.next(3) as i32;
    match r.next(8) {
        0 => MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: r.broker(),
            incarnation_id: [0; 16],
            endpoints: vec![],
            rack: None,
        }),
        1 => MetadataRecord::FenceBroker(FenceBrokerRecord {
            broker_id: r.broker(),
            broker_epoch: BrokerEpoch::new(r.next(40) as i64),
        }),
        2 => MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
            broker_id: r.broker(),
            broker_epoch: BrokerEpoch::new(r.next(40) as i64),
        }),
        3 => MetadataRecord::Topic(TopicRecord {
            name: format!("t{}", r.next(3)),
            topic_id,
        }),
        4 => MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id }),
        5 => {
            let replicas = r.brokers();
            let isr = r.brokers();
            let leader = NodeId::new(r.broker().get() - 1);
            MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition_id,
                replicas,
                isr,
                leader,
                leader_epoch: LeaderEpoch::new(0),
                partition_epoch: PartitionEpoch::new(0),
            })
        }
        6 => MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id,
            partition_id,
            replicas: (r.next(3) == 0).then(|| r.brokers()),
            isr: (r.next(2) == 0).then(|| r.brokers()),
            leader: (r.next(2) == 0).then(|| NodeId::new(r.broker().get() - 1)),
        }),
        _ => MetadataRecord::PartitionReassignmentChange(PartitionReassignmentChangeRecord {
            change: PartitionChangeRecord {
                topic_id,
                partition_id,
                replicas: (r.next(2) == 0).then(|| r.brokers()),
                isr: (r.next(3) == 0).then(|| r.brokers()),
                leader: (r.next(3) == 0).then(|| NodeId::new(r.broker().get() - 1)),
            },
            adding_replicas: (r.next(2) == 0).then(|| r.brokers()),
            removing_replicas: (r.next(2) == 0).then(|| r.brokers()),
        }),
    }
}

fn check_invariants(md: &ClusterMetadata, epochs: &mut BTreeMap<([u8; 16], i32), (i32, i32)>) {
    for topic in md.topics.values() {
        for (index, p) in &topic.partitions {
            assert!(
                p.isr.iter().all(|b| p.replicas.contains(b)),
                "isr ⊆ replicas: {p:?}"
            );
            let listed = |list: &[NodeId]| list.iter().all(|b| p.replicas.contains(b));
            assert!(
                listed(&p.adding_replicas) && listed(&p.removing_replicas),
                "adding and removing ⊆ replicas: {p:?}"
            );
            assert!(
                !p.adding_replicas.iter().any(|b| p.removing_replicas.contains(b)),
                "{p:?}"
            );
            if p.leader != NO_LEADER {
                assert!(p.isr.contains(&p.leader), "leader ∈ isr: {p:?}");
                assert!(md.is_unfenced(p.leader), "a fenced broker leads: {p:?}");
            }
            let key = (topic.topic_id, *index);
            let (leader_epoch, partition_epoch) = epochs.get(&key).copied().unwrap_or((0, 0));
            assert!(
                p.leader_epoch.get() >= leader_epoch && p.partition_epoch.get() >= partition_epoch,
                "epochs went back"
            );
            epochs.insert(key, (p.leader_epoch.get(), p.partition_epoch.get()));
        }
    }
    for broker in md.brokers.values().filter(|b| b.fenced) {
        assert!(!md.leads_any(broker.broker_id));
    }
}

#[test]
fn random_record_sequences_keep_the_invariants() {
    let mut random = Random(0x5EED_1234_ABCD_0001);
    let mut applied = 0;
    for _ in 0..200 {
        let mut md = ClusterMetadata::default();
        let mut epochs = BTreeMap::new();
        for index in 1..300u64 {
            let record = random_record(&mut random);
            let before = md.clone();
            match md.apply(&record, index) {
                Ok(()) => applied += 1,
                Err(_) => assert_eq!(md, before, "a refused record changed the state"),
            }
            check_invariants(&md, &mut epochs);
            // A removed and re-created topic starts its epochs again.
            epochs.retain(|(id, _), _| md.topics.contains_key(id));
        }
    }
    assert!(applied > 5_000, "too few records fit: {applied}");
}

fn decide_with(md: &ClusterMetadata, request: ControllerRequest) -> laminar_controller::decide::Decision {
    let ctx = laminar_controller::decide::DecisionContext {
        session_alive: Box::new(|_| false),
        unclean_leader_election_default: false,
        seed: 7,
    };
    laminar_controller::decide::decide(md, request, &ctx)
}

/// Each topic's Kafka error, `None` for a topic done.
fn topic_errors(decision: &laminar_controller::decide::Decision) -> Vec<Option<ResponseError>> {
    match &decision.response {
        api::ControllerResponse::Topics(results) => {
            let each = results.iter().map(|r| r.result.as_ref().err());
            each.map(|refusal| refusal.map(Refusal::response_error)).collect()
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn manual_assignments_follow_kafkas_rules_and_place_the_leader_first() {
    let md = two_broker_state();
    let manual = |name: &str, partitions: i32, factor: i16, assignments: Vec<Vec<NodeId>>| {
        let topic = api::CreatableTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: factor,
            configs: BTreeMap::new(),
            assignments,
            topic_id: None,
        };
        decide_with(&md, ControllerRequest::CreateTopics { topics: vec![topic] })
    };
    let refused = [
        manual("a", 2, -1, vec![ids(&[2])]),
        manual("b", -1, -1, vec![ids(&[2, 2])]),
        manual("c", -1, -1, vec![ids(&[2]), ids(&[1, 2])]),
        manual("d", -1, -1, vec![ids(&[9])]),
    ];
    let errors: Vec<_> = refused.iter().flat_map(topic_errors).collect();
    let invalid = Some(ResponseError::InvalidReplicaAssignment);
    assert_eq!(
        errors,
        vec![Some(ResponseError::InvalidRequest), invalid, invalid, invalid]
    );
    let accepted = manual("e", -1, -1, vec![ids(&[2]), ids(&[2]), ids(&[2])]);
    assert_eq!(topic_errors(&accepted), vec![None]);
    let mut after = md.clone();
    apply_all(&mut after, &accepted.records);
    let topic = after.topic_by_name("e").unwrap();
    assert_eq!(topic.partitions.len(), 3);
    assert!(topic
        .partitions
        .values()
        .all(|p| p.replicas == ids(&[2]) && p.leader == id(2) && p.isr == ids(&[2])));
}

#[test]
fn a_topic_created_with_an_id_keeps_it_unless_zero_or_taken() {
    let md = two_broker_state();
    let with_id = |name: &str, topic_id: [u8; 16]| {
        let topic = api::CreatableTopic {
            name: name.into(),
            num_partitions: 1,
            replication_factor: 1,
            configs: BTreeMap::new(),
            assignments: Vec::new(),
            topic_id: Some(topic_id),
        };
        decide_with(&md, ControllerRequest::CreateTopics { topics: vec![topic] })
    };
    let kept = with_id("migrated", [7; 16]);
    assert_eq!(topic_errors(&kept), vec![None]);
    let mut after = md.clone();
    apply_all(&mut after, &kept.records);
    assert_eq!(after.topic_by_name("migrated").unwrap().topic_id, [7; 16]);

    let taken = md.topic_by_name("t").unwrap().topic_id;
    let refused = [with_id("zero", [0; 16]), with_id("taken", taken)];
    let errors: Vec<_> = refused.iter().flat_map(topic_errors).collect();
    assert_eq!(errors, vec![Some(ResponseError::InvalidRequest); 2]);
}

#[test]
fn a_broker_back_rejoins_the_isr_through_its_leader_and_the_rebalance_hands_its_leaderships_back() {
    let md = two_broker_state();
    // Broker 1 (preferred for t-0) is fenced: broker 2 leads, 1 leaves the ISR.
    let mut fenced = md.clone();
    apply_all(&mut fenced, &fence_broker(&md, id(1), false));
    let p = fenced.topic_by_name("t").unwrap().partitions[&0].clone();
    assert_eq!((p.leader, p.isr.clone()), (id(2), ids(&[2])));
    assert!(
        leaders_to_rebalance(&fenced, 10).is_empty(),
        "broker 1 cannot lead yet"
    );
    // It re-registers and heartbeats: unfenced, but out of the ISR until its leader adds it.
    let register = RegisterBrokerRecord {
        broker_id: id(1),
        incarnation_id: [9; 16],
        endpoints: vec![],
        rack: None,
    };
    fenced
        .apply(&MetadataRecord::RegisterBroker(register), 30)
        .unwrap();
    let heartbeat = decide_with(
        &fenced,
        ControllerRequest::BrokerHeartbeat {
            broker_id: id(1),
            broker_epoch: BrokerEpoch::new(30),
        },
    );
    apply_all(&mut fenced, &heartbeat.records);
    let p = fenced.topic_by_name("t").unwrap().partitions[&0].clone();
    assert_eq!(
        (p.leader, p.isr.clone()),
        (id(2), ids(&[2])),
        "behind until it fetched"
    );
    assert!(
        leaders_to_rebalance(&fenced, 10).is_empty(),
        "an out-of-sync replica cannot lead"
    );
    let caught_up = decide_with(
        &fenced,
        ControllerRequest::AlterPartition(AlterPartitionRequest {
            broker_id: id(2),
            broker_epoch: BrokerEpoch::new(11),
            topic_id: [1; 16],
            partition: 0,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: ids(&[2, 1]),
        }),
    );
    apply_all(&mut fenced, &caught_up.records);
    let p = fenced.topic_by_name("t").unwrap().partitions[&0].clone();
    assert_eq!((p.leader, p.isr.clone()), (id(2), ids(&[2, 1])));
    // 1 of 1 partitions preferring broker 1 is led elsewhere: 100% > 10%, so it moves back.
    let wanted = leaders_to_rebalance(&fenced, 10);
    assert_eq!(wanted.len(), 1);
    assert!(leaders_to_rebalance(&fenced, 100).is_empty(), "not past 100%");
    let elected = elect_leaders(&fenced, ElectionType::Preferred, Some(&wanted));
    apply_all(&mut fenced, &elected.records);
    assert_eq!(fenced.topic_by_name("t").unwrap().partitions[&0].leader, id(1));
    assert!(leaders_to_rebalance(&fenced, 0).is_empty());
}

#[test]
fn the_cluster_id_is_set_once_in_kafkas_form() {
    let id = cluster_id_text([0xFF; 16]);
    assert_eq!(id.len(), 22);
    assert_eq!(cluster_id_text([0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
    assert!(id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    let mut md = ClusterMetadata::default();
    let record = |id: &str| {
        MetadataRecord::ClusterId(ClusterIdRecord {
            cluster_id: id.into(),
        })
    };
    md.apply(&record("first"), 1).unwrap();
    assert!(md.apply(&record("second"), 2).is_err());
    assert_eq!(md.cluster_id.as_deref(), Some("first"));
}
