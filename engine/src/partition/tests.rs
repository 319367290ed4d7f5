use super::*;
use crate::io::{CrashMode, FaultyStorage};
use crate::log::batch::testing::BatchBuilder;
use crate::log::batch::{self, BatchHeader};
use futures::executor::block_on;

pub(super) fn dir() -> PathBuf {
    PathBuf::from("/data/t-0")
}

pub(super) fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 128,
        ..LogConfig::default()
    }
}

pub(super) fn batch(records: usize, ts: i64) -> Bytes {
    Bytes::from(BatchBuilder::new(ts).records_of(records, 20).build())
}

pub(super) async fn open(storage: &FaultyStorage, config: LogConfig) -> Partition<FaultyStorage> {
    Partition::open(Rc::new(storage.clone()), dir(), config)
        .await
        .unwrap()
}

/// Every batch from `from` to the log end (a read returns one segment's worth at most).
pub(super) async fn read_all<S: Storage>(p: &Partition<S>, from: i64) -> Vec<BatchHeader> {
    let mut out: Vec<BatchHeader> = Vec::new();
    let mut next = from;
    while next < p.log_end_offset().get() {
        let r = p.read(Offset::new(next), 1 << 20, true).await.unwrap();
        out.extend(headers(&r.data));
        next = out.last().unwrap().next_offset();
    }
    out
}

pub(super) fn headers(data: &[Bytes]) -> Vec<BatchHeader> {
    data.iter()
        .map(|b| batch::validate(b, usize::MAX).unwrap())
        .collect()
}

#[test]
fn append_assigns_offsets_and_reads_back_whole_batches() {
    block_on(async {
        let storage = FaultyStorage::new(1);
        let p = open(&storage, small_config()).await;
        let mut bases = Vec::new();
        for i in 0..40 {
            let info = p.append(batch(1 + i % 3, 1000 + i as i64), 5).await.unwrap();
            let records = info.last_offset.get() - info.base_offset.get() + 1;
            assert_eq!(records, (1 + i % 3) as i64);
            assert_eq!(info.log_append_time_ms, -1);
            bases.push(info.base_offset.get());
        }
        assert!(p.segment_count() > 3, "small segments roll");
        let end = p.log_end_offset().get();
        for offset in 0..end {
            let r = p.read(Offset::new(offset), 1, true).await.unwrap();
            let h = headers(&r.data);
            assert_eq!(h.len(), 1);
            assert!(h[0].base_offset <= offset && offset <= h[0].last_offset());
        }
        let hs = read_all(&p, 0).await;
        assert_eq!(hs.last().unwrap().next_offset(), end);
        assert!(hs.windows(2).all(|w| w[0].next_offset() == w[1].base_offset));
        assert!(p.read(Offset::new(end), 100, true).await.unwrap().data.is_empty());
        let err = p.read(Offset::new(end + 1), 100, true).await.unwrap_err();
        assert!(matches!(err, LogError::OffsetOutOfRange { .. }));
        let first_late = hs.iter().find(|h| h.max_timestamp >= 1010).unwrap();
        let found = p.offset_for_timestamp(1010).await.unwrap().unwrap();
        assert_eq!(
            found,
            (Offset::new(first_late.base_offset), first_late.max_timestamp)
        );
        assert!(bases.contains(&found.0.get()));
        assert_eq!(p.offset_for_timestamp(99_999).await.unwrap(), None);
    });
}

#[test]
fn invalid_batches_reject_the_whole_append() {
    block_on(async {
        let storage = FaultyStorage::new(2);
        let config = LogConfig {
            max_message_bytes: 200,
            ..small_config()
        };
        let p = open(&storage, config).await;
        let good = BatchBuilder::new(0).records_of(1, 10).build();
        let mut bad = good.clone();
        *bad.last_mut().unwrap() ^= 1;
        let err = p
            .append(Bytes::from([good.clone(), bad].concat()), 0)
            .await
            .unwrap_err();
        assert!(matches!(err, LogError::Batch(e) if e.is_corrupt()));
        let big = BatchBuilder::new(0).records_of(1, 300).build();
        let err = p.append(Bytes::from(big), 0).await.unwrap_err();
        assert!(matches!(err, LogError::MessageTooLarge { max: 200, .. }));
        assert_eq!(p.log_end_offset().get(), 0);
        assert!(p.append(Bytes::from(good), 0).await.is_ok());
    });
}

