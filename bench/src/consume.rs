//! One consumer thread: fetches its partitions with large max bytes on its one connection and
//! counts records from batch headers; in end-to-end mode it also reads each record's key (the
//! producer's timestamp) to measure end-to-end latency.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use laminar_client::records::{batches, for_each_record};
use laminar_client::{ClientConfig, Connection, FetchPosition, FetchSession, FetchSpec};

use crate::layout::KEY_BYTES;
use crate::pacing::Clock;
use crate::stats::Recorder;

/// Kafka consumers' `fetch.max.bytes` default (Java and librdkafka alike): 50 MiB.
pub const FETCH_MAX_BYTES_DEFAULT: i32 = 50 * 1024 * 1024;

/// What one consumer thread does.
#[derive(Debug, Clone)]
pub struct ConsumerJob {
    /// Leader of the partitions.
    pub leader: String,
    /// Topic.
    pub topic: String,
    /// `(partition, first offset)`.
    pub partitions: Vec<(i32, i64)>,
    /// Bytes asked per fetch.
    pub fetch_max_bytes: i32,
    /// Record end-to-end latency from each record's key instead of fetch latency.
    pub end_to_end: bool,
    /// Give up after this long without a record.
    pub idle_timeout: Duration,
    /// Fetch in an incremental fetch session (KIP-227).
    pub fetch_session: bool,
    /// How to connect (TLS, SASL).
    pub client: ClientConfig,
}

/// Shared between the consumers of a run: records consumed by all, and when to stop.
#[derive(Debug)]
pub struct ConsumeTarget {
    /// Records consumed so far, by all consumers.
    pub consumed: AtomicU64,
    /// Records wanted in total.
    pub wanted: u64,
    /// Set when the run is over for another reason (a producer failed).
    pub stop: AtomicBool,
}

impl ConsumeTarget {
    fn done(&self) -> bool {
        self.consumed.load(Ordering::Relaxed) >= self.wanted || self.stop.load(Ordering::Relaxed)
    }
}

/// Records and bytes of the batches in `records` from `position` on; returns
/// `(records, batch bytes, next position)`. A batch that starts before `position` (a fetch
/// inside a batch returns the whole batch) counts only its records from `position`.
pub fn count_from(records: &[u8], position: i64) -> anyhow::Result<(u64, u64, i64)> {
    let (mut count, mut bytes, mut next) = (0u64, 0u64, position);
    for batch in batches(records) {
        let batch = batch?;
        if batch.last_offset() < next {
            continue;
        }
        let skipped = (next - batch.base_offset()).max(0);
        count += (i64::from(batch.record_count()) - skipped).max(0) as u64;
        bytes += batch.bytes.len() as u64;
        next = batch.last_offset() + 1;
    }
    Ok((count, bytes, next))
}

/// Connects a consumer to its leader and warms its receive memory for the largest answer it
/// asks for: the run measures consumers in their steady state, not the kernel's zero-filling of
/// each one's first buffer, which at 16 consumers of 1 GiB was every byte received (decision
/// 0029, bench scale and its goals).
pub fn connect_consumer(job: &ConsumerJob) -> anyhow::Result<Connection> {
    let mut connection = Connection::connect(&job.leader, &job.client)
        .with_context(|| format!("consumer connecting to {}", job.leader))?;
    connection.warm_receive_buffer(answer_bytes_max(job));
    Ok(connection)
}

/// Room for headers around an answer's record batches: a few dozen bytes per partition.
const ANSWER_HEADER_BYTES_PER_PARTITION: usize = 64;

/// The largest answer a fetch of `job`'s asks for, headers included.
fn answer_bytes_max(job: &ConsumerJob) -> usize {
    let partitions = job.partitions.len();
    let records = (job.fetch_max_bytes.max(0) as usize).min(partitions * partition_max_bytes(job) as usize);
    records + partitions * ANSWER_HEADER_BYTES_PER_PARTITION
}

/// Bytes asked of each partition per fetch: an even share of the fetch's, at least 1 MiB.
fn partition_max_bytes(job: &ConsumerJob) -> i32 {
    let partitions = i32::try_from(job.partitions.len()).unwrap_or(i32::MAX).max(1);
    (job.fetch_max_bytes / partitions).max(1 << 20)
}

