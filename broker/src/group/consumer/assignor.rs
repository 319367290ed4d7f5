//! Server-side partition assignors of the KIP-848 consumer group protocol.
//!
//! Two assignors, both sticky (a member that stays keeps what it has as far as balance allows) and
//! rack-aware (a partition prefers a member in one of its replicas' racks, but never at the cost of
//! balance):
//!
//! * `uniform` (the default) spreads all partitions as evenly as possible over the members. It
//!   keeps every valid prior ownership, places orphaned partitions on the least-loaded eligible
//!   member, then moves partitions from over-loaded to under-loaded members until no member could
//!   take a partition from a member with two or more partitions more than itself, and finally
//!   improves rack locality with moves and swaps that never make the counts less even.
//! * `range` gives, per topic, each subscriber (ordered by member id) `n / m` partitions and the
//!   first `n % m` one more, so that co-partitioned topics line up; a member keeps the partitions
//!   it had of that topic up to its quota.
//!
//! Everything here is pure and deterministic: the same input always gives the same output, because
//! only ordered collections are iterated.

use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// Partitions by topic id.
pub type TopicPartitions = BTreeMap<Uuid, BTreeSet<i32>>;

/// A topic as the assignor sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssignorTopic {
    pub name: String,
    pub partition_count: i32,
    /// The racks of each partition's replicas, by partition index; empty when racks are unknown.
    pub partition_racks: Vec<BTreeSet<String>>,
}

/// A member as the assignor sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssignorMember {
    pub rack_id: Option<String>,
    /// Topic ids it subscribes to (only ids present in the topics map count; others are ignored).
    pub subscribed: BTreeSet<Uuid>,
    /// Its partitions in the previous target assignment (may name topics or partitions that no
    /// longer exist, or topics it no longer subscribes to: those are dropped).
    pub current: TopicPartitions,
}

/// Which server-side assignor a group uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AssignorKind {
    Uniform,
    Range,
}

impl AssignorKind {
    /// Parses Kafka's assignor names, "uniform" and "range".
    pub fn from_name(name: &str) -> Option<AssignorKind> {
        match name {
            "uniform" => Some(AssignorKind::Uniform),
            "range" => Some(AssignorKind::Range),
            _ => None,
        }
    }

    /// Kafka's name for this assignor, as sent in `ConsumerGroupHeartbeat` and `DescribeGroups`.
    pub fn name(self) -> &'static str {
        match self {
            AssignorKind::Uniform => "uniform",
            AssignorKind::Range => "range",
        }
    }
}

/// Computes the target assignment. Every member of `members` appears in the result, with an empty
/// map if it gets nothing.
pub fn assign(
    kind: AssignorKind,
    members: &BTreeMap<String, AssignorMember>,
    topics: &BTreeMap<Uuid, AssignorTopic>,
) -> BTreeMap<String, TopicPartitions> {
    let universe = Universe::new(members, topics);
    let owners = match kind {
        AssignorKind::Uniform => UniformBuilder::new(&universe).build(),
        AssignorKind::Range => assign_range(&universe),
    };
    universe.to_output(&owners)
}

/// Index of a member in member-id order.
type MemberIdx = usize;
/// Index of a partition over all relevant topics (topics in id order, partitions in index order).
type PartitionIdx = usize;
/// Index of a rack among the racks members are in.
type RackIdx = u32;

/// The input flattened into dense indices, with every invalid piece of a prior assignment dropped.
struct Universe<'a> {
    member_ids: Vec<&'a str>,
    member_racks: Vec<Option<RackIdx>>,
    /// Relevant topic indices each member may be assigned, ascending.
    member_topics: Vec<Vec<usize>>,
    /// Topics that exist and that at least one member subscribes to, in id order.
    topic_ids: Vec<Uuid>,
    /// `topic_offsets[t]..topic_offsets[t + 1]` are topic `t`'s partitions.
    topic_offsets: Vec<PartitionIdx>,
    /// Racks (of some member) holding a replica of each partition, ascending.
    partition_racks: Vec<Vec<RackIdx>>,
    /// Each member's valid prior partitions, ascending; two members may still claim the same one.
    prior: Vec<Vec<PartitionIdx>>,
}

