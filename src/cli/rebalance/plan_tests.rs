use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn brokers(ids: &[i32]) -> Vec<Broker> {
    ids.iter().map(|id| Broker { id: *id, rack: None }).collect()
}

fn placements(replicas: &[&[i32]]) -> Vec<Placement> {
    let each = replicas.iter().enumerate().map(|(i, r)| Placement {
        topic: "t".into(),
        partition: i32::try_from(i).unwrap(),
        replicas: r.to_vec(),
        size_bytes: 100,
    });
    each.collect()
}

/// `partitions` with every move of `moves` applied.
fn after(partitions: &[Placement], moves: &[Move]) -> Vec<Vec<i32>> {
    let each = partitions.iter().map(|p| {
        let moved = moves
            .iter()
            .find(|m| m.topic == p.topic && m.partition == p.partition);
        moved.map_or_else(|| p.replicas.clone(), |m| m.to.clone())
    });
    each.collect()
}

fn all(placed: &[Vec<i32>]) -> Vec<usize> {
    (0..placed.len()).collect()
}

fn spread(counts: &BTreeMap<i32, usize>) -> usize {
    let (min, max) = (counts.values().min(), counts.values().max());
    max.zip(min).map_or(0, |(max, min)| max - min)
}

#[test]
fn a_new_empty_broker_gets_its_share_and_leads_some() {
    let partitions = placements(&[&[1, 2], &[2, 3], &[3, 1], &[1, 2], &[2, 3], &[3, 1]]);
    let moves = plan(&brokers(&[1, 2, 3, 4]), &partitions, &BTreeSet::new()).unwrap();
    let placed = after(&partitions, &moves);
    let counts = replica_counts(&placed, &all(&placed), &[1, 2, 3, 4]);
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), [3, 3, 3, 3]);
    assert!(leader_counts(&placed, &all(&placed), &[1, 2, 3, 4])[&4] >= 1);
    // Three replicas copied, 100 bytes each; only partitions that changed are listed.
    assert_eq!(moves.iter().map(|m| m.bytes).sum::<u64>(), 300);
    assert!(moves.iter().all(|m| m.from != m.to));
}

#[test]
fn a_leaving_broker_ends_with_nothing_and_too_few_brokers_is_refused() {
    let partitions = placements(&[&[1, 2], &[2, 3], &[3, 1]]);
    let leaving = BTreeSet::from([3]);
    let moves = plan(&brokers(&[1, 2, 3]), &partitions, &leaving).unwrap();
    assert!(after(&partitions, &moves).iter().all(|r| !r.contains(&3)));
    let three_replicas = placements(&[&[1, 2, 3]]);
    let refused = plan(&brokers(&[1, 2, 3]), &three_replicas, &leaving).unwrap_err();
    assert!(matches!(
        refused,
        PlanError::TooFewBrokers {
            replicas: 3,
            brokers: 2,
            ..
        }
    ));
}

#[test]
fn a_balanced_cluster_moves_nothing() {
    let partitions = placements(&[&[1, 2], &[2, 3], &[3, 1]]);
    assert_eq!(
        plan(&brokers(&[1, 2, 3]), &partitions, &BTreeSet::new()).unwrap(),
        []
    );
}

#[test]
fn replicas_go_to_racks_the_partition_is_not_on_yet() {
    let racked = |id: i32, rack: &str| Broker {
        id,
        rack: Some(rack.into()),
    };
    let cluster = [racked(1, "a"), racked(2, "b"), racked(3, "a"), racked(4, "b")];
    // Every partition on 1 (rack a) and 2 (rack b); 3 (rack a) and 4 (rack b) are new.
    let partitions = placements(&[&[1, 2], &[2, 1], &[1, 2], &[2, 1]]);
    let moves = plan(&cluster, &partitions, &BTreeSet::new()).unwrap();
    for replicas in after(&partitions, &moves) {
        let racks: BTreeSet<&str> = replicas
            .iter()
            .map(|b| if b % 2 == 1 { "a" } else { "b" })
            .collect();
        assert_eq!(racks.len(), 2, "{replicas:?} spans both racks");
    }
}

