//! What the clients of a fault test saw, and the checker that judges it, Jepsen-style: the
//! history is recorded as it happens, the checker runs once at the end against the log read back
//! after every fault has healed.
//!
//! Every record a producer sends carries its own sequence number within its partition (0, 1, 2,
//! ... as text in the value), so the final log says by itself what was written where. The
//! checker then demands, per partition:
//! - every acknowledged record is in the final log exactly once, at the offset it was
//!   acknowledged at (no loss, no duplicate);
//! - the sequence numbers in the final log only grow (no reordering), and none is unknown;
//! - every record a consumer read during the run is in the final log at the offset it was read
//!   at (no dirty read: nothing read that was never committed and later vanished);
//! - a group's committed offset, read back, is never below an offset whose commit was
//!   acknowledged before the read started (committed offsets never go backwards).
//!
//! It also measures availability: the longest stretch without an acknowledgement in each
//! partition while a fault lasted and until the cluster recovered from it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

/// A record's place in the history: its partition and its sequence number there.
pub type Sequence = u64;

/// Everything the workload's clients observed, in the order they observed it.
#[derive(Debug, Default)]
pub struct History {
    /// How many records were handed to the producer, per partition (sequences `0..n`).
    pub sent: BTreeMap<i32, Sequence>,
    pub acks: Vec<Ack>,
    /// Records the producer gave up on, with the error it reported.
    pub failures: Vec<(i32, Sequence, String)>,
    pub reads: Vec<Read>,
    pub commits: Vec<Commit>,
    pub committed_reads: Vec<CommittedRead>,
}

/// The broker acknowledged a record at `offset` (negative: acknowledged at an offset the client
/// was not told).
#[derive(Clone, Copy, Debug)]
pub struct Ack {
    pub partition: i32,
    pub sequence: Sequence,
    pub offset: i64,
    pub at: Instant,
}

/// A consumer read the record with `sequence` at `offset`.
#[derive(Clone, Copy, Debug)]
pub struct Read {
    pub partition: i32,
    pub offset: i64,
    pub sequence: Sequence,
}

/// A group's commit of `offset` (the next one to read) was acknowledged at `at`.
#[derive(Clone, Copy, Debug)]
pub struct Commit {
    pub partition: i32,
    pub offset: i64,
    pub at: Instant,
}

/// The group's committed offset as read back (OffsetFetch), asked at `asked_at`.
#[derive(Clone, Copy, Debug)]
pub struct CommittedRead {
    pub partition: i32,
    pub offset: i64,
    pub asked_at: Instant,
}

/// A fault as the checker needs it: what it was, when it began, when the cluster had recovered
/// from it (every replica back in sync after the heal), and the longest any partition may go
/// without an acknowledgement meanwhile.
#[derive(Clone, Debug)]
pub struct FaultWindow {
    pub kind: String,
    pub started: Instant,
    pub recovered: Instant,
    pub unavailability_bound: Duration,
}

/// One thing the history shows that must not happen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Anomaly {
    /// Acknowledged, but not in the final log.
    Lost {
        partition: i32,
        sequence: Sequence,
        offset: i64,
    },
    /// Acknowledged at one offset, found at another.
    Moved {
        partition: i32,
        sequence: Sequence,
        acked: i64,
        found: i64,
    },
    /// In the final log more than once.
    Duplicated {
        partition: i32,
        sequence: Sequence,
        offsets: Vec<i64>,
    },
    /// In the final log after a record with a higher sequence.
    Reordered {
        partition: i32,
        offset: i64,
        sequence: Sequence,
        after: Sequence,
    },
    /// In the final log, but never sent.
    Unknown {
        partition: i32,
        offset: i64,
        sequence: Sequence,
    },
    /// Read during the run, but the final log holds something else at that offset.
    DirtyRead {
        partition: i32,
        offset: i64,
        read: Sequence,
        now: Option<Sequence>,
    },
    /// A committed offset read back below one whose commit was acknowledged before.
    OffsetWentBack {
        partition: i32,
        read: i64,
        acknowledged: i64,
    },
}

/// The final log of every partition: `(offset, sequence)` in offset order.
pub type FinalLogs = BTreeMap<i32, Vec<(i64, Sequence)>>;