impl<'a> Universe<'a> {
    fn new(members: &'a BTreeMap<String, AssignorMember>, topics: &BTreeMap<Uuid, AssignorTopic>) -> Self {
        let rack_index: BTreeMap<&str, RackIdx> = members
            .values()
            .filter_map(|member| member.rack_id.as_deref())
            .collect::<BTreeSet<&str>>()
            .into_iter()
            .zip(0..)
            .collect();
        let relevant: BTreeSet<Uuid> = members
            .values()
            .flat_map(|member| member.subscribed.iter().copied())
            .filter(|topic_id| topics.contains_key(topic_id))
            .collect();
        let topic_ids: Vec<Uuid> = relevant.into_iter().collect();
        let topic_index: BTreeMap<Uuid, usize> = topic_ids.iter().copied().zip(0..).collect();
        let mut topic_offsets = vec![0];
        let mut partition_racks = Vec::new();
        for topic_id in &topic_ids {
            let topic = &topics[topic_id];
            let count = usize::try_from(topic.partition_count).unwrap_or(0);
            for partition in 0..count {
                let racks = topic.partition_racks.get(partition).into_iter().flatten();
                partition_racks.push(
                    racks
                        .filter_map(|rack| rack_index.get(rack.as_str()).copied())
                        .collect(),
                );
            }
            topic_offsets.push(partition_racks.len());
        }
        let member_topics: Vec<Vec<usize>> = members
            .values()
            .map(|member| {
                member
                    .subscribed
                    .iter()
                    .filter_map(|id| topic_index.get(id).copied())
                    .collect()
            })
            .collect();
        let prior = members
            .values()
            .zip(&member_topics)
            .map(|(member, eligible)| Self::valid_prior(member, eligible, &topic_index, &topic_offsets))
            .collect();
        Universe {
            member_ids: members.keys().map(String::as_str).collect(),
            member_racks: members
                .values()
                .map(|member| {
                    member
                        .rack_id
                        .as_deref()
                        .and_then(|rack| rack_index.get(rack).copied())
                })
                .collect(),
            member_topics,
            topic_ids,
            topic_offsets,
            partition_racks,
            prior,
        }
    }

    /// The member's prior partitions that still exist in a topic it may be assigned.
    fn valid_prior(
        member: &AssignorMember,
        eligible: &[usize],
        topic_index: &BTreeMap<Uuid, usize>,
        topic_offsets: &[PartitionIdx],
    ) -> Vec<PartitionIdx> {
        let mut valid = Vec::new();
        for (topic_id, partitions) in &member.current {
            let Some(&topic) = topic_index.get(topic_id) else {
                continue;
            };
            if eligible.binary_search(&topic).is_err() {
                continue;
            }
            let (start, end) = (topic_offsets[topic], topic_offsets[topic + 1]);
            for &partition in partitions {
                match usize::try_from(partition) {
                    Ok(partition) if partition < end - start => valid.push(start + partition),
                    _ => {}
                }
            }
        }
        valid
    }

    fn member_count(&self) -> usize {
        self.member_ids.len()
    }

    fn partition_count(&self) -> usize {
        self.partition_racks.len()
    }

    fn topic_partitions(&self, topic: usize) -> std::ops::Range<PartitionIdx> {
        self.topic_offsets[topic]..self.topic_offsets[topic + 1]
    }

    /// Whether the member sits in a rack holding a replica of the partition.
    fn rack_matches(&self, member: MemberIdx, partition: PartitionIdx) -> bool {
        self.member_racks[member]
            .is_some_and(|rack| self.partition_racks[partition].binary_search(&rack).is_ok())
    }

    fn to_output(&self, owners: &[Option<MemberIdx>]) -> BTreeMap<String, TopicPartitions> {
        let mut output: Vec<TopicPartitions> = vec![TopicPartitions::new(); self.member_count()];
        for (topic, topic_id) in self.topic_ids.iter().enumerate() {
            let start = self.topic_offsets[topic];
            for partition in self.topic_partitions(topic) {
                let owner = owners[partition].expect("invariant: every relevant partition has an owner");
                let index = i32::try_from(partition - start).expect("partition index came from an i32 count");
                output[owner].entry(*topic_id).or_default().insert(index);
            }
        }
        self.member_ids
            .iter()
            .map(|id| (*id).to_owned())
            .zip(output)
            .collect()
    }
}

