//! `<dir>/.laminar-log-state`: whether a crash could have left anything torn in the log, and
//! what of its active segment it cannot have touched.
//!
//! Format 3, 36 bytes, overwritten in place (one write, then fdatasync); integers big endian:
//!
//! ```text
//! off len field
//!   0   4 magic "LLST"
//!   4   1 format version (3)
//!   5   1 state: 1 clean, 0 dirty
//!   6   2 zero
//!   8   8 synced prefix: base offset of the active segment, -1 when none is known
//!  16   8 synced prefix: length of the active segment's `.log` (bytes)
//!  24   4 synced prefix: entries of its offset index
//!  28   4 synced prefix: entries of its time index
//!  32   4 CRC-32 (IEEE, crc32fast) of bytes 0..32
//! ```
//!
//! Format 2 has the same layout; format 1 (12 bytes: the first 8 above with version 1, then the
//! CRC of bytes 0..8) records no prefix. Both are still read. What changed with format 3 is what
//! a dirty state promises of the segments before the active one: formats 1 and 2 were written
//! by versions that fsynced every segment as it rolled, so only the active one needed recovery.
//! Since format 3 a segment that rolls is fsynced in the background while appends go on into
//! the next (`rolled.rs`), so recovery verifies every segment from the prefix's on (without a
//! prefix: the active one and the one before it).
//!
//! Clean means: every byte of the log is fdatasync'd, its indexes are complete and fdatasync'd,
//! and nothing has been written since. An open then trusts the indexes and reads only the batch
//! headers after the last index entry (decision 0004). The log writes dirty, durably, before
//! its first write of any kind after a clean open, and clean once everything is synced again:
//! at a close, or at a checkpoint of a partition that went idle. So after a crash only the logs
//! written since their last checkpoint are recovered, not every log that was open.
//!
//! The synced prefix is the active segment as the last clean state left it: that many bytes of
//! its `.log` and entries of its indexes were fdatasync'd then, and appends only write past
//! them (a truncation below them first writes the state again without a prefix). A dirty log
//! whose active segment is still that one is recovered from there: the prefix is trusted, only
//! the bytes after it are verified. Recovery is then proportional to what was written since the
//! last checkpoint, not to the segment.
//!
//! Anything else read from the file (a wrong length, magic, version, state byte, non-zero
//! padding or CRC: a torn write) counts as dirty without a prefix, which is always safe: the
//! whole active segment is verified. A log without the file is dirty too, unless it holds the
//! marker file earlier versions left at a clean close (`.laminar-clean-shutdown`, empty), which
//! counts as clean until the first write removes it.

use crate::io::{Storage, StorageFile};
use std::io;
use std::path::Path;

pub const STATE_FILE: &str = ".laminar-log-state";
/// The empty marker of a clean close that earlier versions left instead of the state file.
pub const LEGACY_CLEAN_MARKER: &str = ".laminar-clean-shutdown";

const MAGIC: &[u8; 4] = b"LLST";
const FORMAT_VERSION: u8 = 3;
/// Same layout as format 3, but every segment before the active one was synced as it rolled.
const FORMAT_2: u8 = 2;
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
    /// Never written (the log writes format 3).
    pub rolled_synced: bool,
}

impl StateRecord {
    pub const DIRTY: StateRecord = StateRecord {
        state: DiskState::Dirty,
        synced: None,
        rolled_synced: false,
    };

    /// A record this version writes.
    pub fn new(state: DiskState, synced: Option<SyncedPrefix>) -> StateRecord {
        StateRecord {
            state,
            synced,
            rolled_synced: false,
        }
    }
}

pub fn encode(record: StateRecord) -> [u8; STATE_LEN] {
    let mut out = [0u8; STATE_LEN];
    out[..4].copy_from_slice(MAGIC);
    out[4] = FORMAT_VERSION;
    out[5] = u8::from(record.state == DiskState::Clean);
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
        STATE_LEN => ([FORMAT_2, FORMAT_VERSION], 32),
        FORMAT_1_LEN => ([1, 1], 8),
        _ => return None,
    };
    let version = bytes[4];
    let crc = u32::from_be_bytes(bytes[covered..].try_into().ok()?);
    let valid = &bytes[..4] == MAGIC
        && versions.contains(&version)
        && bytes[6..8] == [0, 0]
        && crc32fast::hash(&bytes[..covered]) == crc;
    let state = match (valid, bytes[5]) {
        (true, 1) => DiskState::Clean,
        (true, 0) => DiskState::Dirty,
        _ => return None,
    };
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
        rolled_synced: version < FORMAT_VERSION,
    })
}

/// The record of the log in `dir`, whose entries are `names`: clean only when the state file
/// says so, or (without one) when the legacy marker is there.
pub async fn read<S: Storage>(storage: &S, dir: &Path, names: &[String]) -> io::Result<StateRecord> {
    if !names.iter().any(|n| n == STATE_FILE) {
        let legacy = names.iter().any(|n| n == LEGACY_CLEAN_MARKER);
        let state = if legacy {
            DiskState::Clean
        } else {
            DiskState::Dirty
        };
        // Without the file (a new log before its first checkpoint) nothing is promised.
        return Ok(StateRecord::new(state, None));
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
                b'L', b'L', b'S', b'T', 3, 1, 0, 0, // magic, version, clean, zero
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
            b"LLST\x03\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"
        );
        assert_eq!(decode(&clean).and_then(|r| r.synced), Some(PREFIX));
        assert_eq!(decode(&dirty), Some(StateRecord::DIRTY));
    }

    #[test]
    fn format_2_is_read_as_every_rolled_segment_synced() {
        let mut v2 = encode(StateRecord::new(DiskState::Dirty, Some(PREFIX)));
        v2[4] = 2;
        let crc = crc32fast::hash(&v2[..32]);
        v2[32..].copy_from_slice(&crc.to_be_bytes());
        let record = decode(&v2).expect("valid");
        assert_eq!((record.synced, record.rolled_synced), (Some(PREFIX), true));
        let v3 = decode(&encode(StateRecord::new(DiskState::Dirty, Some(PREFIX)))).expect("valid");
        assert!(!v3.rolled_synced, "format 3 promises nothing of rolled segments");
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
        let crc = crc32fast::hash(&other_state[..32]);
        other_state[32..].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(decode(&other_state), None, "an unknown state");
    }
}
