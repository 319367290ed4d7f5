//! The idempotent producer through the Partition API: duplicates, refusals, snapshots and
//! rebuilding the state after a clean reopen and after a crash.

use super::producer_snapshot::snapshot_path;
use super::*;
use crate::io::{CrashMode, FaultyStorage};
use crate::log::batch::testing::BatchBuilder;
use futures::executor::block_on;

fn dir() -> PathBuf {
    PathBuf::from("/data/idem-0")
}

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 600,
        index_interval_bytes: 128,
        ..LogConfig::default()
    }
}

/// A batch of `count` records from producer `id`/`epoch` starting at sequence `seq`.
fn batch(id: i64, epoch: i16, seq: i32, count: usize) -> Bytes {
    Bytes::from(
        BatchBuilder::new(1_000)
            .producer(id, epoch, seq)
            .records_of(count, 20)
            .build(),
    )
}

async fn open(storage: &FaultyStorage) -> Partition<FaultyStorage> {
    Partition::open(Rc::new(storage.clone()), dir(), small_config())
        .await
        .unwrap()
}

fn snapshots(storage: &FaultyStorage) -> Vec<i64> {
    (0..10_000)
        .filter(|&o| storage.file_bytes(&snapshot_path(&dir(), o)).is_some())
        .collect()
}

/// Appends batches of 1..=3 records for producers 1..=3 in turn; returns each batch as sent
/// with its acknowledged base offset.
async fn produce_rounds(p: &Partition<FaultyStorage>, rounds: usize) -> Vec<(Bytes, i64)> {
    let mut next_seq = [0i32; 4];
    let mut sent = Vec::new();
    for i in 0..rounds {
        let id = 1 + i % 3;
        let count = 1 + i % 3;
        let b = batch(id as i64, 0, next_seq[id], count);
        next_seq[id] += count as i32;
        let info = p.append(b.clone(), 10).await.unwrap();
        sent.push((b, info.base_offset.get()));
    }
    sent
}

/// Every batch in `sent` is answered as a duplicate with its original offset, and the log
/// does not grow.
async fn assert_all_duplicates(p: &Partition<FaultyStorage>, sent: &[(Bytes, i64)]) {
    let end = p.log_end_offset().get();
    for (b, offset) in sent {
        let info = p.append(b.clone(), 20).await.unwrap();
        assert_eq!((info.base_offset.get(), info.record_count), (*offset, 0));
    }
    assert_eq!(p.log_end_offset().get(), end, "duplicates are not written");
}

#[test]
fn a_retry_is_answered_with_the_original_offset_and_not_written() {
    block_on(async {
        let storage = FaultyStorage::new(1);
        let p = open(&storage).await;
        p.append(batch(-1, -1, -1, 2), 5).await.unwrap();
        let first = p.append(batch(42, 0, 0, 3), 5).await.unwrap();
        assert_eq!(
            (
                first.base_offset.get(),
                first.last_offset.get(),
                first.record_count
            ),
            (2, 4, 3)
        );
        let retry = p.append(batch(42, 0, 0, 3), 6).await.unwrap();
        assert_eq!((retry.base_offset.get(), retry.last_offset.get()), (2, 4));
        assert_eq!((retry.record_count, retry.bytes), (0, 0));
        assert_eq!(p.log_end_offset().get(), 5);
        let r = p.read(Offset::new(0), 1 << 20, true).await.unwrap();
        assert_eq!(r.data.len(), 2, "one plain batch and one idempotent batch");
    });
}

