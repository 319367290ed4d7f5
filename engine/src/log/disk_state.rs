//! `<dir>/.laminar-log-state`: whether a crash could have left anything torn in the log, and
//! what of its active segment it cannot have touched.
//!
//! Format 4, 36 bytes, overwritten in place (one write, then fdatasync); integers big endian:
//!
//! ```text
//! off len field
//!   0   4 magic "LLST"
//!   4   1 format version (4)
//!   5   1 state: 1 clean, 0 dirty
//!   6   1 flags, clean only: bit 0 "no producer state" (below); other bits zero
//!   7   1 zero
//!   8   8 synced prefix: base offset of the active segment, -1 when none is known
//!  16   8 synced prefix: length of the active segment's `.log` (bytes)
//!  24   4 synced prefix: entries of its offset index
//!  28   4 synced prefix: entries of its time index
//!  32   4 CRC-32 (IEEE, crc32fast) of bytes 0..32
//! ```
//!
//! Formats 3 and 2 have the same layout with byte 6 zero; format 1 (12 bytes: the first 8
//! above with version 1, then the CRC of bytes 0..8) records no prefix. All are still read.
//! Format 4 added the flags; a format-3 reader counts a format-4 file as damaged, which is
//! safe (the log is recovered, and its producer state rebuilt from the log). What changed with format 3 is what
//! a dirty state promises of the segments before the active one: formats 1 and 2 were written
//! by versions that fsynced every segment as it rolled, so only the active one needed recovery.
//! Since format 3 a segment that rolls is fsynced in the background while appends go on into
//! the next (`rolled.rs`), so recovery verifies every segment from the prefix's on (without a
//! prefix: the active one and the one before it).
//!
//! Clean means: every byte of the log is fdatasync'd, its indexes are complete and fdatasync'd,
//! and nothing has been written since. An open then trusts the indexes and reads only the batch
//! headers after the last index entry (decision 0004). The log writes clean once everything is
//! synced again: at a close, or at a checkpoint of a partition that went idle. So after a crash
//! only the logs written since their last checkpoint are recovered, not every log that was open.
//!
//! How a clean state stops being trusted: an append only ever writes past the synced prefix
//! (below), so a clean record whose prefix no longer describes the files (its segment longer,
//! more index entries, or a later segment) was written since, and the open counts it dirty
//! from that prefix, as if the file said so (`Log::written_since_clean`). An append therefore
//! writes nothing here (decision 0022, open on first use and the log state file). Every other writer (a
//! removal of segments,
//! a compaction, a truncation, a new start) may leave the files as long as the prefix says,
//! so it writes dirty, durably, before its first write; so does an append when the clean
//! record has no prefix (format 1).
//!
//! The synced prefix is the active segment as the last clean state left it: that many bytes of
//! its `.log` and entries of its indexes were fdatasync'd then, and appends only write past
//! them (a truncation below them first writes the state again without a prefix). A dirty log
//! whose active segment is still that one is recovered from there: the prefix is trusted, only
//! the bytes after it are verified. Recovery is then proportional to what was written since the
//! last checkpoint, not to the segment.
//!
//! "No producer state" says the partition that owns the log had no idempotent producer's
//! state at this clean point (`partition/producer_snapshot.rs`): an open that finds the log
//! still clean starts from an empty table at the log end, where otherwise it lists the
//! producer snapshots and replays the log after the newest (the whole log when there is none,
//! as for a short log, which gets none: decision 0022, open on first use and the log state file).
//!
//! Anything else read from the file (a wrong length, magic, version, state byte, non-zero
//! padding or CRC: a torn write) counts as dirty without a prefix, which is always safe: the
//! whole active segment is verified. A log without the file is dirty too.

use crate::io::{Storage, StorageFile};
use std::io;
use std::path::Path;

pub const STATE_FILE: &str = ".laminar-log-state";

const MAGIC: &[u8; 4] = b"LLST";
const FORMAT_VERSION: u8 = 4;
/// Same layout as format 4 without the flags (byte 6 zero).
const FORMAT_3: u8 = 3;
/// Same layout as format 3, but every segment before the active one was synced as it rolled.
const FORMAT_2: u8 = 2;
/// Flag of byte 6: no producer state at this clean point (see the module docs).
const FLAG_NO_PRODUCER_STATE: u8 = 1;
pub const STATE_LEN: usize = 36;
const FORMAT_1_LEN: usize = 12;

/// What the state file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskState {
    Clean,
    Dirty,
}

/// What of the active segment the last clean state had synced (see the module docs). Plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncedPrefix {
    pub base_offset: i64,
    pub log_len: u64,
    pub offset_entries: u32,
    pub time_entries: u32,
}

