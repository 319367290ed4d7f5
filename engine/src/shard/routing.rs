//! The partition→shard table.
//!
//! Ownership is a pure function of (topic, partition, shard count), so every shard computes the
//! same owner without coordination and without a lock. The partitions of one topic are spread
//! round-robin from a per-topic starting shard, so a topic with as many partitions as cores uses
//! every core, and many single-partition topics still spread across cores.

use super::ShardId;

/// Returns the shard that owns `partition` of `topic` when `shard_count` shards run.
pub fn shard_of_partition(topic: &str, partition: i32, shard_count: usize) -> ShardId {
    assert!(shard_count > 0, "a broker runs at least one shard");
    assert!(partition >= 0, "partition index must be non-negative");
    // Stable across runs and platforms: Laminar's own hash, not Rust's randomised one.
    let topic_hash = crc32fast::hash(topic.as_bytes()) as usize;
    (topic_hash.wrapping_add(partition as usize)) % shard_count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_of_a_topic_spread_over_every_shard() {
        let shard_count = 4;
        let mut owners: Vec<ShardId> = (0..4)
            .map(|p| shard_of_partition("orders", p, shard_count))
            .collect();
        owners.sort_unstable();
        assert_eq!(owners, vec![0, 1, 2, 3]);
    }

    #[test]
    fn ownership_is_stable_and_in_range() {
        for p in 0..64 {
            let a = shard_of_partition("t", p, 3);
            assert_eq!(a, shard_of_partition("t", p, 3));
            assert!(a < 3);
        }
        assert_eq!(shard_of_partition("anything", 7, 1), 0);
    }
}