#[test]
fn log_append_time_is_stamped() {
    block_on(async {
        let storage = FaultyStorage::new(3);
        let config = LogConfig {
            timestamp_type: TimestampType::LogAppendTime,
            ..small_config()
        };
        let p = open(&storage, config).await;
        let info = p.append(batch(2, 10), 777).await.unwrap();
        assert_eq!(info.log_append_time_ms, 777);
        let r = p.read(Offset::new(0), 1000, true).await.unwrap();
        let h = headers(&r.data)[0];
        assert_eq!(
            (h.max_timestamp, h.timestamp_type()),
            (777, TimestampType::LogAppendTime)
        );
    });
}

#[test]
fn group_commit_survives_crash_and_sync_error_fails_the_partition() {
    block_on(async {
        let storage = FaultyStorage::new(4);
        let p = open(&storage, LogConfig::default()).await;
        p.append(batch(3, 0), 0).await.unwrap();
        p.wait_durable(Offset::new(2)).await.unwrap();
        p.append(batch(3, 0), 0).await.unwrap();
        drop(p);
        storage.crash(CrashMode::LoseUnsynced);
        let p = open(&storage, LogConfig::default()).await;
        assert_eq!(
            p.log_end_offset().get(),
            3,
            "synced batch kept, unsynced one lost"
        );
        p.append(batch(1, 0), 0).await.unwrap();
        storage.fail_sync_after(1);
        assert!(p.wait_durable(Offset::new(3)).await.is_err());
        let again = p.wait_durable(Offset::new(3)).await.unwrap_err();
        assert!(again.is_storage_failure(), "never retried into success");
        assert!(p.append(batch(1, 0), 0).await.is_err());
    });
}

/// DeleteRecords promises the records from its new start: in a new partition, whose directory
/// is not yet durable in the data dir, that takes the data dir's fsync as well as the log's.
#[test]
fn records_after_a_new_start_survive_a_crash_in_a_new_partition() {
    block_on(async {
        let storage = FaultyStorage::new(6);
        let p = open(&storage, LogConfig::default()).await;
        p.append(batch(9, 0), 0).await.unwrap();
        assert_eq!(p.delete_records_before(Offset::new(4)).await.unwrap().get(), 4);
        p.append(batch(5, 0), 0).await.unwrap();
        drop(p);
        storage.crash(CrashMode::LoseUnsynced);
        let p = open(&storage, LogConfig::default()).await;
        assert_eq!((p.log_start_offset().get(), p.log_end_offset().get()), (4, 9));
    });
}

#[test]
fn retention_delete_records_truncate_and_clean_reopen() {
    block_on(async {
        let storage = FaultyStorage::new(5);
        let p = open(&storage, small_config()).await;
        for i in 0..30 {
            p.append(batch(2, 1_000 * i), 0).await.unwrap();
        }
        let segments = p.segment_count();
        let outcome = p.apply_retention(12_000 + 7 * 24 * 3_600_000).await.unwrap();
        assert!(outcome.segments_deleted > 0 && outcome.segments_deleted < segments);
        assert_eq!(p.log_start_offset(), outcome.log_start_offset);
        let start = p.delete_records_before(Offset::new(41)).await.unwrap();
        assert_eq!(start.get(), 41);
        assert_eq!(p.read(Offset::new(41), 10, true).await.unwrap().data.len(), 1);
        assert!(p.read(Offset::new(40), 10, true).await.is_err());
        p.truncate_to(Offset::new(50)).await.unwrap();
        assert_eq!(p.log_end_offset().get(), 50);
        p.close().await.unwrap();
        assert!(matches!(p.append(batch(1, 0), 0).await, Err(LogError::Closed)));
        let p = open(&storage, small_config()).await;
        assert_eq!((p.log_start_offset().get(), p.log_end_offset().get()), (41, 50));
        let hs = read_all(&p, 41).await;
        assert_eq!(hs.last().unwrap().next_offset(), 50);
        p.delete().await.unwrap();
        assert!(!storage.exists(&dir()).await.unwrap());
        let parent = dir().parent().unwrap().to_path_buf();
        let left = storage.list_dir(&parent).await.unwrap();
        assert!(left.is_empty(), "the retired directory is removed too: {left:?}");
    });
}

