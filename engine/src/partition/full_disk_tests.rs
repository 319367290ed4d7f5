//! A log dir that fills up and frees again: appends are refused while it is full, nothing of a
//! refused append stays, and the partition resumes by itself, acknowledged data intact.

use super::*;
use crate::io::{CrashMode, FaultyStorage};
use crate::log::batch::testing::BatchBuilder;
use crate::log::batch::{self, BatchHeader};
use crate::log::segment::segment_path;
use futures::executor::block_on;

fn dir() -> PathBuf {
    PathBuf::from("/data/full-0")
}

/// Segments roll every ~1 KiB, with an index entry every 128 bytes (written behind, so a roll
/// has entries to write).
fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 128,
        ..LogConfig::default()
    }
}

/// A batch of 3 records, about 150 bytes.
fn batch(ts: i64) -> Bytes {
    batch_of(3, ts)
}

fn batch_of(records: usize, ts: i64) -> Bytes {
    Bytes::from(BatchBuilder::new(ts).records_of(records, 20).build())
}

async fn open(storage: &FaultyStorage) -> Partition<FaultyStorage> {
    Partition::open(Rc::new(storage.clone()), dir(), small_config())
        .await
        .unwrap()
}

/// The active segment's `.log` bytes as stored.
fn active_log_len(storage: &FaultyStorage, p: &Partition<FaultyStorage>) -> usize {
    let path = segment_path(&dir(), p.log.active_base_offset(), "log");
    storage.file_bytes(&path).map_or(0, |bytes| bytes.len())
}

/// Reads from every offset of every `(base offset, timestamp)` batch of `expected` (so that
/// every lookup goes through the indexes) and checks that its batch answers, and that the log
/// ends after the last one.
async fn assert_batches(p: &Partition<FaultyStorage>, expected: &[(i64, i64)]) {
    let mut end = 0;
    for &(base, ts) in expected {
        let mut offset = base;
        loop {
            let read = p.read(Offset::new(offset), 1, true).await.unwrap();
            let header: BatchHeader = batch::validate(&read.data[0], usize::MAX).unwrap();
            assert_eq!(
                (header.base_offset, header.base_timestamp),
                (base, ts),
                "at {offset}"
            );
            end = header.next_offset();
            offset += 1;
            if offset == end {
                break;
            }
        }
    }
    assert_eq!(p.log_end_offset().get(), end);
}

/// Appends until the partition refuses one, noting the accepted ones in `acked`; returns why.
async fn append_until_refused(p: &Partition<FaultyStorage>, acked: &mut Vec<(i64, i64)>) -> LogError {
    for ts in 1000 * acked.len() as i64.. {
        match p.append(batch(ts), 0).await {
            Ok(info) => acked.push((info.base_offset.get(), ts)),
            Err(error) => return error,
        }
    }
    unreachable!("appends to a bounded disk end")
}

#[test]
fn appends_refused_while_the_disk_is_full_resume_once_space_returns() {
    block_on(async {
        let storage = FaultyStorage::new(21);
        let p = open(&storage).await;
        let mut acked = Vec::new();
        for ts in 0..4 {
            acked.push((p.append(batch(ts), 0).await.unwrap().base_offset.get(), ts));
        }
        p.flush().await.unwrap();
        // Space for less than two batches: each append writes part of its bytes (and makes
        // index entries for them), then is refused.
        let two_batches = Bytes::from([batch(98), batch(99)].concat());
        for left in [0, 40, 100, 200] {
            storage.set_space_left(Some(left));
            let (end, stored) = (p.log_end_offset().get(), active_log_len(&storage, &p));
            let refused = p.append(two_batches.clone(), 0).await.unwrap_err();
            assert!(matches!(refused, LogError::Exhausted(_)), "{refused}");
            assert!(!refused.is_storage_failure(), "the log dir has not failed");
            assert_eq!(p.log_end_offset().get(), end, "no offsets taken");
            assert_eq!(
                active_log_len(&storage, &p),
                stored,
                "no partial batch left behind"
            );
            assert_batches(&p, &acked).await;
        }
        storage.set_space_left(None);
        // Smaller batches now: the offsets the refused batches would have had lie elsewhere.
        for ts in 5..9 {
            let info = p.append(batch_of(1, ts), 0).await.unwrap();
            if ts == 5 {
                assert_eq!(info.base_offset.get(), 12, "right after the acknowledged batches");
            }
            acked.push((info.base_offset.get(), ts));
            p.wait_durable(info.last_offset).await.unwrap();
        }
        assert_batches(&p, &acked).await;
    });
}

