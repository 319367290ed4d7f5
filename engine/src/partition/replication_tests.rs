//! Leader epochs, follower appends and truncation (the storage side of replication), including a
//! seeded randomized test of two replicas against a model.

use super::leader_epochs::{entries, EpochEntry, LEADER_EPOCH_FILE};
use super::*;
use crate::io::{CrashMode, FaultyStorage};
use crate::log::batch::testing::BatchBuilder;
use crate::log::BatchError;
use futures::executor::block_on;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 128,
        ..LogConfig::default()
    }
}

fn batch(records: usize) -> Bytes {
    Bytes::from(BatchBuilder::new(1_000).records_of(records, 20).build())
}

async fn open_at(storage: &FaultyStorage, dir: &str) -> Partition<FaultyStorage> {
    Partition::open(Rc::new(storage.clone()), PathBuf::from(dir), config())
        .await
        .unwrap()
}

/// The leader's batches from `from` to its end, one batch per item.
async fn batches_from(leader: &Partition<FaultyStorage>, from: i64) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut next = from;
    while next < leader.log_end_offset().get() {
        let read = leader.read(Offset::new(next), 1, true).await.unwrap();
        let one = read.data.into_iter().next().unwrap();
        next = BatchHeader::parse(&one).unwrap().next_offset();
        out.push(one);
    }
    out
}

fn epoch(value: i32) -> LeaderEpoch {
    LeaderEpoch::new(value)
}

/// OffsetForLeaderEpoch's answer as plain integers, to compare with a model's.
fn end_offset_for(p: &Partition<FaultyStorage>, asked: i32) -> (i32, i64) {
    let (found, end) = p.end_offset_for(epoch(asked));
    (found.get(), end.get())
}

/// The names and bytes of every segment and index file under `dir`.
async fn segment_files(storage: &FaultyStorage, dir: &str) -> Vec<(String, Vec<u8>)> {
    let mut names = storage.list_dir(Path::new(dir)).await.unwrap();
    names.retain(|n| n.ends_with(".log") || n.ends_with(".index") || n.ends_with(".timeindex"));
    names.sort();
    let files = names.into_iter().map(|n| {
        let bytes = storage.file_bytes(&Path::new(dir).join(&n)).unwrap();
        (n, bytes)
    });
    files.collect()
}

use std::path::Path;

#[test]
fn leader_appends_record_new_epochs_and_the_file_survives_a_reopen() {
    block_on(async {
        let storage = FaultyStorage::new(11);
        let p = open_at(&storage, "/data/t-0").await;
        p.append(batch(3), 0).await.unwrap();
        p.append(batch(2), 0).await.unwrap();
        p.set_leader_epoch(epoch(4));
        p.append(batch(1), 0).await.unwrap();
        assert_eq!(p.leader_epochs(), entries(&[(0, 0), (4, 5)]));
        let file = storage.file_bytes(&PathBuf::from("/data/t-0").join(LEADER_EPOCH_FILE));
        assert_eq!(file.unwrap(), b"0\n2\n0 0\n4 5\n");
        assert_eq!(end_offset_for(&p, 0), (0, 5));
        assert_eq!(end_offset_for(&p, 3), (0, 5));
        assert_eq!(end_offset_for(&p, 4), (4, 6));
        assert_eq!(end_offset_for(&p, 5), (-1, -1));
        p.close().await.unwrap();
        let p = open_at(&storage, "/data/t-0").await;
        assert_eq!(p.leader_epochs(), entries(&[(0, 0), (4, 5)]));
    });
}

#[test]
fn a_partition_that_never_changed_leader_writes_no_epoch_file() {
    block_on(async {
        let storage = FaultyStorage::new(14);
        let p = open_at(&storage, "/data/t-0").await;
        p.append(batch(3), 0).await.unwrap();
        p.append(batch(2), 0).await.unwrap();
        let path = PathBuf::from("/data/t-0").join(LEADER_EPOCH_FILE);
        assert!(
            storage.file_bytes(&path).is_none(),
            "epoch 0 only: no file, no fsync"
        );
        assert_eq!(p.leader_epochs(), entries(&[(0, 0)]));
        p.close().await.unwrap();
        let p = open_at(&storage, "/data/t-0").await;
        assert_eq!(p.leader_epochs(), entries(&[(0, 0)]), "rebuilt without a file");
        assert_eq!(end_offset_for(&p, 0), (0, 5));
        p.set_leader_epoch(epoch(2));
        p.append(batch(1), 0).await.unwrap();
        assert_eq!(
            storage.file_bytes(&path).unwrap(),
            b"0\n2\n0 0\n2 5\n",
            "written once epoch 2 came"
        );
    });
}