/// The state file's content.
impl SyncedPrefix {
    /// Nothing of the segment at `base_offset` trusted, but every segment before it synced.
    pub fn start_of(base_offset: i64) -> SyncedPrefix {
        SyncedPrefix {
            base_offset,
            log_len: 0,
            offset_entries: 0,
            time_entries: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateRecord {
    pub state: DiskState,
    pub synced: Option<SyncedPrefix>,
    /// Read from format 1 or 2: every segment before the active one was synced as it rolled.
    /// Never written (the log writes format 4).
    pub rolled_synced: bool,
    /// Clean only: the log's owner had no producer state at this point (module docs).
    pub no_producer_state: bool,
}

impl StateRecord {
    pub const DIRTY: StateRecord = StateRecord {
        state: DiskState::Dirty,
        synced: None,
        rolled_synced: false,
        no_producer_state: false,
    };

    /// A record this version writes, without flags.
    pub fn new(state: DiskState, synced: Option<SyncedPrefix>) -> StateRecord {
        StateRecord {
            state,
            synced,
            rolled_synced: false,
            no_producer_state: false,
        }
    }

    /// A clean record whose owner had no producer state at this point.
    pub fn clean_without_producer_state(synced: SyncedPrefix) -> StateRecord {
        StateRecord {
            no_producer_state: true,
            ..StateRecord::new(DiskState::Clean, Some(synced))
        }
    }
}

pub fn encode(record: StateRecord) -> [u8; STATE_LEN] {
    let mut out = [0u8; STATE_LEN];
    out[..4].copy_from_slice(MAGIC);
    out[4] = FORMAT_VERSION;
    let clean = record.state == DiskState::Clean;
    out[5] = u8::from(clean);
    assert!(
        clean || !record.no_producer_state,
        "the flags describe a clean point"
    );
    out[6] = if record.no_producer_state {
        FLAG_NO_PRODUCER_STATE
    } else {
        0
    };
    let prefix = record.synced.unwrap_or(SyncedPrefix {
        base_offset: -1,
        log_len: 0,
        offset_entries: 0,
        time_entries: 0,
    });
    out[8..16].copy_from_slice(&prefix.base_offset.to_be_bytes());
    out[16..24].copy_from_slice(&prefix.log_len.to_be_bytes());
    out[24..28].copy_from_slice(&prefix.offset_entries.to_be_bytes());
    out[28..32].copy_from_slice(&prefix.time_entries.to_be_bytes());
    let crc = crc32fast::hash(&out[..32]);
    out[32..].copy_from_slice(&crc.to_be_bytes());
    out
}

/// The record `bytes` hold; `None` when they are not a whole, valid state file.
pub fn decode(bytes: &[u8]) -> Option<StateRecord> {
    let (versions, covered) = match bytes.len() {
        STATE_LEN => (&[FORMAT_2, FORMAT_3, FORMAT_VERSION][..], 32),
        FORMAT_1_LEN => (&[1][..], 8),
        _ => return None,
    };
    let version = bytes[4];
    let crc = u32::from_be_bytes(bytes[covered..].try_into().ok()?);
    let flags_known = if version == FORMAT_VERSION {
        FLAG_NO_PRODUCER_STATE
    } else {
        0
    };
    let valid = &bytes[..4] == MAGIC
        && versions.contains(&version)
        && bytes[6] & !flags_known == 0
        && bytes[7] == 0
        && crc32fast::hash(&bytes[..covered]) == crc;
    let state = match (valid, bytes[5]) {
        (true, 1) => DiskState::Clean,
        (true, 0) => DiskState::Dirty,
        _ => return None,
    };
    let no_producer_state = bytes[6] & FLAG_NO_PRODUCER_STATE != 0;
    if no_producer_state && state == DiskState::Dirty {
        return None;
    }
    let synced = (version != 1)
        .then(|| SyncedPrefix {
            base_offset: i64::from_be_bytes(bytes[8..16].try_into().expect("8 bytes")),
            log_len: u64::from_be_bytes(bytes[16..24].try_into().expect("8 bytes")),
            offset_entries: u32::from_be_bytes(bytes[24..28].try_into().expect("4 bytes")),
            time_entries: u32::from_be_bytes(bytes[28..32].try_into().expect("4 bytes")),
        })
        .filter(|p| p.base_offset >= 0);
    Some(StateRecord {
        state,
        synced,
        rolled_synced: version < FORMAT_3,
        no_producer_state,
    })
}

/// The record of the log in `dir`, whose entries are `names`: clean only when the state file
/// says so.
pub async fn read<S: Storage>(storage: &S, dir: &Path, names: &[String]) -> io::Result<StateRecord> {
    if !names.iter().any(|n| n == STATE_FILE) {
        // Without the file (a new log before its first checkpoint) nothing is promised.
        return Ok(StateRecord::DIRTY);
    }
    let path = dir.join(STATE_FILE);
    let file = storage.open(&path, false).await?;
    let bytes = file.read_at(0, STATE_LEN + 1).await;
    file.close().await?;
    Ok(decode(&bytes?).unwrap_or_else(|| {
        tracing::warn!(path = %path.display(), "damaged log state file: the log is recovered");
        StateRecord::DIRTY
    }))
}

/// Writes `record` to the state file of the log in `dir` and fdatasyncs it; creates the file
/// if `exists` is false (the caller then fsyncs the directory).
pub async fn write<S: Storage>(storage: &S, dir: &Path, record: StateRecord, exists: bool) -> io::Result<()> {
    let file = storage.open(&dir.join(STATE_FILE), !exists).await?;
    let written = async {
        file.write_at(0, &[&encode(record)]).await?;
        file.fdatasync().await
    }
    .await;
    let closed = file.close().await;
    written.and(closed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: SyncedPrefix = SyncedPrefix {
        base_offset: 0x0102,
        log_len: 0x0A0B_0C0D,
        offset_entries: 7,
        time_entries: 3,
    };

    #[test]
    fn golden_state_file() {
        let clean = encode(StateRecord::new(DiskState::Clean, Some(PREFIX)));
        assert_eq!(
            clean[..32],
            [
                b'L', b'L', b'S', b'T', 4, 1, 0, 0, // magic, version, clean, no flags, zero
                0, 0, 0, 0, 0, 0, 0x01, 0x02, // active segment base offset
                0, 0, 0, 0, 0x0A, 0x0B, 0x0C, 0x0D, // synced .log length
                0, 0, 0, 7, // offset index entries
                0, 0, 0, 3, // time index entries
            ]
        );
        assert_eq!(&clean[32..], &crc32fast::hash(&clean[..32]).to_be_bytes());
        let dirty = encode(StateRecord::DIRTY);
        assert_eq!(
            &dirty[..16],
            b"LLST\x04\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"
        );
        assert_eq!(decode(&clean).and_then(|r| r.synced), Some(PREFIX));
        assert_eq!(decode(&dirty), Some(StateRecord::DIRTY));
        let without = encode(StateRecord::clean_without_producer_state(PREFIX));
        assert_eq!(without[..8], *b"LLST\x04\x01\x01\x00", "flag bit 0 of byte 6");
        assert_eq!(without[8..32], clean[8..32]);
        let read = decode(&without).expect("valid");
        assert!(read.no_producer_state && read.state == DiskState::Clean);
        assert!(!decode(&clean).expect("valid").no_producer_state);
    }

    fn with_crc(mut bytes: [u8; STATE_LEN]) -> [u8; STATE_LEN] {
        let crc = crc32fast::hash(&bytes[..32]);
        bytes[32..].copy_from_slice(&crc.to_be_bytes());
        bytes
    }

    #[test]
    fn the_producer_flag_is_refused_where_it_cannot_be() {
        let mut dirty = encode(StateRecord::DIRTY);
        dirty[6] = 1;
        assert_eq!(decode(&with_crc(dirty)), None, "on a dirty state");
        let mut v3 = encode(StateRecord::clean_without_producer_state(PREFIX));
        v3[4] = 3;
        assert_eq!(decode(&with_crc(v3)), None, "in format 3");
        v3[6] = 0;
        let read = decode(&with_crc(v3)).expect("format 3 without flags");
        assert_eq!(
            (read.state, read.no_producer_state, read.rolled_synced),
            (DiskState::Clean, false, false)
        );
        let mut unknown = encode(StateRecord::clean_without_producer_state(PREFIX));
        unknown[6] = 3;
        assert_eq!(decode(&with_crc(unknown)), None, "an unknown flag");
    }

    #[test]
    fn format_2_is_read_as_every_rolled_segment_synced() {
        let mut v2 = encode(StateRecord::new(DiskState::Dirty, Some(PREFIX)));
        v2[4] = 2;
        let record = decode(&with_crc(v2)).expect("valid");
        assert_eq!((record.synced, record.rolled_synced), (Some(PREFIX), true));
        let current = decode(&encode(StateRecord::new(DiskState::Dirty, Some(PREFIX)))).expect("valid");
        assert!(
            !current.rolled_synced,
            "format 4 promises nothing of rolled segments"
        );
    }

    #[test]
    fn format_1_is_read_without_a_prefix() {
        let mut v1 = *b"LLST\x01\x01\x00\x00\x00\x00\x00\x00";
        let crc = crc32fast::hash(&v1[..8]);
        v1[8..].copy_from_slice(&crc.to_be_bytes());
        let record = decode(&v1).expect("valid");
        assert_eq!((record.state, record.synced), (DiskState::Clean, None));
        assert!(record.rolled_synced);
    }

    #[test]
    fn anything_but_a_whole_valid_file_is_refused() {
        let clean = encode(StateRecord::new(DiskState::Clean, Some(PREFIX)));
        assert_eq!(decode(&clean[..35]), None, "short");
        assert_eq!(decode(&[&clean[..], &[0]].concat()), None, "long");
        for at in 0..STATE_LEN {
            let mut torn = clean;
            torn[at] ^= 0x40;
            assert_eq!(decode(&torn), None, "byte {at} changed");
        }
        let mut other_state = clean;
        other_state[5] = 2;
        assert_eq!(decode(&with_crc(other_state)), None, "an unknown state");
    }
}
