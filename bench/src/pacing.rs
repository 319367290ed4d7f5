//! Time and fixed-rate pacing.
//!
//! At a fixed rate, record `k` of a producer has an intended send time `start + k / rate`, and
//! latency is measured from that time, not from when the record was actually sent: if the broker
//! stalls, the records that should have gone out meanwhile carry the stall in their latency
//! (no coordinated omission).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Wall-clock microseconds read through the monotonic clock (never going backwards within a run,
/// comparable across threads and with the timestamps written into records). `Copy`, shared.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
    start_wall_us: u64,
}

impl Clock {
    /// A clock anchored now.
    pub fn new() -> Clock {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("the system clock is after 1970");
        Clock {
            start: Instant::now(),
            start_wall_us: wall.as_micros() as u64,
        }
    }

    /// Microseconds since the Unix epoch.
    pub fn now_us(&self) -> u64 {
        self.start_wall_us + self.start.elapsed().as_micros() as u64
    }

    /// Sleeps until `us` (a [`Clock::now_us`] value); returns at once if it has passed.
    pub fn sleep_until_us(&self, us: u64) {
        let now = self.now_us();
        if us > now {
            std::thread::sleep(Duration::from_micros(us - now));
        }
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::new()
    }
}

/// What a producer should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchPlan {
    /// Build and send a batch of this many records now.
    Send(usize),
    /// Nothing to send before this time (µs).
    WaitUntil(u64),
}

/// One producer's schedule. Owned by that producer's thread.
#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    start_us: u64,
    /// Microseconds between records; `None` = as fast as possible.
    interval_us: Option<f64>,
    linger_us: u64,
}

impl Pacer {
    /// A schedule starting at `start_us` at `rate` records/s (`None`: unlimited).
    pub fn new(start_us: u64, rate: Option<f64>, linger_us: u64) -> Pacer {
        if let Some(rate) = rate {
            assert!(rate > 0.0, "a fixed rate is positive");
        }
        Pacer {
            start_us,
            interval_us: rate.map(|rate| 1e6 / rate),
            linger_us,
        }
    }

    /// Whether records have intended times (a fixed rate).
    pub fn is_paced(&self) -> bool {
        self.interval_us.is_some()
    }

    /// Intended send time of record `index` (µs); for an unpaced run, the start.
    pub fn due_us(&self, index: u64) -> u64 {
        match self.interval_us {
            Some(interval) => self.start_us + (index as f64 * interval) as u64,
            None => self.start_us,
        }
    }

    /// Records due by `now_us` (the count of records whose intended time has come).
    fn due_count(&self, now_us: u64) -> u64 {
        match self.interval_us {
            Some(_) if now_us < self.start_us => 0,
            Some(interval) => ((now_us - self.start_us) as f64 / interval) as u64 + 1,
            None => u64::MAX,
        }
    }

    /// What to do with `sent` records sent so far and `batch_max` records allowed in the next
    /// batch (already capped by the records left). A partial batch goes out once its first record
    /// has lingered `linger_us`.
    pub fn plan(&self, sent: u64, now_us: u64, batch_max: usize) -> BatchPlan {
        assert!(batch_max > 0, "plan() needs room for a record");
        let due = self.due_count(now_us).saturating_sub(sent);
        if due >= batch_max as u64 {
            return BatchPlan::Send(batch_max);
        }
        if due == 0 {
            return BatchPlan::WaitUntil(self.due_us(sent));
        }
        let linger_deadline = self.due_us(sent) + self.linger_us;
        if now_us >= linger_deadline {
            return BatchPlan::Send(due as usize);
        }
        let full_at = self.due_us(sent + batch_max as u64 - 1);
        BatchPlan::WaitUntil(linger_deadline.min(full_at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpaced_always_sends_full_batches() {
        let pacer = Pacer::new(1_000, None, 5_000);
        assert!(!pacer.is_paced());
        assert_eq!(pacer.plan(0, 0, 100), BatchPlan::Send(100));
        assert_eq!(pacer.plan(1 << 40, 7, 3), BatchPlan::Send(3));
        assert_eq!(pacer.due_us(12345), 1_000);
    }

    #[test]
    fn fixed_rate_schedule() {
        // 1000 records/s: one per millisecond from t = 10 s.
        let start = 10_000_000;
        let pacer = Pacer::new(start, Some(1000.0), 5_000);
        assert_eq!(pacer.due_us(0), start);
        assert_eq!(pacer.due_us(250), start + 250_000);
        // Before the start nothing is due: wait for record 0.
        assert_eq!(pacer.plan(0, start - 1, 10), BatchPlan::WaitUntil(start));
        // At 2.5 ms, records 0, 1, 2 are due; the batch of 10 is not full and record 0 has
        // lingered 2.5 of its 5 ms: wait until the linger ends (5 ms) or the batch fills (9 ms).
        assert_eq!(
            pacer.plan(0, start + 2_500, 10),
            BatchPlan::WaitUntil(start + 5_000)
        );
        // At 5 ms six records are due and the linger is over.
        assert_eq!(pacer.plan(0, start + 5_000, 10), BatchPlan::Send(6));
        // A batch of 4 fills at 3 ms, before the linger ends.
        assert_eq!(
            pacer.plan(0, start + 1_000, 4),
            BatchPlan::WaitUntil(start + 3_000)
        );
        // Far behind schedule (a stall): full batches go out at once.
        assert_eq!(pacer.plan(6, start + 1_000_000, 10), BatchPlan::Send(10));
        // Everything due was sent: wait for the next intended time.
        assert_eq!(
            pacer.plan(6, start + 5_000, 10),
            BatchPlan::WaitUntil(start + 6_000)
        );
    }

    #[test]
    fn clock_runs_forward_from_the_wall_clock() {
        let clock = Clock::new();
        let first = clock.now_us();
        clock.sleep_until_us(first + 2_000);
        let second = clock.now_us();
        assert!(second >= first + 2_000, "{first} {second}");
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64;
        assert!(wall.abs_diff(second) < 1_000_000);
    }
}
