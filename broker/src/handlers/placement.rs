//! Where a connection's data requests go, so that a connection whose produce and fetch
//! requests all name partitions of one other shard moves to that shard (`connection.rs`). A
//! request to a group's coordinator counts as naming the group's `__consumer_offsets`
//! partition.
//!
//! The kernel spreads connections over the shards' listeners by a hash of their addresses, not
//! by the partitions they will use. A connection on another shard than its partitions pays a
//! round trip between shards per request: on this 2-vCPU VM that tripled the broker's CPU per
//! GB for a producer of 16 KiB batches to one partition (3.6 s against 1.3 s), in wake-ups,
//! context switches and the memory barrier glommio issues before each executor sleeps. Once
//! moved, its requests run where their partitions live (docs/decisions/0025, small requests and connections
//! that move).

use std::cell::Cell;

use laminar_engine::shard::ShardId;

use crate::broker::{owner_of, TopicPartition};

/// Data requests in a row whose partitions all live on one other shard before the connection
/// moves there. Any request naming partitions of this shard or of two shards starts the count
/// again, so a client whose work spreads over the shards never moves; a steady producer or
/// consumer of one shard's partitions moves within its first few dozen requests, and a client
/// whose work changes shard moves at most once per this many requests.
pub const MOVE_AFTER_REQUESTS: u32 = 32;

/// The placement of one connection's data requests. Owned by the connection, on its shard.
#[derive(Debug)]
pub struct Placement {
    here: ShardId,
    shard_count: usize,
    /// The other shard the latest requests named only, and how many in a row did.
    toward: Cell<Option<(ShardId, u32)>>,
}

impl Placement {
    /// A connection served on shard `here` of `shard_count`.
    pub fn new(here: ShardId, shard_count: usize) -> Placement {
        assert!(here < shard_count, "shard {here} of {shard_count}");
        Placement {
            here,
            shard_count,
            toward: Cell::new(None),
        }
    }

    /// Notes the partitions one produce or fetch request names.
    pub fn note<'a>(&self, partitions: impl IntoIterator<Item = &'a TopicPartition>) {
        let mut owners = partitions
            .into_iter()
            .filter_map(|tp| owner_of(tp, self.shard_count));
        let Some(first) = owners.next() else {
            return; // no partition a shard owns: neither for moving nor against
        };
        let one_shard = owners.all(|owner| owner == first);
        let toward = match self.toward.get() {
            _ if !one_shard || first == self.here => None,
            Some((shard, run)) if shard == first => Some((shard, run.saturating_add(1))),
            _ => Some((first, 1)),
        };
        self.toward.set(toward);
    }

    /// The shard this connection should move to: the one its last [`MOVE_AFTER_REQUESTS`] data
    /// requests named alone.
    pub fn move_to(&self) -> Option<ShardId> {
        match self.toward.get() {
            Some((shard, run)) if run >= MOVE_AFTER_REQUESTS => Some(shard),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first partition of `topic` that shard `shard` of 2 owns, from `start` on.
    fn on_shard(topic: &str, shard: ShardId, start: i32) -> TopicPartition {
        (start..)
            .map(|partition| TopicPartition {
                topic: topic.into(),
                partition,
            })
            .find(|tp| owner_of(tp, 2) == Some(shard))
            .expect("partitions spread over both shards")
    }

    #[test]
    fn requests_naming_only_another_shard_move_the_connection_after_the_threshold() {
        let placement = Placement::new(0, 2);
        let there = on_shard("t", 1, 0);
        for _ in 1..MOVE_AFTER_REQUESTS {
            placement.note([&there]);
            assert_eq!(placement.move_to(), None);
        }
        placement.note([&there]);
        assert_eq!(placement.move_to(), Some(1));
    }

    #[test]
    fn a_request_naming_this_shard_or_two_shards_starts_the_count_again() {
        let placement = Placement::new(0, 2);
        let (here, there) = (on_shard("t", 0, 0), on_shard("t", 1, 0));
        for spoiler in [vec![&here], vec![&there, &here]] {
            for _ in 1..MOVE_AFTER_REQUESTS {
                placement.note([&there]);
            }
            placement.note(spoiler);
            placement.note([&there]);
            assert_eq!(placement.move_to(), None, "the count started again");
        }
    }

    #[test]
    fn requests_naming_no_partition_neither_count_nor_reset() {
        let placement = Placement::new(1, 2);
        let there = on_shard("t", 0, 0);
        let unplaceable = TopicPartition {
            topic: "t".into(),
            partition: -1,
        };
        for _ in 0..MOVE_AFTER_REQUESTS {
            placement.note([&there]);
            placement.note(std::iter::empty());
            placement.note([&unplaceable]);
        }
        assert_eq!(placement.move_to(), Some(0));
    }

    #[test]
    fn one_shard_never_moves() {
        let placement = Placement::new(0, 1);
        let tp = on_shard("t", 0, 0);
        for _ in 0..=MOVE_AFTER_REQUESTS {
            placement.note([&tp]);
        }
        assert_eq!(placement.move_to(), None);
    }
}
