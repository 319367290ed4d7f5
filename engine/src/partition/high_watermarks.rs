//! The high watermark checkpoint of a log dir: Kafka's `replication-offset-checkpoint` format,
//! so that a follower restarts from the high watermark it had.
//!
//! Format (text, ASCII, each line ended by `\n`):
//!
//! ```text
//! 0                     version
//! 2                     number of entries
//! orders 0 1200         <topic> <partition> <high watermark>, separated by one space
//! orders 1 877
//! ```
//!
//! One file per shard, `<log dir>/replication-offset-checkpoint.shard-<N>`, not one per log
//! dir as in Kafka: each shard owns its partitions (invariant 1), so it can write its file from
//! its own state at any time, whereas one shared file would need every shard's high
//! watermarks gathered (a cross-shard round) for each write. A partition's owner can change
//! when the shard count does, so an open reads every shard's file ([`read_log_dir`]); an entry
//! found in two files (one stale) counts at its lower value, which is always safe: a high
//! watermark only says what is known committed. The files are replaced atomically (temp file,
//! fdatasync, rename, directory fsync). A damaged file is an error, never guessed at.

use super::checkpoint_file;
use crate::io::{write_file_atomically, Storage};
use bytes::Bytes;
use laminar_model::{Offset, TopicPartition};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

pub const CHECKPOINT_FILE: &str = "replication-offset-checkpoint";

/// A file larger than this is refused before it is read (about 100 000 partitions with names
/// of the longest kind Kafka allows would take 27 MiB; 64 MiB leaves room, and bounds memory).
const MAX_FILE_BYTES: usize = 64 << 20;

/// Kafka's longest topic name.
const MAX_TOPIC_LEN: usize = 249;

/// High watermarks by partition, in the file's order (topic, then index). Plain data.
pub type HighWatermarkMap = BTreeMap<TopicPartition, Offset>;

/// The file of shard `shard` in `log_dir`.
pub fn shard_file(log_dir: &Path, shard: usize) -> PathBuf {
    log_dir.join(format!("{CHECKPOINT_FILE}.shard-{shard}"))
}

/// Whether `name` is a topic name Kafka allows (`[a-zA-Z0-9._-]`, 1 to 249 characters).
fn legal_topic(name: &str) -> bool {
    let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    !name.is_empty() && name.len() <= MAX_TOPIC_LEN && name.chars().all(legal)
}

pub fn encode(entries: &HighWatermarkMap) -> String {
    let lines: Vec<String> = entries
        .iter()
        .map(|(tp, offset)| format!("{} {} {offset}", tp.topic, tp.partition))
        .collect();
    checkpoint_file::encode(&lines)
}

/// The entries the file's `bytes` hold; an error says what is wrong with them.
pub fn decode(bytes: &[u8]) -> Result<HighWatermarkMap, String> {
    let mut entries = HighWatermarkMap::new();
    for (i, line) in checkpoint_file::entry_lines(bytes)?.into_iter().enumerate() {
        let (topic, partition, offset) =
            parse_line(line).ok_or_else(|| format!("bad entry line {}: {line:?}", i + 3))?;
        let tp = TopicPartition::new(topic, partition);
        if entries.insert(tp, offset).is_some() {
            return Err(format!("{topic}-{partition} appears twice"));
        }
    }
    Ok(entries)
}

fn parse_line(line: &str) -> Option<(&str, i32, Offset)> {
    let mut fields = line.split(' ');
    let topic = fields.next().filter(|t| legal_topic(t))?;
    let partition = fields.next()?.parse().ok().filter(|p| *p >= 0)?;
    let offset = fields.next()?.parse().ok().filter(|o| *o >= 0).map(Offset::new)?;
    fields.next().is_none().then_some((topic, partition, offset))
}

/// Reads one checkpoint file: empty when there is none; InvalidData when it is damaged.
pub async fn read<S: Storage>(storage: &S, path: &Path) -> io::Result<HighWatermarkMap> {
    match checkpoint_file::read(storage, path, MAX_FILE_BYTES).await? {
        Some(bytes) => decode(&bytes).map_err(|why| checkpoint_file::invalid(path, why)),
        None => Ok(HighWatermarkMap::new()),
    }
}

/// Every shard's file in `log_dir`, merged (an entry in two files at its lower value).
pub async fn read_log_dir<S: Storage>(storage: &S, log_dir: &Path) -> io::Result<HighWatermarkMap> {
    let prefix = format!("{CHECKPOINT_FILE}.shard-");
    let mut merged = HighWatermarkMap::new();
    for name in storage.list_dir(log_dir).await? {
        let is_shard_file = name
            .strip_prefix(&prefix)
            .is_some_and(|n| n.parse::<usize>().is_ok());
        if !is_shard_file {
            continue; // also the temp files of an interrupted write
        }
        for (key, offset) in read(storage, &log_dir.join(&name)).await? {
            let kept = merged.entry(key).or_insert(offset);
            *kept = (*kept).min(offset);
        }
    }
    Ok(merged)
}

