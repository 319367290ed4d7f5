//! Segment files longer than their data (decision 0048): pre-written blocks (`io/prewrite.rs`)
//! and recycled segment files (`log/recycle.rs`: retention keeps a removed segment's file where
//! the storage writes O_DIRECT, the next segment overwrites it), and no crash ever brings back
//! what lies past the data.

use super::tests::{append_mib, in_each_write_mode, read_all};
use super::*;
use crate::io::{GlommioStorage, WriteMode};
use crate::log::batch::testing::BatchBuilder;

const NOW: i64 = 1_700_000_000_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 << 10,
        retention_bytes: 128 << 10,
        ..LogConfig::default()
    }
}

/// A batch of four ~1 KiB records.
fn batch() -> Bytes {
    Bytes::from(BatchBuilder::new(NOW).records_of(4, 1000).build())
}

fn spare_exists(dir: &std::path::Path) -> bool {
    dir.join(crate::log::recycle::SPARE_NAME).exists()
}

/// The `.log` file of the active segment (the highest base offset) and its length on disk.
fn active_log_len(dir: &std::path::Path) -> u64 {
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    std::fs::metadata(logs.last().unwrap()).unwrap().len()
}

/// Appends until the log has `segments` segments; returns the log end offset.
async fn fill_to<S: Storage>(p: &Partition<S>, segments: usize) -> i64 {
    while p.segment_count() < segments {
        p.append(batch(), NOW).await.unwrap();
    }
    p.log_end_offset().get()
}

/// Every batch from the log start to the log end follows on from the one before, and the log
/// ends at `end`.
async fn assert_contiguous<S: Storage>(p: &Partition<S>, end: i64) {
    let start = p.log_start_offset().get();
    let mut next = start;
    while next < end {
        let headers = read_all(p, next).await;
        assert!(!headers.is_empty(), "nothing at {next}");
        for header in headers {
            assert_eq!(header.base_offset, next, "batches follow on from {start}");
            next = header.next_offset();
        }
    }
    assert_eq!((next, p.log_end_offset().get()), (end, end));
}

#[test]
fn retention_keeps_a_segment_file_for_the_next_segment_and_a_crash_never_brings_its_batches_back() {
    in_each_write_mode(|mode, path| async move {
        let storage = Rc::new(GlommioStorage::new(mode));
        let p = Partition::open(storage.clone(), path.clone(), config())
            .await
            .unwrap();
        fill_to(&p, 5).await;
        let outcome = p.apply_retention(NOW).await.unwrap();
        assert!(outcome.segments_deleted >= 1, "{outcome:?}");
        let recycles = mode == WriteMode::Direct;
        assert_eq!(
            spare_exists(&path),
            recycles,
            "{mode:?}: a spare only with O_DIRECT"
        );

        // The next roll takes the spare: its old bytes lie past the new segment's data.
        let segments = p.segment_count();
        let end = fill_to(&p, segments + 1).await;
        assert!(!spare_exists(&path), "{mode:?}: the roll took the spare");
        let on_disk = active_log_len(&path);
        let one_batch = batch().len() as u64;
        if recycles {
            assert!(
                on_disk > 8 * one_batch,
                "{mode:?}: {on_disk} bytes: the old file's length"
            );
        } else {
            assert!(on_disk <= 2 * one_batch, "{mode:?}: {on_disk} bytes: a new file");
        }
        assert_contiguous(&p, end).await;

        // A crash: nothing closes; the old batches past the data are still in the file.
        drop(p);
        let p = Partition::open(storage.clone(), path.clone(), config())
            .await
            .unwrap();
        assert_contiguous(&p, end).await;
        assert!(
            active_log_len(&path) <= 2 * one_batch,
            "{mode:?}: recovery cut the old bytes"
        );
        p.append(batch(), NOW).await.unwrap();
        assert_contiguous(&p, end + 4).await;

        // Retention again, then a clean close: the spare goes with the close.
        fill_to(&p, p.segment_count() + 3).await;
        p.apply_retention(NOW).await.unwrap();
        assert_eq!(spare_exists(&path), recycles);
        let end = p.log_end_offset().get();
        p.close().await.unwrap();
        assert!(!spare_exists(&path), "{mode:?}: a closed log keeps no spare");
        let p = Partition::open(storage, path, config()).await.unwrap();
        assert_contiguous(&p, end).await;
    });
}

