//! The controller's decisions and the metadata state machine under randomized operations,
//! checked against a simple model. Each seeded run registers, unfences, fences and shuts down
//! brokers, creates, grows and deletes topics, changes ISRs as leaders would, elects leaders,
//! reassigns replicas and hands out producer ids, all through the real `decide` and
//! `fence_broker`, and restarts the state machine from a snapshot or from the whole log. After
//! every step:
//! - every record decided applies (a record that does not is a bug: the nodes stop on it);
//! - every invariant of the metadata holds (`ClusterMetadata::check_invariants`);
//! - leader and partition epochs never go back, and broker epochs only grow;
//! - the topics are the model's: those whose creation succeeded and deletion has not;
//! - replaying the log from nothing, or decoding the last snapshot, gives the same state.

use laminar_model::{BrokerEpoch, NodeId};
use std::collections::BTreeSet;

use laminar_controller::api::*;
use laminar_controller::decide::{decide, fence_broker, DecisionContext};
use laminar_controller::snapshot_format::{decode_metadata, encode_metadata};
use laminar_controller::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const BROKERS: i32 = 5;
const TOPIC_NAMES: [&str; 4] = ["a", "b", "c", "d"];
const STEPS_PER_SEED: usize = 400;
/// Seeds run in CI: fixed, so a failure replays. `LAMINAR_MODEL_SEEDS=n` runs n more, random.
const SEEDS: [u64; 8] = [1, 2, 3, 5, 8, 13, 21, 34];

/// The node under test: its state, the log it applied, and the model.
struct Run {
    rng: StdRng,
    metadata: ClusterMetadata,
    /// Every record applied, with its entry's log index: the log a restart replays.
    log: Vec<(u64, MetadataRecord)>,
    next_index: u64,
    /// The last snapshot taken (a restart from it replays the log after `snapshot_index`).
    snapshot: (Vec<u8>, u64),
    model_topics: BTreeSet<String>,
}

impl Run {
    fn new(seed: u64) -> Run {
        Run {
            rng: StdRng::seed_from_u64(seed),
            metadata: ClusterMetadata::default(),
            log: Vec::new(),
            next_index: 1,
            snapshot: (encode_metadata(&ClusterMetadata::default()).unwrap(), 0),
            model_topics: BTreeSet::new(),
        }
    }

    /// Decides `request` on the current state and applies its records as one entry.
    fn decide(&mut self, request: ControllerRequest) -> ControllerResponse {
        let ctx = DecisionContext {
            session_alive: Box::new(|_| true),
            unclean_leader_election_default: false,
            seed: self.rng.gen(),
        };
        let decision = decide(&self.metadata, request, &ctx);
        self.apply_entry(decision.records);
        decision.response
    }

    fn apply_entry(&mut self, records: Vec<MetadataRecord>) {
        let index = self.next_index;
        self.next_index += 1;
        for record in records {
            if let Err(error) = self.metadata.apply(&record, index) {
                panic!("a decided record does not apply at entry {index}: {error}: {record:?}");
            }
            self.log.push((index, record));
        }
    }

    fn broker_epoch(&self, broker_id: NodeId) -> Option<BrokerEpoch> {
        self.metadata.brokers.get(&broker_id).map(|b| b.broker_epoch)
    }

    /// A random partition: (topic name, topic id, index, state).
    fn some_partition(&mut self) -> Option<(String, TopicId, i32, PartitionState)> {
        let partitions: Vec<_> = self
            .metadata
            .topics
            .values()
            .flat_map(|t| {
                let each = t.partitions.iter();
                each.map(|(i, p)| (t.name.clone(), t.topic_id, *i, p.clone()))
            })
            .collect();
        (!partitions.is_empty()).then(|| partitions[self.rng.gen_range(0..partitions.len())].clone())
    }

    fn some_broker(&mut self) -> NodeId {
        NodeId::new(self.rng.gen_range(1..=BROKERS))
    }

    fn some_replicas(&mut self) -> Vec<NodeId> {
        let count = self.rng.gen_range(1..=3);
        let mut replicas: Vec<NodeId> = Vec::new();
        while replicas.len() < count {
            let broker = self.some_broker();
            if !replicas.contains(&broker) {
                replicas.push(broker);
            }
        }
        replicas
    }

    fn step(&mut self) {
        match self.rng.gen_range(0..12) {
            0 => self.register(),
            1 | 2 => self.heartbeat(),
            3 => self.fence(),
            4 => self.controlled_shutdown(),
            5 => self.create_topic(),
            6 => self.grow_topic(),
            7 => self.delete_topic(),
            8 => self.alter_isr(),
            9 => self.elect(),
            10 => self.reassign(),
            _ => self.allocate_producer_ids(),
        }
    }

