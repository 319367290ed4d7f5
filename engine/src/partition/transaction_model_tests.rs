//! The last stable offset and the aborted transactions of a partition against a simple model,
//! through randomised appends, markers, high-watermark moves, truncations, reopens and crashes;
//! and a follower of a random workload, which must write its leader's index bytes. Helpers
//! from `transaction_tests.rs`.

use super::transaction_tests::*;
use super::*;
use crate::io::{CrashMode, FaultyStorage};
use futures::executor::block_on;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

/// What a model batch is.
#[derive(Debug, Clone, Copy)]
enum ModelKind {
    Plain,
    /// A producer's batch, its first sequence; `txn`: transactional.
    Data {
        producer: i64,
        seq: i32,
        txn: bool,
    },
    Marker {
        producer: i64,
        abort: bool,
    },
}

/// Open transactions (producer → first offset) and aborted ones (producer, first offset,
/// marker offset) in marker order.
type Replayed = (HashMap<i64, i64>, Vec<(i64, i64, i64)>);

/// The log as the model sees it, and the high watermark (`None`: single-node, the log end).
#[derive(Default)]
struct Model {
    batches: Vec<(i64, i64, ModelKind)>,
    hw: Option<i64>,
}

impl Model {
    fn end(&self) -> i64 {
        self.batches.last().map_or(0, |b| b.1)
    }

    fn push(&mut self, count: i64, kind: ModelKind) {
        let base = self.end();
        self.batches.push((base, base + count, kind));
    }

    /// Replays the batches: the open transactions at the end, and every aborted transaction
    /// as (producer, first offset, marker offset), in marker order.
    fn replay(&self) -> Replayed {
        let (mut open, mut aborted) = (HashMap::new(), Vec::new());
        for &(base, _, kind) in &self.batches {
            match kind {
                ModelKind::Data {
                    producer, txn: true, ..
                } => {
                    open.entry(producer).or_insert(base);
                }
                ModelKind::Marker { producer, abort } => {
                    if let (Some(first), true) = (open.remove(&producer), abort) {
                        aborted.push((producer, first, base));
                    }
                }
                _ => {}
            }
        }
        (open, aborted)
    }

    /// The last stable offset counting open transactions only: the highest the partition may
    /// answer.
    fn last_stable_offset(&self) -> i64 {
        let hw = self.hw.unwrap_or(self.end()).min(self.end());
        let first_open = self.replay().0.into_values().min();
        first_open.map_or(hw, |first| first.min(hw))
    }

    /// The last stable offset also held by every ended transaction whose marker is not below
    /// the high watermark: the lowest the partition may answer (it forgets such markers a
    /// reopen did not replay, as Kafka's producer state does).
    fn last_stable_offset_strict(&self) -> i64 {
        let hw = self.hw.unwrap_or(self.end()).min(self.end());
        let (mut open, mut first_unstable) = (HashMap::new(), self.last_stable_offset());
        for &(base, _, kind) in &self.batches {
            match kind {
                ModelKind::Data {
                    producer, txn: true, ..
                } => {
                    open.entry(producer).or_insert(base);
                }
                ModelKind::Marker { producer, .. } => {
                    if let Some(first) = open.remove(&producer).filter(|_| base >= hw) {
                        first_unstable = first_unstable.min(first);
                    }
                }
                _ => {}
            }
        }
        first_unstable
    }

    fn aborted_between(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        let (_, all) = self.replay();
        let overlapping = all.iter().filter(|a| a.2 >= from && a.1 < to);
        let listed: Vec<_> = overlapping.map(|a| (a.0, a.1)).collect();
        aborted(&listed)
    }

    fn has_open_txn(&self, producer: i64) -> bool {
        self.replay().0.contains_key(&producer)
    }

    /// The sequence a producer continues at: after its last batch in the log (0 without one;
    /// a producer the partition does not know may start anywhere).
    fn next_seq(&self, producer: i64) -> i32 {
        let last = self
            .batches
            .iter()
            .rev()
            .find_map(|&(base, next, kind)| match kind {
                ModelKind::Data { producer: p, seq, .. } if p == producer => Some(seq + (next - base) as i32),
                _ => None,
            });
        last.unwrap_or(0)
    }

    fn truncate(&mut self, offset: i64) {
        self.batches.retain(|b| b.1 <= offset);
        self.hw = self.hw.map(|hw| hw.min(self.end()));
    }
}

/// Compares the last stable offset and the aborted transactions of a few random ranges.
async fn check_against(p: &Partition<FaultyStorage>, model: &Model, rng: &mut StdRng, step: usize) {
    assert_eq!(p.log_end_offset().get(), model.end(), "step {step}");
    let answered = p.last_stable_offset().get();
    let (lowest, highest) = (model.last_stable_offset_strict(), model.last_stable_offset());
    assert!(
        (lowest..=highest).contains(&answered),
        "step {step}: last stable offset {answered} outside {lowest}..={highest}"
    );
    for _ in 0..3 {
        let from = rng.gen_range(0..=model.end());
        let to = rng.gen_range(from..=model.end() + 1);
        let listed = aborted_between(p, from, to).await;
        assert_eq!(
            listed,
            model.aborted_between(from, to),
            "step {step}: [{from}, {to})"
        );
    }
}