#[test]
fn concurrent_waiters_share_one_fdatasync() {
    block_on(async {
        let storage = FaultyStorage::new(8);
        let p = open(&storage, LogConfig::default()).await;
        let mut lasts = Vec::new();
        for _ in 0..3 {
            lasts.push(p.append(batch(2, 0), 0).await.unwrap().last_offset);
        }
        let before = storage.sync_count();
        let (a, b, c) = futures::join!(
            p.wait_durable(lasts[2]),
            p.wait_durable(lasts[0]),
            p.wait_durable(lasts[1])
        );
        a.and(b).and(c).unwrap();
        assert_eq!(storage.sync_count() - before, 1);
        assert_eq!(p.durable_offset().get(), p.log_end_offset().get());
        assert!(
            p.wait_durable(p.log_end_offset()).await.is_err(),
            "never acks the unwritten"
        );
    });
}

#[test]
fn segment_ms_rolls_and_missing_index_is_rebuilt() {
    block_on(async {
        let storage = FaultyStorage::new(9);
        let config = LogConfig {
            segment_ms: 1000,
            index_interval_bytes: 64,
            ..LogConfig::default()
        };
        let p = open(&storage, config.clone()).await;
        for i in 0..10 {
            p.append(batch(2, 10_000), 10_000 + 100 * i).await.unwrap();
        }
        p.append(batch(1, 11_500), 11_500).await.unwrap();
        assert_eq!(
            p.segment_count(),
            2,
            "the first batch's timestamp ages the segment"
        );
        p.close().await.unwrap();
        let index = dir().join(format!("{:020}.index", 0));
        let before = storage.file_bytes(&index).unwrap();
        assert!(!before.is_empty());
        storage.remove_file(&index).await.unwrap();
        let p = open(&storage, config).await;
        assert_eq!(
            storage.file_bytes(&index).unwrap(),
            before,
            "rebuilt byte for byte"
        );
        assert_eq!(read_all(&p, 0).await.len(), 11);
    });
}

#[test]
fn appended_wakes_waiters() {
    block_on(async {
        let storage = FaultyStorage::new(6);
        let p = open(&storage, small_config()).await;
        let woken = p.appended();
        p.append(batch(1, 0), 0).await.unwrap();
        woken.await;
    });
}

fn tmp_path_big(path: &std::path::Path) -> std::path::PathBuf {
    path.with_file_name("big-0")
}

/// Runs `test` on a glommio executor once per write mode (buffered, then O_DIRECT), each time
/// with the path of a partition directory in a fresh temporary directory (made by the test
/// when it wants one).
pub(super) fn in_each_write_mode<F, Fut>(test: F)
where
    F: Fn(crate::io::WriteMode, PathBuf) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    for mode in [crate::io::WriteMode::Buffered, crate::io::WriteMode::Direct] {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t-0");
        let test = test.clone();
        glommio::LocalExecutorBuilder::default()
            .spawn(move || test(mode, path))
            .unwrap()
            .join()
            .unwrap();
    }
}

#[test]
fn glommio_storage_round_trip() {
    use crate::io::{GlommioStorage, WriteMode};
    for mode in [WriteMode::Buffered, WriteMode::Direct] {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t-0");
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let storage = Rc::new(GlommioStorage::new(mode));
                let p = Partition::open(storage.clone(), path.clone(), small_config())
                    .await
                    .unwrap();
                for i in 0..20 {
                    p.append(batch(3, i), 0).await.unwrap();
                }
                p.wait_durable(Offset::new(59)).await.unwrap();
                assert_eq!(read_all(&p, 0).await.last().unwrap().next_offset(), 60);
                p.close().await.unwrap();
                let p = Partition::open(storage.clone(), path.clone(), small_config())
                    .await
                    .unwrap();
                assert_eq!(p.log_end_offset().get(), 60);
                let all = p.read(Offset::new(30), 1 << 20, true).await.unwrap();
                assert_eq!(headers(&all.data)[0].base_offset, 30);
                // A read stays within one segment (as Kafka's does): the first segment's batches.
                let from_start = p.read(Offset::new(0), 8 << 20, true).await.unwrap();
                assert_eq!(headers(&from_start.data).last().unwrap().next_offset(), 21);
                p.close().await.unwrap();
                let big = LogConfig::default();
                let p = Partition::open(storage, tmp_path_big(&path), big).await.unwrap();
                for i in 0..20 {
                    p.append(batch(3, i), 0).await.unwrap();
                }
                let from_start = p.read(Offset::new(0), 8 << 20, true).await.unwrap();
                assert_eq!(from_start.data.len(), 20, "every batch that fits, in one read");
            })
            .unwrap()
            .join()
            .unwrap();
    }
}

