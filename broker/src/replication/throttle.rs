//! Replication throttles, as Kafka has them: `leader.replication.throttled.rate` and
//! `follower.replication.throttled.rate` (bytes per second, per broker) apply to the replicas a
//! topic lists in `leader.replication.throttled.replicas` / `follower.replication.throttled
//! .replicas` (`*`, or `partition:broker` pairs). A throttled leader leaves throttled partitions
//! out of a follower's answer while its budget is spent; a throttled follower stops asking for
//! them. Each shard has its share of the rate (its own bucket: no sharing across shards).

use laminar_model::NodeId;
use std::cell::Cell;
use std::time::Instant;

/// Which end of replication a throttle applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrottleSide {
    Leader,
    Follower,
}

impl ThrottleSide {
    /// The topic config listing the throttled replicas of this side.
    pub fn replicas_key(self) -> &'static str {
        match self {
            ThrottleSide::Leader => "leader.replication.throttled.replicas",
            ThrottleSide::Follower => "follower.replication.throttled.replicas",
        }
    }
}

/// A token bucket of bytes. Owned by one shard; not Send. Its rate changes with the dynamic
/// broker configs (`set_rate`).
pub struct Throttle {
    /// Bytes per second this shard may move; `None`: unthrottled.
    rate_bytes_per_s: Cell<Option<u64>>,
    shard_count: usize,
    /// Bytes that may go now; negative after a large answer (it is paid back before more go).
    available: Cell<f64>,
    refilled_at: Cell<Instant>,
}

impl Throttle {
    /// `rate_bytes_per_s` for the whole broker, of which this shard gets `1 / shard_count`.
    pub fn new(rate_bytes_per_s: i64, shard_count: usize) -> Self {
        let throttle = Throttle {
            rate_bytes_per_s: Cell::new(None),
            shard_count: shard_count.max(1),
            available: Cell::new(0.0),
            refilled_at: Cell::new(Instant::now()),
        };
        throttle.set_rate(rate_bytes_per_s);
        throttle
    }

    /// A new broker-wide rate: this shard's share starts with one second's worth.
    /// Kafka's "no throttle" is `Long.MAX_VALUE`: anything past 2^53 counts as none.
    pub fn set_rate(&self, rate_bytes_per_s: i64) {
        let shards = u64::try_from(self.shard_count).unwrap_or(1);
        let rate = u64::try_from(rate_bytes_per_s)
            .ok()
            .filter(|r| *r < 1 << 53)
            .map(|r| (r / shards).max(1));
        self.rate_bytes_per_s.set(rate);
        self.available.set(rate.map_or(0.0, |r| r as f64));
        self.refilled_at.set(Instant::now());
    }

    pub fn is_limited(&self) -> bool {
        self.rate_bytes_per_s.get().is_some()
    }

    /// Whether throttled bytes may go now (the budget is not spent).
    pub fn allows(&self, now: Instant) -> bool {
        self.refill(now);
        self.rate_bytes_per_s.get().is_none() || self.available.get() > 0.0
    }

    /// Counts `bytes` that went.
    pub fn spend(&self, bytes: usize, now: Instant) {
        if self.rate_bytes_per_s.get().is_some() {
            self.refill(now);
            self.available.set(self.available.get() - bytes as f64);
        }
    }

    /// Adds what the time since the last refill earned, up to one second's worth (the burst).
    fn refill(&self, now: Instant) {
        let Some(rate) = self.rate_bytes_per_s.get() else {
            return;
        };
        let elapsed = now
            .saturating_duration_since(self.refilled_at.get())
            .as_secs_f64();
        let rate = rate as f64;
        self.available
            .set((self.available.get() + elapsed * rate).min(rate));
        self.refilled_at.set(now);
    }
}

/// Whether a topic's `*.replication.throttled.replicas` value names `partition` on `broker`.
pub fn lists_replica(value: &str, partition: i32, broker: NodeId) -> bool {
    let value = value.trim();
    value == "*"
        || value.split(',').any(|pair| {
            let mut parts = pair.trim().splitn(2, ':');
            let (p, b) = (parts.next(), parts.next());
            p.and_then(|p| p.trim().parse::<i32>().ok()) == Some(partition)
                && b.and_then(|b| b.trim().parse::<i32>().ok()) == Some(broker.get())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_spent_budget_refills_at_the_rate_up_to_one_seconds_worth() {
        let start = Instant::now();
        let throttle = Throttle::new(2_000, 2); // 1 000 B/s on this shard
        assert!(throttle.is_limited());
        assert!(throttle.allows(start));
        throttle.spend(2_500, start);
        assert!(!throttle.allows(start), "1 500 B in debt");
        assert!(!throttle.allows(start + Duration::from_millis(1_400)));
        assert!(throttle.allows(start + Duration::from_millis(1_600)));
        let idle = start + Duration::from_secs(60);
        throttle.spend(1_001, idle);
        assert!(
            !throttle.allows(idle),
            "a long idle earns one second's burst, no more"
        );
    }

    #[test]
    fn a_new_rate_applies_at_once() {
        let throttle = Throttle::new(i64::MAX, 1);
        throttle.set_rate(1_000);
        assert!(throttle.is_limited());
        throttle.spend(1_500, Instant::now());
        assert!(!throttle.allows(Instant::now()));
        throttle.set_rate(i64::MAX);
        assert!(!throttle.is_limited());
        assert!(throttle.allows(Instant::now()));
    }

    #[test]
    fn kafkas_long_max_means_no_throttle() {
        let throttle = Throttle::new(i64::MAX, 4);
        assert!(!throttle.is_limited());
        throttle.spend(usize::MAX, Instant::now());
        assert!(throttle.allows(Instant::now()));
    }

    #[test]
    fn throttled_replica_lists_name_partition_broker_pairs_or_everything() {
        assert!(lists_replica("*", 3, NodeId::new(9)));
        assert!(lists_replica("0:1, 1:2", 1, NodeId::new(2)));
        assert!(!lists_replica("0:1,1:2", 1, NodeId::new(1)));
        assert!(!lists_replica("", 0, NodeId::new(1)));
        assert!(!lists_replica("0:x,:1", 0, NodeId::new(1)));
    }
}
