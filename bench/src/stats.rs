//! Counting and latency recording: one [`Recorder`] per worker thread (no sharing on the hot
//! path), a [`Progress`] they publish to about once a second, and the merged [`Measurement`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;

/// Latencies are recorded in microseconds, 1 µs to 10 min, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

const INTERVAL_US: u64 = 1_000_000;

/// Counts and latencies of one second of a run.
#[derive(Debug, Clone)]
pub struct Interval {
    /// Seconds since the run's start.
    pub second: u64,
    /// Records completed in this second.
    pub records: u64,
    /// Bytes completed in this second.
    pub bytes: u64,
    /// Latencies of those records (µs).
    pub latency_us: Histogram<u64>,
}

impl Interval {
    fn new(second: u64) -> Interval {
        Interval {
            second,
            records: 0,
            bytes: 0,
            latency_us: new_histogram(),
        }
    }
}

/// Totals shared with the progress line. Shared across worker threads.
#[derive(Debug)]
pub struct Progress {
    records: AtomicU64,
    bytes: AtomicU64,
    latency_us: Mutex<Histogram<u64>>,
}

impl Progress {
    /// Empty totals.
    pub fn new() -> Arc<Progress> {
        Arc::new(Progress {
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            latency_us: Mutex::new(new_histogram()),
        })
    }

    /// `(records, bytes, p99 µs of the seconds published so far)`.
    pub fn snapshot(&self) -> (u64, u64, u64) {
        let p99 = self
            .latency_us
            .lock()
            .expect("progress lock")
            .value_at_quantile(0.99);
        (
            self.records.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
            p99,
        )
    }
}

/// One worker's counts and latencies. Owned by one thread; merged at the end.
#[derive(Debug)]
pub struct Recorder {
    start_us: u64,
    total_latency_us: Histogram<u64>,
    intervals: Vec<Interval>,
    progress: Arc<Progress>,
}

impl Recorder {
    /// A recorder for a run that started at `start_us`.
    pub fn new(start_us: u64, progress: Arc<Progress>) -> Recorder {
        Recorder {
            start_us,
            total_latency_us: new_histogram(),
            intervals: vec![Interval::new(0)],
            progress,
        }
    }

    fn interval_at(&mut self, now_us: u64) -> &mut Interval {
        let second = now_us.saturating_sub(self.start_us) / INTERVAL_US;
        let current = self.intervals.last().expect("at least one interval").second;
        if second > current {
            let finished = self.intervals.last().expect("at least one interval");
            self.progress
                .latency_us
                .lock()
                .expect("progress lock")
                .add(&finished.latency_us)
                .expect("same bounds");
            self.intervals.push(Interval::new(second));
        }
        self.intervals.last_mut().expect("at least one interval")
    }

    /// Counts `records` / `bytes` completed at `now_us` without latencies.
    pub fn count(&mut self, now_us: u64, records: u64, bytes: u64) {
        let interval = self.interval_at(now_us);
        interval.records += records;
        interval.bytes += bytes;
        self.progress.records.fetch_add(records, Ordering::Relaxed);
        self.progress.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Records `count` latencies of `latency_us` each, completed at `now_us`.
    pub fn latency(&mut self, now_us: u64, latency_us: u64, count: u64) {
        let latency_us = latency_us.max(1);
        self.interval_at(now_us)
            .latency_us
            .saturating_record_n(latency_us, count);
        self.total_latency_us.saturating_record_n(latency_us, count);
    }

    /// The counts and latencies recorded.
    pub fn finish(self) -> (Histogram<u64>, Vec<Interval>) {
        (self.total_latency_us, self.intervals)
    }
}

/// Merged result of all workers of one kind.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// Records completed.
    pub records: u64,
    /// Bytes completed.
    pub bytes: u64,
    /// Wall time of the run (s).
    pub seconds: f64,
    /// All latencies (µs), empty when none were measured.
    pub latency_us: Histogram<u64>,
    /// Per-second counts and latencies, merged across workers.
    pub timeline: Vec<Interval>,
}

impl Measurement {
    /// Merges the recorders of a run that took `seconds`.
    pub fn merge(parts: Vec<(Histogram<u64>, Vec<Interval>)>, seconds: f64) -> Measurement {
        let mut latency_us = new_histogram();
        let mut timeline: Vec<Interval> = Vec::new();
        for (histogram, intervals) in parts {
            latency_us.add(&histogram).expect("same bounds");
            for interval in intervals {
                let second = interval.second as usize;
                while timeline.len() <= second {
                    timeline.push(Interval::new(timeline.len() as u64));
                }
                let slot = &mut timeline[second];
                slot.records += interval.records;
                slot.bytes += interval.bytes;
                slot.latency_us.add(&interval.latency_us).expect("same bounds");
            }
        }
        Measurement {
            records: timeline.iter().map(|i| i.records).sum(),
            bytes: timeline.iter().map(|i| i.bytes).sum(),
            seconds,
            latency_us,
            timeline,
        }
    }

