//! Slowing down an address that keeps guessing passwords: each SASL login refused for wrong
//! credentials from an address within [`FAILURE_MEMORY`] of its previous one doubles the delay before the
//! failure is answered (and the connection closed), from
//! `connection.failed.authentication.delay.ms` up to
//! `laminar.connection.failed.authentication.delay.max.ms`. A password guesser on one address
//! gets one guess per delay per connection, and each reconnect costs it the longer delay; a
//! client that mistyped once is not held up longer than Kafka would hold it.
//!
//! Shared by every shard; touched only on failures. Bounded: at most [`ADDRESSES_MAX`]
//! addresses are remembered; past that the one that failed longest ago is forgotten.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a failure counts towards the next one's delay.
pub const FAILURE_MEMORY: Duration = Duration::from_secs(60);
/// Addresses remembered at once.
pub const ADDRESSES_MAX: usize = 10_000;
/// Doublings past the base delay (2^16 times the base is far past any sensible maximum).
const DOUBLINGS_MAX: u32 = 16;

/// The failures per client address.
#[derive(Debug)]
pub struct FailedLogins {
    base: Duration,
    max: Duration,
    recent: Mutex<HashMap<Arc<str>, Failures>>,
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    /// In a row, each within [`FAILURE_MEMORY`] of the one before.
    count: u32,
    last_at: Instant,
}

impl FailedLogins {
    pub fn new(base: Duration, max: Duration) -> FailedLogins {
        FailedLogins {
            base,
            max: max.max(base),
            recent: Mutex::new(HashMap::new()),
        }
    }

    /// Notes a failed login from `host` at `now`; answers how long to hold its answer.
    pub fn delay_after_failure(&self, host: &Arc<str>, now: Instant) -> Duration {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if !recent.contains_key(host) && recent.len() >= ADDRESSES_MAX {
            forget_one(&mut recent, now);
        }
        let failures = recent.entry(host.clone()).or_insert(Failures {
            count: 0,
            last_at: now,
        });
        if now.saturating_duration_since(failures.last_at) > FAILURE_MEMORY {
            failures.count = 0;
        }
        failures.count = failures.count.saturating_add(1);
        failures.last_at = now;
        let doublings = (failures.count - 1).min(DOUBLINGS_MAX);
        self.base.saturating_mul(1 << doublings).min(self.max)
    }

    /// The delay of a failure that was not a guess (a malformed or out-of-turn token).
    pub fn base_delay(&self) -> Duration {
        self.base
    }

    /// Addresses remembered now.
    pub fn addresses(&self) -> usize {
        self.recent.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// Makes room: every address whose last failure is out of memory, or else the oldest.
fn forget_one(recent: &mut HashMap<Arc<str>, Failures>, now: Instant) {
    recent.retain(|_, f| now.saturating_duration_since(f.last_at) <= FAILURE_MEMORY);
    if recent.len() < ADDRESSES_MAX {
        return;
    }
    let oldest = recent
        .iter()
        .min_by_key(|(_, f)| f.last_at)
        .map(|(host, _)| host.clone());
    if let Some(oldest) = oldest {
        recent.remove(&oldest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_millis(1000);

    #[test]
    fn failures_in_a_row_double_the_delay_up_to_the_maximum_and_are_forgotten_after_a_minute() {
        let logins = FailedLogins::new(BASE, MAX);
        let (guesser, typo): (Arc<str>, Arc<str>) = ("10.0.0.1".into(), "10.0.0.2".into());
        let start = Instant::now();
        let delays: Vec<u128> = (0..6)
            .map(|i| {
                logins
                    .delay_after_failure(&guesser, start + Duration::from_secs(i))
                    .as_millis()
            })
            .collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
        // Another address is not held up by the guesser.
        assert_eq!(logins.delay_after_failure(&typo, start), BASE);
        let later = start + Duration::from_secs(5) + FAILURE_MEMORY + Duration::from_secs(1);
        assert_eq!(logins.delay_after_failure(&guesser, later), BASE);
    }

    #[test]
    fn the_addresses_remembered_are_bounded() {
        let logins = FailedLogins::new(BASE, MAX);
        let start = Instant::now();
        for i in 0..ADDRESSES_MAX + 10 {
            let host: Arc<str> = format!("10.1.{}.{}", i / 256, i % 256).into();
            logins.delay_after_failure(&host, start + Duration::from_millis(i as u64));
        }
        assert_eq!(logins.addresses(), ADDRESSES_MAX);
        // The oldest went first: the first address starts again from the base delay.
        let first: Arc<str> = "10.1.0.0".into();
        assert_eq!(
            logins.delay_after_failure(&first, start + Duration::from_secs(1)),
            BASE
        );
    }
}