/// Disk bytes allocated to the `.log` files under `dir` (measured against the partition's
/// `size_bytes`: while a small append's mapping is open, a file's length lies past its data).
fn log_files_allocated(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let logs = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path());
    logs.filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| std::fs::metadata(p).unwrap().blocks() * 512)
        .sum()
}

/// Appends 64 KiB batches (16 per MiB) at `now_ms` until `mib` MiB more were appended, all in
/// one burst: a high write rate. Returns how many batches.
pub(super) async fn append_mib<S: Storage>(p: &Partition<S>, mib: u64, now_ms: i64) -> i64 {
    let target = p.size_bytes() + (mib << 20);
    let mut batches = 0;
    while p.size_bytes() < target {
        let big = Bytes::from(BatchBuilder::new(now_ms).records_of(64, 1024).build());
        p.append(big, now_ms).await.unwrap();
        batches += 1;
    }
    batches
}

#[test]
fn tiny_partitions_reserve_nothing_busy_ones_within_the_budget_and_idle_ones_give_back() {
    use crate::io::{GlommioStorage, ReserveBudget, WriteMode};
    use crate::log::segment::{RESERVE_AHEAD_MIN_BYTES, RESERVE_IDLE_MS};
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            // One and a half reservations of the least size.
            let budget = ReserveBudget::new(3 * RESERVE_AHEAD_MIN_BYTES / 2);
            let storage = GlommioStorage::new(WriteMode::Buffered).with_reserve_budget(budget.clone());
            let storage = Rc::new(storage);
            let open = |name: &str| Partition::open(storage.clone(), root.join(name), LogConfig::default());
            let (tiny, busy, other) = (
                open("tiny-0").await.unwrap(),
                open("busy-0").await.unwrap(),
                open("busy-1").await.unwrap(),
            );
            let now = 1_700_000_000_000;
            tiny.append(batch(3, 0), now).await.unwrap();
            let (allocated, len) = (log_files_allocated(&root.join("tiny-0")), tiny.size_bytes());
            assert!(
                allocated <= len.next_multiple_of(4096),
                "tiny: {allocated} for {len}"
            );
            assert_eq!(budget.reserved(), 0);

            let ahead = |name: &str, len: u64| log_files_allocated(&root.join(name)).saturating_sub(len);
            // Past 1 MiB, a fast partition reserves a second of its appends (at least 1 MiB).
            let batches = append_mib(&busy, 1, now).await;
            busy.append(batch(3, 0), now).await.unwrap();
            if budget.reserved() == 0 {
                return; // this filesystem reserves nothing (fallocate is only a hint)
            }
            assert!(
                ahead("busy-0", busy.size_bytes()) >= RESERVE_AHEAD_MIN_BYTES - 64 * 1024,
                "{}",
                ahead("busy-0", busy.size_bytes())
            );
            // The second busy partition gets what is left of the budget.
            append_mib(&other, 1, now).await;
            other.append(batch(3, 0), now).await.unwrap();
            assert!(budget.reserved() <= budget.limit());
            let second = ahead("busy-1", other.size_bytes());
            assert!(
                second > 0 && second < RESERVE_AHEAD_MIN_BYTES,
                "what was left: {second}"
            );
            assert!(
                ahead("busy-0", busy.size_bytes()) + ahead("busy-1", other.size_bytes())
                    <= budget.limit() + 2 * 4096
            );

            // Idle for a while: the reservation comes back; the partition stays usable.
            let later = now + RESERVE_IDLE_MS;
            assert!(
                !busy.release_idle_reservation(later - 1).await.unwrap(),
                "not idle yet"
            );
            assert!(busy.release_idle_reservation(later).await.unwrap());
            assert!(ahead("busy-0", busy.size_bytes()) <= 4096);
            other.close().await.unwrap();
            assert!(ahead("busy-1", other.size_bytes()) <= 4096);
            assert_eq!(budget.reserved(), 0);
            busy.append(batch(1, 0), later).await.unwrap();
            assert_eq!(busy.log_end_offset().get(), batches * 64 + 3 + 1);
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn blocks_reserved_ahead_of_appends_are_given_back_when_the_segment_rolls_and_closes() {
    use crate::io::{GlommioStorage, WriteMode};
    use crate::log::segment::RESERVE_AHEAD_MIN_BYTES;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t-0");
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let storage = Rc::new(GlommioStorage::new(WriteMode::Buffered));
            // segment.bytes of 2 MiB: the third MiB appended rolls the segment.
            let config = LogConfig {
                segment_bytes: 2 << 20,
                ..LogConfig::default()
            };
            let p = Partition::open(storage.clone(), path.clone(), config)
                .await
                .unwrap();
            append_mib(&p, 1, 0).await;
            p.append(batch(3, 0), 0).await.unwrap();
            let (allocated, len) = (log_files_allocated(&path), p.size_bytes());
            if allocated < len + RESERVE_AHEAD_MIN_BYTES / 2 {
                return; // this filesystem reserves nothing (fallocate is only a hint)
            }
            // The next MiB rolls: the first segment gives back its reservation once synced (in
            // the background, which the broker starts on the roll's claim), and the new one,
            // tiny, reserves nothing.
            append_mib(&p, 1, 0).await;
            p.append(batch(3, 0), 0).await.unwrap();
            assert_eq!(p.segment_count(), 2);
            assert!(p.claim_rolled_sync(), "the roll asks for its background sync");
            assert!(!p.claim_rolled_sync(), "once");
            p.finish_rolled_sync().await.unwrap();
            let (allocated, len) = (log_files_allocated(&path), p.size_bytes());
            assert!(allocated <= len + 2 * 4096, "rolled: {allocated} bytes for {len}");
            append_mib(&p, 1, 0).await;
            let len = p.size_bytes();
            p.close().await.unwrap();
            let allocated = log_files_allocated(&path);
            assert!(allocated <= len + 2 * 4096, "closed: {allocated} bytes for {len}");
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn a_crash_while_appends_are_mapped_leaves_zeros_past_the_data_which_the_open_cuts() {
    use crate::io::{GlommioStorage, WriteMode};
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t-0");
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let log_len = || {
                std::fs::metadata(path.join(format!("{:020}.log", 0)))
                    .unwrap()
                    .len()
            };
            let storage = Rc::new(GlommioStorage::new(WriteMode::Buffered));
            let p = Partition::open(storage.clone(), path.clone(), LogConfig::default())
                .await
                .unwrap();
            for _ in 0..3 {
                p.append(batch(3, 0), 0).await.unwrap();
            }
            p.checkpoint().await.unwrap();
            assert_eq!(
                log_len(),
                p.size_bytes(),
                "a checkpoint cuts the file to its data"
            );
            // Past the appends that go through pwritev before a file is mapped.
            for _ in 0..crate::io::mapped_appends::SMALL_APPENDS_BEFORE_MAPPING + 2 {
                p.append(batch(3, 0), 0).await.unwrap();
            }
            let (data, end) = (p.size_bytes(), p.log_end_offset().get());
            if log_len() == data {
                return; // not mapped: this test's file system is nearly full
            }
            // The process dies: nothing closes, unmaps or cuts; the page cache keeps the bytes.
            std::mem::forget(p);
            std::mem::forget(storage);
            assert!(log_len() > data, "zeros past the data");
            let storage = Rc::new(GlommioStorage::new(WriteMode::Buffered));
            let p = Partition::open(storage, path.clone(), LogConfig::default())
                .await
                .unwrap();
            assert_eq!(
                (p.log_end_offset().get(), p.size_bytes()),
                (end, data),
                "every batch, nothing more"
            );
            assert_eq!(log_len(), data, "the zeros cut");
            let read = p.read(Offset::new(0), 1 << 20, true).await.unwrap();
            let read_bytes: usize = read.data.iter().map(|b| b.len()).sum();
            assert_eq!(read_bytes as u64, data, "all of it readable");
            p.append(batch(1, 0), 0).await.unwrap();
            assert_eq!(p.log_end_offset().get(), end + 1);
            p.close().await.unwrap();
        })
        .unwrap()
        .join()
        .unwrap();
}