/// Range assignment: per topic, fixed quotas over the subscribers in member-id order.
fn assign_range(universe: &Universe) -> Vec<Option<MemberIdx>> {
    let mut owners = vec![None; universe.partition_count()];
    for topic in 0..universe.topic_ids.len() {
        let subscribers: Vec<MemberIdx> = (0..universe.member_count())
            .filter(|&member| universe.member_topics[member].binary_search(&topic).is_ok())
            .collect();
        assert!(!subscribers.is_empty(), "a relevant topic has a subscriber");
        let range = universe.topic_partitions(topic);
        let (base, extra) = (range.len() / subscribers.len(), range.len() % subscribers.len());
        let quotas: Vec<usize> = (0..subscribers.len())
            .map(|i| base + usize::from(i < extra))
            .collect();
        let mut filled = vec![0usize; subscribers.len()];
        for (slot, &member) in subscribers.iter().enumerate() {
            let prior = &universe.prior[member];
            let first = prior.partition_point(|&p| p < range.start);
            let last = prior.partition_point(|&p| p < range.end);
            for &partition in &prior[first..last] {
                if filled[slot] < quotas[slot] && owners[partition].is_none() {
                    owners[partition] = Some(member);
                    filled[slot] += 1;
                }
            }
        }
        place_range_by_rack(
            universe,
            &subscribers,
            &quotas,
            &mut filled,
            range.clone(),
            &mut owners,
        );
        let mut slot = 0;
        for partition in range {
            if owners[partition].is_some() {
                continue;
            }
            while filled[slot] == quotas[slot] {
                slot += 1;
            }
            owners[partition] = Some(subscribers[slot]);
            filled[slot] += 1;
        }
        debug_assert_eq!(filled, quotas);
    }
    owners
}

/// Gives each unowned partition to a rack-matching subscriber with room left, preferring the one
/// with the most room so that the racks' quotas are used up evenly.
fn place_range_by_rack(
    universe: &Universe,
    subscribers: &[MemberIdx],
    quotas: &[usize],
    filled: &mut [usize],
    range: std::ops::Range<PartitionIdx>,
    owners: &mut [Option<MemberIdx>],
) {
    for partition in range {
        if owners[partition].is_some() || universe.partition_racks[partition].is_empty() {
            continue;
        }
        let best = (0..subscribers.len())
            .filter(|&slot| {
                filled[slot] < quotas[slot] && universe.rack_matches(subscribers[slot], partition)
            })
            .max_by_key(|&slot| (quotas[slot] - filled[slot], std::cmp::Reverse(slot)));
        if let Some(slot) = best {
            owners[partition] = Some(subscribers[slot]);
            filled[slot] += 1;
        }
    }
}

/// Topics with exactly the same eligible members. Balancing works per class rather than per topic
/// so that a homogeneous group is one class however many topics it has.
struct SubscriptionClass {
    members: Vec<MemberIdx>,
    partitions: Vec<PartitionIdx>,
    /// Eligible members by (partition count, member).
    by_count: BTreeSet<(usize, MemberIdx)>,
    /// Eligible members with a rack, per rack, by (partition count, member).
    by_rack: BTreeMap<RackIdx, BTreeSet<(usize, MemberIdx)>>,
    /// Members holding at least one partition of this class, by (partition count, member).
    holders: BTreeSet<(usize, MemberIdx)>,
}

/// Mutable state of the uniform assignor.
struct UniformBuilder<'u> {
    universe: &'u Universe<'u>,
    classes: Vec<SubscriptionClass>,
    partition_class: Vec<usize>,
    /// Classes each member is eligible for, ascending.
    member_classes: Vec<Vec<usize>>,
    owners: Vec<Option<MemberIdx>>,
    /// Each member's partitions, per class (no empty sets).
    held: Vec<BTreeMap<usize, BTreeSet<PartitionIdx>>>,
    counts: Vec<usize>,
    rack_aware: bool,
}

