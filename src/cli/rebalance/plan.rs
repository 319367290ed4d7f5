//! The rebalance planner: from where every replica is, a new placement with the same replica
//! counts per partition in which every broker holds about as many replicas and leads about as
//! many partitions as the others, moving as little data as it can. Brokers named as leaving
//! (decommission) end with none. Pure: the CLI gathers the inputs and carries out the moves.
//!
//! Each topic is balanced on its own, as Kafka's reassignment tool does, so that every topic
//! spreads over every broker; where several brokers would do, the one holding fewest replicas
//! over all topics is taken, which keeps the cluster as a whole even too.
//!
//! Replicas first: while a leaving broker holds a replica of the topic, or the broker holding
//! most of its replicas holds two more than the one holding fewest, one replica moves from the
//! first to the second (the smallest partition that can go, preferring one whose other replicas
//! are on other racks than the destination's). A move replaces the broker in place in the
//! replica list, so the order (the preferred leader first) changes only where the broker moved.
//! Then leaders: where a broker is the preferred leader of more of the topic's partitions than
//! its share, it swaps places with another replica of the same partition that leads less; a
//! swap moves no data.

use std::collections::{BTreeMap, BTreeSet};

/// A broker the replicas may go to, with its `broker.rack`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    pub id: i32,
    pub rack: Option<String>,
}

/// One partition where it is now: its replicas (the preferred leader first) and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub topic: String,
    pub partition: i32,
    pub replicas: Vec<i32>,
    pub size_bytes: u64,
}

/// One partition whose replicas change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub topic: String,
    pub partition: i32,
    pub from: Vec<i32>,
    pub to: Vec<i32>,
    /// The bytes copied: the partition's size once per broker it gains.
    pub bytes: u64,
}

/// Why no plan can be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("{topic}-{partition} has {replicas} replicas, but only {brokers} brokers may hold them")]
    TooFewBrokers {
        topic: String,
        partition: i32,
        replicas: usize,
        brokers: usize,
    },
}

/// The moves that balance `partitions` over `brokers` minus `leaving`.
pub fn plan(
    brokers: &[Broker],
    partitions: &[Placement],
    leaving: &BTreeSet<i32>,
) -> Result<Vec<Move>, PlanError> {
    let placed = placement(brokers, partitions, leaving, Leaders::Balance)?;
    Ok(partitions
        .iter()
        .zip(placed)
        .filter(|(p, to)| p.replicas != *to)
        .map(|(p, to)| {
            let gained = to.iter().filter(|b| !p.replicas.contains(b)).count() as u64;
            Move {
                topic: p.topic.clone(),
                partition: p.partition,
                from: p.replicas.clone(),
                to,
                bytes: p.size_bytes.saturating_mul(gained),
            }
        })
        .collect())
}

/// Whether the preferred leaders are evened after the replicas (tests compare both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leaders {
    Balance,
    #[cfg_attr(not(test), allow(dead_code))]
    Keep,
}

/// Every partition's replicas once balanced, in `partitions`' order.
fn placement(
    brokers: &[Broker],
    partitions: &[Placement],
    leaving: &BTreeSet<i32>,
    leaders: Leaders,
) -> Result<Vec<Vec<i32>>, PlanError> {
    let eligible: Vec<&Broker> = brokers.iter().filter(|b| !leaving.contains(&b.id)).collect();
    if let Some(p) = partitions.iter().find(|p| p.replicas.len() > eligible.len()) {
        return Err(PlanError::TooFewBrokers {
            topic: p.topic.clone(),
            partition: p.partition,
            replicas: p.replicas.len(),
            brokers: eligible.len(),
        });
    }
    let racks: BTreeMap<i32, Option<&str>> = brokers.iter().map(|b| (b.id, b.rack.as_deref())).collect();
    let mut placed: Vec<Vec<i32>> = partitions.iter().map(|p| p.replicas.clone()).collect();
    let eligible_ids: Vec<i32> = eligible.iter().map(|b| b.id).collect();
    let mut topics: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, p) in partitions.iter().enumerate() {
        topics.entry(p.topic.as_str()).or_default().push(index);
    }
    for indexes in topics.values() {
        let topic = Topic { indexes, partitions };
        balance_replicas(&mut placed, &topic, (&eligible_ids, leaving), &racks);
        if leaders == Leaders::Balance {
            balance_leaders(&mut placed, indexes, &eligible_ids);
        }
    }
    Ok(placed)
}

