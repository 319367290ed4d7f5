//! The leader epoch cache of one partition (KIP-101, KIP-279) and its file,
//! `<partition dir>/leader-epoch-checkpoint`, in Kafka's format so that tools and operators
//! read it as they read Kafka's.
//!
//! Format (text, ASCII, each line ended by `\n`):
//!
//! ```text
//! 0                 version
//! 2                 number of entries
//! 0 0               <epoch> <start offset>, one line per entry, both decimal,
//! 3 120               separated by one space, epochs and start offsets strictly increasing
//! ```
//!
//! An entry says: the first batch stamped with that leader epoch is at that offset; the epoch
//! lasts until the next entry's start offset, the last one until the log end. The file is
//! replaced atomically (temp file, fdatasync, rename, directory fsync) whenever an entry is
//! added or removed, so a crash leaves the old list or the new one. A list is written before
//! the batches it describes are appended (see `Partition::append`), so after a crash it may
//! name offsets the log lost: the open drops every entry at or past the log end, as Kafka's
//! recovery does. Anything else wrong in the file (a bad version, count or line, entries out
//! of order) fails the partition's open: answering OffsetForLeaderEpoch from a damaged list
//! would let a follower keep a diverged log.

use super::checkpoint_file;
use crate::io::{write_file_atomically, Storage};
use bytes::Bytes;
use laminar_model::{LeaderEpoch, Offset};
use std::io;
use std::path::Path;

pub const LEADER_EPOCH_FILE: &str = "leader-epoch-checkpoint";

/// Kafka's UNDEFINED_EPOCH_OFFSET: with [`LeaderEpoch::UNKNOWN`], OffsetForLeaderEpoch's
/// "no answer".
pub const UNDEFINED_EPOCH_OFFSET: Offset = Offset::new(-1);

/// A file larger than this is refused before it is read: it bounds the memory an open gives
/// the list (about 100 000 entries, one per leader election that reached the log; retention
/// removes the old ones through [`LeaderEpochs::truncate_from_start`]).
const MAX_FILE_BYTES: usize = 4 << 20;

/// One entry: `epoch` starts at `start_offset`. Plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: LeaderEpoch,
    pub start_offset: Offset,
}

/// Why an assignment was refused: it would break the strictly increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "leader epoch {epoch} at offset {start_offset} does not follow epoch {latest_epoch} at {latest_start}"
)]
pub struct EpochOutOfOrder {
    pub epoch: LeaderEpoch,
    pub start_offset: Offset,
    pub latest_epoch: LeaderEpoch,
    pub latest_start: Offset,
}