    fn register(&mut self) {
        let broker_id = self.some_broker();
        let request = ControllerRequest::RegisterBroker {
            broker_id,
            incarnation_id: self.rng.gen(),
            endpoints: vec![],
            rack: None,
        };
        self.decide(request);
    }

    fn heartbeat(&mut self) {
        let broker_id = self.some_broker();
        let stale = self.rng.gen_bool(0.1);
        let Some(epoch) = self.broker_epoch(broker_id) else {
            return;
        };
        let broker_epoch = if stale {
            BrokerEpoch::new(epoch.get() - 1)
        } else {
            epoch
        };
        self.decide(ControllerRequest::BrokerHeartbeat {
            broker_id,
            broker_epoch,
        });
    }

    fn fence(&mut self) {
        let broker_id = self.some_broker();
        if self.metadata.brokers.get(&broker_id).is_some_and(|b| !b.fenced) {
            let records = fence_broker(&self.metadata, broker_id, self.rng.gen_bool(0.2));
            self.apply_entry(records);
        }
    }

    fn controlled_shutdown(&mut self) {
        let broker_id = self.some_broker();
        let Some(broker_epoch) = self.broker_epoch(broker_id) else {
            return;
        };
        self.decide(ControllerRequest::ControlledShutdown {
            broker_id,
            broker_epoch,
        });
    }

    fn create_topic(&mut self) {
        let name = TOPIC_NAMES[self.rng.gen_range(0..TOPIC_NAMES.len())].to_string();
        let topic = CreatableTopic {
            name: name.clone(),
            num_partitions: self.rng.gen_range(1..=4),
            replication_factor: self.rng.gen_range(1..=3),
            configs: Default::default(),
            assignments: vec![],
            topic_id: None,
        };
        let response = self.decide(ControllerRequest::CreateTopics { topics: vec![topic] });
        if let ControllerResponse::Topics(results) = response {
            if results.iter().any(|r| r.name == name && r.result.is_ok()) {
                assert!(self.model_topics.insert(name), "created a topic that existed");
            }
        }
    }

    fn grow_topic(&mut self) {
        let name = TOPIC_NAMES[self.rng.gen_range(0..TOPIC_NAMES.len())].to_string();
        let count = self.rng.gen_range(1..=6);
        self.decide(ControllerRequest::CreatePartitions {
            topics: vec![(name, count)],
        });
    }

    fn delete_topic(&mut self) {
        let name = TOPIC_NAMES[self.rng.gen_range(0..TOPIC_NAMES.len())].to_string();
        let response = self.decide(ControllerRequest::DeleteTopics {
            names: vec![name.clone()],
        });
        if let ControllerResponse::Topics(results) = response {
            if results.iter().any(|r| r.name == name && r.result.is_ok()) {
                assert!(
                    self.model_topics.remove(&name),
                    "deleted a topic that did not exist"
                );
            }
        }
    }

    /// The leader shrinks or grows its ISR, as a leader's AlterPartition does.
    fn alter_isr(&mut self) {
        let Some((_, topic_id, partition, state)) = self.some_partition() else {
            return;
        };
        let Some(broker_epoch) = self.broker_epoch(state.leader) else {
            return;
        };
        let mut new_isr: Vec<NodeId> = state
            .replicas
            .iter()
            .copied()
            .filter(|b| *b == state.leader || self.rng.gen_bool(0.6))
            .collect();
        new_isr.sort_unstable();
        self.decide(ControllerRequest::AlterPartition(AlterPartitionRequest {
            broker_id: state.leader,
            broker_epoch,
            topic_id,
            partition,
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            new_isr,
        }));
    }

    fn elect(&mut self) {
        let Some((topic, _, partition, _)) = self.some_partition() else {
            return;
        };
        let election_type = if self.rng.gen_bool(0.3) {
            ElectionType::Unclean
        } else {
            ElectionType::Preferred
        };
        self.decide(ControllerRequest::ElectLeaders {
            election_type,
            partitions: Some(vec![TopicPartition::new(topic, partition)]),
        });
    }

    fn reassign(&mut self) {
        let Some((topic, _, partition, _)) = self.some_partition() else {
            return;
        };
        let replicas = (!self.rng.gen_bool(0.2)).then(|| self.some_replicas());
        self.decide(ControllerRequest::AlterPartitionReassignments {
            partitions: vec![PartitionReassignment {
                topic,
                partition,
                replicas,
            }],
            replication_factor_change: ReplicationFactorChange::Allowed,
        });
    }

