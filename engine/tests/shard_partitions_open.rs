//! A shard opens the partitions a request names concurrently, yet never one partition twice:
//! tasks asking for the same unopened partition at once all get the one `Partition`, removal
//! waits for an open of the same partition, and the per-partition locks leave nothing behind.

use std::rc::Rc;

use futures::future::join_all;
use laminar_engine::io::{FileCache, GlommioStorage, ShardStorage, WriteMode};
use laminar_engine::partition::LogConfig;
use laminar_engine::shard::partitions::ShardPartitions;

const PARTITIONS: i32 = 100;
const ASKS_PER_PARTITION: usize = 3;

async fn open_each_partition_from_several_tasks(dir: std::path::PathBuf) {
    let storage: Rc<ShardStorage> = Rc::new(FileCache::new(GlommioStorage::new(WriteMode::Buffered), None));
    let shard = ShardPartitions::new(dir.clone(), storage);
    let asks = (0..PARTITIONS).flat_map(|p| std::iter::repeat_n(p, ASKS_PER_PARTITION));
    let opened = join_all(asks.map(|p| {
        let shard = &shard;
        async move {
            (
                p,
                shard
                    .get_or_open("t", p, LogConfig::default)
                    .await
                    .expect("opens"),
            )
        }
    }))
    .await;
    for chunk in opened.chunks(ASKS_PER_PARTITION) {
        let (partition, first) = &chunk[0];
        for (same, other) in &chunk[1..] {
            assert_eq!(same, partition);
            assert!(Rc::ptr_eq(first, other), "partition {partition} opened twice");
        }
    }
    assert_eq!(shard.open_count(), PARTITIONS as usize);
    assert_eq!(shard.partitions_locked(), 0, "no lock entry outlives its tasks");

    // Removing half while the other half is asked for again: each side sees a consistent shard.
    let removals = (0..PARTITIONS / 2).map(|p| {
        let shard = &shard;
        async move { shard.remove("t", p).await.expect("removes") }
    });
    let reopenings = (PARTITIONS / 2..PARTITIONS).map(|p| {
        let shard = &shard;
        async move {
            shard
                .get_or_open("t", p, LogConfig::default)
                .await
                .expect("opens")
        }
    });
    let (_, reopened) = futures::join!(join_all(removals), join_all(reopenings));
    assert_eq!(reopened.len(), (PARTITIONS / 2) as usize);
    assert_eq!(shard.open_count(), (PARTITIONS / 2) as usize);
    assert!(
        !dir.join("t-0").exists(),
        "a removed partition's directory is gone"
    );
    assert_eq!(shard.partitions_locked(), 0);
    assert!(shard.close_all().await.is_empty());
}

#[test]
fn concurrent_opens_of_one_partition_share_it_and_leave_no_lock_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    glommio::LocalExecutorBuilder::default()
        .spawn(move || open_each_partition_from_several_tasks(dir))
        .unwrap()
        .join()
        .unwrap();
}