impl<'u> UniformBuilder<'u> {
    fn new(universe: &'u Universe<'u>) -> Self {
        let member_count = universe.member_count();
        let mut eligible_members: Vec<Vec<MemberIdx>> = vec![Vec::new(); universe.topic_ids.len()];
        for (member, topics) in universe.member_topics.iter().enumerate() {
            for &topic in topics {
                eligible_members[topic].push(member);
            }
        }
        let mut class_of_members: BTreeMap<Vec<MemberIdx>, usize> = BTreeMap::new();
        let mut classes: Vec<SubscriptionClass> = Vec::new();
        let mut partition_class = vec![0; universe.partition_count()];
        for (topic, members) in eligible_members.into_iter().enumerate() {
            let next = classes.len();
            let class = *class_of_members.entry(members.clone()).or_insert(next);
            if class == next {
                classes.push(SubscriptionClass::new(members, &universe.member_racks));
            }
            for partition in universe.topic_partitions(topic) {
                classes[class].partitions.push(partition);
                partition_class[partition] = class;
            }
        }
        let mut member_classes = vec![Vec::new(); member_count];
        for (class, data) in classes.iter().enumerate() {
            for &member in &data.members {
                member_classes[member].push(class);
            }
        }
        let rack_aware = universe.member_racks.iter().any(Option::is_some)
            && universe.partition_racks.iter().any(|racks| !racks.is_empty());
        UniformBuilder {
            universe,
            classes,
            partition_class,
            member_classes,
            owners: vec![None; universe.partition_count()],
            held: vec![BTreeMap::new(); member_count],
            counts: vec![0; member_count],
            rack_aware,
        }
    }

    /// Runs the phases. Balancing strictly lowers the sum of squared counts, and every rack
    /// improvement raises the number of rack-local partitions without raising that sum, so the
    /// alternation ends; its end state is a fixed point, which makes the assignor idempotent.
    fn build(mut self) -> Vec<Option<MemberIdx>> {
        self.retain_prior();
        self.place_unassigned();
        loop {
            self.balance((0..self.classes.len()).collect());
            if !self.rack_aware || !self.improve_racks() {
                break;
            }
        }
        self.owners
    }

    /// Keeps every valid prior ownership; a partition claimed twice goes to the first claimer in
    /// member-id order. Over-loaded members are evened out later by `balance`, which only moves
    /// what it must.
    fn retain_prior(&mut self) {
        for member in 0..self.universe.member_count() {
            for index in 0..self.universe.prior[member].len() {
                let partition = self.universe.prior[member][index];
                if self.owners[partition].is_none() {
                    self.give(partition, member);
                }
            }
        }
    }

    /// Gives each orphaned partition to the least-loaded eligible member, preferring a rack-local
    /// one when it is as little loaded. Most constrained classes go first.
    fn place_unassigned(&mut self) {
        let mut order: Vec<usize> = (0..self.classes.len()).collect();
        order.sort_by_key(|&class| (self.classes[class].members.len(), class));
        for class in order {
            for index in 0..self.classes[class].partitions.len() {
                let partition = self.classes[class].partitions[index];
                if self.owners[partition].is_some() {
                    continue;
                }
                let &(least_count, least_loaded) = self.classes[class]
                    .by_count
                    .first()
                    .expect("invariant: a class has members");
                let member = match self.least_loaded_local(partition) {
                    Some((count, local)) if count <= least_count => local,
                    _ => least_loaded,
                };
                self.give(partition, member);
            }
        }
    }

    /// The least-loaded eligible member in one of the partition's racks, as (count, member).
    fn least_loaded_local(&self, partition: PartitionIdx) -> Option<(usize, MemberIdx)> {
        let class = &self.classes[self.partition_class[partition]];
        self.universe.partition_racks[partition]
            .iter()
            .filter_map(|rack| {
                class
                    .by_rack
                    .get(rack)
                    .and_then(|members| members.first().copied())
            })
            .min()
    }