/// What the checker found.
#[derive(Debug, Default)]
pub struct Verdict {
    pub acknowledged: usize,
    pub read: usize,
    pub commits: usize,
    pub anomalies: Vec<Anomaly>,
    /// Per fault, the longest stretch any partition went without an acknowledgement.
    pub unavailability: Vec<(String, Duration)>,
    /// The faults whose stretch exceeded their bound: kind, stretch, bound.
    pub beyond_bound: Vec<(String, Duration, Duration)>,
}

impl Verdict {
    /// The longest stretch without an acknowledgement, per fault kind, over every fault.
    pub fn unavailability_by_kind(&self) -> BTreeMap<String, Duration> {
        let mut by_kind: BTreeMap<String, Duration> = BTreeMap::new();
        for (kind, gap) in &self.unavailability {
            let longest = by_kind.entry(kind.clone()).or_default();
            *longest = (*longest).max(*gap);
        }
        by_kind
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} acknowledged, {} read, {} commits, {} anomalies",
            self.acknowledged,
            self.read,
            self.commits,
            self.anomalies.len()
        )?;
        for anomaly in self.anomalies.iter().take(20) {
            writeln!(f, "  {anomaly:?}")?;
        }
        for (kind, gap, bound) in &self.beyond_bound {
            writeln!(
                f,
                "  {kind}: {gap:.1?} without an acknowledgement, beyond its bound of {bound:.1?}"
            )?;
        }
        for (kind, gap) in self.unavailability_by_kind() {
            writeln!(f, "  longest without an acknowledgement, {kind}: {gap:.1?}")?;
        }
        Ok(())
    }
}

/// Judges `history` against the `logs` read back after healing, and measures availability
/// over `faults`.
pub fn check(history: &History, logs: &FinalLogs, faults: &[FaultWindow]) -> Verdict {
    let mut anomalies = Vec::new();
    let positions = positions_of(logs, history, &mut anomalies);
    check_acks(history, &positions, &mut anomalies);
    check_reads(history, logs, &mut anomalies);
    check_commits(history, &mut anomalies);
    let unavailability: Vec<(String, Duration)> = faults
        .iter()
        .map(|fault| (fault.kind.clone(), longest_gap(history, fault)))
        .collect();
    let beyond_bound = faults
        .iter()
        .zip(&unavailability)
        .filter(|(fault, (_, gap))| *gap > fault.unavailability_bound)
        .map(|(fault, (kind, gap))| (kind.clone(), *gap, fault.unavailability_bound))
        .collect();
    Verdict {
        acknowledged: history.acks.len(),
        read: history.reads.len(),
        commits: history.commits.len(),
        anomalies,
        unavailability,
        beyond_bound,
    }
}

/// Where each sequence sits in the final logs; notes duplicates, reorderings and unknowns.
fn positions_of(
    logs: &FinalLogs,
    history: &History,
    anomalies: &mut Vec<Anomaly>,
) -> BTreeMap<(i32, Sequence), i64> {
    let mut positions = BTreeMap::new();
    for (&partition, log) in logs {
        let sent = history.sent.get(&partition).copied().unwrap_or(0);
        let mut offsets_of: BTreeMap<Sequence, Vec<i64>> = BTreeMap::new();
        let mut highest: Option<Sequence> = None;
        for &(offset, sequence) in log {
            if sequence >= sent {
                anomalies.push(Anomaly::Unknown {
                    partition,
                    offset,
                    sequence,
                });
            }
            if let Some(after) = highest.filter(|after| *after >= sequence) {
                anomalies.push(Anomaly::Reordered {
                    partition,
                    offset,
                    sequence,
                    after,
                });
            }
            highest = highest.max(Some(sequence));
            offsets_of.entry(sequence).or_default().push(offset);
        }
        for (sequence, offsets) in offsets_of {
            positions.insert((partition, sequence), offsets[0]);
            if offsets.len() > 1 {
                anomalies.push(Anomaly::Duplicated {
                    partition,
                    sequence,
                    offsets,
                });
            }
        }
    }
    positions
}