    fn allocate_producer_ids(&mut self) {
        let broker_id = self.some_broker();
        let Some(broker_epoch) = self.broker_epoch(broker_id) else {
            return;
        };
        self.decide(ControllerRequest::AllocateProducerIds {
            broker_id,
            broker_epoch,
        });
    }

    /// A restart: from the last snapshot plus the log after it, or from the whole log; the
    /// state rebuilt is the state the node had. Sometimes takes a new snapshot first.
    fn restart(&mut self) {
        if self.rng.gen_bool(0.5) {
            self.snapshot = (encode_metadata(&self.metadata).unwrap(), self.next_index - 1);
        }
        let (from, after) = if self.rng.gen_bool(0.5) {
            (
                decode_metadata(&self.snapshot.0).expect("the snapshot decodes"),
                self.snapshot.1,
            )
        } else {
            (ClusterMetadata::default(), 0)
        };
        let mut replayed = from;
        for (index, record) in self.log.iter().filter(|(index, _)| *index > after) {
            replayed
                .apply(record, *index)
                .unwrap_or_else(|e| panic!("replaying entry {index}: {e}: {record:?}"));
        }
        assert_eq!(replayed, self.metadata, "the replayed state differs");
        self.metadata = replayed;
    }
}

/// Epochs never go back: for each partition that is still the same topic's, and each broker.
fn check_monotonic(before: &ClusterMetadata, after: &ClusterMetadata) {
    for (id, topic) in &after.topics {
        let Some(old) = before.topics.get(id) else {
            continue;
        };
        for (index, new) in &topic.partitions {
            let Some(old) = old.partitions.get(index) else {
                continue;
            };
            assert!(
                new.leader_epoch >= old.leader_epoch && new.partition_epoch >= old.partition_epoch,
                "{}-{index}: epochs went back: {old:?} -> {new:?}",
                topic.name
            );
        }
    }
    for (id, broker) in &after.brokers {
        if let Some(old) = before.brokers.get(id) {
            assert!(
                broker.broker_epoch >= old.broker_epoch,
                "broker {id}'s epoch went back"
            );
        }
    }
    assert!(
        after.next_producer_id >= before.next_producer_id,
        "producer ids went back"
    );
}

fn run_seed(seed: u64) {
    let mut run = Run::new(seed);
    for step in 0..STEPS_PER_SEED {
        let before = run.metadata.clone();
        if run.rng.gen_ratio(1, 25) {
            run.restart();
        } else {
            run.step();
        }
        if let Err(broken) = run.metadata.check_invariants() {
            panic!("seed {seed}, step {step}: {broken}");
        }
        check_monotonic(&before, &run.metadata);
        let topics: BTreeSet<String> = run.metadata.topic_ids_by_name.keys().cloned().collect();
        assert_eq!(topics, run.model_topics, "seed {seed}, step {step}: the topics");
    }
    run.restart();
}

#[test]
fn randomized_decisions_always_apply_keep_the_invariants_and_replay_to_the_same_state() {
    for seed in SEEDS {
        run_seed(seed);
    }
    let extra: u64 = std::env::var("LAMINAR_MODEL_SEEDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    for _ in 0..extra {
        let seed = rand::random();
        eprintln!("metadata model: seed {seed}");
        run_seed(seed);
    }
}

/// The model test reaches the states it is about: without these, a generator that never gets
/// past "no brokers" would pass.
#[test]
fn the_randomized_runs_reach_topics_leaders_reassignments_and_fenced_brokers() {
    let mut run = Run::new(SEEDS[0]);
    let (mut led, mut reassigning, mut fenced_after_unfenced) = (0, 0, 0);
    for _ in 0..STEPS_PER_SEED {
        let unfenced_before: BTreeSet<NodeId> = run
            .metadata
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .map(|b| b.broker_id)
            .collect();
        run.step();
        let partitions = run.metadata.topics.values().flat_map(|t| t.partitions.values());
        led += partitions.clone().filter(|p| p.leader != NO_LEADER).count();
        reassigning += partitions.filter(|p| p.is_reassigning()).count();
        fenced_after_unfenced += unfenced_before
            .iter()
            .filter(|id| run.metadata.brokers.get(id).is_some_and(|b| b.fenced))
            .count();
    }
    assert!(led > 0, "no partition ever had a leader");
    assert!(reassigning > 0, "no reassignment ever started");
    assert!(
        fenced_after_unfenced > 0,
        "no broker was ever fenced after serving"
    );
}