    /// Moves partitions until, in every class, the most loaded holder has at most one partition
    /// more than the least loaded eligible member: then no member could take a partition from one
    /// with two or more partitions more. In a homogeneous group that means counts differ by ≤ 1.
    fn balance(&mut self, mut pending: BTreeSet<usize>) {
        while let Some(class) = pending.pop_first() {
            while let Some((partition, donor, receiver)) = self.next_balancing_move(class) {
                self.transfer(partition, receiver);
                pending.extend(self.member_classes[donor].iter().copied());
                pending.extend(self.member_classes[receiver].iter().copied());
                pending.remove(&class);
            }
        }
    }

    /// The move (partition, donor, receiver) that the class needs next, if its most loaded holder
    /// has two or more partitions more than its least loaded member.
    fn next_balancing_move(&self, class: usize) -> Option<(PartitionIdx, MemberIdx, MemberIdx)> {
        let &(least_count, _) = self.classes[class].by_count.first()?;
        let &(most_count, donor) = self.classes[class].holders.last()?;
        if most_count < least_count + 2 {
            return None;
        }
        let (partition, receiver) = self.pick_balancing_move(class, least_count, donor);
        Some((partition, donor, receiver))
    }

    /// Picks which of the donor's partitions moves, and to which least-loaded member: a move that
    /// lands in a replica's rack if there is one, else preferably one that was not rack-local.
    fn pick_balancing_move(
        &self,
        class: usize,
        least_count: usize,
        donor: MemberIdx,
    ) -> (PartitionIdx, MemberIdx) {
        let donated = &self.held[donor][&class];
        if self.rack_aware {
            for &partition in donated {
                if let Some((count, member)) = self.least_loaded_local(partition) {
                    if count == least_count && member != donor {
                        return (partition, member);
                    }
                }
            }
        }
        let &(_, receiver) = self.classes[class]
            .by_count
            .first()
            .expect("invariant: a class has members");
        let partition = donated
            .iter()
            .copied()
            .find(|&partition| !self.universe.rack_matches(donor, partition))
            .or_else(|| donated.first().copied())
            .expect("invariant: a holder holds a partition of the class");
        (partition, receiver)
    }

    /// Makes passes over the partitions that sit outside their racks although an eligible member
    /// is in one of them, fixing what can be fixed without upsetting balance. Returns whether
    /// anything moved.
    fn improve_racks(&mut self) -> bool {
        let mut improved = false;
        loop {
            let mut progress = false;
            for partition in 0..self.universe.partition_count() {
                if self.is_fixable_misplacement(partition) && self.try_fix_misplacement(partition) {
                    progress = true;
                }
            }
            if !progress {
                return improved;
            }
            improved = true;
        }
    }

    fn is_fixable_misplacement(&self, partition: PartitionIdx) -> bool {
        let owner = self.owners[partition].expect("invariant: all partitions are placed");
        !self.universe.rack_matches(owner, partition) && self.least_loaded_local(partition).is_some()
    }

    /// Tries, in order: moving the partition to a less-loaded local member; swapping it with a
    /// partition of a local member; moving it to an equally loaded local member while taking a
    /// partition from a more loaded member in exchange. Each raises the number of rack-local
    /// partitions and never raises the sum of squared counts.
    fn try_fix_misplacement(&mut self, partition: PartitionIdx) -> bool {
        let owner = self.owners[partition].expect("invariant: all partitions are placed");
        let Some((local_count, local)) = self.least_loaded_local(partition) else {
            return false;
        };
        if local_count < self.counts[owner] {
            self.transfer(partition, local);
            return true;
        }
        if let Some((member, exchanged)) = self.find_swap(partition, owner) {
            self.transfer(partition, member);
            self.transfer(exchanged, owner);
            return true;
        }
        if let Some(exchanged) = self.find_refill(owner, local, local_count + 1) {
            self.transfer(exchanged, owner);
            self.transfer(partition, local);
            return true;
        }
        false
    }

    /// Whether moving `partition` from `from` to `to` keeps or gains rack locality.
    fn move_keeps_locality(&self, partition: PartitionIdx, from: MemberIdx, to: MemberIdx) -> bool {
        self.universe.rack_matches(to, partition) || !self.universe.rack_matches(from, partition)
    }

