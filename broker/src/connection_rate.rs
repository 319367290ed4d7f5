//! `max.connection.creation.rate` and its per-listener form
//! (`listener.name.<name>.max.connection.creation.rate`), as Kafka's acceptor applies them
//! (KIP-612): a connection past the broker's or its listener's rate is held before it is
//! served, and the listener's accept loop with it, so the next connections wait in the listen
//! queue rather than being refused. The inter-broker listener is exempt from the broker-wide
//! rate, as in Kafka, so that replication never waits behind a client's connection storm.
//!
//! Each rate is a token bucket holding at most a second's worth of connections: a burst of
//! that many is served at once, then one per `1/rate` seconds. Shared by every shard's accept
//! loops; touched once per accepted connection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::kafka_listener::ListenerId;

/// Kafka's default for both keys: no limit.
pub const UNLIMITED: u32 = i32::MAX as u32;

/// The connection creation rates of a broker.
#[derive(Debug)]
pub struct ConnectionRate {
    broker: Option<TokenBucket>,
    /// By listener, in the order of `listeners`.
    listeners: Vec<Option<TokenBucket>>,
    /// The inter-broker listener, which the broker-wide rate does not count.
    exempt: Option<ListenerId>,
    throttled_total: AtomicU64,
}

impl ConnectionRate {
    /// `broker`: `max.connection.creation.rate`; `listeners`: each listener's own (or
    /// [`UNLIMITED`]); `exempt`: the inter-broker listener, in a cluster.
    pub fn new(broker: u32, listeners: &[u32], exempt: Option<ListenerId>) -> ConnectionRate {
        ConnectionRate {
            broker: TokenBucket::limiting(broker),
            listeners: listeners
                .iter()
                .map(|rate| TokenBucket::limiting(*rate))
                .collect(),
            exempt,
            throttled_total: AtomicU64::new(0),
        }
    }

    /// Counts a connection accepted on `listener` at `now`; answers how long to hold it (zero:
    /// serve it at once).
    pub fn hold_for(&self, listener: ListenerId, now: Instant) -> Duration {
        let own = self.listeners.get(listener.0).and_then(Option::as_ref);
        let broker = self.broker.as_ref().filter(|_| Some(listener) != self.exempt);
        let hold = [own, broker]
            .into_iter()
            .flatten()
            .map(|bucket| bucket.take(now))
            .max()
            .unwrap_or(Duration::ZERO);
        if !hold.is_zero() {
            self.throttled_total.fetch_add(1, Ordering::Relaxed);
        }
        hold
    }

    /// Connections held back so far.
    pub fn throttled_total(&self) -> u64 {
        self.throttled_total.load(Ordering::Relaxed)
    }
}

#[derive(Debug)]
struct TokenBucket {
    per_second: f64,
    /// Tokens now (below zero: connections taken on credit, which their holds pay back) and
    /// when that was.
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    fn limiting(per_second: u32) -> Option<TokenBucket> {
        (per_second < UNLIMITED).then(|| TokenBucket {
            per_second: f64::from(per_second.max(1)),
            state: Mutex::new((f64::from(per_second.max(1)), Instant::now())),
        })
    }

    /// Takes a token at `now`; the wait until the bucket is out of debt again.
    fn take(&self, now: Instant) -> Duration {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (tokens, at) = *state;
        let refilled = now.saturating_duration_since(at).as_secs_f64() * self.per_second;
        let tokens = (tokens + refilled).min(self.per_second) - 1.0;
        *state = (tokens, now.max(at));
        match tokens < 0.0 {
            true => Duration::from_secs_f64(-tokens / self.per_second),
            false => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_a_seconds_worth_is_served_then_one_per_interval() {
        let rate = ConnectionRate::new(10, &[UNLIMITED], None);
        let now = Instant::now();
        let holds: Vec<Duration> = (0..13).map(|_| rate.hold_for(ListenerId(0), now)).collect();
        assert!(holds[..10].iter().all(Duration::is_zero), "{holds:?}");
        let ms: Vec<u128> = holds[10..].iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [100, 200, 300]);
        assert_eq!(rate.throttled_total(), 3);
        // A second later the debt is paid and a token refilled... and so on.
        assert!(rate
            .hold_for(ListenerId(0), now + Duration::from_millis(1400))
            .is_zero());
    }

    #[test]
    fn the_listeners_own_rate_applies_and_the_inter_broker_one_is_exempt_from_the_brokers() {
        let rate = ConnectionRate::new(1, &[UNLIMITED, 2, UNLIMITED], Some(ListenerId(2)));
        let now = Instant::now();
        for _ in 0..50 {
            assert!(
                rate.hold_for(ListenerId(2), now).is_zero(),
                "the inter-broker listener"
            );
        }
        assert!(rate.hold_for(ListenerId(1), now).is_zero());
        // The broker's one token is gone: listener 1's second connection waits for it.
        assert_eq!(rate.hold_for(ListenerId(1), now), Duration::from_secs(1));
        assert_eq!(rate.hold_for(ListenerId(1), now), Duration::from_secs(2));
    }
}
