//! The two ways Kafka measures a client against its quota: a rate over sampled windows (byte
//! rates, request time) and a token bucket (controller mutations, KIP-599).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How rates are sampled: `quota.window.num` windows of `quota.window.size.seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    pub count: usize,
    pub size: Duration,
}

impl Windows {
    /// Everything a rate remembers; also the longest a client is throttled for at once.
    pub fn span(&self) -> Duration {
        self.size * self.count as u32
    }
}

/// A rate over the last `Windows::count` windows, as Kafka's `Rate` over a `SampledStat`: each
/// sample holds what was recorded from its start for one window; samples older than the span
/// are forgotten. Bounded: at most `count` samples.
#[derive(Debug)]
pub struct SampledRate {
    samples: VecDeque<(Instant, f64)>,
}

impl SampledRate {
    pub fn new() -> SampledRate {
        SampledRate {
            samples: VecDeque::new(),
        }
    }

    pub fn record(&mut self, windows: Windows, now: Instant, amount: f64) {
        self.forget_old(windows, now);
        match self.samples.back_mut() {
            Some((start, total)) if now < *start + windows.size => *total += amount,
            _ => {
                if self.samples.len() == windows.count {
                    self.samples.pop_front();
                }
                self.samples.push_back((now, amount));
            }
        }
        assert!(
            self.samples.len() <= windows.count,
            "samples are bounded by the window count"
        );
    }

    /// Units a second, and the span it was measured over. As Kafka's, the span is at least
    /// `count - 1` whole windows, so that a first burst does not read as a huge rate.
    pub fn measure(&mut self, windows: Windows, now: Instant) -> (f64, Duration) {
        self.forget_old(windows, now);
        let Some((oldest, _)) = self.samples.front() else {
            return (0.0, windows.size);
        };
        let elapsed = now.saturating_duration_since(*oldest);
        let whole_min = windows.size * (windows.count.saturating_sub(1)) as u32;
        let span = elapsed.max(whole_min).max(Duration::from_millis(1));
        let total: f64 = self.samples.iter().map(|(_, amount)| amount).sum();
        (total / span.as_secs_f64(), span)
    }

    /// Whether nothing recorded is remembered any more (the rate can be dropped).
    pub fn is_idle(&self, windows: Windows, now: Instant) -> bool {
        self.samples
            .back()
            .is_none_or(|(start, _)| now.saturating_duration_since(*start) >= windows.span())
    }

    fn forget_old(&mut self, windows: Windows, now: Instant) {
        while let Some((start, _)) = self.samples.front() {
            if now.saturating_duration_since(*start) < windows.span() {
                break;
            }
            self.samples.pop_front();
        }
    }
}

/// How long a client whose rate is `rate`, measured over `span`, waits to come back to `bound`
/// (Kafka's `ClientQuotaManager.throttleTime`): zero within the quota, at most the span of the
/// windows.
pub fn throttle_time(rate: f64, bound: f64, span: Duration, windows: Windows) -> Duration {
    if rate <= bound || bound <= 0.0 {
        return Duration::ZERO;
    }
    let wait = span.mul_f64(((rate - bound) / bound).min(windows.count as f64));
    wait.min(windows.span())
}

/// Kafka's token bucket for controller mutations: it refills at the quota's rate up to a burst
/// of the quota times the windows' span; a mutation may take it below zero once, and while it
/// is below zero strict requests are refused for as long as it takes to refill to zero.
#[derive(Debug)]
pub struct TokenBucket {
    tokens: f64,
    refilled: Instant,
}

impl TokenBucket {
    pub fn new(now: Instant) -> TokenBucket {
        TokenBucket {
            tokens: f64::MAX,
            refilled: now,
        }
    }

    /// The wait before a mutation is accepted again (zero: now); not capped, as Kafka's.
    pub fn wait(&mut self, bound: f64, windows: Windows, now: Instant) -> Duration {
        self.refill(bound, windows, now);
        match self.tokens < 0.0 && bound > 0.0 {
            true => Duration::from_secs_f64(-self.tokens / bound),
            false => Duration::ZERO,
        }
    }

    pub fn take(&mut self, bound: f64, windows: Windows, now: Instant, amount: f64) {
        self.refill(bound, windows, now);
        self.tokens -= amount;
    }

    pub fn is_idle(&self, windows: Windows, now: Instant) -> bool {
        now.saturating_duration_since(self.refilled) >= windows.span()
    }

    fn refill(&mut self, bound: f64, windows: Windows, now: Instant) {
        let burst = bound * windows.span().as_secs_f64();
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * bound).min(burst);
        self.refilled = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOWS: Windows = Windows {
        count: 11,
        size: Duration::from_secs(1),
    };

    #[test]
    fn a_steady_rate_measures_as_itself_and_a_burst_over_the_minimum_span() {
        let start = Instant::now();
        let mut rate = SampledRate::new();
        rate.record(WINDOWS, start, 10_000.0);
        let (first, span) = rate.measure(WINDOWS, start);
        assert_eq!(span, Duration::from_secs(10));
        assert!((first - 1_000.0).abs() < 1e-6, "{first}");
        for second in 1..=30 {
            rate.record(WINDOWS, start + Duration::from_secs(second), 500.0);
        }
        let (steady, _) = rate.measure(WINDOWS, start + Duration::from_millis(30_500));
        assert!((steady - 500.0 * 11.0 / 10.5).abs() < 1.0, "{steady}");
        assert!(rate.samples.len() <= WINDOWS.count);
        assert!(rate.is_idle(WINDOWS, start + Duration::from_secs(42)));
    }

    #[test]
    fn throttle_time_brings_the_rate_back_to_the_bound() {
        let span = Duration::from_secs(10);
        assert_eq!(throttle_time(900.0, 1_000.0, span, WINDOWS), Duration::ZERO);
        // 2 000/s over 10 s is 20 000; at 1 000/s that is 20 s: 10 s more than measured.
        assert_eq!(
            throttle_time(2_000.0, 1_000.0, span, WINDOWS),
            Duration::from_secs(10)
        );
        assert_eq!(throttle_time(1e9, 1_000.0, span, WINDOWS), WINDOWS.span());
    }

    #[test]
    fn the_bucket_allows_a_burst_then_refuses_until_refilled() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(start);
        // 1 a second over 11 s: a burst of 11, then one mutation of 20 goes 9 below zero.
        assert_eq!(bucket.wait(1.0, WINDOWS, start), Duration::ZERO);
        bucket.take(1.0, WINDOWS, start, 20.0);
        assert_eq!(bucket.wait(1.0, WINDOWS, start), Duration::from_secs(9));
        let later = start + Duration::from_secs(9);
        assert_eq!(bucket.wait(1.0, WINDOWS, later), Duration::ZERO);
    }
}
