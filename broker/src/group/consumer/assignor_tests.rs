//! The assignors' guarantees over random groups: complete, balanced, sticky, rack-local.

use super::*;

/// splitmix64: a tiny deterministic PRNG so that every failing seed can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: usize) -> usize {
        if bound == 0 {
            0
        } else {
            (self.next() % bound as u64) as usize
        }
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

type Members = BTreeMap<String, AssignorMember>;
type Topics = BTreeMap<Uuid, AssignorTopic>;
type Output = BTreeMap<String, TopicPartitions>;

const SEEDS: u64 = 200;
const KINDS: [AssignorKind; 2] = [AssignorKind::Uniform, AssignorKind::Range];

fn topic_id(index: usize) -> Uuid {
    Uuid::from_u128(0x1000 + index as u128 * 7919)
}

fn member_id(index: usize) -> String {
    format!("member-{index:04}")
}

fn rack(index: usize) -> String {
    format!("rack-{index}")
}

fn topic(partition_count: i32, partition_racks: Vec<BTreeSet<String>>) -> AssignorTopic {
    AssignorTopic {
        name: "t".into(),
        partition_count,
        partition_racks,
    }
}

fn member(rack_id: Option<String>, subscribed: BTreeSet<Uuid>) -> AssignorMember {
    AssignorMember {
        rack_id,
        subscribed,
        current: TopicPartitions::new(),
    }
}

/// Random topics (0..20, 0..50 partitions, sometimes with replica racks) and members (random
/// racks and subscriptions, sometimes homogeneous, sometimes naming unknown topics).
fn random_group(rng: &mut Rng) -> (Members, Topics) {
    let rack_count = rng.below(4);
    let mut topics = Topics::new();
    for index in 0..rng.below(20) {
        let count = rng.below(50) as i32;
        let racks = if rack_count > 0 && rng.chance(70) {
            (0..count)
                .map(|_| (0..rng.below(3)).map(|_| rack(rng.below(rack_count))).collect())
                .collect()
        } else {
            Vec::new()
        };
        topics.insert(topic_id(index), topic(count, racks));
    }
    let homogeneous = rng.chance(40);
    let shared: BTreeSet<Uuid> = topics.keys().copied().filter(|_| rng.chance(70)).collect();
    let mut members = Members::new();
    for _ in 0..rng.below(12) {
        let mut subscribed: BTreeSet<Uuid> = if homogeneous {
            shared.clone()
        } else {
            topics.keys().copied().filter(|_| rng.chance(40)).collect()
        };
        if rng.chance(20) {
            subscribed.insert(topic_id(100 + rng.below(3)));
        }
        let rack_id = (rack_count > 0 && rng.chance(80)).then(|| rack(rng.below(rack_count)));
        members.insert(member_id(rng.below(1000)), member(rack_id, subscribed));
    }
    (members, topics)
}

/// Prior assignments: either a valid assignment of a perturbed group or garbage (out-of-range
/// partitions, unknown or unsubscribed topics, partitions claimed twice).
fn add_random_prior(rng: &mut Rng, members: &mut Members, topics: &Topics) {
    if rng.chance(50) {
        let mut perturbed = members.clone();
        let ids: Vec<String> = perturbed.keys().cloned().collect();
        for id in ids.iter().filter(|_| rng.chance(25)) {
            perturbed.remove(id);
        }
        perturbed.insert(
            member_id(2000 + rng.below(5)),
            member(None, topics.keys().copied().collect()),
        );
        let kind = KINDS[rng.below(2)];
        let previous = assign(kind, &perturbed, topics);
        for (id, current) in previous {
            if let Some(member) = members.get_mut(&id) {
                member.current = current;
            }
        }
        return;
    }
    let topic_ids: Vec<Uuid> = topics.keys().copied().chain([topic_id(101)]).collect();
    for member in members.values_mut() {
        for _ in 0..rng.below(6) {
            let topic = topic_ids[rng.below(topic_ids.len())];
            let partitions = (0..rng.below(8)).map(|_| rng.below(60) as i32 - 3).collect();
            member.current.insert(topic, partitions);
        }
    }
}