fn check_acks(history: &History, positions: &BTreeMap<(i32, Sequence), i64>, anomalies: &mut Vec<Anomaly>) {
    for ack in &history.acks {
        match positions.get(&(ack.partition, ack.sequence)) {
            None => anomalies.push(Anomaly::Lost {
                partition: ack.partition,
                sequence: ack.sequence,
                offset: ack.offset,
            }),
            // A client may learn that a batch was written without learning where: librdkafka
            // acknowledges a timed-out batch once a later one of its producer succeeds, with
            // the offset unknown (negative).
            Some(&found) if ack.offset >= 0 && found != ack.offset => anomalies.push(Anomaly::Moved {
                partition: ack.partition,
                sequence: ack.sequence,
                acked: ack.offset,
                found,
            }),
            Some(_) => {}
        }
    }
}

fn check_reads(history: &History, logs: &FinalLogs, anomalies: &mut Vec<Anomaly>) {
    let by_offset: BTreeMap<(i32, i64), Sequence> = logs
        .iter()
        .flat_map(|(&partition, log)| log.iter().map(move |&(offset, seq)| ((partition, offset), seq)))
        .collect();
    let mut reported = BTreeSet::new();
    for read in &history.reads {
        let now = by_offset.get(&(read.partition, read.offset)).copied();
        if now != Some(read.sequence) && reported.insert((read.partition, read.offset)) {
            anomalies.push(Anomaly::DirtyRead {
                partition: read.partition,
                offset: read.offset,
                read: read.sequence,
                now,
            });
        }
    }
}

fn check_commits(history: &History, anomalies: &mut Vec<Anomaly>) {
    for read in &history.committed_reads {
        let acknowledged = history
            .commits
            .iter()
            .filter(|commit| commit.partition == read.partition && commit.at < read.asked_at)
            .map(|commit| commit.offset)
            .max();
        if let Some(acknowledged) = acknowledged.filter(|offset| *offset > read.offset) {
            anomalies.push(Anomaly::OffsetWentBack {
                partition: read.partition,
                read: read.offset,
                acknowledged,
            });
        }
    }
}

