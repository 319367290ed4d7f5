//! Where a new partition's replicas go: spread evenly over the unfenced brokers, leaders
//! (first replicas) spread evenly, and rack-aware when brokers have racks.
//!
//! The brokers are put in a rack-alternating order (one broker of each rack in turn, racks and
//! brokers in id order, then rotated by the seed). Partition `p`'s first replica is the
//! broker at `(start + p) mod n` of that order, so each broker leads the same number of
//! partitions (±1). The other replicas follow at a distance that changes every `n` partitions,
//! so followers spread too; each next replica skips brokers already chosen and, while some
//! rack has no replica yet, brokers of racks already used. Pure functions: the active
//! controller calls them on its runtime with a seed, and the same seed gives the same answer.

use laminar_model::NodeId;
use std::collections::{BTreeMap, BTreeSet};

/// A broker that can take replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementBroker {
    pub broker_id: NodeId,
    pub rack: Option<String>,
}

/// Serde: it crosses the network inside a [`crate::Refusal`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, thiserror::Error)]
pub enum PlacementError {
    #[error("replication factor {replication_factor} is larger than the {brokers} available brokers")]
    NotEnoughBrokers {
        replication_factor: usize,
        brokers: usize,
    },
    #[error("replication factor must be positive")]
    ZeroReplicationFactor,
}

/// A small deterministic mixer (splitmix64), so placement does not depend on a library's RNG.
fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Brokers ordered so that neighbours are on different racks when racks allow it.
fn rack_alternating(brokers: &[PlacementBroker]) -> Vec<PlacementBroker> {
    let mut by_rack: BTreeMap<Option<&str>, Vec<&PlacementBroker>> = BTreeMap::new();
    for broker in brokers {
        by_rack.entry(broker.rack.as_deref()).or_default().push(broker);
    }
    for members in by_rack.values_mut() {
        members.sort_by_key(|b| b.broker_id);
    }
    let rounds = by_rack.values().map(Vec::len).max().unwrap_or(0);
    let mut order = Vec::with_capacity(brokers.len());
    for round in 0..rounds {
        order.extend(
            by_rack
                .values()
                .filter_map(|members| members.get(round).map(|b| (*b).clone())),
        );
    }
    order
}

/// Replica lists for partitions `first_partition .. first_partition + partition_count`.
pub fn assign_replicas(
    brokers: &[PlacementBroker],
    first_partition: usize,
    partition_count: usize,
    replication_factor: usize,
    seed: u64,
) -> Result<Vec<Vec<NodeId>>, PlacementError> {
    if replication_factor == 0 {
        return Err(PlacementError::ZeroReplicationFactor);
    }
    if replication_factor > brokers.len() {
        return Err(PlacementError::NotEnoughBrokers {
            replication_factor,
            brokers: brokers.len(),
        });
    }
    let order = rack_alternating(brokers);
    let n = order.len();
    let racks: BTreeSet<Option<&str>> = order.iter().map(|b| b.rack.as_deref()).collect();
    let random = mix(seed);
    let start = (random % n as u64) as usize;
    let shift_start = ((random >> 32) % n as u64) as usize;
    let mut assignment = Vec::with_capacity(partition_count);
    for p in first_partition..first_partition + partition_count {
        let first = (start + p) % n;
        // 1 ..= n-1: the distance from the first replica to the next, changing every n.
        let distance = if n > 1 {
            1 + (shift_start + p / n) % (n - 1)
        } else {
            0
        };
        let replicas = pick_replicas(&order, &racks, first, distance, replication_factor);
        let distinct: BTreeSet<&NodeId> = replicas.iter().collect();
        assert!(
            replicas.len() == replication_factor && distinct.len() == replication_factor,
            "placement picks {replication_factor} distinct brokers: {replicas:?}"
        );
        assignment.push(replicas);
    }
    Ok(assignment)
}

fn pick_replicas(
    order: &[PlacementBroker],
    racks: &BTreeSet<Option<&str>>,
    first: usize,
    distance: usize,
    replication_factor: usize,
) -> Vec<NodeId> {
    let n = order.len();
    let mut chosen: Vec<usize> = vec![first];
    let mut racks_used: BTreeSet<Option<&str>> = BTreeSet::new();
    racks_used.extend(order.get(first).map(|b| b.rack.as_deref()));
    while chosen.len() < replication_factor {
        let candidates = (0..n)
            .map(|k| (first + distance + k) % n)
            .filter(|i| !chosen.contains(i));
        let candidates: Vec<usize> = candidates.collect();
        let want_new_rack = racks_used.len() < racks.len();
        let rack_of = |i: &usize| order.get(*i).map(|b| b.rack.as_deref());
        let pick = candidates
            .iter()
            .find(|i| !want_new_rack || rack_of(i).is_some_and(|r| !racks_used.contains(&r)))
            .or(candidates.first())
            .copied();
        let Some(pick) = pick else { break };
        racks_used.extend(rack_of(&pick));
        chosen.push(pick);
    }
    chosen
        .iter()
        .filter_map(|i| order.get(*i).map(|b| b.broker_id))
        .collect()
}