/// One random data append or marker, done on both.
async fn produce_step(p: &Partition<FaultyStorage>, model: &mut Model, rng: &mut StdRng) {
    let producer = rng.gen_range(1..=3);
    let count = rng.gen_range(1..=3);
    match rng.gen_range(0..10) {
        0..=3 => {
            let seq = model.next_seq(producer);
            p.append(txn_batch(producer, seq, count), 5).await.unwrap();
            model.push(
                count as i64,
                ModelKind::Data {
                    producer,
                    seq,
                    txn: true,
                },
            );
        }
        4 => {
            let seq = model.next_seq(producer);
            let appended = p.append(idempotent_batch(producer, seq, count), 5).await;
            if model.has_open_txn(producer) {
                assert!(matches!(appended, Err(LogError::InvalidTxnState { .. })));
            } else {
                appended.unwrap();
                model.push(
                    count as i64,
                    ModelKind::Data {
                        producer,
                        seq,
                        txn: false,
                    },
                );
            }
        }
        5 => {
            p.append(plain_batch(count), 5).await.unwrap();
            model.push(count as i64, ModelKind::Plain);
        }
        _ => {
            let abort = rng.gen_bool(0.5);
            let result = if abort {
                TxnResult::Abort
            } else {
                TxnResult::Commit
            };
            p.append_txn_marker(producer, 0, result, 1, 5).await.unwrap();
            model.push(1, ModelKind::Marker { producer, abort });
        }
    }
}

/// Moves the high watermark, truncates, or reopens (cleanly or after a crash) both.
async fn disturb_step(
    storage: &FaultyStorage,
    p: Partition<FaultyStorage>,
    model: &mut Model,
    rng: &mut StdRng,
) -> Partition<FaultyStorage> {
    match rng.gen_range(0..5) {
        0 => {
            let hw = rng.gen_range(0..=model.end());
            p.set_high_watermark(Offset::new(hw));
            model.hw = Some(hw);
        }
        1 => {
            let to = rng.gen_range(0..=model.end());
            p.truncate_to(Offset::new(to)).await.unwrap();
            model.truncate(to);
        }
        2 => p.flush().await.unwrap(),
        3 => {
            p.close().await.unwrap();
            model.hw = None;
            return open(storage).await;
        }
        _ => {
            let mode = [
                CrashMode::LoseUnsynced,
                CrashMode::TornTail,
                CrashMode::TornTailWithGarbage,
            ][rng.gen_range(0..3)];
            storage.crash(mode);
            drop(p);
            let p = open(storage).await;
            model.truncate(p.log_end_offset().get());
            model.hw = None;
            return p;
        }
    }
    p
}

#[test]
fn the_last_stable_offset_and_aborted_list_match_a_model_through_truncations_and_reopens() {
    block_on(async {
        for seed in 0..24 {
            let mut rng = StdRng::seed_from_u64(seed);
            let storage = FaultyStorage::new(100 + seed);
            let mut p = open(&storage).await;
            let mut model = Model::default();
            for step in 0..150 {
                if rng.gen_range(0..8) == 0 {
                    p = disturb_step(&storage, p, &mut model, &mut rng).await;
                } else {
                    produce_step(&p, &mut model, &mut rng).await;
                }
                check_against(&p, &model, &mut rng, step).await;
            }
        }
    });
}

/// Copies to `follower` what `leader` has past the follower's log end.
async fn catch_up(leader: &Partition<FaultyStorage>, follower: &Partition<FaultyStorage>) {
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
}

/// A crash of the machine both replicas share: both reopen; the follower drops what the
/// leader lost, then catches up again.
async fn crash_both(
    storage: &FaultyStorage,
    model: &mut Model,
) -> (Partition<FaultyStorage>, Partition<FaultyStorage>) {
    storage.crash(CrashMode::TornTailWithGarbage);
    let leader = open(storage).await;
    let follower = open_at(storage, follower_dir()).await;
    model.truncate(leader.log_end_offset().get());
    follower.truncate_to(leader.log_end_offset()).await.unwrap();
    (leader, follower)
}

#[test]
fn a_follower_of_a_random_workload_has_its_leaders_index_bytes_through_crashes() {
    block_on(async {
        for seed in 0..6 {
            let mut rng = StdRng::seed_from_u64(1_000 + seed);
            let storage = FaultyStorage::new(200 + seed);
            let mut leader = open(&storage).await;
            let mut follower = open_at(&storage, follower_dir()).await;
            let mut model = Model::default();
            for step in 0..120 {
                produce_step(&leader, &mut model, &mut rng).await;
                if rng.gen_range(0..12) == 0 {
                    drop((leader, follower));
                    (leader, follower) = crash_both(&storage, &mut model).await;
                }
                catch_up(&leader, &follower).await;
                let (leader_files, follower_files) = (
                    txn_index_files(&storage, &leader),
                    txn_index_files(&storage, &follower),
                );
                assert_eq!(follower_files, leader_files, "seed {seed} step {step}");
                check_against(&follower, &model, &mut rng, step).await;
            }
        }
    });
}