    /// A local member of the partition and one of its partitions that the owner can take without
    /// losing locality.
    fn find_swap(&self, partition: PartitionIdx, owner: MemberIdx) -> Option<(MemberIdx, PartitionIdx)> {
        let class = &self.classes[self.partition_class[partition]];
        for rack in &self.universe.partition_racks[partition] {
            for &(_, member) in class.by_rack.get(rack).into_iter().flatten() {
                for (other_class, partitions) in &self.held[member] {
                    if self.member_classes[owner].binary_search(other_class).is_err() {
                        continue;
                    }
                    let exchanged = partitions
                        .iter()
                        .copied()
                        .find(|&other| self.move_keeps_locality(other, member, owner));
                    if let Some(exchanged) = exchanged {
                        return Some((member, exchanged));
                    }
                }
            }
        }
        None
    }

    /// A partition the owner can take, without losing locality, from a member (other than `local`)
    /// holding at least `min_count` partitions.
    fn find_refill(&self, owner: MemberIdx, local: MemberIdx, min_count: usize) -> Option<PartitionIdx> {
        for &class in &self.member_classes[owner] {
            for &(count, donor) in self.classes[class].holders.iter().rev() {
                if count < min_count {
                    break;
                }
                if donor == owner || donor == local {
                    continue;
                }
                let found = self.held[donor][&class]
                    .iter()
                    .copied()
                    .find(|&other| self.move_keeps_locality(other, donor, owner));
                if found.is_some() {
                    return found;
                }
            }
        }
        None
    }

    fn transfer(&mut self, partition: PartitionIdx, to: MemberIdx) {
        let from = self.owners[partition].expect("invariant: only placed partitions are transferred");
        debug_assert_ne!(from, to);
        self.unindex(from);
        let class = self.partition_class[partition];
        let emptied = self.held[from].get_mut(&class).is_some_and(|set| {
            set.remove(&partition);
            set.is_empty()
        });
        if emptied {
            self.held[from].remove(&class);
        }
        self.counts[from] -= 1;
        self.owners[partition] = None;
        self.reindex(from);
        self.give(partition, to);
    }

    fn give(&mut self, partition: PartitionIdx, member: MemberIdx) {
        debug_assert!(self.owners[partition].is_none());
        self.unindex(member);
        let class = self.partition_class[partition];
        self.owners[partition] = Some(member);
        self.held[member].entry(class).or_default().insert(partition);
        self.counts[member] += 1;
        self.reindex(member);
    }

    /// Removes the member's entries from its classes' indices before its count changes.
    fn unindex(&mut self, member: MemberIdx) {
        let key = (self.counts[member], member);
        for &class in &self.member_classes[member] {
            let data = &mut self.classes[class];
            data.by_count.remove(&key);
            if let Some(rack) = self.universe.member_racks[member] {
                data.by_rack.entry(rack).or_default().remove(&key);
            }
            data.holders.remove(&key);
        }
    }

    /// Puts the member's entries back into its classes' indices after its count changed.
    fn reindex(&mut self, member: MemberIdx) {
        let key = (self.counts[member], member);
        for &class in &self.member_classes[member] {
            let data = &mut self.classes[class];
            data.by_count.insert(key);
            if let Some(rack) = self.universe.member_racks[member] {
                data.by_rack.entry(rack).or_default().insert(key);
            }
            if self.held[member].contains_key(&class) {
                data.holders.insert(key);
            }
        }
    }
}

impl SubscriptionClass {
    fn new(members: Vec<MemberIdx>, member_racks: &[Option<RackIdx>]) -> Self {
        let by_count = members.iter().map(|&member| (0, member)).collect();
        let mut by_rack: BTreeMap<RackIdx, BTreeSet<(usize, MemberIdx)>> = BTreeMap::new();
        for &member in &members {
            if let Some(rack) = member_racks[member] {
                by_rack.entry(rack).or_default().insert((0, member));
            }
        }
        SubscriptionClass {
            members,
            partitions: Vec::new(),
            by_count,
            by_rack,
            holders: BTreeSet::new(),
        }
    }
}

#[cfg(test)]
#[path = "assignor_tests.rs"]
mod tests;