#[test]
fn refused_batches_write_nothing_and_keep_the_state() {
    block_on(async {
        let storage = FaultyStorage::new(2);
        let p = open(&storage).await;
        p.append(batch(7, 1, 0, 2), 5).await.unwrap();
        let gap = p.append(batch(7, 1, 3, 1), 5).await.unwrap_err();
        assert!(matches!(
            gap,
            LogError::OutOfOrderSequence {
                sequence: 3,
                last_sequence: 1,
                ..
            }
        ));
        let fenced = p.append(batch(7, 0, 2, 1), 5).await.unwrap_err();
        assert!(matches!(
            fenced,
            LogError::InvalidProducerEpoch { current_epoch: 1, .. }
        ));
        // A request whose second batch breaks the sequence writes neither.
        let mut two = batch(7, 1, 2, 1).to_vec();
        two.extend_from_slice(&batch(7, 1, 9, 1));
        assert!(p.append(Bytes::from(two), 5).await.is_err());
        assert_eq!(p.log_end_offset().get(), 2);
        // A corrupt retry is reported as corrupt, not as a duplicate.
        let mut corrupt = batch(7, 1, 0, 2).to_vec();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1;
        let err = p.append(Bytes::from(corrupt), 5).await.unwrap_err();
        assert!(matches!(err, LogError::Batch(e) if e.is_corrupt()));
        // Two in-order batches in one request are both written and recorded.
        let mut two = batch(7, 1, 2, 1).to_vec();
        two.extend_from_slice(&batch(7, 1, 3, 2));
        let info = p.append(Bytes::from(two), 5).await.unwrap();
        assert_eq!((info.base_offset.get(), info.last_offset.get()), (2, 4));
        let entry = p.producer_entry(7).unwrap();
        let offsets: Vec<_> = entry
            .batches
            .iter()
            .map(|b| (b.first_seq, b.first_offset))
            .collect();
        assert_eq!(offsets, vec![(0, 0), (2, 2), (3, 3)]);
    });
}

#[test]
fn state_survives_a_clean_reopen_through_the_close_snapshot() {
    block_on(async {
        let storage = FaultyStorage::new(3);
        let p = open(&storage).await;
        let sent = produce_rounds(&p, 30).await;
        assert!(p.segment_count() > 2, "small segments roll");
        assert!(!snapshots(&storage).is_empty(), "a roll writes a snapshot");
        let before: Vec<_> = (1..=3).map(|id| p.producer_entry(id).unwrap()).collect();
        let end = p.log_end_offset().get();
        p.close().await.unwrap();
        assert_eq!(
            snapshots(&storage).last(),
            Some(&end),
            "close snapshots at the log end"
        );
        assert!(snapshots(&storage).len() <= 2, "old snapshots are removed");
        let p = open(&storage).await;
        let after: Vec<_> = (1..=3).map(|id| p.producer_entry(id).unwrap()).collect();
        assert_eq!(after, before, "loaded from the snapshot, timestamps included");
        assert_all_duplicates(&p, &sent[sent.len() - 5..]).await;
    });
}

#[test]
fn state_is_rebuilt_from_snapshot_and_log_tail_after_a_crash() {
    block_on(async {
        for mode in [
            CrashMode::LoseUnsynced,
            CrashMode::TornTail,
            CrashMode::TornTailWithGarbage,
        ] {
            let storage = FaultyStorage::new(4);
            let p = open(&storage).await;
            let durable = produce_rounds(&p, 25).await;
            p.flush().await.unwrap();
            let before: Vec<_> = (1..=3).map(|id| p.producer_entry(id).unwrap()).collect();
            // Unsynced batches of a new producer: a crash may take them.
            let unsynced = p.append(batch(9, 0, 0, 2), 10).await.unwrap();
            storage.crash(mode);
            drop(p);
            let p = open(&storage).await;
            let end = p.log_end_offset().get();
            assert!(
                end >= unsynced.base_offset.get(),
                "{mode:?}: synced batches survive"
            );
            for (id, old) in (1..=3).zip(&before) {
                let rebuilt = p.producer_entry(id).unwrap();
                assert_eq!(
                    (rebuilt.epoch, &rebuilt.batches),
                    (old.epoch, &old.batches),
                    "{mode:?}"
                );
            }
            let tail = &durable[durable.len() - 6..];
            assert_all_duplicates(&p, tail).await;
            // The new producer's batch is a duplicate if it survived, else appended afresh.
            let again = p.append(batch(9, 0, 0, 2), 30).await.unwrap();
            if end > unsynced.base_offset.get() {
                assert_eq!((again.base_offset, again.record_count), (unsynced.base_offset, 0));
            } else {
                assert_eq!((again.base_offset.get(), again.record_count), (end, 2));
            }
        }
    });
}

