//! CRC-32C and batch validation (bytes/s), index lookup (ns), and append throughput (bytes/s)
//! through buffered and O_DIRECT glommio files, without and with a group-commit fdatasync.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use futures::executor::block_on;
use laminar_engine::io::{FaultyStorage, GlommioStorage, Storage, WriteMode};
use laminar_engine::log::batch::testing::BatchBuilder;
use laminar_engine::log::batch::validate;
use laminar_engine::log::index::{EntryFile, IndexEntry};
use laminar_engine::partition::{LogConfig, Partition};
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
        EntryFile::new(file, entries)
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

criterion_group!(benches, crc_and_validation, index_lookup, append_throughput);
criterion_main!(benches);
