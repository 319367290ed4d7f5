//! CRC-32C and batch validation (bytes/s), index lookup (ns), append throughput (bytes/s)
//! through buffered and O_DIRECT glommio files, without and with a group-commit fdatasync, and
//! the cost of one small batch as a shard's appends spread over more partitions (batches/s).

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use futures::executor::block_on;
use laminar_engine::io::{DescriptorBudget, FaultyStorage, FileCache, GlommioStorage, Storage, WriteMode};
use laminar_engine::log::batch::testing::BatchBuilder;
use laminar_engine::log::batch::validate;
use laminar_engine::log::index::{EntryFile, IndexEntry, IndexFile};
use laminar_engine::partition::{LogConfig, Partition};
use laminar_engine::shard::partitions::ShardPartitions;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

fn crc_and_validation(c: &mut Criterion) {
    let mut group = c.benchmark_group("batch");
    for value_len in [100usize, 1000] {
        let batch = BatchBuilder::new(0)
            .records_of((1 << 20) / (value_len + 8), value_len)
            .build();
        group.throughput(Throughput::Bytes(batch.len() as u64));
        group.bench_with_input(BenchmarkId::new("crc32c_1MiB", value_len), &batch, |b, batch| {
            b.iter(|| laminar_engine::log::checksum::crc32c(&batch[21..]))
        });
        // The crate the batch CRC used before (docs/decisions/0008), for comparison.
        group.bench_with_input(
            BenchmarkId::new("crc32c_crate_1MiB", value_len),
            &batch,
            |b, batch| b.iter(|| crc32c::crc32c(&batch[21..])),
        );
        group.bench_with_input(
            BenchmarkId::new("validate_1MiB", value_len),
            &batch,
            |b, batch| b.iter(|| validate(batch, usize::MAX).unwrap()),
        );
    }
    group.finish();
}

fn index_lookup(c: &mut Criterion) {
    // A full 1 GiB segment at the default 4 KiB interval has 262 144 entries.
    let entries: Vec<IndexEntry> = (0..262_144u32)
        .map(|i| IndexEntry {
            relative_offset: i * 4,
            position: i * 4096,
        })
        .collect();
    let storage = FaultyStorage::new(0);
    let index = block_on(async {
        storage.create_dir_all(Path::new("/b")).await.unwrap();
        let file = storage.open(Path::new("/b/0.index"), true).await.unwrap();
        EntryFile::new(IndexFile::Open(file), entries)
    });
    let mut probe = 0u32;
    c.bench_function("index_lookup_262144_entries", |b| {
        b.iter(|| {
            probe = probe.wrapping_mul(1_103_515_245).wrapping_add(12_345) % (262_144 * 4);
            index.last_where(|e| e.relative_offset <= probe)
        })
    });
}

/// Appends `iters` batches of `batch` to a fresh log; with `sync_every`, waits for durability
/// every that many batches (what acks=all under load amounts to).
fn timed_appends(mode: WriteMode, batch: &Bytes, iters: u64, sync_every: Option<u64>) -> Duration {
    let batch = batch.clone();
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
            let config = LogConfig {
                segment_bytes: 256 << 20,
                ..LogConfig::default()
            };
            let storage = Rc::new(GlommioStorage::new(mode));
            let p = Partition::open(storage, dir.path().join("p-0"), config)
                .await
                .unwrap();
            let start = Instant::now();
            for i in 0..iters {
                let info = p.append(batch.clone(), 0).await.unwrap();
                if sync_every.is_some_and(|n| (i + 1) % n == 0) {
                    p.wait_durable(info.last_offset).await.unwrap();
                }
            }
            p.flush().await.unwrap();
            let elapsed = start.elapsed();
            p.close().await.unwrap();
            elapsed
        })
        .unwrap()
        .join()
        .unwrap()
}