#[test]
fn a_damaged_epoch_file_fails_the_open() {
    block_on(async {
        let storage = FaultyStorage::new(12);
        let p = open_at(&storage, "/data/t-0").await;
        p.set_leader_epoch(epoch(1));
        p.append(batch(1), 0).await.unwrap();
        p.close().await.unwrap();
        let path = PathBuf::from("/data/t-0").join(LEADER_EPOCH_FILE);
        storage.set_file_bytes(&path, b"0\n2\n0 0\n".to_vec());
        let opened = Partition::open(Rc::new(storage.clone()), PathBuf::from("/data/t-0"), config()).await;
        assert!(matches!(opened, Err(LogError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData));
    });
}

#[test]
fn follower_appends_give_byte_identical_segments() {
    block_on(async {
        let storage = FaultyStorage::new(13);
        let leader = open_at(&storage, "/data/leader/t-0").await;
        for i in 0..60 {
            if i % 20 == 0 {
                leader.set_leader_epoch(epoch(i / 10));
            }
            let producer = BatchBuilder::new(1_000).producer(77, 0, i * 2).records_of(2, 30);
            leader.append(Bytes::from(producer.build()), 0).await.unwrap();
        }
        assert!(leader.segment_count() > 2, "small segments roll");
        let follower = open_at(&storage, "/data/follower/t-0").await;
        for one in batches_from(&leader, 0).await {
            follower.append_as_follower(one).await.unwrap();
        }
        assert_eq!(follower.log_end_offset().get(), leader.log_end_offset().get());
        assert_eq!(follower.leader_epochs(), leader.leader_epochs());
        assert_eq!(follower.leader_epochs(), entries(&[(0, 0), (2, 40), (4, 80)]));
        assert_eq!(
            follower
                .producer_entry(77)
                .and_then(|e| e.batches.back().map(|b| b.last_seq)),
            Some(119)
        );
        let (l, f) = (
            segment_files(&storage, "/data/leader/t-0").await,
            segment_files(&storage, "/data/follower/t-0").await,
        );
        assert!(!l.is_empty());
        assert_eq!(l, f, "same files, same bytes");
    });
}

#[test]
fn follower_appends_are_validated() {
    block_on(async {
        let storage = FaultyStorage::new(14);
        let leader = open_at(&storage, "/data/leader/t-0").await;
        leader.append(batch(3), 0).await.unwrap();
        leader.append(batch(3), 0).await.unwrap();
        let batches = batches_from(&leader, 0).await;
        let follower = open_at(&storage, "/data/follower/t-0").await;
        let gap = follower.append_as_follower(batches[1].clone()).await;
        assert!(matches!(
            gap,
            Err(LogError::UnexpectedOffset { expected: 0, got: 3 })
        ));
        let mut corrupt = batches[0].to_vec();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1;
        let crc = follower.append_as_follower(Bytes::from(corrupt)).await;
        assert!(matches!(
            crc,
            Err(LogError::Batch(BatchError::CrcMismatch { .. }))
        ));
        let partial = batches[0].slice(..batches[0].len() - 1);
        let short = follower.append_as_follower(partial).await;
        assert!(matches!(short, Err(LogError::Batch(BatchError::NeedMore { .. }))));
        let reordered = Bytes::from([batches[1].to_vec(), batches[0].to_vec()].concat());
        assert!(follower.append_as_follower(reordered).await.is_err());
        assert!(follower.append_as_follower(Bytes::new()).await.is_err());
        assert_eq!(follower.log_end_offset().get(), 0, "nothing was appended");
        let both = Bytes::from([batches[0].to_vec(), batches[1].to_vec()].concat());
        let info = follower.append_as_follower(both).await.unwrap();
        assert_eq!((info.base_offset.get(), info.last_offset.get()), (0, 5));
    });
}

#[test]
fn truncation_rounds_down_to_a_batch_start_and_trims_the_epochs() {
    block_on(async {
        let storage = FaultyStorage::new(15);
        let p = open_at(&storage, "/data/t-0").await;
        p.append(batch(4), 0).await.unwrap(); // 0..4
        p.set_leader_epoch(epoch(1));
        p.append(batch(4), 0).await.unwrap(); // 4..8
        p.set_leader_epoch(epoch(2));
        p.append(batch(4), 0).await.unwrap(); // 8..12
        p.set_high_watermark(Offset::new(10));
        assert_eq!(
            p.truncate_to(Offset::new(6)).await.unwrap().get(),
            4,
            "inside the batch 4..8"
        );
        assert_eq!(p.leader_epochs(), entries(&[(0, 0)]));
        assert_eq!(p.high_watermark().get(), 4);
        assert_eq!(end_offset_for(&p, 0), (0, 4));
        assert_eq!(
            p.truncate_to(Offset::new(40)).await.unwrap().get(),
            4,
            "past the end: nothing"
        );
        p.set_leader_epoch(epoch(3));
        p.append(batch(1), 0).await.unwrap();
        assert_eq!(p.leader_epochs(), entries(&[(0, 0), (3, 4)]));
        p.close().await.unwrap();
        let p = open_at(&storage, "/data/t-0").await;
        assert_eq!(p.leader_epochs(), entries(&[(0, 0), (3, 4)]));
        assert_eq!(
            p.high_watermark().get(),
            p.log_end_offset().get(),
            "single node until set"
        );
    });
}

#[test]
fn an_epoch_entry_past_what_a_crash_kept_is_dropped_at_open() {
    block_on(async {
        let storage = FaultyStorage::new(16);
        let p = open_at(&storage, "/data/t-0").await;
        p.append(batch(2), 0).await.unwrap();
        p.flush().await.unwrap();
        p.set_leader_epoch(epoch(5));
        p.append(batch(2), 0).await.unwrap(); // the epoch file is synced, the batch is not
        storage.crash(CrashMode::LoseUnsynced);
        let p = open_at(&storage, "/data/t-0").await;
        assert_eq!(p.log_end_offset().get(), 2);
        assert_eq!(p.leader_epochs(), entries(&[(0, 0)]));
    });
}

#[test]
fn retention_moves_the_first_epoch_start() {
    block_on(async {
        let storage = FaultyStorage::new(17);
        let p = open_at(&storage, "/data/t-0").await;
        p.append(batch(3), 0).await.unwrap();
        p.set_leader_epoch(epoch(1));
        p.append(batch(3), 0).await.unwrap();
        assert_eq!(p.delete_records_before(Offset::new(4)).await.unwrap().get(), 4);
        assert_eq!(p.leader_epochs(), entries(&[(1, 4)]));
    });
}

/// One replica's log as the model sees it: (base offset, next offset, leader epoch) per batch.
type ModelLog = Vec<(i64, i64, i32)>;

fn model_end(log: &ModelLog) -> i64 {
    log.last().map_or(0, |b| b.1)
}

/// The epoch entries a model log implies: the first batch of each epoch.
fn model_epochs(log: &ModelLog) -> Vec<EpochEntry> {
    let mut out: Vec<(i32, i64)> = Vec::new();
    for &(base, _, epoch) in log {
        if out.last().map(|e| e.0) != Some(epoch) {
            out.push((epoch, base));
        }
    }
    entries(&out)
}

/// OffsetForLeaderEpoch by scanning the model's batches (not the engine's algorithm).
fn model_end_offset_for(log: &ModelLog, asked: i32) -> (i32, i64) {
    let latest = log.last().map(|b| b.2);
    if asked < 0 || latest.is_none_or(|l| asked > l) {
        return (-1, -1);
    }
    if latest == Some(asked) {
        return (asked, model_end(log));
    }
    let next_start = log.iter().find(|b| b.2 > asked).map(|b| b.0).unwrap_or(-1);
    let found = log.iter().rev().find(|b| b.2 <= asked).map_or(asked, |b| b.2);
    (found, next_start)
}

fn check(p: &Partition<FaultyStorage>, log: &ModelLog, rng: &mut StdRng) {
    assert_eq!(p.log_end_offset().get(), model_end(log));
    assert_eq!(p.leader_epochs(), model_epochs(log));
    for _ in 0..4 {
        let asked = rng.gen_range(-1..12);
        assert_eq!(
            end_offset_for(p, asked),
            model_end_offset_for(log, asked),
            "epoch {asked}"
        );
    }
}

/// Kafka's follower truncation (KIP-279) before it fetches: ask the leader for the end of the
/// follower's latest epoch and cut at the lower of that and the follower's own end for the
/// epoch the leader found; again, with the follower's new latest epoch, until nothing moves
/// (each round removes at least one epoch, so this ends).
async fn truncate_follower(leader: &Partition<FaultyStorage>, follower: &Partition<FaultyStorage>) -> i64 {
    loop {
        let end = follower.log_end_offset().get();
        let Some(latest) = follower.leader_epochs().last().copied() else {
            return end;
        };
        let (found, leader_end) = leader.end_offset_for(latest.epoch);
        let to = if found == LeaderEpoch::UNKNOWN {
            0
        } else {
            let (own_found, own_end) = follower.end_offset_for(found);
            let own = if own_found == LeaderEpoch::UNKNOWN {
                end
            } else {
                own_end.get()
            };
            leader_end.get().min(own).min(end)
        };
        if follower.truncate_to(Offset::new(to)).await.unwrap().get() == end {
            return end;
        }
    }
}

#[test]
fn replicas_agree_with_a_model_through_elections_truncations_and_crashes() {
    for seed in 0..16 {
        block_on(run_model(seed));
    }
}

async fn run_model(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let storage = FaultyStorage::new(seed);
    let dirs = ["/data/a/t-0", "/data/b/t-0"];
    let mut replicas = [open_at(&storage, dirs[0]).await, open_at(&storage, dirs[1]).await];
    let mut models: [ModelLog; 2] = [Vec::new(), Vec::new()];
    let (mut leader, mut epoch) = (0usize, 0i32);
    for _step in 0..80 {
        let follower = 1 - leader;
        match rng.gen_range(0..10) {
            0..=3 => {
                let records = rng.gen_range(1..4);
                let info = replicas[leader].append(batch(records), 0).await.unwrap();
                let next = info.last_offset.next();
                models[leader].push((info.base_offset.get(), next.get(), epoch));
            }
            4..=6 => {
                let end = truncate_follower(&replicas[leader], &replicas[follower]).await;
                models[follower].retain(|b| b.1 <= end);
                let from = replicas[follower].log_end_offset().get();
                for one in batches_from(&replicas[leader], from).await {
                    replicas[follower].append_as_follower(one).await.unwrap();
                }
                models[follower] = models[leader].clone();
                let (l, f) = (
                    segment_log(&storage, dirs[leader]).await,
                    segment_log(&storage, dirs[follower]).await,
                );
                assert_eq!(l, f, "seed {seed}: the follower holds the leader's bytes");
            }
            7 | 8 => {
                (leader, epoch) = (follower, epoch + 1);
                replicas[leader].set_leader_epoch(LeaderEpoch::new(epoch));
            }
            _ => {
                if rng.gen_bool(0.5) {
                    for r in &replicas {
                        r.flush().await.unwrap();
                    }
                }
                let mode = [
                    CrashMode::LoseUnsynced,
                    CrashMode::TornTail,
                    CrashMode::TornTailWithGarbage,
                ];
                storage.crash(mode[rng.gen_range(0..3)]);
                replicas = [open_at(&storage, dirs[0]).await, open_at(&storage, dirs[1]).await];
                for (r, m) in replicas.iter().zip(models.iter_mut()) {
                    let kept = r.log_end_offset().get();
                    assert!(
                        m.iter().any(|b| b.1 == kept) || kept == 0,
                        "seed {seed}: a batch boundary"
                    );
                    m.retain(|b| b.1 <= kept);
                }
                // A restarted leader comes back under a new election.
                epoch += 1;
                replicas[leader].set_leader_epoch(LeaderEpoch::new(epoch));
            }
        }
        for (r, m) in replicas.iter().zip(&models) {
            check(r, m, &mut rng);
        }
    }
}

/// The concatenated `.log` bytes under `dir` (segment boundaries may differ between replicas
/// that fetched in different chunks; the bytes at each offset may not).
async fn segment_log(storage: &FaultyStorage, dir: &str) -> Vec<u8> {
    let files = segment_files(storage, dir).await;
    files
        .into_iter()
        .filter(|(n, _)| n.ends_with(".log"))
        .flat_map(|(_, bytes)| bytes)
        .collect()
}

#[test]
fn consumers_read_below_the_high_watermark_and_followers_to_the_log_end() {
    block_on(async {
        let storage = FaultyStorage::new(12);
        let p = open_at(&storage, "/data/t-0").await;
        for records in [3, 2, 4] {
            p.append(batch(records), 0).await.unwrap();
        }
        let offsets_read = |end: ReadEnd| {
            let p = &p;
            async move {
                let read = p.read_for_send(Offset::new(0), 1 << 20, true, end).await.unwrap();
                match read.data {
                    RecordBytes::File { offsets, .. } => offsets,
                    RecordBytes::Memory(batches) => {
                        let last = batches
                            .last()
                            .map_or(0, |b| BatchHeader::parse(b).unwrap().next_offset());
                        0..last
                    }
                }
            }
        };
        assert!(!p.is_replicated());
        assert_eq!(
            offsets_read(ReadEnd::HighWatermark).await,
            0..9,
            "single node: all committed"
        );
        p.set_high_watermark(Offset::new(5));
        assert_eq!(p.high_watermark().get(), 5);
        assert_eq!(offsets_read(ReadEnd::HighWatermark).await, 0..5);
        assert_eq!(offsets_read(ReadEnd::LogEnd).await, 0..9);
        // A high watermark inside a batch leaves that batch out whole.
        p.set_high_watermark(Offset::new(4));
        assert_eq!(offsets_read(ReadEnd::HighWatermark).await, 0..3);
        p.set_high_watermark(Offset::new(2));
        assert!(p
            .read_for_send(Offset::new(0), 1 << 20, true, ReadEnd::HighWatermark)
            .await
            .unwrap()
            .data
            .is_empty());
        assert!(p
            .read_for_send(Offset::new(5), 1 << 20, true, ReadEnd::HighWatermark)
            .await
            .unwrap()
            .data
            .is_empty());
        assert_eq!(
            p.read_for_send(Offset::new(5), 1 << 20, true, ReadEnd::LogEnd)
                .await
                .unwrap()
                .log_end_offset
                .get(),
            9
        );
    });
}

#[test]
fn a_follower_behind_its_leaders_log_start_starts_again_there() {
    block_on(async {
        let storage = FaultyStorage::new(13);
        let leader = open_at(&storage, "/data/leader-0").await;
        for _ in 0..10 {
            leader.append(batch(3), 0).await.unwrap();
        }
        let follower = open_at(&storage, "/data/t-0").await;
        let first = batches_from(&leader, 0).await;
        follower.append_as_follower(first[0].clone()).await.unwrap();
        follower.set_high_watermark(Offset::new(3));
        // The leader's log now starts at 15 (retention while the follower was away).
        follower.start_again_at(Offset::new(15)).await.unwrap();
        assert_eq!(
            (follower.log_start_offset().get(), follower.log_end_offset().get()),
            (15, 15)
        );
        assert_eq!(follower.high_watermark().get(), 15);
        assert!(follower.leader_epochs().is_empty());
        for batch in batches_from(&leader, 15).await {
            follower.append_as_follower(batch).await.unwrap();
        }
        assert_eq!(follower.log_end_offset().get(), 30);
        assert!(
            follower.start_again_at(Offset::new(30)).await.is_err(),
            "only past the log end"
        );
        follower.close().await.unwrap();
        let reopened = open_at(&storage, "/data/t-0").await;
        assert_eq!(
            (reopened.log_start_offset().get(), reopened.log_end_offset().get()),
            (15, 30)
        );
        let names = storage.list_dir(Path::new("/data/t-0")).await.unwrap();
        assert!(
            !names.iter().any(|n| n.starts_with("00000000000000000000.")),
            "the old segment is gone: {names:?}"
        );
        let read = reopened.read(Offset::new(15), 1 << 20, true).await.unwrap();
        assert_eq!(BatchHeader::parse(&read.data[0]).unwrap().base_offset, 15);
    });
}
