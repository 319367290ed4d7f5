//! Transactions through the Partition API: the last stable offset, markers, the refusals of
//! KIP-98, the aborted-transaction index on disk, and a model test of LSO and aborted
//! transactions under appends, markers, high-watermark moves, truncations and reopens.

use super::*;
use crate::io::{CrashMode, FaultyStorage};
use crate::log::batch::testing::BatchBuilder;
use crate::log::segment::{segment_path, TXN_INDEX_SUFFIX};
use crate::log::txn_index::{AbortedTxnEntry, ENTRY_LEN};
use crate::log::BatchError;
use futures::executor::block_on;

pub(super) fn dir() -> PathBuf {
    PathBuf::from("/data/txn-0")
}

pub(super) fn follower_dir() -> PathBuf {
    PathBuf::from("/data/txn-follower-0")
}

pub(super) fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 700,
        index_interval_bytes: 128,
        ..LogConfig::default()
    }
}

pub(super) async fn open(storage: &FaultyStorage) -> Partition<FaultyStorage> {
    open_at(storage, dir()).await
}

pub(super) async fn open_at(storage: &FaultyStorage, at: PathBuf) -> Partition<FaultyStorage> {
    Partition::open(Rc::new(storage.clone()), at, small_config())
        .await
        .unwrap()
}

/// A transactional batch of `count` records from producer `id` (epoch 0) at sequence `seq`.
pub(super) fn txn_batch(id: i64, seq: i32, count: usize) -> Bytes {
    let built = BatchBuilder::new(1_000)
        .attributes(0x10)
        .producer(id, 0, seq)
        .records_of(count, 20);
    Bytes::from(built.build())
}

/// An idempotent, non-transactional batch.
pub(super) fn idempotent_batch(id: i64, seq: i32, count: usize) -> Bytes {
    Bytes::from(
        BatchBuilder::new(1_000)
            .producer(id, 0, seq)
            .records_of(count, 20)
            .build(),
    )
}

pub(super) fn plain_batch(count: usize) -> Bytes {
    Bytes::from(BatchBuilder::new(1_000).records_of(count, 20).build())
}

pub(super) fn aborted(list: &[(i64, i64)]) -> Vec<AbortedTxn> {
    let entry = |&(producer_id, first)| AbortedTxn {
        producer_id,
        first_offset: Offset::new(first),
    };
    list.iter().map(entry).collect()
}

pub(super) async fn aborted_between(p: &Partition<FaultyStorage>, from: i64, to: i64) -> Vec<AbortedTxn> {
    p.aborted_transactions(Offset::new(from), Offset::new(to))
        .await
        .unwrap()
}

/// The entries of every `.txnindex` file of the partition, by segment.
pub(super) fn txn_index_files(storage: &FaultyStorage, p: &Partition<FaultyStorage>) -> Vec<(i64, Vec<u8>)> {
    let bases = (0..p.log_end_offset().get() + 1).filter_map(|base| {
        let bytes = storage.file_bytes(&segment_path(p.dir(), base, TXN_INDEX_SUFFIX))?;
        Some((base, bytes))
    });
    bases.collect()
}

#[test]
pub(super) fn an_ended_transaction_holds_the_last_stable_offset_until_its_marker_is_below_the_high_watermark()
{
    block_on(async {
        let storage = FaultyStorage::new(1);
        let p = open(&storage).await;
        p.set_high_watermark(Offset::ZERO);
        p.append(txn_batch(7, 0, 3), 5).await.unwrap(); // 0..=2
        p.append_txn_marker(7, 0, TxnResult::Commit, 4, 9).await.unwrap(); // 3
        p.set_high_watermark(Offset::new(3));
        assert_eq!(p.last_stable_offset().get(), 0, "the marker could still be lost");
        p.set_high_watermark(Offset::new(4));
        assert_eq!(p.last_stable_offset().get(), 4, "the marker is replicated");
    });
}