#[test]
fn a_roll_refused_for_lack_of_space_is_retried_and_nothing_acknowledged_is_lost() {
    block_on(async {
        let storage = FaultyStorage::new(22);
        let p = open(&storage).await;
        let mut acked = Vec::new();
        // Enough space for a few more batches, not for the roll's index entries and snapshot:
        // the disk fills part-way through this run, in the data, the indexes or the roll.
        for left in [2000i64, 1500, 700, 300] {
            storage.set_space_left(Some(left as u64));
            let refused = append_until_refused(&p, &mut acked).await;
            assert!(matches!(refused, LogError::Exhausted(_)), "{refused}");
            assert_batches(&p, &acked).await;
            storage.set_space_left(None);
            let info = p.append(batch(left), 0).await.unwrap();
            acked.push((info.base_offset.get(), left));
            p.flush().await.unwrap();
        }
        assert!(p.segment_count() > 2, "the runs went through rolls");
        assert_batches(&p, &acked).await;
        // What was acknowledged (and synced) survives a crash, and nothing refused comes back.
        drop(p);
        storage.crash(CrashMode::LoseUnsynced);
        let p = open(&storage).await;
        assert_batches(&p, &acked).await;
        let info = p.append(batch(7), 0).await.unwrap();
        assert_eq!(info.base_offset.get(), acked.last().unwrap().0 + 3);
    });
}

#[test]
fn an_append_whose_index_write_finds_no_space_leaves_no_index_entry_behind() {
    block_on(async {
        let storage = FaultyStorage::new(24);
        let config = LogConfig {
            index_interval_bytes: 128,
            ..LogConfig::default()
        };
        let p = Partition::open(Rc::new(storage.clone()), dir(), config)
            .await
            .unwrap();
        let mut acked = Vec::new();
        // Room for each append's data but not for the index entries written behind every
        // 512: the append that would write them is refused after its data went in.
        let refused = loop {
            let ts = acked.len() as i64;
            let two_batches = Bytes::from([batch(ts), batch(ts + 1)].concat());
            storage.set_space_left(Some(two_batches.len() as u64 + 8));
            match p.append(two_batches, 0).await {
                Ok(info) => {
                    acked.extend([(info.base_offset.get(), ts), (info.base_offset.get() + 3, ts + 1)])
                }
                Err(error) => break error,
            }
        };
        assert!(matches!(refused, LogError::Exhausted(_)), "{refused}");
        assert!(
            acked.len() > 500,
            "refused at the index write, after {} batches",
            acked.len()
        );
        storage.set_space_left(None);
        // Batches of another size now: an entry left for a refused batch would point between
        // batches.
        for ts in 100_000..100_008 {
            let info = p.append(batch_of(1, ts), 0).await.unwrap();
            acked.push((info.base_offset.get(), ts));
        }
        assert_batches(&p, &acked).await;
    });
}

#[test]
fn a_roll_without_space_for_its_producer_snapshot_still_appends() {
    block_on(async {
        let mut outcomes = std::collections::BTreeMap::new();
        // Every amount of space from none to more than the roll, its append and the snapshot
        // need: the append is refused or done, and done without the snapshot in between.
        for left in 0..400 {
            let storage = FaultyStorage::new(25);
            let p = open(&storage).await;
            let mut acked = Vec::new();
            // Up to the batch that no longer fits in the segment.
            while p.size_bytes() + batch(0).len() as u64 <= small_config().segment_bytes {
                let ts = acked.len() as i64;
                acked.push((p.append(batch(ts), 0).await.unwrap().base_offset.get(), ts));
            }
            storage.set_space_left(Some(left));
            let outcome = match p.append(batch(99), 0).await {
                Ok(info) => {
                    assert_eq!(p.segment_count(), 2, "the append rolled");
                    acked.push((info.base_offset.get(), 99));
                    let snapshot = producer_snapshot::snapshot_path(&dir(), info.base_offset.get());
                    if storage.file_bytes(&snapshot).is_some() {
                        "appended with a snapshot"
                    } else {
                        "appended, snapshot skipped"
                    }
                }
                Err(LogError::Exhausted(_)) => "refused",
                Err(other) => panic!("space {left}: {other}"),
            };
            assert_batches(&p, &acked).await;
            *outcomes.entry(outcome).or_insert(0) += 1;
        }
        assert_eq!(outcomes.len(), 3, "{outcomes:?}");
    });
}

#[test]
fn other_write_errors_still_fail_the_partition_for_good() {
    block_on(async {
        let storage = FaultyStorage::new(23);
        let p = open(&storage).await;
        p.append(batch(0), 0).await.unwrap();
        storage.fail_write_after(1);
        let failed = p.append(batch(1), 0).await.unwrap_err();
        assert!(failed.is_storage_failure(), "{failed}");
        storage.clear_faults();
        assert!(matches!(
            p.append(batch(2), 0).await,
            Err(LogError::Failed { .. })
        ));
    });
}