/// What one shard reports of its replicated partitions' high watermarks, written to its own
/// file by [`ShardHighWatermarks::checkpoint`] (the replica manager calls it periodically, as
/// Kafka's `replica.high.watermark.checkpoint.interval.ms`). Owned by one shard; not Send.
/// Holds one entry per replicated partition of the shard (bounded as the partitions are).
pub struct ShardHighWatermarks {
    path: PathBuf,
    entries: RefCell<HighWatermarkMap>,
    changed: Cell<bool>,
}

impl ShardHighWatermarks {
    pub fn new(log_dir: &Path, shard: usize) -> Self {
        ShardHighWatermarks {
            path: shard_file(log_dir, shard),
            entries: RefCell::new(HighWatermarkMap::new()),
            changed: Cell::new(false),
        }
    }

    /// Records the high watermark of one of this shard's partitions.
    pub fn report(&self, tp: &TopicPartition, high_watermark: Offset) {
        let previous = self.entries.borrow_mut().insert(tp.clone(), high_watermark);
        self.changed
            .set(self.changed.get() || previous != Some(high_watermark));
    }

    /// Forgets a partition (deleted, or no longer this shard's).
    pub fn remove(&self, tp: &TopicPartition) {
        let removed = self.entries.borrow_mut().remove(tp);
        self.changed.set(self.changed.get() || removed.is_some());
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<Offset> {
        self.entries.borrow().get(tp).copied()
    }

    /// Writes the shard's file when anything changed since the last write; returns whether it
    /// wrote.
    pub async fn checkpoint<S: Storage>(&self, storage: &S) -> io::Result<bool> {
        if !self.changed.get() {
            return Ok(false);
        }
        let bytes = Bytes::from(encode(&self.entries.borrow()));
        self.changed.set(false);
        let written = write_file_atomically(storage, &self.path, bytes).await;
        if written.is_err() {
            self.changed.set(true); // the next checkpoint tries again
        }
        written.map(|()| true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::FaultyStorage;
    use futures::executor::block_on;

    fn map(entries: &[(&str, i32, i64)]) -> HighWatermarkMap {
        entries
            .iter()
            .map(|&(t, p, o)| (TopicPartition::new(t, p), Offset::new(o)))
            .collect()
    }

    #[test]
    fn golden_replication_offset_checkpoint() {
        let entries = map(&[("orders", 1, 877), ("orders", 0, 1200), ("a.b_c-d", 7, 0)]);
        let text = "0\n3\na.b_c-d 7 0\norders 0 1200\norders 1 877\n";
        assert_eq!(encode(&entries), text);
        assert_eq!(decode(text.as_bytes()), Ok(entries));
        assert_eq!(encode(&HighWatermarkMap::new()), "0\n0\n");
    }

    #[test]
    fn damaged_files_are_refused() {
        let bad: &[&[u8]] = &[
            b"",
            b"0\n1\nt 0 5",
            b"1\n1\nt 0 5\n",
            b"0\n2\nt 0 5\n",
            b"0\n1\nt 0\n",
            b"0\n1\nt 0 5 6\n",
            b"0\n1\nt -1 5\n",
            b"0\n1\nt 0 -5\n",
            b"0\n1\nt/x 0 5\n",
            b"0\n1\n 0 5\n",
            b"0\n2\nt 0 5\nt 0 6\n",
        ];
        for bytes in bad {
            assert!(decode(bytes).is_err(), "{:?}", String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn shards_write_their_files_and_an_open_merges_them() {
        block_on(async {
            let storage = FaultyStorage::new(3);
            let dir = PathBuf::from("/data");
            storage.create_dir_all(&dir).await.unwrap();
            let (zero, one) = (
                ShardHighWatermarks::new(&dir, 0),
                ShardHighWatermarks::new(&dir, 1),
            );
            let t = |partition| TopicPartition::new("t", partition);
            zero.report(&t(0), Offset::new(10));
            zero.report(&t(2), Offset::new(30));
            one.report(&t(1), Offset::new(20));
            one.report(&t(2), Offset::new(25)); // stale: the shard count changed
            assert!(zero.checkpoint(&storage).await.unwrap());
            assert!(!zero.checkpoint(&storage).await.unwrap(), "nothing changed");
            assert!(one.checkpoint(&storage).await.unwrap());
            let bytes = storage.file_bytes(&shard_file(&dir, 1)).unwrap();
            assert_eq!(bytes, b"0\n2\nt 1 20\nt 2 25\n");
            let merged = read_log_dir(&storage, &dir).await.unwrap();
            assert_eq!(merged, map(&[("t", 0, 10), ("t", 1, 20), ("t", 2, 25)]));
            storage.set_file_bytes(&shard_file(&dir, 0), b"0\n1\n".to_vec());
            assert!(
                read_log_dir(&storage, &dir).await.is_err(),
                "a damaged file is an error"
            );
        });
    }
}