/// Flips a byte inside the last batch of the active segment `00000000000000000000.log`, as
/// a torn write could leave it (its CRC no longer matches).
fn damage_last_batch(storage: &FaultyStorage) {
    let log = dir().join(format!("{:020}.log", 0));
    let mut bytes = storage.file_bytes(&log).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0xFF;
    storage.set_file_bytes(&log, bytes);
}

/// What the log's state file says (`None`: no file, or not a valid one).
fn disk_state(storage: &FaultyStorage) -> Option<crate::log::disk_state::DiskState> {
    let bytes = storage.file_bytes(&dir().join(crate::log::disk_state::STATE_FILE))?;
    crate::log::disk_state::decode(&bytes).map(|record| record.state)
}

#[test]
fn a_log_only_read_since_a_clean_close_stays_clean_and_needs_no_recovery() {
    use crate::log::disk_state::DiskState::Clean;
    block_on(async {
        let storage = FaultyStorage::new(7);
        let config = LogConfig::default();
        let p = open(&storage, config.clone()).await;
        for i in 0..3 {
            p.append(batch(2, i), 0).await.unwrap();
        }
        p.close().await.unwrap();
        assert_eq!(disk_state(&storage), Some(Clean));
        damage_last_batch(&storage);

        // Read only, then a crash: still clean, so the next open trusts the files (the damage
        // is not looked for: only headers are read after a clean close).
        let p = open(&storage, config.clone()).await;
        assert_eq!(p.read(Offset::new(0), 1 << 20, true).await.unwrap().data.len(), 3);
        let syncs = storage.sync_count();
        drop(p);
        storage.crash(CrashMode::LoseUnsynced);
        assert_eq!(disk_state(&storage), Some(Clean), "kept while only read");
        let p = open(&storage, config.clone()).await;
        assert_eq!(p.log_end_offset().get(), 6);
        // Closing a log nobody wrote writes nothing.
        p.close().await.unwrap();
        assert_eq!(storage.sync_count(), syncs);

        // The first write makes it dirty: a crash after it is recovered from what the clean
        // state had synced on (the damaged batch below is trusted); the append, never synced,
        // is lost. The state file is not written: the append's growth past the clean state's
        // prefix is what the next open sees (decision 0022, open on first use and the log state file).
        let p = open(&storage, config.clone()).await;
        p.append(batch(1, 9), 0).await.unwrap();
        assert!(!p.log.is_clean());
        assert_eq!(
            disk_state(&storage),
            Some(Clean),
            "left as it was by the first write"
        );
        drop(p);
        storage.crash(CrashMode::LoseUnsynced);
        let p = open(&storage, config.clone()).await;
        assert_eq!(p.log_end_offset().get(), 6);
        // Without its state file, the whole active segment is verified: cut at the damage.
        drop(p);
        let state = dir().join(crate::log::disk_state::STATE_FILE);
        storage.remove_file(&state).await.unwrap();
        let p = open(&storage, config).await;
        assert_eq!(p.log_end_offset().get(), 4, "cut at the damaged third batch");
    });
}

