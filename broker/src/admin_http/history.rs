//! The console's live charts: a bounded in-memory history of the figures `/metrics` exports,
//! sampled every [`SAMPLE_EVERY`] while someone looks.
//!
//! Sampling is not free (each sample asks every shard for its counters, as a scrape does), so it
//! runs only while the history or the overview was asked for within [`WATCHED_FOR`]: a broker
//! nobody looks at pays nothing. The first look starts a sampler task on shard 0; it ends on its
//! own once nobody has looked for that long. The history keeps at most [`SAMPLES_MAX`] samples
//! (10 minutes), the oldest dropped first; what was sampled stays while nobody looks, so a
//! returning viewer sees the gap.

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kafka_protocol::messages::ApiKey;
use serde::Serialize;

use super::AdminState;
use crate::broker::BrokerCtx;
use crate::metrics::histogram::HistogramSnapshot;
use crate::metrics::{self, BrokerSnapshot, SnapshotDetail};

/// Time between two samples.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(2);
/// Samples kept: 10 minutes at one every 2 s (each about 100 bytes: 30 KB at most).
pub const SAMPLES_MAX: usize = 300;
/// Sampling stops once nobody has looked for this long.
pub const WATCHED_FOR: Duration = Duration::from_secs(60);

/// One sample: rates over the interval since the previous sample, and gauges at its end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Sample {
    /// Milliseconds since the Unix epoch.
    pub time_ms: u64,
    pub bytes_in_per_second: f64,
    pub bytes_out_per_second: f64,
    pub records_in_per_second: f64,
    pub requests_per_second: f64,
    /// Produce and Fetch latency quantiles over the interval (upper bucket bounds), in ms;
    /// 0 when no request finished in it.
    pub produce_p99_ms: f64,
    pub fetch_p99_ms: f64,
    pub fdatasync_p99_ms: f64,
    pub connections: u64,
    pub log_bytes: u64,
}

/// Counters of the last sample, to turn the next one's totals into rates.
#[derive(Debug, Clone, Default)]
struct Totals {
    at: Option<Instant>,
    bytes_in: u64,
    bytes_out: u64,
    records_in: u64,
    requests: u64,
    produce: HistogramSnapshot,
    fetch: HistogramSnapshot,
    fdatasync: HistogramSnapshot,
}

/// The samples and the sampler's state. Owned by shard 0's admin server; not Send.
#[derive(Debug, Default)]
pub struct History {
    samples: VecDeque<Sample>,
    last: Totals,
    sampler_running: bool,
    watched_at: Option<Instant>,
}

impl History {
    pub fn samples(&self) -> impl Iterator<Item = &Sample> {
        self.samples.iter()
    }