#[test]
pub(super) fn an_open_transaction_holds_the_last_stable_offset_until_its_commit() {
    block_on(async {
        let storage = FaultyStorage::new(1);
        let p = open(&storage).await;
        p.append(plain_batch(2), 5).await.unwrap();
        assert_eq!(
            p.last_stable_offset().get(),
            2,
            "no transaction: the high watermark"
        );
        p.append(txn_batch(7, 0, 3), 5).await.unwrap(); // 2..=4
        p.append(plain_batch(1), 5).await.unwrap(); // 5
        p.append(txn_batch(8, 0, 1), 5).await.unwrap(); // 6
        p.append(txn_batch(7, 3, 1), 5).await.unwrap(); // 7: same transaction
        assert_eq!(p.last_stable_offset().get(), 2, "the earliest open transaction");
        let commit = p.append_txn_marker(7, 0, TxnResult::Commit, 4, 9).await.unwrap();
        assert_eq!(commit.base_offset.get(), 8);
        assert_eq!(
            p.last_stable_offset().get(),
            6,
            "producer 8's transaction is still open"
        );
        p.set_high_watermark(Offset::new(4));
        assert_eq!(p.last_stable_offset().get(), 4, "never above the high watermark");
        p.set_high_watermark(Offset::new(9));
        p.append_txn_marker(8, 0, TxnResult::Commit, 4, 9).await.unwrap();
        p.set_high_watermark(Offset::new(10));
        assert_eq!(p.last_stable_offset().get(), 10);
        assert_eq!(aborted_between(&p, 0, 10).await, vec![], "commits are not listed");
        assert!(
            txn_index_files(&storage, &p).is_empty(),
            "no abort, no index file"
        );
        let described = p.producers();
        let seven = described.iter().find(|d| d.producer_id == 7).unwrap();
        assert_eq!(
            (
                seven.last_sequence,
                seven.coordinator_epoch,
                seven.current_txn_start_offset
            ),
            (3, 4, -1)
        );
    });
}

#[test]
pub(super) fn an_abort_is_indexed_in_its_segment_and_listed_for_ranges_it_overlaps() {
    block_on(async {
        let storage = FaultyStorage::new(2);
        let p = open(&storage).await;
        p.append(txn_batch(7, 0, 2), 5).await.unwrap(); // 0..=1
        p.append(txn_batch(8, 0, 2), 5).await.unwrap(); // 2..=3
        let marker = p.append_txn_marker(7, 0, TxnResult::Abort, 1, 9).await.unwrap();
        assert_eq!(marker.base_offset.get(), 4);
        assert_eq!(p.last_stable_offset().get(), 2);
        let files = txn_index_files(&storage, &p);
        let expected = AbortedTxnEntry {
            producer_id: 7,
            first_offset: 0,
            last_offset: 4,
            last_stable_offset: 2, // producer 8's transaction, still open
        };
        assert_eq!(files, vec![(0, expected.encode().to_vec())]);
        assert_eq!(aborted_between(&p, 0, 1).await, aborted(&[(7, 0)]));
        assert_eq!(aborted_between(&p, 4, 5).await, aborted(&[(7, 0)]), "its marker");
        assert_eq!(aborted_between(&p, 5, 9).await, vec![], "after its marker");
        p.append_txn_marker(8, 0, TxnResult::Abort, 1, 9).await.unwrap(); // 5
        assert_eq!(aborted_between(&p, 0, 6).await, aborted(&[(7, 0), (8, 2)]));
        assert_eq!(
            aborted_between(&p, 0, 2).await,
            aborted(&[(7, 0)]),
            "8 starts at 2"
        );
        let described = p.producers();
        assert!(described
            .iter()
            .all(|d| d.current_txn_start_offset == -1 && d.coordinator_epoch == 1));
    });
}

#[test]
pub(super) fn clients_may_not_produce_markers_or_leave_a_transaction_with_plain_batches() {
    block_on(async {
        let storage = FaultyStorage::new(3);
        let p = open(&storage).await;
        let control = BatchBuilder::new(5).attributes(0x30).producer(7, 0, 0).record(
            Some(&[0, 0, 0, 1]),
            Some(&[0; 6]),
            0,
        );
        let refused = p.append(Bytes::from(control.build()), 5).await.unwrap_err();
        assert!(matches!(refused, LogError::Batch(BatchError::ControlFromClient)));
        let anonymous = BatchBuilder::new(5).attributes(0x10).records_of(1, 5);
        let refused = p.append(Bytes::from(anonymous.build()), 5).await.unwrap_err();
        assert!(matches!(
            refused,
            LogError::Batch(BatchError::TransactionalWithoutProducer)
        ));
        p.append(txn_batch(7, 0, 1), 5).await.unwrap();
        let plain = p.append(idempotent_batch(7, 1, 1), 5).await.unwrap_err();
        assert!(matches!(plain, LogError::InvalidTxnState { producer_id: 7 }));
        let mut both = txn_batch(9, 0, 1).to_vec();
        both.extend_from_slice(&idempotent_batch(9, 1, 1));
        let same_request = p.append(Bytes::from(both), 5).await.unwrap_err();
        assert!(matches!(
            same_request,
            LogError::InvalidTxnState { producer_id: 9 }
        ));
        assert_eq!(p.log_end_offset().get(), 1, "refusals write nothing");
        p.append_txn_marker(7, 0, TxnResult::Commit, 0, 5).await.unwrap();
        p.append(idempotent_batch(7, 1, 1), 5).await.unwrap();
    });
}