/// A partition of three batches (offsets 0..6), checkpointed, then `appended` more batches
/// written without a sync; returns it with the fdatasyncs counted before those appends.
async fn appended_after_a_checkpoint(
    storage: &FaultyStorage,
    appended: i64,
) -> (Partition<FaultyStorage>, u64) {
    let p = open(storage, LogConfig::default()).await;
    for i in 0..3 {
        p.append(batch(2, i), 0).await.unwrap();
    }
    assert!(p.checkpoint().await.unwrap());
    let syncs = storage.sync_count();
    for i in 0..appended {
        p.append(batch(2, 10 + i), 0).await.unwrap();
    }
    (p, syncs)
}

#[test]
fn the_first_append_after_a_checkpoint_writes_and_syncs_no_state() {
    use crate::log::disk_state::DiskState::Clean;
    block_on(async {
        let storage = FaultyStorage::new(11);
        let (p, syncs) = appended_after_a_checkpoint(&storage, 3).await;
        assert_eq!(
            storage.sync_count(),
            syncs,
            "no fdatasync on the way to the appends"
        );
        assert_eq!(disk_state(&storage), Some(Clean));
        assert!(!p.log.is_clean(), "dirty in memory: a checkpoint has work to do");
        assert!(p.checkpoint().await.unwrap());
        assert!(p.log.is_clean());
    });
}