fn eligible(member: &AssignorMember, topics: &Topics) -> BTreeSet<Uuid> {
    member
        .subscribed
        .iter()
        .copied()
        .filter(|id| topics.contains_key(id))
        .collect()
}

fn count(assignment: &TopicPartitions) -> usize {
    assignment.values().map(BTreeSet::len).sum()
}

/// Guarantee 1: every partition of every subscribed topic has exactly one eligible owner,
/// nothing else is assigned, every member is present, and no per-topic set is empty.
fn check_complete(members: &Members, topics: &Topics, output: &Output) {
    assert_eq!(
        output.keys().collect::<Vec<_>>(),
        members.keys().collect::<Vec<_>>()
    );
    let mut owned: BTreeMap<(Uuid, i32), &str> = BTreeMap::new();
    for (id, assignment) in output {
        let allowed = eligible(&members[id], topics);
        for (topic, partitions) in assignment {
            assert!(!partitions.is_empty(), "empty set for {id}");
            assert!(allowed.contains(topic), "{id} got a topic it is not eligible for");
            for &partition in partitions {
                assert!((0..topics[topic].partition_count).contains(&partition));
                assert!(
                    owned.insert((*topic, partition), id).is_none(),
                    "partition owned twice"
                );
            }
        }
    }
    let subscribed: BTreeSet<Uuid> = members.values().flat_map(|m| eligible(m, topics)).collect();
    let expected: usize = subscribed
        .iter()
        .map(|id| topics[id].partition_count as usize)
        .sum();
    assert_eq!(owned.len(), expected, "some partition is unassigned");
}

/// Guarantee 2: no member could take a partition it is eligible for from a member holding two or
/// more partitions more; for homogeneous groups, counts differ by at most one.
fn check_uniform_balance(members: &Members, topics: &Topics, output: &Output) {
    for (id, assignment) in output {
        let allowed = eligible(&members[id], topics);
        for (other, other_assignment) in output {
            if count(other_assignment) >= count(assignment) + 2 {
                assert!(
                    other_assignment.keys().all(|topic| !allowed.contains(topic)),
                    "{id} ({}) could take from {other} ({})",
                    count(assignment),
                    count(other_assignment)
                );
            }
        }
    }
    let subscriptions: BTreeSet<BTreeSet<Uuid>> = members.values().map(|m| eligible(m, topics)).collect();
    if subscriptions.len() == 1 {
        let counts: Vec<usize> = output.values().map(count).collect();
        let (low, high) = (counts.iter().min(), counts.iter().max());
        assert!(
            high.zip(low).is_none_or(|(high, low)| high - low <= 1),
            "unbalanced: {counts:?}"
        );
    }
}

/// Guarantee 3: per topic, the subscribers in member-id order get ⌈n/m⌉ for the first n % m and
/// ⌊n/m⌋ for the rest.
fn check_range_quotas(members: &Members, topics: &Topics, output: &Output) {
    for (topic_id, topic) in topics {
        let subscribers: Vec<&String> = members
            .iter()
            .filter(|(_, m)| m.subscribed.contains(topic_id))
            .map(|(id, _)| id)
            .collect();
        if subscribers.is_empty() {
            continue;
        }
        let n = topic.partition_count as usize;
        for (slot, id) in subscribers.iter().enumerate() {
            let got = output[*id].get(topic_id).map_or(0, BTreeSet::len);
            let quota = n / subscribers.len() + usize::from(slot < n % subscribers.len());
            assert_eq!(got, quota, "{id} has {got} of {topic_id}, quota {quota}");
        }
    }
}

