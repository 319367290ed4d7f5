use super::*;
use crate::io::{CrashMode, FaultyStorage};
use crate::log::batch::testing::BatchBuilder;
use crate::log::LogConfig;
use futures::executor::block_on;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::PathBuf;

const DAY_MS: i64 = 86_400_000;

fn dir() -> PathBuf {
    PathBuf::from("/data/compacted-0")
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        index_interval_bytes: 100,
        cleanup_policy_compact: true,
        cleanup_policy_delete: false,
        ..LogConfig::default()
    }
}

async fn open(storage: &FaultyStorage) -> Log<FaultyStorage> {
    Log::open(Rc::new(storage.clone()), dir(), config())
        .await
        .unwrap()
}

type Kv<'a> = (&'a str, Option<&'a str>);

fn batch(records: &[Kv], ts: i64) -> Bytes {
    let mut b = BatchBuilder::new(ts);
    for (k, v) in records {
        b = b.record(Some(k.as_bytes()), v.map(str::as_bytes), 0);
    }
    Bytes::from(b.build())
}

/// One record as read back: (offset, key, value).
type Read = (i64, String, Option<String>);

/// Every record of the log, in order, read batch by batch from the log start.
async fn read_all(log: &Log<FaultyStorage>) -> Vec<Read> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    while next < log.log_end_offset() {
        let data = log.read(next, 1 << 20, true).await.unwrap();
        assert!(!data.is_empty(), "a read below the log end finds a batch");
        for bytes in data {
            let h = batch::validate(&bytes, usize::MAX).unwrap();
            assert!(h.base_offset + h.last_offset_delta as i64 >= next);
            for r in records::records(&bytes, &h).unwrap() {
                let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
                let offset = h.base_offset + r.offset_delta as i64;
                out.push((offset, text(r.key.unwrap()), r.value.map(text)));
            }
            next = h.next_offset();
        }
    }
    out
}

/// Applying the records in order: every key's latest value (tombstones delete).
fn replay(records: &[Read]) -> BTreeMap<String, String> {
    let mut state = BTreeMap::new();
    for (_, k, v) in records {
        match v {
            Some(v) => state.insert(k.clone(), v.clone()),
            None => state.remove(k),
        };
    }
    state
}

/// Appends `n` rounds over keys k0..k4 (value "r<round>"), one record a batch.
async fn fill(log: &Log<FaultyStorage>, rounds: usize, ts: i64) {
    for round in 0..rounds {
        for key in 0..5 {
            let (k, v) = (format!("k{key}"), format!("r{round}"));
            log.append(batch(&[(&k, Some(&v))], ts), ts).await.unwrap();
        }
    }
}

#[test]
fn latest_value_per_key_survives_at_its_original_offset() {
    block_on(async {
        let storage = FaultyStorage::new(1);
        let log = open(&storage).await;
        fill(&log, 10, 1_000).await;
        let before = read_all(&log).await;
        let (end, segments) = (log.log_end_offset(), log.segment_count());
        assert!(segments > 3, "small segments roll");
        let active_before = storage.file_bytes(&segment_path(&dir(), log.active_base_offset(), "log"));
        let outcome = log.compact(2_000, i64::MAX).await.unwrap();
        assert!(
            outcome.records_removed > 30 && outcome.bytes_after < outcome.bytes_before,
            "{outcome:?}"
        );
        let after = read_all(&log).await;
        assert_eq!(log.log_end_offset(), end, "the log end never moves");
        assert_eq!(replay(&after), replay(&before));
        for (offset, key, value) in &after {
            assert!(
                before.contains(&(*offset, key.clone(), value.clone())),
                "offset {offset} kept its record"
            );
        }
        // Closed segments now hold each key at most once, and only where it is the latest.
        let active_base = log.active_base_offset();
        let closed: Vec<_> = after.iter().filter(|r| r.0 < active_base).collect();
        for (offset, key, _) in &closed {
            let last = before.iter().filter(|r| &r.1 == key).map(|r| r.0).max().unwrap();
            assert_eq!(*offset, last, "{key} below the active segment is its latest");
        }
        let active_after = storage.file_bytes(&segment_path(&dir(), active_base, "log"));
        assert_eq!(active_before, active_after, "the active segment is untouched");
        // A read at a removed offset answers with the next surviving batch.
        let data = log.read(1, 1 << 20, true).await.unwrap();
        let first = batch::validate(&data[0], usize::MAX).unwrap();
        assert!(first.base_offset > 1 && after.iter().any(|r| r.0 == first.base_offset));
        // A second pass finds nothing; a reopened log reads the same.
        assert_eq!(log.compact(2_000, i64::MAX).await.unwrap().records_removed, 0);
        log.close().await.unwrap();
        let log = open(&storage).await;
        assert_eq!(read_all(&log).await, after);
        assert_eq!(log.log_end_offset(), end);
    });
}

