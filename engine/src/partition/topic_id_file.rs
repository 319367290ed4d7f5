//! `partition.metadata`, Kafka's record of which topic a partition directory belongs to:
//!
//! ```text
//! version: 0
//! topic_id: <the topic's 16-byte id, URL-safe base64 without padding (22 characters)>
//! ```
//!
//! Directories are named by topic *name*, so a partition directory that outlived its topic (the
//! broker stopped between writing its topic table and removing the directory, or was down
//! while the cluster deleted the topic) would otherwise be opened by a new topic of the same
//! name, old records and all. A partition opened for a topic reads this file first: another
//! topic's id means the directory is that deleted topic's, and it is removed durably before
//! the partition opens (`ShardPartitions::open_now`).
//!
//! Written when missing at the partition's next checkpoint (a close's included), not on its
//! first write's path (decision 0023, partition files made at first write): created in place and written,
//! with no
//! fdatasync of its own. Its entry and bytes reach the disk with the directory fsync that the
//! checkpoint's creation of the state file makes (or the log's next durable point) and the
//! kernel's writeback; a power cut before then leaves it missing, empty or torn. A file that
//! does not parse is unknown, as a missing one is, and written again. No temporary file and
//! rename either: the shard's file cache pays for each rename with a walk of its open files,
//! which at 100 000 partitions checkpointing at once cost minutes of CPU (decision 0020).
//!
//! A partition deleted before its first checkpoint and left behind by a crash has no file, and
//! is taken as the new topic's (as are directories written before the file existed): a narrow
//! gap, since the checkpoint follows the first write's pause by `CHECKPOINT_IDLE_MS`.

use std::io;
use std::path::Path;

use base64::Engine as _;
use bytes::Bytes;

use super::checkpoint_file;
use crate::io::{Storage, StorageFile};

pub const TOPIC_ID_FILE: &str = "partition.metadata";

/// Enough for the two lines with room to spare; a larger file is not one of ours.
const MAX_FILE_BYTES: usize = 256;

/// What a partition directory records of its topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordedTopic {
    /// No file (a new partition, or one written before the file existed).
    Absent,
    /// The file does not parse (a power cut tore it): unknown.
    Unreadable,
    /// The topic with this id.
    Id([u8; 16]),
}

/// The file's text for `topic_id`.
pub fn encode(topic_id: [u8; 16]) -> String {
    let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(topic_id);
    format!("version: 0\ntopic_id: {id}\n")
}

/// The topic id `bytes` record, if they are a version-0 file.
pub fn decode(bytes: &[u8]) -> Option<[u8; 16]> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    if lines.next()?.trim() != "version: 0" {
        return None;
    }
    let id = lines.next()?.strip_prefix("topic_id:")?.trim();
    if id.len() != 22 {
        return None;
    }
    let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(id).ok()?;
    decoded.try_into().ok()
}

/// What the directory `dir` records of its topic.
pub async fn read<S: Storage>(storage: &S, dir: &Path) -> io::Result<RecordedTopic> {
    let path = dir.join(TOPIC_ID_FILE);
    match checkpoint_file::read(storage, &path, MAX_FILE_BYTES).await {
        Ok(None) => Ok(RecordedTopic::Absent),
        Ok(Some(bytes)) => Ok(decode(&bytes).map_or(RecordedTopic::Unreadable, RecordedTopic::Id)),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => Ok(RecordedTopic::Unreadable),
        Err(e) => Err(e),
    }
}

/// Writes the file for `topic_id` in `dir`, in place and unsynced (see the module's comment).
/// Only a missing or unreadable file is written, so a write cut short loses nothing known.
pub async fn write<S: Storage>(storage: &S, dir: &Path, topic_id: [u8; 16]) -> io::Result<()> {
    let text = Bytes::from(encode(topic_id));
    let file = storage.open(&dir.join(TOPIC_ID_FILE), true).await?;
    let written = async {
        file.truncate(0).await?;
        file.write_at(0, &[&text]).await
    }
    .await;
    let closed = file.close().await;
    written.and(closed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: [u8; 16] = [
        0x8d, 0x3c, 0x2a, 0x1f, 0x00, 0xff, 0x7e, 0x10, 0x42, 0x99, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45,
    ];

    #[test]
    fn golden_bytes_round_trip() {
        let text = encode(ID);
        assert_eq!(text, "version: 0\ntopic_id: jTwqHwD_fhBCmavN7wEjRQ\n");
        assert_eq!(decode(text.as_bytes()), Some(ID));
        // Kafka's own writer, should it end lines otherwise or space them so.
        assert_eq!(decode(b"version: 0\r\ntopic_id:jTwqHwD_fhBCmavN7wEjRQ"), Some(ID));
    }

    #[test]
    fn what_is_not_a_version_0_file_is_unknown() {
        for bad in [
            &b""[..],
            b"version: 0\n",
            b"version: 1\ntopic_id: jTwqHwD_fhBCmavN7wEjRQ\n",
            b"version: 0\ntopic_id: jTwqHwD_fhBCmavN7wEjR\n",
            b"version: 0\ntopic_id: jTwqHwD_fhBCmavN7wEj==\n",
            b"version: 0\ntopic: jTwqHwD_fhBCmavN7wEjRQ\n",
            b"\xff\xfe",
        ] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }
}
