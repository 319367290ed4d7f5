//! Torn-tail recovery: cut the active segment at every byte inside its last batches, and flip
//! bits in them; every reopen must end exactly at the last valid batch, without panicking.

use bytes::Bytes;
use futures::executor::block_on;
use laminar_engine::io::{FaultyStorage, Storage};
use laminar_engine::log::batch::testing::BatchBuilder;
use laminar_engine::log::batch::{self, BatchHeader};
use laminar_engine::log::segment::{segment_path, LOG_SUFFIX};
use laminar_engine::partition::{LogConfig, Partition};
use laminar_model::Offset;
use std::path::PathBuf;
use std::rc::Rc;

const BATCHES: usize = 12;

fn dir() -> PathBuf {
    PathBuf::from("/logs/torn-0")
}

fn config() -> LogConfig {
    LogConfig {
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// Writes the batches, closes cleanly; returns the storage, and each batch's (start, header).
fn write_log() -> (FaultyStorage, Vec<(usize, BatchHeader)>) {
    block_on(async {
        let storage = FaultyStorage::new(7);
        let p = Partition::open(Rc::new(storage.clone()), dir(), config())
            .await
            .unwrap();
        for i in 0..BATCHES {
            let b = BatchBuilder::new(1_000 + i as i64)
                .records_of(1 + i % 4, 40 + 13 * i)
                .build();
            p.append(Bytes::from(b), 0).await.unwrap();
        }
        p.close().await.unwrap();
        let log = storage.file_bytes(&segment_path(&dir(), 0, LOG_SUFFIX)).unwrap();
        let mut at = 0;
        let mut batches = Vec::new();
        while at < log.len() {
            let h = batch::validate(&log[at..], usize::MAX).unwrap();
            batches.push((at, h));
            at += h.total_len();
        }
        assert_eq!(batches.len(), BATCHES);
        (storage, batches)
    })
}

/// Reopens after replacing the log file by `log` and dropping the log's state file.
fn reopen_with(storage: &FaultyStorage, log: Vec<u8>) -> (i64, Vec<BatchHeader>) {
    block_on(async {
        let storage = storage.clone();
        storage.set_file_bytes(&segment_path(&dir(), 0, LOG_SUFFIX), log);
        // Without its state file a log counts as dirty: it is recovered.
        let state = dir().join(laminar_engine::log::disk_state::STATE_FILE);
        if storage.exists(&state).await.unwrap() {
            storage.remove_file(&state).await.unwrap();
        }
        let p = Partition::open(Rc::new(storage), dir(), config()).await.unwrap();
        let mut headers = Vec::new();
        let mut offset = 0;
        while offset < p.log_end_offset().get() {
            let data = p.read(Offset::new(offset), 1 << 20, true).await.unwrap().data;
            for b in &data {
                headers.push(batch::validate(b, usize::MAX).unwrap());
            }
            offset = headers.last().unwrap().next_offset();
        }
        (p.log_end_offset().get(), headers)
    })
}

fn snapshot(storage: &FaultyStorage) -> FaultyStorage {
    // Each case starts from the same files: copy them into a fresh storage.
    let fresh = FaultyStorage::new(1);
    block_on(async {
        fresh.create_dir_all(&dir()).await.unwrap();
        for name in storage.list_dir(&dir()).await.unwrap() {
            let path = dir().join(&name);
            fresh.set_file_bytes(&path, storage.file_bytes(&path).unwrap());
        }
    });
    fresh
}

fn expect_end_before(batches: &[(usize, BatchHeader)], byte: usize) -> i64 {
    // The log must end after the last batch that lies wholly before `byte`.
    batches
        .iter()
        .take_while(|(start, h)| start + h.total_len() <= byte)
        .last()
        .map_or(0, |(_, h)| h.next_offset())
}

#[test]
fn every_cut_in_the_last_batches_recovers_to_the_last_whole_batch() {
    let (storage, batches) = write_log();
    let log = storage.file_bytes(&segment_path(&dir(), 0, LOG_SUFFIX)).unwrap();
    let from = batches[BATCHES - 3].0;
    for cut in from..=log.len() {
        let (end, headers) = reopen_with(&snapshot(&storage), log[..cut].to_vec());
        assert_eq!(end, expect_end_before(&batches, cut), "cut at byte {cut}");
        assert_eq!(
            headers.len(),
            batches.iter().filter(|(_, h)| h.next_offset() <= end).count()
        );
    }
}

#[test]
fn flipped_bits_truncate_at_the_damaged_batch() {
    let (storage, batches) = write_log();
    let log = storage.file_bytes(&segment_path(&dir(), 0, LOG_SUFFIX)).unwrap();
    for &(start, h) in &batches[BATCHES - 3..] {
        for byte in start..start + h.total_len() {
            // The leader epoch (bytes 12..16) is outside the CRC and not checkable on its own.
            if (12..16).contains(&(byte - start)) {
                continue;
            }
            let mut damaged = log.clone();
            damaged[byte] ^= 1 << (byte % 8);
            let (end, _) = reopen_with(&snapshot(&storage), damaged);
            assert_eq!(end, h.base_offset, "flip at byte {byte} of batch at {start}");
        }
    }
}

#[test]
fn garbage_after_the_last_batch_is_cut() {
    let (storage, batches) = write_log();
    let mut log = storage.file_bytes(&segment_path(&dir(), 0, LOG_SUFFIX)).unwrap();
    log.extend((0..500u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    let (end, headers) = reopen_with(&snapshot(&storage), log);
    assert_eq!(end, batches.last().unwrap().1.next_offset());
    assert_eq!(headers.len(), BATCHES);
}