#[test]
fn a_partly_superseded_batch_is_rewritten_with_its_offsets_and_producer_fields() {
    block_on(async {
        let storage = FaultyStorage::new(2);
        let log = open(&storage).await;
        let first = BatchBuilder::new(500)
            .producer(7, 1, 0)
            .record(Some(b"a"), Some(b"1"), 0)
            .record(Some(b"b"), Some(b"1"), 5)
            .record(Some(b"c"), Some(b"1"), 9)
            .build();
        log.append(Bytes::from(first), 1).await.unwrap();
        log.append(batch(&[("a", Some("2")), ("c", Some("2"))], 600), 1)
            .await
            .unwrap();
        fill(&log, 4, 700).await; // rolls past the first two batches
        log.compact(1_000, i64::MAX).await.unwrap();
        let data = log.read(0, 1 << 20, true).await.unwrap();
        let h = batch::validate(&data[0], usize::MAX).unwrap();
        assert_eq!((h.base_offset, h.last_offset_delta, h.record_count), (0, 2, 1));
        assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (7, 1, 0));
        assert_eq!(
            (h.base_timestamp, h.max_timestamp),
            (500, 505),
            "max timestamp of the survivor"
        );
        let kept = records::records(&data[0], &h).unwrap();
        assert_eq!((kept[0].offset_delta, kept[0].key), (1, Some(&b"b"[..])));
    });
}

#[test]
fn tombstones_stay_until_delete_retention_then_go() {
    block_on(async {
        let storage = FaultyStorage::new(3);
        let log = open(&storage).await;
        log.append(batch(&[("gone", Some("v"))], 1_000), 1).await.unwrap();
        log.append(batch(&[("gone", None)], 1_000), 1).await.unwrap();
        fill(&log, 4, 1_000).await;
        log.compact(1_000 + DAY_MS, i64::MAX).await.unwrap();
        let records = read_all(&log).await;
        assert!(
            records.contains(&(1, "gone".into(), None)),
            "tombstone kept within delete.retention.ms"
        );
        assert!(!records.iter().any(|r| r.0 == 0), "its superseded value went");
        let outcome = log.compact(1_001 + DAY_MS, i64::MAX).await.unwrap();
        assert_eq!(outcome.tombstones_removed, 1);
        assert!(!read_all(&log).await.iter().any(|r| r.1 == "gone"));
    });
}

#[test]
fn min_compaction_lag_and_delete_policy_are_respected() {
    block_on(async {
        let storage = FaultyStorage::new(4);
        let log = open(&storage).await;
        fill(&log, 6, 1_000).await;
        log.set_config(LogConfig {
            min_compaction_lag_ms: 10_000,
            ..config()
        });
        assert_eq!(
            log.compact(5_000, i64::MAX).await.unwrap(),
            CompactionOutcome::default()
        );
        assert!(log.compact(11_000, i64::MAX).await.unwrap().records_removed > 0);
        // compact-only: time retention deletes nothing.
        assert_eq!(
            log.apply_retention(1_000 + 30 * DAY_MS)
                .await
                .unwrap()
                .segments_deleted,
            0
        );
        log.set_config(LogConfig {
            cleanup_policy_compact: false,
            ..config()
        });
        fill(&log, 6, 1_000).await;
        assert_eq!(
            log.compact(50_000, i64::MAX).await.unwrap().records_removed,
            0,
            "delete-only logs are not compacted"
        );
    });
}

#[test]
fn keyless_records_are_refused_on_a_compacted_log() {
    block_on(async {
        let storage = FaultyStorage::new(5);
        let log = open(&storage).await;
        let keyless = Bytes::from(BatchBuilder::new(1).record(None, Some(b"v"), 0).build());
        let refused = log.append(keyless.clone(), 1).await.unwrap_err();
        assert!(
            matches!(refused, LogError::Batch(batch::BatchError::MissingKey)),
            "{refused}"
        );
        log.set_config(LogConfig {
            cleanup_policy_compact: false,
            ..config()
        });
        log.append(keyless, 1).await.unwrap();
    });
}