#[test]
pub(super) fn a_marker_of_an_old_epoch_is_fenced_and_a_new_epoch_restarts_sequences() {
    block_on(async {
        let storage = FaultyStorage::new(4);
        let p = open(&storage).await;
        let epoch_2 = BatchBuilder::new(5)
            .attributes(0x10)
            .producer(7, 2, 0)
            .records_of(2, 5);
        p.append(Bytes::from(epoch_2.build()), 5).await.unwrap();
        let fenced = p
            .append_txn_marker(7, 1, TxnResult::Abort, 0, 5)
            .await
            .unwrap_err();
        assert!(matches!(
            fenced,
            LogError::InvalidProducerEpoch {
                epoch: 1,
                current_epoch: 2,
                ..
            }
        ));
        assert_eq!(p.last_stable_offset().get(), 0, "the fenced marker ended nothing");
        p.append_txn_marker(7, 3, TxnResult::Abort, 0, 5).await.unwrap();
        assert_eq!(p.last_stable_offset().get(), 3);
        let entry = p.producer_entry(7).unwrap();
        assert_eq!((entry.epoch, entry.batches.len()), (3, 0));
        let at_1 = BatchBuilder::new(5)
            .attributes(0x10)
            .producer(7, 3, 1)
            .records_of(1, 5);
        let refused = p.append(Bytes::from(at_1.build()), 5).await.unwrap_err();
        assert!(matches!(refused, LogError::OutOfOrderSequence { .. }));
        let at_0 = BatchBuilder::new(5)
            .attributes(0x10)
            .producer(7, 3, 0)
            .records_of(1, 5);
        p.append(Bytes::from(at_0.build()), 5).await.unwrap();
        // A marker without an open transaction (a retry) is written and changes nothing.
        p.append_txn_marker(7, 3, TxnResult::Commit, 0, 5).await.unwrap();
        let stale = p
            .append_txn_marker(7, 3, TxnResult::Commit, -1, 5)
            .await
            .unwrap_err();
        assert!(matches!(
            stale,
            LogError::CoordinatorFenced {
                coordinator_epoch: -1,
                current: 0,
                ..
            }
        ));
        let retry = p.append_txn_marker(7, 3, TxnResult::Commit, 0, 5).await.unwrap();
        assert_eq!(retry.base_offset.get(), 5);
        assert_eq!(p.last_stable_offset().get(), 6);
        assert_eq!(aborted_between(&p, 0, 6).await, aborted(&[(7, 0)]));
    });
}

#[test]
pub(super) fn coordinator_batches_skip_sequences_but_open_transactions_and_are_fenced() {
    block_on(async {
        let storage = FaultyStorage::new(5);
        let p = open(&storage).await;
        let commit = |epoch| {
            BatchBuilder::new(5)
                .attributes(0x10)
                .producer(7, epoch, -1)
                .record(Some(b"k"), Some(b"v"), 0)
        };
        p.append_from_coordinator(Bytes::from(commit(1).build()), 5)
            .await
            .unwrap();
        p.append_from_coordinator(Bytes::from(commit(1).build()), 5)
            .await
            .unwrap();
        assert_eq!(p.last_stable_offset().get(), 0);
        let fenced = p
            .append_from_coordinator(Bytes::from(commit(0).build()), 5)
            .await
            .unwrap_err();
        assert!(matches!(fenced, LogError::InvalidProducerEpoch { .. }));
        p.append_txn_marker(7, 1, TxnResult::Commit, 0, 5).await.unwrap();
        assert_eq!(p.last_stable_offset().get(), 3);
        let described = p.producers();
        assert_eq!(described[0].last_sequence, -1, "no sequence recorded");
    });
}