/// A batch of `records` records at `base_offset`, CRC valid (the base offset lies outside what
/// the CRC covers).
fn batch_at(base_offset: i64, records: usize) -> Vec<u8> {
    let mut bytes = BatchBuilder::new(NOW).records_of(records, 100).build();
    bytes[..8].copy_from_slice(&base_offset.to_be_bytes());
    bytes
}

#[test]
fn an_old_batch_with_a_valid_crc_after_the_data_is_refused_by_its_offset() {
    in_each_write_mode(|mode, path| async move {
        std::fs::create_dir_all(&path).unwrap();
        // A recycled file after a crash: the new segment's batches at 100..110, then what the
        // file held before, whole batches with valid CRCs at offsets 0..30.
        let mut file = batch_at(100, 6);
        file.extend(batch_at(106, 4));
        for old in [0, 10, 20] {
            file.extend(batch_at(old, 10));
        }
        std::fs::write(path.join("00000000000000000100.log"), &file).unwrap();
        let storage = Rc::new(GlommioStorage::new(mode));
        let p = Partition::open(storage, path.clone(), config()).await.unwrap();
        assert_eq!(
            p.log_end_offset().get(),
            110,
            "{mode:?}: the old batches are not records"
        );
        assert_eq!(p.log_start_offset().get(), 100);
        assert_contiguous(&p, 110).await;
        let kept = (batch_at(100, 6).len() + batch_at(106, 4).len()) as u64;
        assert_eq!(
            active_log_len(&path),
            kept,
            "{mode:?}: the file is cut after the data"
        );
    });
}

/// The `.log` files under `dir`: their lengths, summed.
fn log_files_len(dir: &std::path::Path) -> u64 {
    let logs = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path());
    logs.filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

#[test]
fn prewritten_segments_lie_past_their_data_until_closed_and_a_crash_leaves_only_zeros_to_cut() {
    in_each_write_mode(|mode, path| async move {
        let storage = Rc::new(GlommioStorage::new(mode).with_prewrite(true).unwrap());
        let p = Partition::open(storage.clone(), path.clone(), LogConfig::default())
            .await
            .unwrap();
        let now = 1_700_000_000_000;
        let batches = append_mib(&p, 3, now).await;
        p.wait_durable(Offset::new(batches * 64 - 1)).await.unwrap();
        let stats = storage.prewrite_stats().expect("pre-writing is on");
        assert!(stats.chains_submitted >= 1, "{mode:?}: {stats:?}");
        // Let the chains in flight finish, as appends keep going.
        for _ in 0..200 {
            let stats = storage.prewrite_stats().unwrap();
            if stats.chains_completed == stats.chains_submitted {
                break;
            }
            glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
        }
        let stats = storage.prewrite_stats().unwrap();
        assert_eq!(stats.chains_failed, 0, "{mode:?}: {stats:?}");
        assert!(stats.bytes_prewritten > 0, "{mode:?}: {stats:?}");
        let size = p.size_bytes();
        let on_disk = log_files_len(&path);
        assert!(
            on_disk > size,
            "{mode:?}: the file lies past its data ({on_disk} for {size})"
        );
        let bytes = std::fs::read(path.join("00000000000000000000.log")).unwrap();
        assert!(
            bytes[size as usize..].iter().all(|&b| b == 0),
            "zeros past the data"
        );

        // A crash: the partition is dropped without a close, the file still long.
        drop(p);
        let p = Partition::open(storage.clone(), path.clone(), LogConfig::default())
            .await
            .unwrap();
        assert_eq!(
            p.log_end_offset().get(),
            batches * 64,
            "{mode:?}: every record back"
        );
        assert_eq!(p.size_bytes(), size);
        p.append(super::tests::batch(3, now), now).await.unwrap();
        assert_eq!(
            read_all(&p, 0).await.last().unwrap().next_offset(),
            batches * 64 + 3
        );
        p.close().await.unwrap();
        assert_eq!(
            log_files_len(&path),
            size + super::tests::batch(3, now).len() as u64,
            "{mode:?}: a close cuts the file back to its data"
        );
    });
}