#[test]
fn a_reader_holding_the_old_segment_keeps_reading_it_whole() {
    block_on(async {
        let storage = FaultyStorage::new(6);
        let log = open(&storage).await;
        fill(&log, 8, 1_000).await;
        let old = log.segments()[0].clone();
        let old_batches = old.read_batches(0, 1 << 20, true).await.unwrap();
        log.compact(2_000, i64::MAX).await.unwrap();
        assert!(!Rc::ptr_eq(&old, &log.segments()[0]), "the segment was replaced");
        let still = old.read_batches(0, 1 << 20, true).await.unwrap();
        assert_eq!(still, old_batches, "the old files are intact behind the reader");
    });
}

/// Records past the high watermark may be truncated away when leadership moves: they neither
/// compact nor make an older, committed record of their key go, so after the truncation every
/// key still has its committed value.
#[test]
fn records_past_the_high_watermark_take_nothing_away_and_a_truncation_to_it_loses_no_key() {
    block_on(async {
        let storage = FaultyStorage::new(7);
        let log = open(&storage).await;
        fill(&log, 6, 1_000).await;
        let high_watermark = log.log_end_offset();
        let committed = replay(&read_all(&log).await);
        // An uncommitted tail that rewrites every key, over several segments.
        for round in 0..4 {
            for key in 0..5 {
                let (k, v) = (format!("k{key}"), format!("uncommitted-{round}"));
                log.append(batch(&[(&k, Some(&v))], 1_000), 1_000).await.unwrap();
            }
        }
        assert!(log.segment_count() > 4, "the tail spans segments");
        let outcome = log.compact(2_000, high_watermark).await.unwrap();
        assert!(
            outcome.records_removed > 0,
            "below the high watermark it compacts: {outcome:?}"
        );
        assert_eq!(
            read_all(&log)
                .await
                .iter()
                .filter(|r| r.0 >= high_watermark)
                .count(),
            20,
            "nothing past the high watermark was removed"
        );
        log.truncate_to(high_watermark).await.unwrap();
        assert_eq!(
            replay(&read_all(&log).await),
            committed,
            "every key keeps its committed value"
        );
    });
}

/// Random keys, values and tombstones; compaction, closes and crashes at random points; the
/// replayed log always equals the model, and every record sits at the offset it was given.
#[test]
fn randomized_against_a_model() {
    for seed in 0..12u64 {
        block_on(async {
            let mut rng = StdRng::seed_from_u64(seed);
            let storage = FaultyStorage::new(seed);
            let mut log = open(&storage).await;
            let mut model: BTreeMap<String, String> = BTreeMap::new();
            let mut written: BTreeMap<i64, (String, Option<String>)> = BTreeMap::new();
            let mut now = 1_000;
            for step in 0..300 {
                now += rng.gen_range(0..DAY_MS / 20);
                match rng.gen_range(0..20) {
                    0 => {
                        log.compact(now, i64::MAX).await.unwrap();
                    }
                    1 => {
                        log.close().await.unwrap();
                        log = open(&storage).await;
                    }
                    _ => {
                        let n = rng.gen_range(1..4);
                        let kvs: Vec<(String, Option<String>)> = (0..n)
                            .map(|i| {
                                let k = format!("k{}", rng.gen_range(0..15));
                                let v = (!rng.gen_bool(0.15)).then(|| format!("s{step}.{i}"));
                                (k, v)
                            })
                            .collect();
                        let refs: Vec<Kv> = kvs.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect();
                        let info = log.append(batch(&refs, now), now).await.unwrap();
                        for (i, (k, v)) in kvs.into_iter().enumerate() {
                            match &v {
                                Some(v) => model.insert(k.clone(), v.clone()),
                                None => model.remove(&k),
                            };
                            written.insert(info.base_offset.get() + i as i64, (k, v));
                        }
                    }
                }
            }
            log.compact(now + 2 * DAY_MS, i64::MAX).await.unwrap();
            let records = read_all(&log).await;
            assert_eq!(replay(&records), model, "seed {seed}");
            for (offset, k, v) in &records {
                assert_eq!(
                    written[offset],
                    (k.clone(), v.clone()),
                    "seed {seed} offset {offset}"
                );
            }
            let tombstones_closed = records
                .iter()
                .filter(|r| r.2.is_none() && r.0 < log.active_base_offset());
            assert_eq!(
                tombstones_closed.count(),
                0,
                "seed {seed}: old tombstones removed"
            );
        });
    }
}