/// The list, in memory. Owned by the partition's shard (inside its `Partition`); plain data.
/// Entries: epochs and start offsets strictly increasing (checked by every operation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochs {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochs {
    /// A list from `entries`, which must be strictly increasing in both fields.
    pub fn from_entries(entries: Vec<EpochEntry>) -> Result<Self, String> {
        let ordered = entries
            .windows(2)
            .all(|w| w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset);
        let valid = entries.iter().all(|e| is_valid(e.epoch, e.start_offset));
        if !(ordered && valid) {
            return Err("epochs and start offsets are not non-negative and strictly increasing".into());
        }
        Ok(LeaderEpochs { entries })
    }

    /// The list of a log whose batches all have epoch 0: one entry at `log_start` unless the
    /// log is empty.
    pub fn implicit(log_start: Offset, log_end: Offset) -> Self {
        let entries = (log_end > log_start).then_some(EpochEntry {
            epoch: LeaderEpoch::FIRST,
            start_offset: log_start,
        });
        LeaderEpochs {
            entries: entries.into_iter().collect(),
        }
    }

    /// Whether the list says no more than [`implicit`](Self::implicit) would: epoch 0 only.
    pub fn is_implicit(&self) -> bool {
        self.entries.iter().all(|entry| entry.epoch == LeaderEpoch::FIRST)
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// Whether `epoch` is the latest entry's: assigning it again changes nothing.
    pub fn is_latest(&self, epoch: LeaderEpoch) -> bool {
        self.latest().is_some_and(|latest| latest.epoch == epoch)
    }

    /// Records that `epoch` starts at `start_offset`; returns whether the list changed. Nothing
    /// changes when `epoch` is already the latest. An entry at the same start offset as the
    /// latest one replaces it (that epoch never got a batch kept in the log, as in Kafka); a
    /// lower epoch, or a start offset below the latest one, is refused.
    pub fn assign(&mut self, epoch: LeaderEpoch, start_offset: Offset) -> Result<bool, EpochOutOfOrder> {
        let latest = self.latest();
        let refused = EpochOutOfOrder {
            epoch,
            start_offset,
            latest_epoch: latest.map_or(LeaderEpoch::UNKNOWN, |l| l.epoch),
            latest_start: latest.map_or(UNDEFINED_EPOCH_OFFSET, |l| l.start_offset),
        };
        if !is_valid(epoch, start_offset) {
            return Err(refused);
        }
        if self.is_latest(epoch) {
            return Ok(false);
        }
        if let Some(latest) = latest {
            if epoch < latest.epoch || start_offset < latest.start_offset {
                return Err(refused);
            }
            if start_offset == latest.start_offset {
                self.entries.pop();
            }
        }
        self.entries.push(EpochEntry { epoch, start_offset });
        Ok(true)
    }

    /// Drops the entries that start at or after `end_offset` (the log was cut there); returns
    /// whether any was.
    pub fn truncate_from_end(&mut self, end_offset: Offset) -> bool {
        let keep = self.entries.partition_point(|e| e.start_offset < end_offset);
        let changed = keep < self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// The log now starts at `start_offset`: entries wholly below it go, and the one that
    /// covers it starts there (as Kafka does). Returns whether the list changed.
    pub fn truncate_from_start(&mut self, start_offset: Offset) -> bool {
        let below = self.entries.partition_point(|e| e.start_offset < start_offset);
        if below == 0 {
            return false;
        }
        let mut covering = self.entries[below - 1];
        covering.start_offset = start_offset;
        self.entries.drain(..below);
        self.entries.insert(0, covering);
        true
    }

    /// OffsetForLeaderEpoch as Kafka answers it, with `log_end` the log end offset: the largest
    /// epoch at most `epoch` and the start offset of the next higher one (the log end for the
    /// latest epoch). An epoch below every entry answers itself and the first entry's start
    /// (the log lost what came before); an epoch above every entry, [`LeaderEpoch::UNKNOWN`] or
    /// an empty list answer ([`LeaderEpoch::UNKNOWN`], [`UNDEFINED_EPOCH_OFFSET`]).
    pub fn end_offset_for(&self, epoch: LeaderEpoch, log_end: Offset) -> (LeaderEpoch, Offset) {
        let undefined = (LeaderEpoch::UNKNOWN, UNDEFINED_EPOCH_OFFSET);
        if epoch == LeaderEpoch::UNKNOWN {
            return undefined;
        }
        if self.latest().is_some_and(|l| l.epoch == epoch) {
            return (epoch, log_end);
        }
        let higher = self.entries.partition_point(|e| e.epoch <= epoch);
        let Some(next) = self.entries.get(higher) else {
            return undefined;
        };
        match higher.checked_sub(1).and_then(|i| self.entries.get(i)) {
            Some(floor) => (floor.epoch, next.start_offset),
            None => (epoch, next.start_offset),
        }
    }

    /// The file's bytes (see the module docs).
    pub fn encode(&self) -> String {
        let lines: Vec<String> = self
            .entries
            .iter()
            .map(|e| format!("{} {}", e.epoch, e.start_offset))
            .collect();
        checkpoint_file::encode(&lines)
    }

    /// The list the file's `bytes` hold; an error says what is wrong with them.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let mut entries = Vec::new();
        for (i, line) in checkpoint_file::entry_lines(bytes)?.into_iter().enumerate() {
            let (epoch, start_offset) = line
                .split_once(' ')
                .and_then(|(e, o)| Some((e.parse().ok()?, o.parse().ok()?)))
                .ok_or_else(|| format!("bad entry line {}: {line:?}", i + 3))?;
            entries.push(EpochEntry {
                epoch: LeaderEpoch::new(epoch),
                start_offset: Offset::new(start_offset),
            });
        }
        Self::from_entries(entries)
    }
}

/// Whether an entry may hold `epoch` at `start_offset`: neither is one of Kafka's negative
/// sentinels.
fn is_valid(epoch: LeaderEpoch, start_offset: Offset) -> bool {
    epoch.get() >= 0 && start_offset.get() >= 0
}

/// Reads the list of the partition in `dir`: `None` when there is no file; an error
/// (InvalidData) when the file is not a valid list.
pub async fn read<S: Storage>(storage: &S, dir: &Path) -> io::Result<Option<LeaderEpochs>> {
    let path = dir.join(LEADER_EPOCH_FILE);
    let Some(bytes) = checkpoint_file::read(storage, &path, MAX_FILE_BYTES).await? else {
        return Ok(None);
    };
    LeaderEpochs::decode(&bytes)
        .map(Some)
        .map_err(|why| checkpoint_file::invalid(&path, why))
}

/// Replaces the file of the partition in `dir` with `epochs`, atomically and durably.
pub async fn write<S: Storage>(storage: &S, dir: &Path, epochs: &LeaderEpochs) -> io::Result<()> {
    let bytes = Bytes::from(epochs.encode());
    write_file_atomically(storage, &dir.join(LEADER_EPOCH_FILE), bytes).await
}

