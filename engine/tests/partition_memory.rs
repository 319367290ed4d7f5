//! What one idle partition costs in memory: the engine's state of 2 000 partitions that each
//! took one small batch, were flushed and had their files closed while idle (what a shard holds
//! for partitions nobody uses), counted by a global allocator that tracks live heap bytes, plus
//! the sizes of the structs themselves. The goal (issue 14): at most 16 KiB per idle partition.

#![forbid(unsafe_code)]

use std::path::Path;
use std::rc::Rc;

use bytes::Bytes;
use laminar_engine::io::{FileCache, GlommioStorage, ShardStorage, WriteMode};
use laminar_engine::log::batch::testing::BatchBuilder;
use laminar_engine::partition::{LogConfig, Partition};
use laminar_engine::shard::partitions::ShardPartitions;
use laminar_model::Offset;
use laminar_sys::memory::CountingAllocator;

/// The system allocator, counting the bytes live.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator::new();

const PARTITIONS: i32 = 2_000;
/// Opened before the count starts, so that what a shard allocates once is not counted.
const WARM_UP: i32 = 64;
/// The goal of issue 14.
const IDLE_PARTITION_BYTES_MAX: isize = 16 << 10;

/// The tests count the one process-wide allocator: they run one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn live() -> isize {
    ALLOCATOR.live_bytes()
}

fn small_batch() -> Bytes {
    Bytes::from(BatchBuilder::new(1_700_000_000_000).records_of(1, 100).build())
}

/// Opens partition `index` of topic `t`, appends one small batch, flushes it.
async fn use_once(shard: &ShardPartitions, index: i32) {
    let partition = shard
        .get_or_open("t", index, LogConfig::default)
        .await
        .expect("opens");
    partition
        .append(small_batch(), 1_700_000_000_000)
        .await
        .expect("appends");
    partition.flush().await.expect("flushes");
}

/// Heap bytes per partition: with its files open, and once they were closed while idle.
async fn partition_bytes(dir: &Path) -> (isize, isize) {
    let storage: Rc<ShardStorage> = Rc::new(FileCache::new(GlommioStorage::new(WriteMode::Buffered), None));
    let shard = ShardPartitions::new(dir.to_path_buf(), storage.clone());
    for index in 0..WARM_UP {
        use_once(&shard, index).await;
    }
    storage.park_idle(usize::MAX).await;
    let before = live();
    for index in WARM_UP..WARM_UP + PARTITIONS {
        use_once(&shard, index).await;
    }
    let open = (live() - before) / PARTITIONS as isize;
    let parked = storage.park_idle(usize::MAX).await;
    // One file each: a batch under one index interval makes no index file.
    assert_eq!(
        parked, PARTITIONS as usize,
        "every file of the idle partitions closed"
    );
    let idle = (live() - before) / PARTITIONS as isize;
    drop(shard);
    (open, idle)
}

#[test]
fn an_idle_partition_holds_at_most_16_kib() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let (open, per_partition) = glommio::LocalExecutorBuilder::default()
        .spawn(move || async move { partition_bytes(&dir).await })
        .unwrap()
        .join()
        .unwrap();
    let structs = std::mem::size_of::<Partition<ShardStorage>>();
    eprintln!(
        "per partition: {open} bytes of heap with its files open, {per_partition} once they \
         were closed idle (the Partition struct itself: {structs} bytes)"
    );
    assert!(
        per_partition <= IDLE_PARTITION_BYTES_MAX,
        "{per_partition} bytes per idle partition"
    );
}

/// Heap bytes a partition holding `mib` MiB gives back once its indexes went unused.
async fn index_bytes_given_back(dir: &Path, mib: u64) -> isize {
    let storage: Rc<ShardStorage> = Rc::new(FileCache::new(GlommioStorage::new(WriteMode::Buffered), None));
    let shard = ShardPartitions::new(dir.to_path_buf(), storage);
    let partition = shard.get_or_open("big", 0, LogConfig::default).await.unwrap();
    let now = 1_700_000_000_000;
    while partition.size_bytes() < mib << 20 {
        let batch = Bytes::from(BatchBuilder::new(now).records_of(4, 1000).build());
        partition.append(batch, now).await.unwrap();
    }
    let end = partition.log_end_offset().get();
    partition.flush().await.unwrap();
    // Entries still waiting for their file are never dropped: a roll (or close) writes them.
    partition
        .set_config(LogConfig {
            segment_bytes: mib << 20,
            ..LogConfig::default()
        })
        .await;
    let batch = Bytes::from(BatchBuilder::new(now).records_of(1, 10).build());
    partition.append(batch, now).await.unwrap();
    assert_eq!(partition.segment_count(), 2);
    let before = live();
    partition.release_unused_indexes();
    assert_eq!(
        partition.release_unused_indexes(),
        2,
        "the rolled segment's two indexes"
    );
    let given_back = before - live();
    // A read brings them back, and finds its batch through them.
    let read = partition.read(Offset::new(end / 2), 1, true).await.unwrap();
    assert_eq!(read.data.len(), 1);
    given_back
}

#[test]
fn a_partition_with_data_gives_its_index_memory_back_when_unused() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let mib = 16;
    let given_back = glommio::LocalExecutorBuilder::default()
        .spawn(move || async move { index_bytes_given_back(&dir, mib).await })
        .unwrap()
        .join()
        .unwrap();
    eprintln!("a {mib} MiB segment's indexes: {given_back} bytes of heap given back when unused");
    // One offset entry (8 bytes) per 4 KiB of log at the default index.interval.bytes.
    assert!(given_back >= ((mib << 20) / 4096 * 8) as isize, "{given_back}");
}
