//! `<dir>/.laminar-log-state`: whether a crash could have left anything torn in the log.
//!
//! Format, 12 bytes, overwritten in place (one write, then fdatasync):
//!
//! ```text
//! off len field
//!   0   4 magic "LLST"
//!   4   1 format version (1)
//!   5   1 state: 1 clean, 0 dirty
//!   6   2 zero
//!   8   4 CRC-32 (IEEE, crc32fast) of bytes 0..8
//! ```
//!
//! Clean means: every byte of the log is fdatasync'd, its indexes are complete and fdatasync'd,
//! and nothing has been written since. An open then trusts the indexes and reads only the batch
//! headers after the last index entry (decision 0004). The log writes dirty, durably, before
//! its first write of any kind after a clean open, and clean once everything is synced again:
//! at a close, or at a checkpoint of a partition that went idle. So after a crash only the logs
//! written since their last checkpoint are recovered, not every log that was open.
//!
//! Anything else read from the file (a wrong length, magic, version, state byte, non-zero
//! padding or CRC: a torn write) counts as dirty, which is always safe: the log is recovered.
//! A log without the file is dirty too, unless it holds the marker file earlier versions left
//! at a clean close (`.laminar-clean-shutdown`, empty), which counts as clean until the first
//! write removes it.

use crate::io::{Storage, StorageFile};
use std::io;
use std::path::Path;

pub const STATE_FILE: &str = ".laminar-log-state";
/// The empty marker of a clean close that earlier versions left instead of the state file.
pub const LEGACY_CLEAN_MARKER: &str = ".laminar-clean-shutdown";

const MAGIC: &[u8; 4] = b"LLST";
const FORMAT_VERSION: u8 = 1;
pub const STATE_LEN: usize = 12;

/// What the state file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskState {
    Clean,
    Dirty,
}

pub fn encode(state: DiskState) -> [u8; STATE_LEN] {
    let mut out = [0u8; STATE_LEN];
    out[..4].copy_from_slice(MAGIC);
    out[4] = FORMAT_VERSION;
    out[5] = u8::from(state == DiskState::Clean);
    let crc = crc32fast::hash(&out[..8]);
    out[8..].copy_from_slice(&crc.to_be_bytes());
    out
}

/// The state `bytes` hold; `None` when they are not a whole, valid state file.
pub fn decode(bytes: &[u8]) -> Option<DiskState> {
    let bytes: &[u8; STATE_LEN] = bytes.try_into().ok()?;
    let crc = u32::from_be_bytes(bytes[8..].try_into().expect("4 bytes"));
    let valid = &bytes[..4] == MAGIC
        && bytes[4] == FORMAT_VERSION
        && bytes[6..8] == [0, 0]
        && crc32fast::hash(&bytes[..8]) == crc;
    match (valid, bytes[5]) {
        (true, 1) => Some(DiskState::Clean),
        (true, 0) => Some(DiskState::Dirty),
        _ => None,
    }
}

/// The state of the log in `dir`, whose entries are `names`: clean only when the state file
/// says so, or (without one) when the legacy marker is there.
pub async fn read<S: Storage>(storage: &S, dir: &Path, names: &[String]) -> io::Result<DiskState> {
    if !names.iter().any(|n| n == STATE_FILE) {
        let legacy = names.iter().any(|n| n == LEGACY_CLEAN_MARKER);
        return Ok(if legacy {
            DiskState::Clean
        } else {
            DiskState::Dirty
        });
    }
    let path = dir.join(STATE_FILE);
    let file = storage.open(&path, false).await?;
    let bytes = file.read_at(0, STATE_LEN + 1).await;
    file.close().await?;
    Ok(decode(&bytes?).unwrap_or_else(|| {
        tracing::warn!(path = %path.display(), "damaged log state file: the log is recovered");
        DiskState::Dirty
    }))
}

/// Writes `state` to the state file of the log in `dir` and fdatasyncs it; creates the file if
/// `exists` is false (the caller then fsyncs the directory).
pub async fn write<S: Storage>(storage: &S, dir: &Path, state: DiskState, exists: bool) -> io::Result<()> {
    let file = storage.open(&dir.join(STATE_FILE), !exists).await?;
    let written = async {
        file.write_at(0, &[&encode(state)]).await?;
        file.fdatasync().await
    }
    .await;
    let closed = file.close().await;
    written.and(closed)
}

/// Creates the state file of a new log, dirty, without an fdatasync of its own: the caller
/// fsyncs the directory. A lost or short write reads as dirty, which it is.
pub async fn create_dirty<S: Storage>(storage: &S, dir: &Path) -> io::Result<()> {
    let file = storage.open(&dir.join(STATE_FILE), true).await?;
    let written = file.write_at(0, &[&encode(DiskState::Dirty)]).await;
    let closed = file.close().await;
    written.and(closed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_state_file() {
        let clean = encode(DiskState::Clean);
        assert_eq!(&clean[..8], b"LLST\x01\x01\x00\x00");
        assert_eq!(&clean[8..], &crc32fast::hash(&clean[..8]).to_be_bytes());
        let dirty = encode(DiskState::Dirty);
        assert_eq!(&dirty[..8], b"LLST\x01\x00\x00\x00");
        assert_eq!(decode(&clean), Some(DiskState::Clean));
        assert_eq!(decode(&dirty), Some(DiskState::Dirty));
    }

    #[test]
    fn anything_but_a_whole_valid_file_is_refused() {
        let clean = encode(DiskState::Clean);
        assert_eq!(decode(&clean[..11]), None, "short");
        assert_eq!(decode(&[&clean[..], &[0]].concat()), None, "long");
        for at in 0..STATE_LEN {
            let mut torn = clean;
            torn[at] ^= 0x40;
            assert_eq!(decode(&torn), None, "byte {at} changed");
        }
        let mut other_state = clean;
        other_state[5] = 2;
        let crc = crc32fast::hash(&other_state[..8]);
        other_state[8..].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(decode(&other_state), None, "an unknown state");
    }
}