#[test]
pub(super) fn read_committed_reads_end_at_the_last_stable_offset() {
    block_on(async {
        let storage = FaultyStorage::new(6);
        let p = open(&storage).await;
        p.append(plain_batch(2), 5).await.unwrap();
        p.append(txn_batch(7, 0, 2), 5).await.unwrap();
        p.append(plain_batch(2), 5).await.unwrap();
        assert_eq!(p.read_end_offset(ReadEnd::LastStable).get(), 2);
        assert_eq!(p.read_end_offset(ReadEnd::HighWatermark).get(), 6);
        let read = p
            .read_for_send(Offset::ZERO, 1 << 20, true, ReadEnd::LastStable)
            .await
            .unwrap();
        let uncommitted = p
            .read_for_send(Offset::ZERO, 1 << 20, true, ReadEnd::HighWatermark)
            .await
            .unwrap();
        assert!(
            read.data.len() < uncommitted.data.len(),
            "the open transaction is not read"
        );
    });
}

/// Producers 1..=3 each run a transaction of two batches, interleaved, over several segments;
/// 1 and 3 abort, 2 commits. Returns the offsets of the two aborts' markers.
pub(super) async fn interleaved_transactions(p: &Partition<FaultyStorage>) -> (i64, i64) {
    for round in 0..2 {
        for id in 1..=3 {
            p.append(txn_batch(id, round * 2, 2), 5).await.unwrap();
            p.append(plain_batch(1), 5).await.unwrap();
        }
    }
    let first = p.append_txn_marker(1, 0, TxnResult::Abort, 0, 5).await.unwrap();
    p.append_txn_marker(2, 0, TxnResult::Commit, 0, 5).await.unwrap();
    let second = p.append_txn_marker(3, 0, TxnResult::Abort, 0, 5).await.unwrap();
    (first.base_offset.get(), second.base_offset.get())
}

#[test]
pub(super) fn a_follower_writes_the_same_index_bytes_as_its_leader() {
    block_on(async {
        let storage = FaultyStorage::new(7);
        let leader = open(&storage).await;
        interleaved_transactions(&leader).await;
        let follower = open_at(&storage, follower_dir()).await;
        while follower.log_end_offset() < leader.log_end_offset() {
            let read = leader
                .read(follower.log_end_offset(), 1 << 20, true)
                .await
                .unwrap();
            follower
                .append_as_follower(Bytes::from(read.data.concat()))
                .await
                .unwrap();
        }
        assert!(leader.segment_count() > 1, "the transactions span segments");
        let files = txn_index_files(&storage, &leader);
        assert_eq!(files.iter().map(|f| f.1.len()).sum::<usize>(), 2 * ENTRY_LEN);
        assert_eq!(txn_index_files(&storage, &follower), files);
        let end = leader.log_end_offset().get();
        assert_eq!(
            aborted_between(&follower, 0, end).await,
            aborted(&[(1, 0), (3, 6)])
        );
        assert_eq!(follower.last_stable_offset(), leader.last_stable_offset());
    });
}

#[test]
pub(super) fn truncation_reopens_a_transaction_whose_abort_it_removes() {
    block_on(async {
        let storage = FaultyStorage::new(8);
        let p = open(&storage).await;
        let (first_abort, second_abort) = interleaved_transactions(&p).await;
        p.truncate_to(Offset::new(second_abort)).await.unwrap();
        let end = p.log_end_offset().get();
        assert_eq!(aborted_between(&p, 0, end).await, aborted(&[(1, 0)]));
        assert_eq!(
            p.last_stable_offset().get(),
            6,
            "producer 3's transaction is open again"
        );
        p.truncate_to(Offset::new(first_abort)).await.unwrap();
        assert_eq!(aborted_between(&p, 0, end).await, vec![]);
        assert!(
            txn_index_files(&storage, &p).is_empty(),
            "an emptied index file goes"
        );
        assert_eq!(p.last_stable_offset().get(), 0);
        let described: Vec<_> = p.producers().iter().map(|d| d.current_txn_start_offset).collect();
        assert_eq!(described, vec![0, 3, 6]);
    });
}

