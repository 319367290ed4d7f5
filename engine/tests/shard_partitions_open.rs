//! A shard opens the partitions a request names concurrently, yet never one partition twice:
//! tasks asking for the same unopened partition at once all get the one `Partition`, removal
//! waits for an open of the same partition, and the per-partition locks leave nothing behind.
//! A partition opened for a topic id records it, and a directory recording another topic's id
//! is set aside before the partition opens.

use std::rc::Rc;

use futures::future::join_all;
use laminar_engine::io::{FileCache, GlommioStorage, ShardStorage, WriteMode};
use laminar_engine::log::batch::testing::BatchBuilder;
use laminar_engine::partition::LogConfig;
use laminar_engine::shard::partitions::{PartitionSpec, ShardPartitions};

const PARTITIONS: i32 = 100;
const ASKS_PER_PARTITION: usize = 3;

/// Runs `test` on a glommio executor, in an empty directory.
fn on_a_shard_in_a_new_dir<Fut: std::future::Future<Output = ()> + 'static>(
    test: impl FnOnce(std::path::PathBuf) -> Fut + Send + 'static,
) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    glommio::LocalExecutorBuilder::default()
        .spawn(move || test(dir))
        .unwrap()
        .join()
        .unwrap();
}

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
    on_a_shard_in_a_new_dir(open_each_partition_from_several_tasks);
}

async fn read_before_and_after_the_first_write(dir: std::path::PathBuf) {
    let storage: Rc<ShardStorage> = Rc::new(FileCache::new(GlommioStorage::new(WriteMode::Buffered), None));
    let shard = ShardPartitions::new(dir.clone(), storage);
    for _ in 0..2 {
        let read = shard.get_or_open_written("t", 0, LogConfig::default).await;
        assert!(read.expect("reads").is_none(), "never written: nothing");
    }
    assert!(!dir.join("t-0").exists(), "a read creates nothing");
    // Reads racing the first write: each finds nothing or the one partition.
    let reads = (0..8).map(|_| shard.get_or_open_written("t", 0, LogConfig::default));
    let (written, raced) = futures::join!(shard.get_or_open("t", 0, LogConfig::default), join_all(reads));
    let written = written.expect("the first write opens it");
    for read in raced {
        if let Some(found) = read.expect("reads") {
            assert!(Rc::ptr_eq(&found, &written));
        }
    }
    let after = shard.get_or_open_written("t", 0, LogConfig::default).await;
    let after = after
        .expect("reads")
        .expect("written: found, though read as never written before");
    assert!(Rc::ptr_eq(&after, &written));
    // Another partition read before is looked for again after any open, not remembered.
    let other = shard.get_or_open_written("t", 1, LogConfig::default).await;
    assert!(other.expect("reads").is_none());
    shard
        .get_or_open("t", 1, LogConfig::default)
        .await
        .expect("opens");
    let other = shard.get_or_open_written("t", 1, LogConfig::default).await;
    assert!(other.expect("reads").is_some());
    // Closed, its directory stays: a read opens it again, though it was read as never written.
    assert!(shard.close_all().await.is_empty());
    let reopened = shard.get_or_open_written("t", 0, LogConfig::default).await;
    assert!(
        reopened.expect("reads").is_some(),
        "a closed partition is read from its files"
    );
    assert!(shard.close_all().await.is_empty());
}

#[test]
fn a_partition_read_before_its_first_write_is_found_once_written() {
    on_a_shard_in_a_new_dir(read_before_and_after_the_first_write);
}

fn spec_of_topic(id: u8) -> PartitionSpec {
    PartitionSpec {
        config: LogConfig::default(),
        topic_id: Some([id; 16]),
    }
}

async fn open_as_one_topic_then_another(dir: std::path::PathBuf) {
    let storage: Rc<ShardStorage> = Rc::new(FileCache::new(GlommioStorage::new(WriteMode::Buffered), None));
    let shard = ShardPartitions::new(dir.clone(), storage);
    let batch = bytes::Bytes::from(BatchBuilder::new(1_700_000_000_000).records_of(5, 10).build());
    let first = shard
        .get_or_open("t", 0, || spec_of_topic(1))
        .await
        .expect("opens");
    first.append(batch, 0).await.expect("appends");
    let metadata = dir.join("t-0/partition.metadata");
    assert!(!metadata.exists(), "not written on the first write's path");
    assert!(shard.close_all().await.is_empty());
    let recorded = std::fs::read_to_string(&metadata).expect("written by the close's checkpoint");
    assert_eq!(recorded, "version: 0\ntopic_id: AQEBAQEBAQEBAQEBAQEBAQ\n");

    // The same topic, or no id given: the records are its own.
    for spec in [spec_of_topic(1), PartitionSpec::from(LogConfig::default())] {
        let same = shard.get_or_open("t", 0, || spec).await.expect("opens");
        assert_eq!(same.log_end_offset().get(), 5);
        assert!(shard.close_all().await.is_empty());
    }

    // Another topic of the name: the old directory is set aside, the partition starts empty.
    let other = shard
        .get_or_open("t", 0, || spec_of_topic(2))
        .await
        .expect("opens");
    assert_eq!(other.log_end_offset().get(), 0);
    assert!(shard.close_all().await.is_empty());
    let recorded = std::fs::read_to_string(&metadata).expect("written by the close's checkpoint");
    assert!(recorded.ends_with("AgICAgICAgICAgICAgICAg\n"), "{recorded}");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(names[0], "t-0");
    assert!(
        names[1].starts_with("t-0.") && names[1].ends_with("-stray"),
        "the old directory is set aside, not removed: {names:?}"
    );
    let aside = dir.join(&names[1]).join("partition.metadata");
    assert!(std::fs::read_to_string(aside)
        .unwrap()
        .ends_with("AQEBAQEBAQEBAQEBAQEBAQ\n"));
}

#[test]
fn a_directory_recording_another_topic_is_set_aside_before_the_partition_opens() {
    on_a_shard_in_a_new_dir(open_as_one_topic_then_another);
}