#[test]
fn a_log_grown_past_its_clean_prefix_is_verified_at_the_open() {
    block_on(async {
        // The process dies (its writes stay in the page cache) with the last append damaged,
        // as a torn write could leave it: the open finds the log longer than the clean state
        // says, verifies what is past it and cuts the damaged batch.
        let storage = FaultyStorage::new(12);
        let (p, _) = appended_after_a_checkpoint(&storage, 2).await;
        drop(p);
        damage_last_batch(&storage);
        let p = open(&storage, LogConfig::default()).await;
        assert_eq!(p.log_end_offset().get(), 8, "cut at the damaged fifth batch");
        assert_eq!(read_all(&p, 0).await.len(), 4);
        // The same after crashes that tear the unsynced appends or leave garbage after them:
        // whole, valid batches from the checkpoint on, nothing before it lost.
        for (seed, mode) in [(13, CrashMode::TornTail), (14, CrashMode::TornTailWithGarbage)] {
            let storage = FaultyStorage::new(seed);
            let (p, _) = appended_after_a_checkpoint(&storage, 4).await;
            drop(p);
            storage.crash(mode);
            let p = open(&storage, LogConfig::default()).await;
            let end = p.log_end_offset().get();
            assert!((6..=14).contains(&end) && end % 2 == 0, "{mode:?}: end {end}");
            assert_eq!(read_all(&p, 0).await.len() as i64, end / 2, "{mode:?}");
        }
    });
}

#[test]
fn a_checkpoint_of_an_idle_partition_spares_it_recovery() {
    use crate::log::disk_state::DiskState::Clean;
    use crate::partition::CHECKPOINT_IDLE_MS;
    block_on(async {
        let storage = FaultyStorage::new(8);
        let config = LogConfig::default();
        let p = open(&storage, config.clone()).await;
        let now = 1_700_000_000_000;
        p.append(batch(2, 0), now).await.unwrap();
        p.append(batch(2, 1), now).await.unwrap();
        assert!(!p
            .checkpoint_if_idle(now + CHECKPOINT_IDLE_MS - 1, CHECKPOINT_IDLE_MS)
            .await
            .unwrap());
        assert!(p
            .checkpoint_if_idle(now + CHECKPOINT_IDLE_MS, CHECKPOINT_IDLE_MS)
            .await
            .unwrap());
        assert_eq!(disk_state(&storage), Some(Clean));
        assert!(!p.checkpoint().await.unwrap(), "nothing written since");
        damage_last_batch(&storage);
        drop(p);
        // The crash finds the log clean: nothing is verified (the damage stays unseen), and
        // everything the checkpoint covered is there, unflushed appends included.
        storage.crash(CrashMode::LoseUnsynced);
        let p = open(&storage, config).await;
        assert_eq!(p.log_end_offset().get(), 4);
    });
}

#[test]
fn a_clean_open_trusts_the_active_segments_index_instead_of_verifying_it() {
    block_on(async {
        let storage = FaultyStorage::new(10);
        let config = LogConfig {
            index_interval_bytes: 128,
            ..LogConfig::default()
        };
        let p = open(&storage, config.clone()).await;
        for i in 0..20 {
            p.append(batch(3, i), 0).await.unwrap();
        }
        p.close().await.unwrap();
        // Damage the body of the second batch: only a verifying scan would see it.
        let log = dir().join(format!("{:020}.log", 0));
        let mut bytes = storage.file_bytes(&log).unwrap();
        let second = batch(3, 0).len() + 70;
        bytes[second] ^= 0xFF;
        storage.set_file_bytes(&log, bytes);
        let p = open(&storage, config).await;
        assert_eq!(
            p.log_end_offset().get(),
            60,
            "clean: the indexes are trusted, nothing is cut"
        );
    });
}

/// Flips a byte in the body of the second batch of the first segment (only a verifying scan
/// sees it).
fn damage_second_batch(storage: &FaultyStorage) {
    let log = dir().join(format!("{:020}.log", 0));
    let mut bytes = storage.file_bytes(&log).unwrap();
    bytes[batch(3, 0).len() + 70] ^= 0xFF;
    storage.set_file_bytes(&log, bytes);
}

fn small_index_config() -> LogConfig {
    LogConfig {
        index_interval_bytes: 128,
        ..LogConfig::default()
    }
}