#[test]
pub(super) fn deleting_segments_deletes_their_index_files() {
    block_on(async {
        let storage = FaultyStorage::new(9);
        let p = open(&storage).await;
        let (_, second_abort) = interleaved_transactions(&p).await;
        p.append(plain_batch(1), 5).await.unwrap();
        let before = txn_index_files(&storage, &p);
        assert!(!before.is_empty());
        p.append(txn_batch(1, 4, 1), 5).await.unwrap(); // an open transaction
        let open_from = p.last_stable_offset();
        p.delete_records_before(p.log_end_offset()).await.unwrap();
        assert!(txn_index_files(&storage, &p).is_empty());
        assert!(open_from < p.log_start_offset());
        assert_eq!(
            p.last_stable_offset(),
            p.log_start_offset(),
            "never below the log start"
        );
        let end = p.log_end_offset().get();
        assert_eq!(aborted_between(&p, second_abort, end).await, vec![]);
    });
}

#[test]
pub(super) fn a_clean_reopen_and_a_crash_keep_the_last_stable_offset_and_the_aborted_list() {
    block_on(async {
        for mode in [None, Some(CrashMode::LoseUnsynced), Some(CrashMode::TornTail)] {
            let storage = FaultyStorage::new(10);
            let p = open(&storage).await;
            interleaved_transactions(&p).await;
            p.append(txn_batch(2, 4, 1), 5).await.unwrap(); // an open transaction
            p.flush().await.unwrap();
            let end = p.log_end_offset().get();
            let (lso, list) = (p.last_stable_offset(), aborted_between(&p, 0, end).await);
            match mode {
                None => p.close().await.unwrap(),
                Some(mode) => storage.crash(mode),
            }
            drop(p);
            let p = open(&storage).await;
            assert_eq!(p.last_stable_offset(), lso, "{mode:?}");
            assert_eq!(aborted_between(&p, 0, end).await, list, "{mode:?}");
            assert_eq!(p.producer_entry(2).unwrap().txn_first_offset, Some(lso.get()));
        }
    });
}

#[test]
pub(super) fn a_read_committed_read_lists_the_aborts_among_the_data_it_returns() {
    block_on(async {
        let storage = FaultyStorage::new(11);
        let p = open(&storage).await;
        p.append(txn_batch(7, 0, 2), 5).await.unwrap(); // 0..=1
        p.append_txn_marker(7, 0, TxnResult::Abort, 0, 5).await.unwrap(); // 2
        p.append(txn_batch(8, 0, 1), 5).await.unwrap(); // 3
        p.append_txn_marker(8, 0, TxnResult::Abort, 0, 5).await.unwrap(); // 4
        let committed =
            |from, max_bytes| p.read_for_send(Offset::new(from), max_bytes, true, ReadEnd::LastStable);
        let first_batch = committed(0, 1).await.unwrap();
        assert_eq!(first_batch.data.next_offset(), Some(2));
        assert_eq!(first_batch.aborted_transactions, Some(aborted(&[(7, 0)])));
        let rest = committed(3, 1 << 20).await.unwrap();
        assert_eq!(rest.aborted_transactions, Some(aborted(&[(8, 3)])));
        assert_eq!(rest.last_stable_offset.get(), 5);
        let at_end = committed(5, 1 << 20).await.unwrap();
        assert_eq!(at_end.aborted_transactions, Some(vec![]), "no data, none listed");
        let uncommitted = p.read_for_send(Offset::ZERO, 1 << 20, true, ReadEnd::HighWatermark);
        assert_eq!(uncommitted.await.unwrap().aborted_transactions, None);
    });
}

#[test]
pub(super) fn compaction_stops_at_the_last_stable_offset_and_keeps_transactional_batches() {
    block_on(async {
        let storage = FaultyStorage::new(12);
        let config = LogConfig {
            cleanup_policy_compact: true,
            cleanup_policy_delete: false,
            min_compaction_lag_ms: 0,
            ..small_config()
        };
        let p = Partition::open(Rc::new(storage.clone()), dir(), config)
            .await
            .unwrap();
        let keyed = |key: &[u8], attributes, producer| {
            let b = BatchBuilder::new(1_000).attributes(attributes).producer(
                producer,
                0,
                if producer < 0 { -1 } else { 0 },
            );
            Bytes::from(b.record(Some(key), Some(&[b'v'; 100]), 0).build())
        };
        p.append(keyed(b"k", 0, -1), 5).await.unwrap(); // 0: the committed value
        p.append(keyed(b"k", 0x10, 1), 5).await.unwrap(); // 1: aborted below
        p.append_txn_marker(1, 0, TxnResult::Abort, 0, 5).await.unwrap(); // 2
        p.append(keyed(b"j", 0x10, 2), 5).await.unwrap(); // 3: open
        for _ in 0..8 {
            p.append(keyed(b"j", 0, -1), 5).await.unwrap(); // 4..: roll segments
        }
        assert!(p.segment_count() > 2);
        let outcome = p.compact(1_000_000).await.unwrap();
        assert_eq!(
            outcome.records_removed, 0,
            "everything past the open transaction waits"
        );
        p.append_txn_marker(2, 0, TxnResult::Commit, 0, 5).await.unwrap();
        p.append(keyed(b"j", 0, -1), 5).await.unwrap();
        let outcome = p.compact(1_000_000).await.unwrap();
        assert!(outcome.records_removed > 0, "older plain values of j go");
        let kept: Vec<i64> = super::tests::read_all(&p, 0)
            .await
            .iter()
            .map(|h| h.base_offset)
            .collect();
        assert_eq!(
            &kept[..4],
            &[0, 1, 2, 3],
            "k's committed value and every transactional batch stay"
        );
    });
}