    /// Runs one after the other as one: counts, bytes and seconds added, latencies merged, and
    /// the timelines in order (each run's seconds after the previous run's).
    pub fn concat<'a>(runs: impl IntoIterator<Item = &'a Measurement>) -> Measurement {
        let mut all = Measurement::merge(Vec::new(), 0.0);
        for run in runs {
            all.records += run.records;
            all.bytes += run.bytes;
            all.seconds += run.seconds;
            all.latency_us.add(&run.latency_us).expect("same bounds");
            let offset = all.timeline.len() as u64;
            all.timeline.extend(run.timeline.iter().map(|interval| Interval {
                second: offset + interval.second,
                ..interval.clone()
            }));
        }
        all
    }

    /// Records per second over the run.
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.seconds.max(1e-9)
    }

    /// Megabytes (10^6 bytes) per second over the run.
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.seconds.max(1e-9)
    }

    /// Latency at quantile `q` in ms, `None` when no latency was measured.
    pub fn latency_ms(&self, q: f64) -> Option<f64> {
        (!self.latency_us.is_empty()).then(|| self.latency_us.value_at_quantile(q) as f64 / 1e3)
    }

    /// Mean latency in ms.
    pub fn latency_ms_avg(&self) -> Option<f64> {
        (!self.latency_us.is_empty()).then(|| self.latency_us.mean() / 1e3)
    }

    /// Largest latency in ms.
    pub fn latency_ms_max(&self) -> Option<f64> {
        (!self.latency_us.is_empty()).then(|| self.latency_us.max() as f64 / 1e3)
    }

    /// The summary line in kafka-producer-perf-test's shape.
    pub fn summary_line(&self, verb: &str) -> String {
        let mut line = format!(
            "{} records {verb}, {:.1} records/sec ({:.2} MB/sec)",
            self.records,
            self.records_per_sec(),
            self.mb_per_sec()
        );
        match (self.latency_ms_avg(), self.latency_ms_max()) {
            (Some(avg), Some(max)) => line.push_str(&format!(
                ", {avg:.2} ms avg latency, {max:.2} ms max latency, {:.2} ms 50th, {:.2} ms 95th, {:.2} ms 99th, {:.2} ms 99.9th.",
                self.latency_ms(0.5).unwrap_or_default(),
                self.latency_ms(0.95).unwrap_or_default(),
                self.latency_ms(0.99).unwrap_or_default(),
                self.latency_ms(0.999).unwrap_or_default(),
            )),
            _ => line.push_str(", no latency measured."),
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorders_merge_by_second() {
        let progress = Progress::new();
        let start = 5_000_000;
        let mut a = Recorder::new(start, progress.clone());
        let mut b = Recorder::new(start, progress.clone());
        a.count(start + 10, 100, 1000);
        a.latency(start + 10, 2_000, 100);
        a.count(start + 1_500_000, 50, 500); // second 1: publishes second 0 to progress
        a.latency(start + 1_500_000, 4_000, 50);
        b.count(start + 2_100_000, 10, 100);
        b.latency(start + 2_100_000, 1_000_000, 10);
        let (records, bytes, p99) = progress.snapshot();
        assert_eq!((records, bytes), (160, 1600));
        assert!((1_999..=2_001).contains(&p99), "{p99}");
        let m = Measurement::merge(vec![a.finish(), b.finish()], 2.0);
        assert_eq!((m.records, m.bytes), (160, 1600));
        assert_eq!(m.timeline.len(), 3);
        assert_eq!(
            m.timeline.iter().map(|i| i.records).collect::<Vec<_>>(),
            vec![100, 50, 10]
        );
        assert_eq!(m.records_per_sec(), 80.0);
        assert_eq!(m.mb_per_sec(), 0.0008);
        assert!((m.latency_ms(0.5).unwrap() - 2.0).abs() < 0.01);
        assert!((m.latency_ms_max().unwrap() - 1000.0).abs() < 1.0);
        let line = m.summary_line("sent");
        assert!(
            line.starts_with("160 records sent, 80.0 records/sec (0.00 MB/sec), "),
            "{line}"
        );
        assert!(line.contains("ms 99.9th."), "{line}");
    }

    #[test]
    fn runs_concatenate_in_order() {
        let run = |records: u64, latency_us: u64| {
            let mut recorder = Recorder::new(0, Progress::new());
            recorder.count(1_500_000, records, records * 10);
            recorder.latency(1_500_000, latency_us, records);
            Measurement::merge(vec![recorder.finish()], 2.0)
        };
        let (a, b) = (run(100, 1_000), run(300, 3_000));
        let both = Measurement::concat([&a, &b]);
        assert_eq!((both.records, both.bytes, both.seconds), (400, 4000, 4.0));
        assert_eq!(both.records_per_sec(), 100.0);
        assert_eq!(
            both.timeline
                .iter()
                .map(|i| (i.second, i.records))
                .collect::<Vec<_>>(),
            vec![(0, 0), (1, 100), (2, 0), (3, 300)]
        );
        assert!((both.latency_ms(0.5).unwrap() - 3.0).abs() < 0.01);
        assert!((both.latency_ms(0.2).unwrap() - 1.0).abs() < 0.01);
        assert_eq!(Measurement::concat([]).latency_ms(0.5), None);
    }

    #[test]
    fn no_latency_is_none_not_zero() {
        let m = Measurement::merge(vec![], 1.0);
        assert_eq!(m.latency_ms(0.99), None);
        assert!(m.summary_line("sent").ends_with("no latency measured."));
    }
}
