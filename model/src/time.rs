//! Wall-clock time as Kafka carries it: milliseconds since the Unix epoch, signed.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A wall-clock instant in milliseconds since the Unix epoch (Kafka's timestamps, a
/// follower's last caught-up time). Signed as Kafka's are; `-1` is Kafka's "no timestamp".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UnixMillis(i64);

impl UnixMillis {
    pub const fn new(millis: i64) -> Self {
        UnixMillis(millis)
    }

    pub const fn get(self) -> i64 {
        self.0
    }

    /// The system clock now; a clock set before 1970 reads as the epoch.
    pub fn now() -> UnixMillis {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        UnixMillis(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
    }

    /// The time from `earlier` to this instant; zero if `earlier` is later (the wall clock
    /// may step back).
    pub fn since(self, earlier: UnixMillis) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }

    /// This instant moved on by `span`, saturating.
    pub fn after(self, span: Duration) -> UnixMillis {
        let millis = i64::try_from(span.as_millis()).unwrap_or(i64::MAX);
        UnixMillis(self.0.saturating_add(millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_never_go_negative() {
        let (early, late) = (UnixMillis::new(1_000), UnixMillis::new(1_250));
        assert_eq!(late.since(early), Duration::from_millis(250));
        assert_eq!(early.since(late), Duration::ZERO);
        assert_eq!(early.after(Duration::from_millis(250)), late);
    }

    #[test]
    fn now_is_after_the_epoch() {
        assert!(UnixMillis::now() > UnixMillis::new(0));
    }
}