/// Replicas each broker holds among `indexes` of `placed` (eligible brokers with none
/// included).
fn replica_counts(placed: &[Vec<i32>], indexes: &[usize], eligible: &[i32]) -> BTreeMap<i32, usize> {
    let mut counts: BTreeMap<i32, usize> = eligible.iter().map(|id| (*id, 0)).collect();
    for broker in indexes.iter().flat_map(|index| &placed[*index]) {
        *counts.entry(*broker).or_default() += 1;
    }
    counts
}

/// One topic's partitions: their indexes in the plan's lists.
struct Topic<'a> {
    indexes: &'a [usize],
    partitions: &'a [Placement],
}

fn balance_replicas(
    placed: &mut [Vec<i32>],
    topic: &Topic<'_>,
    (eligible, leaving): (&[i32], &BTreeSet<i32>),
    racks: &BTreeMap<i32, Option<&str>>,
) {
    let all: Vec<usize> = (0..placed.len()).collect();
    // Each move takes one replica off a leaving broker or narrows the spread: bounded.
    let replicas: usize = topic.indexes.iter().map(|index| placed[*index].len()).sum();
    for _ in 0..replicas.saturating_mul(eligible.len().max(1)) {
        let counts = replica_counts(placed, topic.indexes, eligible);
        let overall = replica_counts(placed, &all, eligible);
        let on_leaving = counts.iter().find(|(id, n)| leaving.contains(id) && **n > 0);
        let mut staying: Vec<(usize, usize, i32)> =
            eligible.iter().map(|id| (counts[id], overall[id], *id)).collect();
        staying.sort_unstable();
        let (Some(&(least, _, _)), Some(&(most, _, fullest))) = (staying.first(), staying.last()) else {
            return;
        };
        let source = match on_leaving {
            Some((id, _)) => *id,
            None if most > least + 1 => fullest,
            None => return,
        };
        let moved = staying
            .iter()
            .filter(|(n, _, id)| *id != source && (leaving.contains(&source) || *n + 1 < counts[&source]))
            .find_map(|(_, _, dest)| pick(placed, topic, (source, *dest), racks).map(|index| (index, *dest)));
        let Some((index, dest)) = moved else {
            return;
        };
        for broker in &mut placed[index] {
            if *broker == source {
                *broker = dest;
            }
        }
    }
}

/// The partition of `topic` to move from `source` to `dest`: one `dest` does not hold,
/// preferring one whose other replicas are on racks other than `dest`'s, then the smallest.
fn pick(
    placed: &[Vec<i32>],
    topic: &Topic<'_>,
    (source, dest): (i32, i32),
    racks: &BTreeMap<i32, Option<&str>>,
) -> Option<usize> {
    let dest_rack = racks.get(&dest).copied().flatten();
    let rack_taken = |replicas: &[i32]| {
        let others = replicas.iter().filter(|b| **b != source);
        dest_rack.is_some()
            && others
                .into_iter()
                .any(|b| racks.get(b).copied().flatten() == dest_rack)
    };
    topic
        .indexes
        .iter()
        .map(|index| (*index, &placed[*index]))
        .filter(|(_, replicas)| replicas.contains(&source) && !replicas.contains(&dest))
        .min_by_key(|(index, replicas)| (rack_taken(replicas), topic.partitions[*index].size_bytes, *index))
        .map(|(index, _)| index)
}

/// Preferred leaders each eligible broker has among `indexes` of `placed`.
fn leader_counts(placed: &[Vec<i32>], indexes: &[usize], eligible: &[i32]) -> BTreeMap<i32, usize> {
    let mut counts: BTreeMap<i32, usize> = eligible.iter().map(|id| (*id, 0)).collect();
    for first in indexes.iter().filter_map(|index| placed[*index].first()) {
        *counts.entry(*first).or_default() += 1;
    }
    counts
}

fn balance_leaders(placed: &mut [Vec<i32>], indexes: &[usize], eligible: &[i32]) {
    for _ in 0..indexes.len().saturating_mul(eligible.len().max(1)) {
        let counts = leader_counts(placed, indexes, eligible);
        // A swap from a broker leading `a` to one leading `b` helps when a > b + 1.
        let swap = indexes.iter().find_map(|index| {
            let replicas = &placed[*index];
            let leads = counts[replicas.first()?];
            let (position, _) = replicas
                .iter()
                .enumerate()
                .skip(1)
                .filter(|(_, b)| counts.get(b).is_some_and(|n| n + 1 < leads))
                .min_by_key(|(_, b)| counts[b])?;
            Some((*index, position))
        });
        let Some((index, position)) = swap else {
            return;
        };
        placed[index].swap(0, position);
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
