//! A latency histogram with fixed power-of-two buckets, cheap enough for every request: one
//! `leading_zeros` and three `Cell` updates per observation.
//!
//! Bucket `i` counts observations of at most `2^(i + BUCKET_SHIFT)` microseconds, so the upper
//! bounds run 8 µs, 16 µs, … about 33.5 s; anything slower falls in the implicit `+Inf` bucket.
//! Prometheus wants cumulative buckets; the per-bucket counts are summed when rendered.

use std::cell::Cell;
use std::time::Duration;

/// log2 of the first bucket's upper bound in microseconds (8 µs).
const BUCKET_SHIFT: u32 = 3;
/// Finite buckets: 8 µs · 2^0 … 8 µs · 2^22 (≈ 33.5 s).
pub const BUCKET_COUNT: usize = 23;

/// Upper bound of finite bucket `index`, in seconds.
pub fn bucket_upper_bound_seconds(index: usize) -> f64 {
    assert!(index < BUCKET_COUNT, "bucket {index} out of range");
    (1u64 << (index as u32 + BUCKET_SHIFT)) as f64 / 1e6
}

/// The finite bucket an observation of `micros` falls in, or `None` for `+Inf`.
fn bucket_of(micros: u64) -> Option<usize> {
    if micros <= 1 << BUCKET_SHIFT {
        return Some(0);
    }
    // Smallest k with micros <= 2^k is the bit length of (micros - 1).
    let k = 64 - (micros - 1).leading_zeros();
    let index = (k - BUCKET_SHIFT) as usize;
    (index < BUCKET_COUNT).then_some(index)
}

/// Observations of one latency. Owned by one shard; not Send.
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    buckets: [Cell<u64>; BUCKET_COUNT],
    /// Observations slower than the last finite bucket.
    overflow: Cell<u64>,
    sum_micros: Cell<u64>,
}

impl LatencyHistogram {
    pub fn observe(&self, elapsed: Duration) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        match bucket_of(micros) {
            Some(index) => bump(&self.buckets[index], 1),
            None => bump(&self.overflow, 1),
        }
        bump(&self.sum_micros, micros);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: std::array::from_fn(|i| self.buckets[i].get()),
            overflow: self.overflow.get(),
            sum_micros: self.sum_micros.get(),
        }
    }
}

fn bump(cell: &Cell<u64>, by: u64) {
    cell.set(cell.get().saturating_add(by));
}

/// A copy of a histogram, to move between shards and add up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Per-bucket (not cumulative) counts.
    pub buckets: [u64; BUCKET_COUNT],
    pub overflow: u64,
    pub sum_micros: u64,
}

impl HistogramSnapshot {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum::<u64>() + self.overflow
    }

    pub fn merge(&mut self, other: &HistogramSnapshot) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *mine += theirs;
        }
        self.overflow += other.overflow;
        self.sum_micros += other.sum_micros;
    }

    /// `(upper bound in seconds, cumulative count)` for every finite bucket.
    pub fn cumulative(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        self.buckets.iter().enumerate().scan(0u64, |total, (i, count)| {
            *total += count;
            Some((bucket_upper_bound_seconds(i), *total))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_inclusive_powers_of_two() {
        assert_eq!(bucket_of(0), Some(0));
        assert_eq!(bucket_of(8), Some(0));
        assert_eq!(bucket_of(9), Some(1));
        assert_eq!(bucket_of(16), Some(1));
        assert_eq!(bucket_of(17), Some(2));
        let last = 1u64 << (BUCKET_COUNT as u32 - 1 + BUCKET_SHIFT);
        assert_eq!(bucket_of(last), Some(BUCKET_COUNT - 1));
        assert_eq!(bucket_of(last + 1), None);
        assert_eq!(bucket_of(u64::MAX), None);
        assert_eq!(bucket_upper_bound_seconds(0), 0.000008);
        assert!((bucket_upper_bound_seconds(BUCKET_COUNT - 1) - 33.554432).abs() < 1e-9);
    }

    #[test]
    fn snapshot_counts_sums_and_merges() {
        let histogram = LatencyHistogram::default();
        histogram.observe(Duration::from_micros(5));
        histogram.observe(Duration::from_micros(100));
        histogram.observe(Duration::from_secs(100));
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.count(), 3);
        assert_eq!(snapshot.overflow, 1);
        assert_eq!(snapshot.sum_micros, 100_000_105);
        let cumulative: Vec<u64> = snapshot.cumulative().map(|(_, c)| c).collect();
        assert_eq!(cumulative[0], 1, "5 µs <= 8 µs");
        assert_eq!(cumulative[4], 2, "100 µs <= 128 µs");
        assert_eq!(*cumulative.last().unwrap(), 2, "100 s only in +Inf");
        let mut merged = snapshot;
        merged.merge(&snapshot);
        assert_eq!(merged.count(), 6);
        assert_eq!(merged.sum_micros, 200_000_210);
    }
}