fn append_throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    group.sample_size(10).measurement_time(Duration::from_secs(4));
    let batch = Bytes::from(BatchBuilder::new(0).records_of(256, 1000).build());
    group.throughput(Throughput::Bytes(batch.len() as u64));
    for (mode, name) in [(WriteMode::Buffered, "buffered"), (WriteMode::Direct, "o_direct")] {
        for (sync_every, sync_name) in [(None, "flush_at_end"), (Some(4), "fdatasync_per_1MiB")] {
            let id = BenchmarkId::new(name, sync_name);
            group.bench_function(id, |b| {
                b.iter_custom(|iters| timed_appends(mode, &batch, iters, sync_every))
            });
        }
    }
    group.finish();
}

/// Descriptors the spread bench's file cache may hold: under this machine's default limit of
/// 20 000, as the broker's budget keeps them (a partition written once holds one file: its log).
const SPREAD_DESCRIPTORS: u64 = 15_000;

/// A shard thread holding `partitions` partitions, each written once (so that creating their
/// files is not counted); each request appends that many one-record batches round robin over
/// them, each partition looked up by name first as a produce of keyed records spread over many
/// partitions does (docs/decisions/0026, per-batch cost across many partitions), and answers how long that
/// took. The
/// partitions stay open across requests: criterion asks many times, and opening 10 000 each
/// time would swamp its estimates.
struct SpreadShard {
    requests: async_channel::Sender<u64>,
    answers: std::sync::mpsc::Receiver<Duration>,
    thread: Option<glommio::ExecutorJoinHandle<()>>,
}

impl SpreadShard {
    fn start(partitions: i32, batch: Bytes) -> SpreadShard {
        let (requests, asked) = async_channel::bounded::<u64>(1);
        let (answer, answers) = std::sync::mpsc::sync_channel(1);
        let thread = glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
                let descriptors = DescriptorBudget::new(SPREAD_DESCRIPTORS).shard();
                let inner =
                    GlommioStorage::new(WriteMode::Buffered).with_descriptor_budget(descriptors.clone());
                let storage = Rc::new(FileCache::new(inner, Some(descriptors)));
                let shard = ShardPartitions::new(dir.path().to_path_buf(), storage);
                for partition in 0..partitions {
                    let open = shard
                        .get_or_open("spread", partition, LogConfig::default)
                        .await
                        .unwrap();
                    open.append(batch.clone(), 0).await.unwrap();
                }
                answer.send(Duration::ZERO).unwrap(); // ready
                while let Ok(iters) = asked.recv().await {
                    let start = Instant::now();
                    for i in 0..iters {
                        let partition = (i % partitions as u64) as i32;
                        let open = shard.get("spread", partition).expect("opened above");
                        open.append(batch.clone(), 0).await.unwrap();
                    }
                    answer.send(start.elapsed()).unwrap();
                }
                assert!(shard.close_all().await.is_empty(), "every partition closes");
            })
            .unwrap();
        // Ready once every partition is open and written: criterion times from its first call.
        answers.recv().unwrap();
        SpreadShard {
            requests,
            answers,
            thread: Some(thread),
        }
    }

    fn timed_appends(&self, iters: u64) -> Duration {
        self.requests.send_blocking(iters).unwrap();
        self.answers.recv().unwrap()
    }
}

impl Drop for SpreadShard {
    /// Closes the partitions and removes their files before the next partition count starts.
    fn drop(&mut self) {
        self.requests.close();
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

fn spread_appends(c: &mut Criterion) {
    let mut group = c.benchmark_group("append_spread");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    // One 100-byte record a batch: the cost per batch, not per byte, and few enough bytes that
    // the kernel's dirty-page throttling stays out of a run of millions.
    let batch = Bytes::from(BatchBuilder::new(0).records_of(1, 100).build());
    group.throughput(Throughput::Elements(1));
    for partitions in [1, 100, 1_000, 10_000] {
        let shard = SpreadShard::start(partitions, batch.clone());
        group.bench_function(BenchmarkId::new("one_record_batches", partitions), |b| {
            b.iter_custom(|iters| shard.timed_appends(iters))
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    crc_and_validation,
    index_lookup,
    append_throughput,
    spread_appends
);
criterion_main!(benches);