/// Range stickiness: when prior ownerships do not conflict, each member keeps as many of its
/// valid prior partitions of a topic as its quota allows.
fn check_range_keeps_prior(members: &Members, topics: &Topics, output: &Output) {
    let mut claims: BTreeMap<(Uuid, i32), usize> = BTreeMap::new();
    for m in members.values() {
        for (topic, partitions) in &m.current {
            for &partition in partitions {
                *claims.entry((*topic, partition)).or_default() += 1;
            }
        }
    }
    if claims.values().any(|&claimants| claimants > 1) {
        return;
    }
    for (id, m) in members {
        for (topic, partitions) in &output[id] {
            let Some(prior) = m.current.get(topic) else {
                continue;
            };
            let valid = prior
                .iter()
                .filter(|&&p| (0..topics[topic].partition_count).contains(&p))
                .count();
            let kept = partitions.intersection(prior).count();
            assert_eq!(
                kept,
                valid.min(partitions.len()),
                "{id} lost prior partitions of {topic}"
            );
        }
    }
}

fn with_current(members: &Members, output: &Output) -> Members {
    let mut next = members.clone();
    for (id, m) in &mut next {
        m.current = output[id].clone();
    }
    next
}

#[test]
fn names_round_trip() {
    for kind in KINDS {
        assert_eq!(AssignorKind::from_name(kind.name()), Some(kind));
    }
    assert_eq!(AssignorKind::from_name("cooperative-sticky"), None);
    assert_eq!(AssignorKind::Uniform.name(), "uniform");
    assert_eq!(AssignorKind::Range.name(), "range");
}

#[test]
fn empty_inputs() {
    for kind in KINDS {
        assert!(assign(kind, &Members::new(), &Topics::new()).is_empty());
        let mut members = Members::new();
        members.insert(member_id(1), member(None, [topic_id(7)].into()));
        let output = assign(kind, &members, &Topics::new());
        assert_eq!(output[&member_id(1)], TopicPartitions::new());
    }
}

/// Guarantees 1–4 on random groups with random (often garbage) prior assignments.
#[test]
fn random_groups_are_complete_balanced_and_stable() {
    for seed in 0..SEEDS {
        let mut rng = Rng(seed);
        let (mut members, topics) = random_group(&mut rng);
        add_random_prior(&mut rng, &mut members, &topics);
        for kind in KINDS {
            let output = assign(kind, &members, &topics);
            check_complete(&members, &topics, &output);
            match kind {
                AssignorKind::Uniform => check_uniform_balance(&members, &topics, &output),
                AssignorKind::Range => {
                    check_range_quotas(&members, &topics, &output);
                    check_range_keeps_prior(&members, &topics, &output);
                }
            }
            assert_eq!(
                output,
                assign(kind, &members, &topics),
                "seed {seed}: not deterministic"
            );
            let again = assign(kind, &with_current(&members, &output), &topics);
            assert_eq!(again, output, "seed {seed} {kind:?}: not a fixed point");
        }
    }
}

fn homogeneous_group(rng: &mut Rng, member_count: usize, racks: usize) -> (Members, Topics) {
    let topics: Topics = (0..1 + rng.below(6))
        .map(|index| (topic_id(index), topic(rng.below(50) as i32, Vec::new())))
        .collect();
    let subscribed: BTreeSet<Uuid> = topics.keys().copied().collect();
    let members = (0..member_count)
        .map(|index| {
            let rack_id = (racks > 0).then(|| rack(index % racks));
            (
                member_id(rng.below(1000) * 10 + index % 10),
                member(rack_id, subscribed.clone()),
            )
        })
        .collect();
    (members, topics)
}

fn is_subset(small: &TopicPartitions, big: &TopicPartitions) -> bool {
    small
        .iter()
        .all(|(topic, partitions)| big.get(topic).is_some_and(|b| partitions.is_subset(b)))
}