    /// Counts `snapshot` as a sample taken at `now` (the first only sets the baseline).
    pub fn record(&mut self, snapshot: &BrokerSnapshot, now: Instant, time_ms: u64) {
        let totals = totals_of(snapshot, now);
        let Some(previous_at) = self.last.at else {
            self.last = totals;
            return;
        };
        let seconds = now.duration_since(previous_at).as_secs_f64().max(0.001);
        let rate = |now: u64, before: u64| now.saturating_sub(before) as f64 / seconds;
        let sample = Sample {
            time_ms,
            bytes_in_per_second: rate(totals.bytes_in, self.last.bytes_in),
            bytes_out_per_second: rate(totals.bytes_out, self.last.bytes_out),
            records_in_per_second: rate(totals.records_in, self.last.records_in),
            requests_per_second: rate(totals.requests, self.last.requests),
            produce_p99_ms: quantile_ms(&totals.produce, &self.last.produce, 0.99),
            fetch_p99_ms: quantile_ms(&totals.fetch, &self.last.fetch, 0.99),
            fdatasync_p99_ms: quantile_ms(&totals.fdatasync, &self.last.fdatasync, 0.99),
            connections: snapshot.shards.iter().map(|s| s.connections_active as u64).sum(),
            log_bytes: snapshot.shards.iter().map(|s| s.log_bytes).sum(),
        };
        if self.samples.len() == SAMPLES_MAX {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
        self.last = totals;
    }
}

fn totals_of(snapshot: &BrokerSnapshot, now: Instant) -> Totals {
    let topics = snapshot.topics();
    let requests = snapshot.requests();
    let latency = |api: ApiKey| requests.get(&(api as i16)).map(|r| r.latency).unwrap_or_default();
    Totals {
        at: Some(now),
        bytes_in: topics.values().map(|t| t.bytes_in).sum(),
        bytes_out: topics.values().map(|t| t.bytes_out).sum(),
        records_in: topics.values().map(|t| t.records_in).sum(),
        requests: requests.values().map(|r| r.served).sum(),
        produce: latency(ApiKey::Produce),
        fetch: latency(ApiKey::Fetch),
        fdatasync: snapshot.fdatasync(),
    }
}

/// The `q` quantile, in milliseconds, of what `now` counted since `before` (the upper bound of
/// the bucket it falls in; the largest bound when it is past the last bucket).
pub fn quantile_ms(now: &HistogramSnapshot, before: &HistogramSnapshot, q: f64) -> f64 {
    let mut delta = HistogramSnapshot::default();
    for (i, (n, b)) in now.buckets.iter().zip(before.buckets.iter()).enumerate() {
        delta.buckets[i] = n.saturating_sub(*b);
    }
    delta.overflow = now.overflow.saturating_sub(before.overflow);
    let count = delta.count();
    if count == 0 {
        return 0.0;
    }
    let rank = ((count as f64) * q).ceil() as u64;
    let mut last_bound = 0.0;
    for (bound, cumulative) in delta.cumulative() {
        last_bound = bound;
        if cumulative >= rank {
            return bound * 1000.0;
        }
    }
    last_bound * 1000.0
}

/// Notes a look at the console, and starts the sampler if it is not running.
pub fn watched(ctx: &Rc<BrokerCtx>, admin: &Rc<AdminState>) {
    {
        let mut history = admin.history.borrow_mut();
        history.watched_at = Some(Instant::now());
        if history.sampler_running {
            return;
        }
        history.sampler_running = true;
        // The borrow ends here: the sampler may start running before spawn_local returns.
    }
    let (ctx, admin) = (ctx.clone(), admin.clone());
    glommio::spawn_local(async move { sample_while_watched(&ctx, &admin).await }).detach();
}

async fn sample_while_watched(ctx: &Rc<BrokerCtx>, admin: &Rc<AdminState>) {
    let shutdown = ctx.state.shared.shutdown.clone();
    loop {
        let watched_recently = {
            let history = admin.history.borrow();
            history.watched_at.is_some_and(|at| at.elapsed() < WATCHED_FOR)
        };
        if !watched_recently || shutdown.is_triggered() {
            break;
        }
        let snapshot = metrics::gather(ctx, SnapshotDetail::Totals).await;
        let time_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        admin
            .history
            .borrow_mut()
            .record(&snapshot, Instant::now(), time_ms);
        glommio::timer::sleep(SAMPLE_EVERY).await;
    }
    admin.history.borrow_mut().sampler_running = false;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{ShardSnapshot, TopicTraffic};

    fn snapshot_with_bytes_in(bytes_in: u64) -> BrokerSnapshot {
        let mut shard = ShardSnapshot::default();
        shard.topics.insert(
            "t".into(),
            TopicTraffic {
                bytes_in,
                ..TopicTraffic::default()
            },
        );
        BrokerSnapshot {
            shards: vec![shard],
            ..BrokerSnapshot::default()
        }
    }

    #[test]
    fn rates_come_from_consecutive_samples_and_the_history_is_bounded() {
        let mut history = History::default();
        let start = Instant::now();
        history.record(&snapshot_with_bytes_in(0), start, 0);
        assert_eq!(history.samples().count(), 0, "the first sample is the baseline");
        for i in 1..=(SAMPLES_MAX as u64 + 5) {
            let at = start + SAMPLE_EVERY * i as u32;
            history.record(&snapshot_with_bytes_in(i * 2000), at, i);
        }
        assert_eq!(history.samples().count(), SAMPLES_MAX);
        let first = history.samples().next().unwrap();
        assert_eq!(first.time_ms, 6, "the oldest were dropped");
        assert!((first.bytes_in_per_second - 1000.0).abs() < 1e-6, "{first:?}");
    }

    #[test]
    fn quantiles_are_of_the_interval_only() {
        let mut before = HistogramSnapshot::default();
        before.buckets[10] = 1000;
        let mut now = before;
        assert_eq!(quantile_ms(&now, &before, 0.99), 0.0);
        now.buckets[0] += 99;
        now.buckets[3] += 1;
        assert_eq!(quantile_ms(&now, &before, 0.5), 0.008);
        assert_eq!(quantile_ms(&now, &before, 1.0), 0.064);
    }
}