/// An interruption at every directory operation and every fdatasync of a pass, then a power
/// cut: the reopened log reads either the old or the new segments, never a mix, and no
/// temporary file is left.
#[test]
fn a_crash_at_any_step_of_the_swap_leaves_old_or_new() {
    let (expected, expected_end) = block_on(async {
        let storage = FaultyStorage::new(7);
        let log = open(&storage).await;
        fill(&log, 10, 1_000).await;
        (replay(&read_all(&log).await), log.log_end_offset())
    });
    let mut outcomes = BTreeMap::new();
    for (kind, n) in (1..=14).map(|n| ("dir", n)).chain((1..=10).map(|n| ("sync", n))) {
        block_on(async {
            let storage = FaultyStorage::new(7);
            let log = open(&storage).await;
            fill(&log, 10, 1_000).await;
            log.sync().await.unwrap();
            match kind {
                "dir" => storage.fail_dir_op_after(n),
                _ => storage.fail_sync_after(n),
            }
            let failed = log.compact(2_000, i64::MAX).await.is_err();
            storage.crash(CrashMode::LoseUnsynced);
            storage.clear_faults();
            let reopened = open(&storage).await;
            let names = storage.list_dir(&dir()).await.unwrap();
            assert!(
                !names
                    .iter()
                    .any(|n| n.ends_with(".cleaned") || n.ends_with(".swap")),
                "{kind} {n}: leftovers {names:?}"
            );
            let records = read_all(&reopened).await;
            assert_eq!(replay(&records), expected, "{kind} {n}");
            assert_eq!(reopened.log_end_offset(), expected_end, "{kind} {n}");
            // Each segment is wholly old (every round present) or wholly compacted.
            let again = reopened.compact(2_000, i64::MAX).await.unwrap();
            let finished = read_all(&reopened).await;
            assert_eq!(
                replay(&finished),
                expected,
                "{kind} {n}: compacting after recovery"
            );
            outcomes
                .entry(failed)
                .or_insert_with(Vec::new)
                .push((kind, n, again.records_removed));
        });
    }
    assert!(
        outcomes.contains_key(&true),
        "some interruptions hit the pass: {outcomes:?}"
    );
}

/// A pass that finds no space for a compacted copy removes the copy and is refused: the log is
/// as before and usable, and a pass after space returned compacts it.
#[test]
fn a_pass_without_space_for_its_copy_changes_nothing_and_is_retried() {
    block_on(async {
        let storage = FaultyStorage::new(8);
        let log = open(&storage).await;
        // The first segment holds a key written once among keys written again: its copy keeps a
        // record, so the pass needs space before any deletion frees some.
        for i in 0..50 {
            let k = match i {
                0 => "once".to_string(),
                1..30 => format!("k{}", i % 3),
                _ => "z".to_string(),
            };
            let v = format!("v{i}");
            log.append(batch(&[(&k, Some(&v))], 1_000), 1_000).await.unwrap();
        }
        let before = read_all(&log).await;
        for left in [0, 40] {
            storage.set_space_left(Some(left));
            let refused = log.compact(2_000, i64::MAX).await.unwrap_err();
            assert!(matches!(refused, LogError::Exhausted(_)), "{refused}");
            let names = storage.list_dir(&dir()).await.unwrap();
            assert!(!names.iter().any(|n| n.ends_with(".cleaned")), "{names:?}");
            assert_eq!(read_all(&log).await, before, "space left {left}");
        }
        storage.set_space_left(None);
        let outcome = log.compact(2_000, i64::MAX).await.unwrap();
        assert!(
            outcome.segments_rewritten > 0 && outcome.records_removed > 30,
            "{outcome:?}"
        );
        assert_eq!(replay(&read_all(&log).await), replay(&before));
        log.append(batch(&[("k0", Some("after"))], 3_000), 3_000)
            .await
            .unwrap();
    });
}

/// A closed segment whose second batch carries a damaged base offset (outside the CRC; the
/// index points past it, so opening the log does not read it): compaction reports the segment
/// as corrupt and changes nothing, whether the offset goes back or leaves the segment's 32 bits.
#[test]
fn a_damaged_batch_offset_in_a_closed_segment_is_reported_and_changes_nothing() {
    block_on(async {
        let storage = FaultyStorage::new(10);
        let log = open(&storage).await;
        fill(&log, 10, 1_000).await;
        log.close().await.unwrap();
        let path = segment_path(&dir(), 0, "log");
        let mut bytes = storage.file_bytes(&path).unwrap();
        let second = batch::validate(&bytes, usize::MAX).unwrap().total_len();
        for damaged in [0i64, 1 << 33] {
            bytes[second..second + 8].copy_from_slice(&damaged.to_be_bytes());
            storage.set_file_bytes(&path, bytes.clone());
            let log = open(&storage).await;
            let error = log.compact(2_000, i64::MAX).await.unwrap_err();
            assert!(error.to_string().contains("out of place"), "{error}");
            assert_eq!(storage.file_bytes(&path).unwrap(), bytes, "offset {damaged}");
            log.close().await.unwrap();
        }
    });
}