#[test]
fn after_a_crash_only_what_follows_the_last_checkpoint_is_verified() {
    for mode in [
        CrashMode::LoseUnsynced,
        CrashMode::TornTail,
        CrashMode::TornTailWithGarbage,
    ] {
        block_on(async {
            let storage = FaultyStorage::new(11);
            let p = open(&storage, small_index_config()).await;
            for i in 0..20 {
                p.append(batch(3, i), 0).await.unwrap();
            }
            assert!(p.checkpoint().await.unwrap());
            damage_second_batch(&storage);
            for i in 0..5 {
                p.append(batch(3, 100 + i), 0).await.unwrap();
            }
            drop(p);
            storage.crash(mode);
            let p = open(&storage, small_index_config()).await;
            // The checkpointed prefix is trusted (the damage below it is not looked for); what
            // followed is verified: whole batches of it kept, the rest cut.
            let end = p.log_end_offset().get();
            assert!((60..=75).contains(&end) && end % 3 == 0, "{mode:?}: {end}");
            let last = p.read(Offset::new(end - 3), 1 << 20, true).await.unwrap();
            assert_eq!(headers(&last.data).len(), 1, "{mode:?}");
            p.append(batch(1, 0), 0).await.unwrap();
        });
    }
}

#[test]
fn a_truncation_below_the_checkpoint_sends_the_whole_segment_to_recovery() {
    block_on(async {
        let storage = FaultyStorage::new(12);
        let p = open(&storage, small_index_config()).await;
        for i in 0..20 {
            p.append(batch(3, i), 0).await.unwrap();
        }
        assert!(p.checkpoint().await.unwrap());
        p.truncate_to(Offset::new(30)).await.unwrap();
        damage_second_batch(&storage);
        drop(p);
        storage.crash(CrashMode::LoseUnsynced);
        let p = open(&storage, small_index_config()).await;
        assert_eq!(
            p.log_end_offset().get(),
            3,
            "verified from the start: cut at the damaged batch"
        );
    });
}

#[test]
fn a_partition_written_without_pause_moves_its_synced_prefix_and_recovers_from_there() {
    block_on(async {
        let storage = FaultyStorage::new(13);
        let p = open(&storage, small_index_config()).await;
        for i in 0..20 {
            p.append(batch(3, i), 0).await.unwrap();
        }
        let size = p.size_bytes();
        assert!(
            !p.log.advance_synced_prefix(size + 1).await.unwrap(),
            "not that far yet"
        );
        assert!(p.log.advance_synced_prefix(size).await.unwrap());
        assert!(!p.log.advance_synced_prefix(size).await.unwrap(), "nothing since");
        damage_second_batch(&storage);
        for i in 0..5 {
            p.append(batch(3, 100 + i), 0).await.unwrap();
        }
        drop(p);
        storage.crash(CrashMode::TornTailWithGarbage);
        let p = open(&storage, small_index_config()).await;
        let end = p.log_end_offset().get();
        assert!(
            (60..=75).contains(&end) && end % 3 == 0,
            "trusted up to the prefix: {end}"
        );
    });
}

#[test]
fn a_new_partition_creates_its_state_file_at_its_first_checkpoint_not_its_first_write() {
    block_on(async {
        let storage = FaultyStorage::new(41);
        let state_file = dir().join(crate::log::disk_state::STATE_FILE);
        let p = open(&storage, LogConfig::default()).await;
        p.append(batch(2, 0), 0).await.unwrap();
        p.wait_durable(Offset::new(1)).await.unwrap();
        assert!(
            storage.file_bytes(&state_file).is_none(),
            "no state file to create on the first write"
        );
        drop(p);
        // A crash before any checkpoint: no state file reads as dirty, and recovery keeps what
        // was synced.
        storage.crash(CrashMode::LoseUnsynced);
        let p = open(&storage, LogConfig::default()).await;
        assert_eq!(p.log_end_offset().get(), 2);
        assert!(!p.log.is_clean());
        p.checkpoint().await.unwrap();
        assert!(p.log.is_clean());
        assert!(
            storage.file_bytes(&state_file).is_some(),
            "the first checkpoint creates it"
        );
        p.append(batch(1, 0), 0).await.unwrap();
        p.close().await.unwrap();
        let p = open(&storage, LogConfig::default()).await;
        assert!(p.log.is_clean(), "closed clean");
        assert_eq!(p.log_end_offset().get(), 3);
    });
}