/// Up to 40 partitions of three topics, all on the first few of `broker_count` brokers, each
/// with at most `eligible` replicas.
fn skewed_placements(rng: &mut StdRng, broker_count: i32, eligible: usize) -> Vec<Placement> {
    let crowded = rng.gen_range(1..=broker_count);
    (0..rng.gen_range(1..40))
        .map(|partition| {
            let factor = rng.gen_range(1..=crowded.min(eligible as i32).max(1));
            let mut pool: Vec<i32> = (1..=crowded).collect();
            let mut replicas = Vec::new();
            while replicas.len() < factor as usize {
                replicas.push(pool.remove(rng.gen_range(0..pool.len())));
            }
            let size_bytes = rng.gen_range(0..1_000);
            Placement {
                topic: format!("t{}", partition % 3),
                partition,
                replicas,
                size_bytes,
            }
        })
        .collect()
}

/// Random clusters, skewed placements and leaving brokers: every plan keeps each partition's
/// replica count with distinct brokers, empties the leaving brokers, balances each topic's
/// replicas to within one per broker, and never leaves a topic's leadership less balanced than
/// the replicas it got.
#[test]
fn random_placements_end_balanced_valid_and_off_the_leaving_brokers() {
    let mut rng = StdRng::seed_from_u64(0x01a4_1a42);
    for round in 0..300 {
        let broker_count: i32 = rng.gen_range(2..=8);
        let ids: Vec<i32> = (1..=broker_count).collect();
        let leaving: BTreeSet<i32> = ids.iter().copied().filter(|_| rng.gen_bool(0.2)).collect();
        let eligible: Vec<i32> = ids.iter().copied().filter(|id| !leaving.contains(id)).collect();
        if eligible.is_empty() {
            continue;
        }
        let partitions = skewed_placements(&mut rng, broker_count, eligible.len());
        let moves = plan(&brokers(&ids), &partitions, &leaving).expect("enough brokers");
        let placed = after(&partitions, &moves);
        let unbalanced =
            placement(&brokers(&ids), &partitions, &leaving, Leaders::Keep).expect("enough brokers");
        assert_eq!(
            unbalanced
                .iter()
                .map(|r| r.iter().collect::<BTreeSet<_>>())
                .collect::<Vec<_>>(),
            placed
                .iter()
                .map(|r| r.iter().collect::<BTreeSet<_>>())
                .collect::<Vec<_>>(),
            "round {round}: evening leaders moves no replica"
        );
        for (before, now) in partitions.iter().zip(&placed) {
            assert_eq!(before.replicas.len(), now.len(), "round {round}");
            assert_eq!(
                now.iter().collect::<BTreeSet<_>>().len(),
                now.len(),
                "round {round}: {now:?}"
            );
            assert!(now.iter().all(|b| !leaving.contains(b)), "round {round}: {now:?}");
        }
        let topics: BTreeSet<&str> = partitions.iter().map(|p| p.topic.as_str()).collect();
        for topic in &topics {
            let indexes: Vec<usize> = (0..partitions.len())
                .filter(|i| partitions[*i].topic == *topic)
                .collect();
            assert!(
                spread(&replica_counts(&placed, &indexes, &eligible)) <= 1,
                "round {round}, {topic}"
            );
            let leaders = spread(&leader_counts(&placed, &indexes, &eligible));
            assert!(
                leaders <= spread(&leader_counts(&unbalanced, &indexes, &eligible)),
                "round {round}"
            );
        }
        // Each topic is within one replica per broker, and ties go to the emptier brokers.
        assert!(
            spread(&replica_counts(&placed, &all(&placed), &eligible)) <= topics.len(),
            "round {round}"
        );
    }
}

#[test]
fn leaders_are_evened_by_reordering_without_moving_data() {
    let partitions = placements(&[&[1, 2], &[1, 2], &[1, 2], &[1, 2]]);
    let moves = plan(&brokers(&[1, 2]), &partitions, &BTreeSet::new()).unwrap();
    let placed = after(&partitions, &moves);
    let leaders = leader_counts(&placed, &all(&placed), &[1, 2]);
    assert_eq!(leaders.values().copied().collect::<Vec<_>>(), [2, 2]);
    assert!(moves.iter().all(|m| m.bytes == 0), "a reorder copies nothing");
}