/// Entries from (epoch, start offset) pairs, for tests to write lists briefly.
#[cfg(test)]
pub(crate) fn entries(pairs: &[(i32, i64)]) -> Vec<EpochEntry> {
    let entry = |&(epoch, start_offset): &(i32, i64)| EpochEntry {
        epoch: LeaderEpoch::new(epoch),
        start_offset: Offset::new(start_offset),
    };
    pairs.iter().map(entry).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(pairs: &[(i32, i64)]) -> LeaderEpochs {
        LeaderEpochs::from_entries(entries(pairs)).unwrap()
    }

    fn epoch(value: i32) -> LeaderEpoch {
        LeaderEpoch::new(value)
    }

    fn offset(value: i64) -> Offset {
        Offset::new(value)
    }

    /// `end_offset_for`'s answer as plain integers, to compare with Kafka's.
    fn end_offset_for(epochs: &LeaderEpochs, asked: i32, log_end: i64) -> (i32, i64) {
        let (found, end) = epochs.end_offset_for(epoch(asked), offset(log_end));
        (found.get(), end.get())
    }

    #[test]
    fn golden_leader_epoch_checkpoint() {
        let epochs = list(&[(0, 0), (3, 120), (7, 4096)]);
        assert_eq!(epochs.encode().as_bytes(), b"0\n3\n0 0\n3 120\n7 4096\n");
        assert_eq!(LeaderEpochs::default().encode().as_bytes(), b"0\n0\n");
        assert_eq!(LeaderEpochs::decode(b"0\n3\n0 0\n3 120\n7 4096\n"), Ok(epochs));
        assert_eq!(LeaderEpochs::decode(b"0\n0\n"), Ok(LeaderEpochs::default()));
    }

    #[test]
    fn damaged_files_are_refused() {
        let bad: &[&[u8]] = &[
            b"",
            b"0\n1\n0 0",                    // last line not ended
            b"1\n1\n0 0\n",                  // version
            b"0\n2\n0 0\n",                  // count too large
            b"0\n0\n0 0\n",                  // count too small
            b"0\nx\n",                       // count
            b"0\n1\n0  0\n",                 // two spaces
            b"0\n1\n0 0 0\n",                // three fields
            b"0\n1\n-2 0\n",                 // negative epoch
            b"0\n2\n1 5\n1 9\n",             // epochs not increasing
            b"0\n2\n1 5\n2 5\n",             // offsets not increasing
            b"0\n1\n\xff 0\n",               // not text
            b"0\n99999999999999999999999\n", // count overflows
        ];
        for bytes in bad {
            assert!(
                LeaderEpochs::decode(bytes).is_err(),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn assign_keeps_the_order() {
        let mut epochs = LeaderEpochs::default();
        assert_eq!(epochs.assign(epoch(2), offset(0)), Ok(true));
        assert_eq!(
            epochs.assign(epoch(2), offset(50)),
            Ok(false),
            "already the latest"
        );
        assert!(epochs.assign(epoch(1), offset(60)).is_err(), "a lower epoch");
        assert_eq!(epochs.assign(epoch(4), offset(60)), Ok(true));
        assert!(
            epochs.assign(epoch(5), offset(59)).is_err(),
            "a lower start offset"
        );
        assert_eq!(
            epochs.assign(epoch(5), offset(60)),
            Ok(true),
            "replaces an epoch without batches"
        );
        assert_eq!(epochs, list(&[(2, 0), (5, 60)]));
    }

    #[test]
    fn truncations() {
        let mut epochs = list(&[(0, 0), (3, 120), (7, 4096)]);
        assert!(!epochs.truncate_from_end(offset(5000)));
        assert!(epochs.truncate_from_end(offset(4096)));
        assert_eq!(epochs, list(&[(0, 0), (3, 120)]));
        assert!(!epochs.truncate_from_start(offset(0)));
        assert!(epochs.truncate_from_start(offset(100)));
        assert_eq!(epochs, list(&[(0, 100), (3, 120)]));
        assert!(epochs.truncate_from_start(offset(130)));
        assert_eq!(epochs, list(&[(3, 130)]));
    }

    #[test]
    fn end_offset_for_answers_as_kafka() {
        let epochs = list(&[(2, 10), (4, 30), (7, 50)]);
        let log_end = 80;
        assert_eq!(
            end_offset_for(&epochs, 7, log_end),
            (7, 80),
            "latest: the log end"
        );
        assert_eq!(end_offset_for(&epochs, 4, log_end), (4, 50));
        assert_eq!(
            end_offset_for(&epochs, 5, log_end),
            (4, 50),
            "an epoch with no batches"
        );
        assert_eq!(end_offset_for(&epochs, 2, log_end), (2, 30));
        assert_eq!(
            end_offset_for(&epochs, 1, log_end),
            (1, 10),
            "below the first entry"
        );
        assert_eq!(end_offset_for(&epochs, 8, log_end), (-1, -1), "above the latest");
        assert_eq!(end_offset_for(&epochs, -1, log_end), (-1, -1));
        assert_eq!(end_offset_for(&LeaderEpochs::default(), 0, 0), (-1, -1));
    }
}