/// Guarantee 4: adding a member to a balanced homogeneous group moves only what the new member
/// receives; removing one only hands its partitions to the others.
#[test]
fn uniform_moves_little_when_members_come_and_go() {
    for seed in 0..SEEDS {
        let mut rng = Rng(seed);
        let member_count = 1 + rng.below(10);
        let (members, topics) = homogeneous_group(&mut rng, member_count, 0);
        let before = assign(AssignorKind::Uniform, &members, &topics);
        let settled = with_current(&members, &before);

        let mut grown = settled.clone();
        let newcomer = member_id(99_999);
        grown.insert(newcomer.clone(), member(None, topics.keys().copied().collect()));
        let after = assign(AssignorKind::Uniform, &grown, &topics);
        check_complete(&grown, &topics, &after);
        check_uniform_balance(&grown, &topics, &after);
        for (id, old) in &before {
            assert!(is_subset(&after[id], old), "seed {seed}: {id} gained on a join");
        }

        let mut shrunk = settled.clone();
        let leaver = settled
            .keys()
            .nth(rng.below(settled.len()))
            .cloned()
            .unwrap_or_default();
        shrunk.remove(&leaver);
        let after = assign(AssignorKind::Uniform, &shrunk, &topics);
        check_complete(&shrunk, &topics, &after);
        check_uniform_balance(&shrunk, &topics, &after);
        for (id, new) in &after {
            assert!(is_subset(&before[id], new), "seed {seed}: {id} lost on a leave");
        }
    }
}

/// A group whose racks are balanced: every rack has the same number of members and the same
/// number of partitions replicated there (each partition in one rack, or in all of them).
fn rack_balanced_group(rng: &mut Rng) -> (Members, Topics) {
    let racks = 1 + rng.below(4);
    let per_rack_members = 1 + rng.below(4);
    let everywhere: BTreeSet<String> = (0..racks).map(rack).collect();
    let mut topics = Topics::new();
    for index in 0..1 + rng.below(5) {
        let count = racks * rng.below(12);
        let single_rack = rng.chance(70);
        let offset = rng.below(racks);
        let partition_racks = (0..count)
            .map(|p| {
                if single_rack {
                    [rack((p + offset) % racks)].into()
                } else {
                    everywhere.clone()
                }
            })
            .collect();
        topics.insert(topic_id(index), topic(count as i32, partition_racks));
    }
    let subscribed: BTreeSet<Uuid> = topics.keys().copied().collect();
    let members = (0..racks * per_rack_members)
        .map(|index| {
            (
                member_id(rng.below(100) * 100 + index),
                member(Some(rack(index % racks)), subscribed.clone()),
            )
        })
        .collect();
    (members, topics)
}

fn count_outside_racks(members: &Members, topics: &Topics, output: &Output) -> usize {
    let mut misplaced = 0;
    for (id, assignment) in output {
        let Some(rack_id) = &members[id].rack_id else {
            continue;
        };
        for (topic, partitions) in assignment {
            for &p in partitions {
                if !topics[topic].partition_racks[p as usize].contains(rack_id) {
                    misplaced += 1;
                }
            }
        }
    }
    misplaced
}

/// Guarantee 5: with balanced racks every partition lands in one of its racks, from scratch, from
/// a garbage prior assignment and from an assignment made without racks; balance still holds.
#[test]
fn uniform_is_rack_local_when_racks_are_balanced() {
    for seed in 0..SEEDS {
        let mut rng = Rng(seed);
        let (mut members, topics) = rack_balanced_group(&mut rng);
        let output = assign(AssignorKind::Uniform, &members, &topics);
        check_complete(&members, &topics, &output);
        check_uniform_balance(&members, &topics, &output);
        assert_eq!(
            count_outside_racks(&members, &topics, &output),
            0,
            "seed {seed} from scratch"
        );

        let mut rackless = members.clone();
        rackless.values_mut().for_each(|m| m.rack_id = None);
        let rackless_output = assign(AssignorKind::Uniform, &rackless, &topics);
        let output = assign(
            AssignorKind::Uniform,
            &with_current(&members, &rackless_output),
            &topics,
        );
        check_uniform_balance(&members, &topics, &output);
        assert_eq!(
            count_outside_racks(&members, &topics, &output),
            0,
            "seed {seed} from rackless"
        );

        add_random_prior(&mut rng, &mut members, &topics);
        let output = assign(AssignorKind::Uniform, &members, &topics);
        check_complete(&members, &topics, &output);
        check_uniform_balance(&members, &topics, &output);
        assert_eq!(
            count_outside_racks(&members, &topics, &output),
            0,
            "seed {seed} from garbage"
        );
    }
}