/// The longest time any partition went without an acknowledgement between the fault's start
/// and its recovery (from the start to the first one, between two, from the last to the
/// recovery).
fn longest_gap(history: &History, fault: &FaultWindow) -> Duration {
    let mut times: BTreeMap<i32, Vec<Instant>> = history.sent.keys().map(|p| (*p, Vec::new())).collect();
    for ack in &history.acks {
        if ack.at > fault.started && ack.at < fault.recovered {
            times.entry(ack.partition).or_default().push(ack.at);
        }
    }
    let mut longest = Duration::ZERO;
    for mut acked in times.into_values() {
        acked.sort();
        let mut previous = fault.started;
        for at in acked.into_iter().chain(std::iter::once(fault.recovered)) {
            longest = longest.max(at.duration_since(previous));
            previous = at;
        }
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Partition 0 with `count` records sent, each acknowledged at the offset of its sequence.
    fn clean_history(count: u64) -> (History, FinalLogs) {
        let at = Instant::now();
        let mut history = History::default();
        history.sent.insert(0, count);
        for seq in 0..count {
            let offset = seq as i64;
            history.acks.push(Ack {
                partition: 0,
                sequence: seq,
                offset,
                at,
            });
            history.reads.push(Read {
                partition: 0,
                offset,
                sequence: seq,
            });
        }
        let logs = FinalLogs::from([(0, (0..count).map(|s| (s as i64, s)).collect())]);
        (history, logs)
    }

    #[test]
    fn a_clean_history_has_no_anomaly() {
        let (history, logs) = clean_history(10);
        let verdict = check(&history, &logs, &[]);
        assert_eq!(verdict.anomalies, vec![]);
        assert_eq!(verdict.acknowledged, 10);
    }

    #[test]
    fn a_lost_acknowledged_record_is_found() {
        let (history, mut logs) = clean_history(10);
        logs.get_mut(&0).unwrap().truncate(9);
        let verdict = check(&history, &logs, &[]);
        assert!(verdict.anomalies.contains(&Anomaly::Lost {
            partition: 0,
            sequence: 9,
            offset: 9
        }));
        assert!(matches!(
            verdict.anomalies[..],
            [Anomaly::Lost { .. }, Anomaly::DirtyRead { .. }]
        ));
    }

    #[test]
    fn duplicates_reorderings_and_unknowns_are_found() {
        let (history, mut logs) = clean_history(4);
        logs.insert(0, vec![(0, 0), (1, 2), (2, 1), (3, 3), (4, 3), (5, 9)]);
        let anomalies = check(&history, &logs, &[]).anomalies;
        assert!(anomalies.contains(&Anomaly::Reordered {
            partition: 0,
            offset: 2,
            sequence: 1,
            after: 2
        }));
        assert!(anomalies.contains(&Anomaly::Duplicated {
            partition: 0,
            sequence: 3,
            offsets: vec![3, 4]
        }));
        assert!(anomalies.contains(&Anomaly::Unknown {
            partition: 0,
            offset: 5,
            sequence: 9
        }));
        assert!(anomalies.contains(&Anomaly::Moved {
            partition: 0,
            sequence: 1,
            acked: 1,
            found: 2
        }));
    }

    #[test]
    fn an_acknowledgement_without_an_offset_only_needs_the_record_once() {
        let (mut history, logs) = clean_history(3);
        history.acks[1].offset = -1001;
        assert_eq!(check(&history, &logs, &[]).anomalies, vec![]);
        let lost = FinalLogs::from([(0, vec![(0, 0), (2, 2)])]);
        let anomalies = check(&history, &lost, &[]).anomalies;
        assert!(anomalies.contains(&Anomaly::Lost {
            partition: 0,
            sequence: 1,
            offset: -1001
        }));
    }

    #[test]
    fn a_read_that_later_vanished_is_a_dirty_read() {
        let (mut history, logs) = clean_history(3);
        history.reads.push(Read {
            partition: 0,
            offset: 3,
            sequence: 3,
        });
        let anomalies = check(&history, &logs, &[]).anomalies;
        assert_eq!(
            anomalies,
            vec![Anomaly::DirtyRead {
                partition: 0,
                offset: 3,
                read: 3,
                now: None
            }]
        );
    }

    #[test]
    fn a_committed_offset_read_below_an_acknowledged_commit_went_back() {
        let (mut history, logs) = clean_history(3);
        let start = Instant::now();
        history.commits.push(Commit {
            partition: 0,
            offset: 5,
            at: start,
        });
        let later = start + Duration::from_millis(1);
        history.committed_reads.push(CommittedRead {
            partition: 0,
            offset: 5,
            asked_at: later,
        });
        assert_eq!(check(&history, &logs, &[]).anomalies, vec![]);
        history.committed_reads.push(CommittedRead {
            partition: 0,
            offset: 4,
            asked_at: later,
        });
        history.committed_reads.push(CommittedRead {
            partition: 0,
            offset: 1,
            asked_at: start,
        });
        let anomalies = check(&history, &logs, &[]).anomalies;
        assert_eq!(
            anomalies,
            vec![Anomaly::OffsetWentBack {
                partition: 0,
                read: 4,
                acknowledged: 5
            }]
        );
    }

    #[test]
    fn unavailability_is_the_longest_stretch_without_an_acknowledgement() {
        let start = Instant::now();
        let ms = |n| start + Duration::from_millis(n);
        let mut history = History::default();
        history.sent.insert(0, 3);
        history.sent.insert(1, 1);
        for (sequence, at) in [(0, 100), (1, 700), (2, 900)] {
            history.acks.push(Ack {
                partition: 0,
                sequence,
                offset: sequence as i64,
                at: ms(at),
            });
        }
        history.acks.push(Ack {
            partition: 1,
            sequence: 0,
            offset: 0,
            at: ms(400),
        });
        let fault = |bound| FaultWindow {
            kind: "pause".into(),
            started: ms(50),
            recovered: ms(1000),
            unavailability_bound: Duration::from_millis(bound),
        };
        let verdict = check(&history, &FinalLogs::new(), &[fault(600)]);
        // Partition 1: 350 ms to its only acknowledgement, then 600 ms to the recovery.
        assert_eq!(
            verdict.unavailability,
            vec![("pause".to_string(), Duration::from_millis(600))]
        );
        assert_eq!(verdict.beyond_bound, vec![]);
        let verdict = check(&history, &FinalLogs::new(), &[fault(599)]);
        let (gap, bound) = (Duration::from_millis(600), Duration::from_millis(599));
        assert_eq!(verdict.beyond_bound, vec![("pause".to_string(), gap, bound)]);
    }
}