#[test]
fn a_clean_reopen_without_producer_state_reads_no_log() {
    block_on(async {
        let storage = FaultyStorage::new(8);
        let config = LogConfig {
            segment_bytes: 1 << 20,
            index_interval_bytes: 4096,
            ..LogConfig::default()
        };
        let p = Partition::open(Rc::new(storage.clone()), dir(), config.clone())
            .await
            .unwrap();
        for _ in 0..100 {
            let plain = BatchBuilder::new(1_000).records_of(1, 200).build();
            p.append(Bytes::from(plain), 10).await.unwrap();
        }
        let end = p.log_end_offset().get();
        p.close().await.unwrap();
        assert!(
            snapshots(&storage).is_empty(),
            "a short log without producers gets no snapshot"
        );
        let before = storage.bytes_read();
        let p = Partition::open(Rc::new(storage.clone()), dir(), config)
            .await
            .unwrap();
        let read = storage.bytes_read() - before;
        // The state file, the index tails and the headers after the last index entry: not
        // the 25 KB of the log, which rebuilding the producer state would replay.
        assert!(read < 8 << 10, "the open read {read} bytes");
        assert_eq!(p.log_end_offset().get(), end);
        let info = p.append(batch(4, 0, 0, 2), 20).await.unwrap();
        assert_eq!(
            (info.base_offset.get(), info.record_count),
            (end, 2),
            "a producer starts afresh"
        );
    });
}

#[test]
fn stale_and_damaged_snapshots_are_not_trusted() {
    block_on(async {
        let storage = FaultyStorage::new(5);
        let p = open(&storage).await;
        let sent = produce_rounds(&p, 20).await;
        let end = p.log_end_offset().get();
        p.close().await.unwrap();
        // Damage the close snapshot; plant one past the log end naming a producer that
        // never wrote here.
        let newest = snapshot_path(&dir(), end);
        let mut bytes = storage.file_bytes(&newest).unwrap();
        bytes[30] ^= 0xff;
        storage.set_file_bytes(&newest, bytes);
        let mut table = ProducerStateTable::default();
        let planted = BatchHeader::parse(&batch(55, 0, 0, 1)).unwrap();
        table.record(&planted, None, 0);
        let future = producer_snapshot::encode(&table, end + 100);
        storage.set_file_bytes(&snapshot_path(&dir(), end + 100), future.to_vec());
        let p = open(&storage).await;
        assert!(
            p.producer_entry(55).is_none(),
            "a snapshot past the log end is ignored"
        );
        assert!(!snapshots(&storage).contains(&(end + 100)), "and removed");
        assert_all_duplicates(&p, &sent[sent.len() - 5..]).await;
    });
}

#[test]
fn truncation_rebuilds_the_state() {
    block_on(async {
        let storage = FaultyStorage::new(6);
        let p = open(&storage).await;
        let first = p.append(batch(3, 0, 0, 2), 5).await.unwrap();
        let second = p.append(batch(3, 0, 2, 2), 5).await.unwrap();
        p.truncate_to(second.base_offset).await.unwrap();
        let entry = p.producer_entry(3).unwrap();
        assert_eq!(
            entry.batches.back().unwrap().first_offset,
            first.base_offset.get()
        );
        // The truncated batch is not a duplicate any more: it is written again.
        let again = p.append(batch(3, 0, 2, 2), 5).await.unwrap();
        assert_eq!((again.base_offset, again.record_count), (second.base_offset, 2));
    });
}

#[test]
fn idle_producers_expire_from_the_partition() {
    block_on(async {
        let storage = FaultyStorage::new(7);
        let p = open(&storage).await;
        p.append(batch(1, 0, 0, 1), 1_000).await.unwrap();
        p.append(batch(2, 0, 0, 1), 9_000).await.unwrap();
        assert_eq!(p.expire_producers(10_000, 5_000), 1);
        assert!(p.producer_entry(1).is_none() && p.producer_entry(2).is_some());
    });
}

#[test]
fn a_batch_claiming_a_negative_record_span_is_refused_as_bad_bytes_not_by_producer_rules() {
    block_on(async {
        let storage = FaultyStorage::new(1);
        let p = open(&storage).await;
        p.append(batch(7, 0, 0, 1), 5).await.unwrap();
        let mut bad = bytes::BytesMut::from(&batch(7, 0, 1, 1)[..]);
        bad[23..27].copy_from_slice(&(-5i32).to_be_bytes()); // last offset delta
        let refused = p.append(bad.freeze(), 5).await.unwrap_err();
        assert!(matches!(refused, LogError::Batch(_)), "{refused:?}");
        assert_eq!(p.log_end_offset().get(), 1, "nothing written");
    });
}