/// Guarantee 5, second half: racks that cannot all be honoured never cost balance (the random
/// test covers this too; here every member sits in a rack no partition uses, or all in one).
#[test]
fn mismatched_racks_keep_balance() {
    for seed in 0..SEEDS {
        let mut rng = Rng(seed);
        let (member_count, racks) = (1 + rng.below(8), 1 + rng.below(2));
        let (mut members, mut topics) = homogeneous_group(&mut rng, member_count, racks);
        for t in topics.values_mut() {
            t.partition_racks = (0..t.partition_count)
                .map(|_| [rack(rng.below(3))].into())
                .collect();
        }
        if rng.chance(50) {
            members.values_mut().for_each(|m| m.rack_id = Some(rack(0)));
        }
        for kind in KINDS {
            let output = assign(kind, &members, &topics);
            check_complete(&members, &topics, &output);
            match kind {
                AssignorKind::Uniform => check_uniform_balance(&members, &topics, &output),
                AssignorKind::Range => check_range_quotas(&members, &topics, &output),
            }
        }
    }
}

/// Guarantee 3: without a prior assignment, co-partitioned topics line up member by member, in
/// contiguous ranges.
#[test]
fn range_lines_up_co_partitioned_topics() {
    for seed in 0..SEEDS {
        let mut rng = Rng(seed);
        let partitions = rng.below(30) as i32;
        let topics: Topics = (0..1 + rng.below(5))
            .map(|i| (topic_id(i), topic(partitions, Vec::new())))
            .collect();
        let subscribed: BTreeSet<Uuid> = topics.keys().copied().collect();
        let members: Members = (0..1 + rng.below(8))
            .map(|i| {
                (
                    member_id(rng.below(50) * 10 + i),
                    member(None, subscribed.clone()),
                )
            })
            .collect();
        let output = assign(AssignorKind::Range, &members, &topics);
        check_range_quotas(&members, &topics, &output);
        let mut next = 0;
        for assignment in output.values() {
            let sets: BTreeSet<&BTreeSet<i32>> = assignment.values().collect();
            assert!(sets.len() <= 1, "seed {seed}: topics do not line up");
            if let Some(set) = sets.first() {
                assert_eq!(
                    set.iter().copied().collect::<Vec<_>>(),
                    (next..next + set.len() as i32).collect::<Vec<_>>()
                );
                next += set.len() as i32;
            }
        }
    }
}

/// Guarantee 6: a large group is assigned correctly (the time is not asserted).
#[test]
fn large_group() {
    let mut rng = Rng(42);
    let topics: Topics = (0..20)
        .map(|index| (topic_id(index), topic(500, Vec::new())))
        .collect();
    let subscribed: BTreeSet<Uuid> = topics.keys().copied().collect();
    let members: Members = (0..1000)
        .map(|index| (member_id(index), member(None, subscribed.clone())))
        .collect();
    for kind in KINDS {
        let output = assign(kind, &members, &topics);
        check_complete(&members, &topics, &output);
        let settled = with_current(&members, &output);
        assert_eq!(assign(kind, &settled, &topics), output);
    }
    let output = assign(AssignorKind::Uniform, &members, &topics);
    check_uniform_balance(&members, &topics, &output);
    let mut grown = with_current(&members, &output);
    for index in 0..50 {
        grown.insert(
            member_id(5000 + index),
            member(Some(rack(rng.below(3))), subscribed.clone()),
        );
    }
    let heterogeneous: Members = grown
        .into_iter()
        .map(|(id, mut m)| {
            m.subscribed.retain(|_| rng.chance(80));
            (id, m)
        })
        .collect();
    let output = assign(AssignorKind::Uniform, &heterogeneous, &topics);
    check_complete(&heterogeneous, &topics, &output);
    check_uniform_balance(&heterogeneous, &topics, &output);
    assert_eq!(
        assign(
            AssignorKind::Uniform,
            &with_current(&heterogeneous, &output),
            &topics
        ),
        output
    );
}