#[test]
pub(super) fn an_index_file_left_without_its_segment_is_removed_at_open() {
    block_on(async {
        let storage = FaultyStorage::new(13);
        let p = open(&storage).await;
        p.append(plain_batch(1), 5).await.unwrap();
        p.close().await.unwrap();
        // A crash between a deleted segment's removals left its index; a later segment at
        // that base must not inherit its entries.
        let entry = AbortedTxnEntry {
            producer_id: 4,
            first_offset: 5,
            last_offset: 6,
            last_stable_offset: 7,
        };
        let orphan = segment_path(&dir(), 5, TXN_INDEX_SUFFIX);
        storage.set_file_bytes(&orphan, entry.encode().to_vec());
        let p = open(&storage).await;
        assert_eq!(storage.file_bytes(&orphan), None);
        for _ in 0..6 {
            p.append(plain_batch(1), 5).await.unwrap();
        }
        assert_eq!(aborted_between(&p, 0, 7).await, vec![]);
    });
}

#[test]
pub(super) fn starting_again_past_the_log_end_forgets_transactions_and_their_index() {
    block_on(async {
        let storage = FaultyStorage::new(14);
        let p = open(&storage).await;
        interleaved_transactions(&p).await;
        p.append(txn_batch(2, 4, 1), 5).await.unwrap(); // an open transaction
        let restart = p.log_end_offset().get() + 100;
        p.start_again_at(Offset::new(restart)).await.unwrap();
        assert!(txn_index_files(&storage, &p).is_empty());
        assert_eq!(p.last_stable_offset().get(), restart);
        assert_eq!(aborted_between(&p, restart, restart + 10).await, vec![]);
        p.append(txn_batch(5, 0, 1), 5).await.unwrap();
        p.append_txn_marker(5, 0, TxnResult::Abort, 0, 5).await.unwrap();
        assert_eq!(
            aborted_between(&p, restart, restart + 2).await,
            aborted(&[(5, restart)])
        );
    });
}

#[test]
pub(super) fn an_index_longer_than_a_read_chunk_is_searched_and_cut_whole() {
    block_on(async {
        let storage = FaultyStorage::new(15);
        let config = LogConfig {
            segment_bytes: 1 << 20,
            ..small_config()
        };
        let p = Partition::open(Rc::new(storage.clone()), dir(), config)
            .await
            .unwrap();
        let aborts = 1_100;
        for i in 0..aborts {
            p.append(txn_batch(1, i, 1), 5).await.unwrap(); // at 2 * i
            p.append_txn_marker(1, 0, TxnResult::Abort, 0, 5).await.unwrap();
        }
        assert_eq!(p.segment_count(), 1);
        let all: Vec<(i64, i64)> = (0..aborts as i64).map(|i| (1, 2 * i)).collect();
        assert_eq!(aborted_between(&p, 0, 2 * aborts as i64).await, aborted(&all));
        assert_eq!(
            aborted_between(&p, 2_101, 2_104).await,
            aborted(&all[1_050..1_052])
        );
        p.truncate_to(Offset::new(2_101)).await.unwrap();
        assert_eq!(
            aborted_between(&p, 0, 2 * aborts as i64).await,
            aborted(&all[..1_050])
        );
        assert_eq!(txn_index_files(&storage, &p)[0].1.len(), 1_050 * ENTRY_LEN);
    });
}