/// Runs one consumer over `connection` (from [`connect_consumer`]) until the target is met, the
/// run stops, or nothing arrives for the idle timeout.
pub fn run_consumer(
    job: &ConsumerJob,
    mut connection: Connection,
    target: &Arc<ConsumeTarget>,
    clock: Clock,
    recorder: &mut Recorder,
) -> anyhow::Result<()> {
    let partition_max_bytes = partition_max_bytes(job);
    let mut positions: Vec<FetchPosition> = job
        .partitions
        .iter()
        .map(|(partition, offset)| FetchPosition {
            topic: job.topic.clone(),
            partition: *partition,
            offset: *offset,
            partition_max_bytes,
        })
        .collect();
    // Answers name partitions in any order; finding each one's position must not cost a scan
    // of all of them (10 000 partitions a fetch).
    let position_of: std::collections::HashMap<i32, usize> = positions
        .iter()
        .enumerate()
        .map(|(index, p)| (p.partition, index))
        .collect();
    let spec = FetchSpec {
        max_wait_ms: 100,
        min_bytes: 1,
        max_bytes: job.fetch_max_bytes,
    };
    let mut session = job.fetch_session.then(FetchSession::new);
    let mut last_progress_us = clock.now_us();
    while !target.done() {
        let asked_us = clock.now_us();
        let fetched = match &mut session {
            Some(session) => connection.fetch_in_session(session, &spec, &positions)?,
            None => connection.fetch(&spec, &positions)?,
        };
        let answered_us = clock.now_us();
        let mut records_total = 0u64;
        for partition in fetched {
            if let Some(error) = partition.error {
                bail!("fetch {}-{}: {error}", partition.topic, partition.partition);
            }
            let position = position_of
                .get(&partition.partition)
                .and_then(|index| positions.get_mut(*index))
                .context("fetch answered a partition not asked for")?;
            let (records, bytes, next) = count_from(&partition.records, position.offset)?;
            if job.end_to_end {
                record_end_to_end(&partition.records, position.offset, answered_us, recorder)?;
            }
            position.offset = next;
            records_total += records;
            recorder.count(answered_us, records, bytes);
        }
        if records_total > 0 {
            if !job.end_to_end {
                recorder.latency(answered_us, answered_us - asked_us, 1);
            }
            target.consumed.fetch_add(records_total, Ordering::Relaxed);
            last_progress_us = answered_us;
        } else if answered_us - last_progress_us > job.idle_timeout.as_micros() as u64 {
            bail!(
                "no records for {:?} (consumed {} of {})",
                job.idle_timeout,
                target.consumed.load(Ordering::Relaxed),
                target.wanted
            );
        }
    }
    Ok(())
}

/// Records `now - key timestamp` for each record at or after `position`.
fn record_end_to_end(
    records: &[u8],
    position: i64,
    now_us: u64,
    recorder: &mut Recorder,
) -> anyhow::Result<()> {
    for batch in batches(records) {
        let batch = batch?;
        if batch.last_offset() < position {
            continue;
        }
        let mut bad_key = false;
        for_each_record(batch, |record| {
            if record.offset < position {
                return;
            }
            // Keyed records' keys hold more after the timestamp.
            let timestamp = record.key.and_then(|key| key.get(..KEY_BYTES));
            match timestamp.and_then(|key| <[u8; KEY_BYTES]>::try_from(key).ok()) {
                Some(key) => {
                    let sent_us = u64::from_be_bytes(key);
                    recorder.latency(now_us, now_us.saturating_sub(sent_us), 1);
                }
                None => bad_key = true,
            }
        })?;
        if bad_key {
            bail!("a record without the harness's timestamp key: was the topic written by `laminar bench`?");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::produce::BatchBuilder;
    use crate::stats::Progress;
    use laminar_client::Compression;

    fn patched(mut batch: Vec<u8>, base_offset: i64) -> Vec<u8> {
        batch[..8].copy_from_slice(&base_offset.to_be_bytes());
        batch
    }

    #[test]
    fn counts_from_a_position_inside_a_batch() {
        let mut builder = BatchBuilder::new(10, 5, 1);
        let first = builder.build(0..5, Compression::None, None).unwrap().to_vec();
        let second = builder.build(0..5, Compression::None, None).unwrap().to_vec();
        let fetched = [patched(first, 100), patched(second, 105)].concat();
        assert_eq!(
            count_from(&fetched, 100).unwrap(),
            (10, fetched.len() as u64, 110)
        );
        let (records, _, next) = count_from(&fetched, 103).unwrap();
        assert_eq!((records, next), (7, 110));
        // A trailing partial batch is left for the next fetch.
        assert_eq!(count_from(&fetched[..fetched.len() - 3], 100).unwrap().0, 5);
    }

    #[test]
    fn end_to_end_latency_from_keys() {
        let mut builder = BatchBuilder::new(10, 3, 1);
        let batch = builder
            .build([1_000u64, 2_000, 3_000].into_iter(), Compression::Lz4, None)
            .unwrap();
        let mut recorder = Recorder::new(0, Progress::new());
        record_end_to_end(&batch, 1, 10_000, &mut recorder).unwrap();
        let (histogram, _) = recorder.finish();
        assert_eq!(histogram.len(), 2, "offset 0 is before the position");
        assert!((7_990..=8_010).contains(&histogram.max()));
        assert!((6_990..=7_010).contains(&histogram.min()));

        // Keyed records carry more after the timestamp.
        let keyed = builder
            .build_keyed([(4_000u64, 1u64 << 48)].into_iter(), Compression::None, None)
            .unwrap();
        let mut recorder = Recorder::new(0, Progress::new());
        record_end_to_end(&keyed, 0, 10_000, &mut recorder).unwrap();
        assert!((5_990..=6_010).contains(&recorder.finish().0.max()));
    }
}