/// Guarantee 6 with racks that cannot all be honoured, so that rack improvement has work to do.
#[test]
fn large_rack_aware_group() {
    for skewed in [false, true] {
        large_rack_aware_case(skewed);
    }
}

fn large_rack_aware_case(skewed: bool) {
    let mut rng = Rng(7);
    let topics: Topics = (0..20)
        .map(|index| {
            let racks = (0..500)
                .map(|_| [rack(if skewed { 0 } else { rng.below(4) })].into())
                .collect();
            (topic_id(index), topic(500, racks))
        })
        .collect();
    let subscribed: BTreeSet<Uuid> = topics.keys().copied().collect();
    let members: Members = (0..1000)
        .map(|index| {
            (
                member_id(index),
                member(Some(rack(index % 3)), subscribed.clone()),
            )
        })
        .collect();
    for kind in KINDS {
        let output = assign(kind, &members, &topics);
        check_complete(&members, &topics, &output);
        assert_eq!(assign(kind, &with_current(&members, &output), &topics), output);
    }
    let output = assign(AssignorKind::Uniform, &members, &topics);
    check_uniform_balance(&members, &topics, &output);
    let misplaced = count_outside_racks(&members, &topics, &output);
    // Skewed: every partition is in rack 0, whose 334 members can hold 3 340 of them. Otherwise
    // only the partitions in rack 3, where no member is, must be outside their racks.
    let rackless: usize = topics
        .values()
        .map(|t| {
            t.partition_racks
                .iter()
                .filter(|racks| racks.contains(&rack(3)))
                .count()
        })
        .sum();
    let bound = if skewed { 10_000 - 3_340 } else { rackless };
    assert_eq!(misplaced, bound, "{misplaced} partitions outside their racks");
}

/// Range honours racks within its quotas: each member takes the partitions replicated in its
/// rack, and a member's prior partitions still win over rack locality.
#[test]
fn range_prefers_rack_local_partitions() {
    let racks: Vec<BTreeSet<String>> = ["b", "b", "a", "a"]
        .iter()
        .map(|r| [(*r).to_owned()].into())
        .collect();
    let topics: Topics = [(topic_id(0), topic(4, racks))].into();
    let subscribed: BTreeSet<Uuid> = [topic_id(0)].into();
    let mut members: Members = [
        (member_id(0), member(Some("a".into()), subscribed.clone())),
        (member_id(1), member(Some("b".into()), subscribed)),
    ]
    .into();
    let output = assign(AssignorKind::Range, &members, &topics);
    assert_eq!(output[&member_id(0)][&topic_id(0)], [2, 3].into());
    assert_eq!(output[&member_id(1)][&topic_id(0)], [0, 1].into());

    let first = members.get_mut(&member_id(0)).map(|m| &mut m.current);
    first
        .into_iter()
        .for_each(|current| *current = [(topic_id(0), [0, 2].into())].into());
    let output = assign(AssignorKind::Range, &members, &topics);
    assert_eq!(output[&member_id(0)][&topic_id(0)], [0, 2].into());
    assert_eq!(output[&member_id(1)][&topic_id(0)], [1, 3].into());
}
