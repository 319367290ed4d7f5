//! The bytes of the controller's metadata directory, and how they are read back safely.
//!
//! The broker passes `<first log dir>/__cluster_metadata-0/`; this module owns three files in
//! it. All integers are little-endian.
//!
//! * **Envelope** (used by `raft-state`, `snapshot` and the header of `raft-log`):
//!   `magic: [u8; 8] | format: u32 | body_len: u64 | body_crc32c: u32 | body: [u8; body_len]`.
//!   `body_len` is bounded per file before anything is allocated; a CRC mismatch, a short file
//!   or an unknown format makes the file unreadable (an error, never a panic).
//! * **`raft-state`** (magic `LMNVOTE1`): body = bincode of [`RaftStateFile`] (the vote and the
//!   committed log id). Replaced atomically: written to `raft-state.tmp`, fsync'd, renamed,
//!   directory fsync'd.
//! * **`snapshot`** (magic `LMNSNAP1`): body = bincode of `(SnapshotMeta, state bytes)` where the
//!   state bytes are `ClusterMetadata` in the format of `snapshot_format.rs` (a tag, then
//!   bincode; snapshots written before the tag still decode). Replaced atomically the same way.
//! * **`raft-log`**: an envelope (magic `LMNRLOG1`) whose body is bincode of
//!   `Option<LogId>` — the last purged log id — followed by entry frames:
//!   `payload_len: u32 | payload_crc32c: u32 | payload: [u8; payload_len]`, payload = bincode
//!   (1.x default options: fixed-width little-endian integers, u64 lengths, u32 enum tags) of
//!   `openraft::Entry<TypeConfig>`: log id (term: u64, node id: u64, index: u64) then the
//!   payload enum (0 blank, 1 normal `RecordBatch`, 2 membership). Entries are appended and
//!   fsync'd before openraft hears they are durable. A purge rewrites the file (header with
//!   the new purged id, then the entries kept) to `raft-log.tmp` and renames it over, so the
//!   purged id and the kept entries change together. At open, frames are read until the first
//!   one that is short, longer than [`ENTRY_PAYLOAD_LEN_MAX`], fails its CRC, does not decode
//!   or does not follow the previous index: the file is truncated there (a torn tail after a
//!   crash), and the open carries on.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::TypeConfig;

pub const LOG_FILE: &str = "raft-log";
pub const STATE_FILE: &str = "raft-state";
pub const SNAPSHOT_FILE: &str = "snapshot";
pub const LOG_MAGIC: [u8; 8] = *b"LMNRLOG1";
pub const STATE_MAGIC: [u8; 8] = *b"LMNVOTE1";
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"LMNSNAP1";
pub const FORMAT_VERSION: u32 = 1;
const ENVELOPE_HEADER_LEN: usize = 8 + 4 + 8 + 4;
const ENTRY_HEADER_LEN: usize = 8;
/// One entry's bincode: the largest controller decision (a CreateTopics of
/// `decide::PARTITIONS_PER_REQUEST_MAX` partitions, about 1 MiB) with room to spare.
pub const ENTRY_PAYLOAD_LEN_MAX: usize = 2 << 20;
/// A snapshot body: the whole ClusterMetadata. 256 MiB is millions of partitions.
pub const SNAPSHOT_LEN_MAX: u64 = 256 << 20;
/// The small files: a vote, a committed id, a purged id.
pub const SMALL_BODY_LEN_MAX: u64 = 4096;

pub type Entry = openraft::Entry<TypeConfig>;
pub type LogId = openraft::LogId<u64>;

/// The body of `raft-state`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaftStateFile {
    pub vote: Option<openraft::Vote<u64>>,
    pub committed: Option<LogId>,
}

/// Why bytes are not a valid envelope, entry frame or body; the file's reader decides what
/// that means (an error, or the torn tail of the log).
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("{part} cut short")]
    Truncated { part: &'static str },
    #[error("wrong magic {}, expected {}", found.escape_ascii(), expected.escape_ascii())]
    BadMagic { expected: [u8; 8], found: [u8; 8] },
    #[error("unknown format {0}")]
    UnknownFormat(u32),
    #[error("{part} of {len} bytes is over the bound {max}")]
    TooLong { part: &'static str, len: u64, max: u64 },
    #[error("{part} CRC mismatch: {found:#010x} stored, {expected:#010x} computed")]
    ChecksumMismatch {
        part: &'static str,
        expected: u32,
        found: u32,
    },
    #[error("does not decode: {0}")]
    Decode(bincode::Error),
    #[error("does not encode: {0}")]
    Encode(bincode::Error),
}

#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: {source}")]
    Corrupt { path: String, source: FormatError },
    /// A file written in place of another that did not read back as it should; the old one
    /// stays.
    #[error("{path}: written but does not read back: {source}")]
    NotReadBack { path: String, source: Box<DiskError> },
}

impl DiskError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        DiskError::Io {
            path: path.display().to_string(),
            source,
        }
    }
    pub fn corrupt(path: &Path, source: FormatError) -> Self {
        DiskError::Corrupt {
            path: path.display().to_string(),
            source,
        }
    }
}

impl DiskError {
    /// Whether the write failed only because the disk (or the user's quota) is full: space may
    /// come back, and the same write then succeeds.
    pub fn is_disk_full(&self) -> bool {
        match self {
            DiskError::Io { source, .. } => {
                source.kind() == std::io::ErrorKind::StorageFull
                    || source.kind() == std::io::ErrorKind::QuotaExceeded
            }
            DiskError::NotReadBack { source, .. } => source.is_disk_full(),
            DiskError::Corrupt { .. } => false,
        }
    }
}

/// How long a write that found the disk full waits before it tries again.
const DISK_FULL_RETRY: std::time::Duration = std::time::Duration::from_millis(200);
/// How often a write still waiting for space says so.
const DISK_FULL_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs `write` until it succeeds or fails other than for a full disk. openraft treats every
/// storage error as fatal and stops the node's Raft core for good; a full disk is not fatal
/// (an operator or retention frees space), so the write waits for space instead, and this
/// voter stalls meanwhile as a paused one would: the quorum goes on without it, and it catches
/// up once space comes back. `write` must be idempotent: each try writes from the same place.
pub async fn retry_while_disk_full<T>(
    what: &str,
    mut write: impl FnMut() -> Result<T, DiskError>,
) -> Result<T, DiskError> {
    let mut logged: Option<std::time::Instant> = None;
    loop {
        match write() {
            Err(error) if error.is_disk_full() => {
                if logged.is_none_or(|at| at.elapsed() >= DISK_FULL_LOG_EVERY) {
                    tracing::warn!(%error, what, "controller: metadata disk full; waiting for space");
                    logged = Some(std::time::Instant::now());
                }
                tokio::time::sleep(DISK_FULL_RETRY).await;
            }
            done => {
                if logged.is_some() && done.is_ok() {
                    tracing::info!(what, "controller: metadata disk has space again");
                }
                return done;
            }
        }
    }
}

impl From<DiskError> for std::io::Error {
    fn from(e: DiskError) -> Self {
        match e {
            DiskError::Io { source, .. } => source,
            other => std::io::Error::new(std::io::ErrorKind::InvalidData, other.to_string()),
        }
    }
}

pub fn encode_envelope(magic: [u8; 8], body: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(ENVELOPE_HEADER_LEN + body.len());
    bytes.extend_from_slice(&magic);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&(body.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
    bytes.extend_from_slice(body);
    bytes
}

/// The first `N` bytes of `bytes` as an array, and the rest.
fn split_field<'a, const N: usize>(
    bytes: &'a [u8],
    part: &'static str,
) -> Result<([u8; N], &'a [u8]), FormatError> {
    let (field, rest) = bytes
        .split_first_chunk::<N>()
        .ok_or(FormatError::Truncated { part })?;
    Ok((*field, rest))
}

fn check_crc(part: &'static str, bytes: &[u8], found: [u8; 4]) -> Result<(), FormatError> {
    let expected = crc32c::crc32c(bytes);
    let found = u32::from_le_bytes(found);
    if expected != found {
        return Err(FormatError::ChecksumMismatch {
            part,
            expected,
            found,
        });
    }
    Ok(())
}

/// Decodes an envelope at the start of `bytes`: its body and the envelope's total length.
pub fn decode_envelope(
    bytes: &[u8],
    magic: [u8; 8],
    body_len_max: u64,
) -> Result<(&[u8], usize), FormatError> {
    let (found_magic, rest) = split_field::<8>(bytes, "header")?;
    let (format, rest) = split_field::<4>(rest, "header")?;
    let (body_len, rest) = split_field::<8>(rest, "header")?;
    let (crc, rest) = split_field::<4>(rest, "header")?;
    if found_magic != magic {
        return Err(FormatError::BadMagic {
            expected: magic,
            found: found_magic,
        });
    }
    let format = u32::from_le_bytes(format);
    if format != FORMAT_VERSION {
        return Err(FormatError::UnknownFormat(format));
    }
    let body_len = u64::from_le_bytes(body_len);
    let len = usize::try_from(body_len)
        .ok()
        .filter(|_| body_len <= body_len_max)
        .ok_or(FormatError::TooLong {
            part: "body",
            len: body_len,
            max: body_len_max,
        })?;
    let body = rest.get(..len).ok_or(FormatError::Truncated { part: "body" })?;
    check_crc("body", body, crc)?;
    Ok((body, ENVELOPE_HEADER_LEN + len))
}

/// Writes `bytes` as `dir/name` so that a crash leaves the old or the new file: a temporary
/// file, fsync, rename, fsync of the directory.
pub fn replace_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), DiskError> {
    replace_file_verified(dir, name, bytes, |_| Ok(()))
}

/// As [`replace_file`], with `verify` run on the temporary file once it is durable: the old
/// file stays unless the new one reads back as it should.
pub fn replace_file_verified(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    verify: impl FnOnce(&Path) -> Result<(), DiskError>,
) -> Result<(), DiskError> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = std::fs::File::create(&tmp).map_err(|e| DiskError::io(&tmp, e))?;
    file.write_all(bytes).map_err(|e| DiskError::io(&tmp, e))?;
    file.sync_all().map_err(|e| DiskError::io(&tmp, e))?;
    drop(file);
    if let Err(error) = verify(&tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(DiskError::NotReadBack {
            path: tmp.display().to_string(),
            source: Box::new(error),
        });
    }
    std::fs::rename(&tmp, &path).map_err(|e| DiskError::io(&path, e))?;
    sync_dir(dir)
}

pub fn sync_dir(dir: &Path) -> Result<(), DiskError> {
    let handle = std::fs::File::open(dir).map_err(|e| DiskError::io(dir, e))?;
    handle.sync_all().map_err(|e| DiskError::io(dir, e))
}

/// Reads an envelope file; `Ok(None)` when it does not exist.
pub fn read_envelope_file(
    path: &Path,
    magic: [u8; 8],
    body_len_max: u64,
) -> Result<Option<Vec<u8>>, DiskError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(DiskError::io(path, e)),
    };
    let (body, _) = decode_envelope(&bytes, magic, body_len_max).map_err(|e| DiskError::corrupt(path, e))?;
    Ok(Some(body.to_vec()))
}

pub fn encode_entry(entry: &Entry) -> Result<Vec<u8>, FormatError> {
    let payload = bincode::serialize(entry).map_err(FormatError::Encode)?;
    if payload.len() > ENTRY_PAYLOAD_LEN_MAX {
        return Err(entry_too_long(payload.len()));
    }
    let mut frame = Vec::with_capacity(ENTRY_HEADER_LEN + payload.len());
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    frame.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    frame.extend_from_slice(&payload);
    Ok(frame)
}

fn entry_too_long(len: usize) -> FormatError {
    FormatError::TooLong {
        part: "entry",
        len: len as u64,
        max: ENTRY_PAYLOAD_LEN_MAX as u64,
    }
}

/// Decodes the entry frame at the start of `bytes`: the entry and the frame's length, or why
/// the bytes are not a whole valid frame (the caller truncates there).
pub fn decode_entry(bytes: &[u8]) -> Result<(Entry, usize), FormatError> {
    let (len, rest) = split_field::<4>(bytes, "frame header")?;
    let (crc, rest) = split_field::<4>(rest, "frame header")?;
    let len = u32::from_le_bytes(len) as usize;
    if len > ENTRY_PAYLOAD_LEN_MAX {
        return Err(entry_too_long(len));
    }
    let payload = rest
        .get(..len)
        .ok_or(FormatError::Truncated { part: "payload" })?;
    check_crc("entry", payload, crc)?;
    let entry = decode_body(payload)?;
    Ok((entry, ENTRY_HEADER_LEN + len))
}

/// bincode with the same layout as `bincode::serialize` and a limit, so a corrupt length
/// inside a payload that passed its CRC still cannot size an allocation past the payload.
pub fn bounded_bincode() -> impl bincode::Options {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .allow_trailing_bytes()
        .with_limit(SNAPSHOT_LEN_MAX)
}

/// Decodes a bincode body read from disk or the network, with the allocation bound.
pub fn decode_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, FormatError> {
    use bincode::Options;
    bounded_bincode().deserialize(body).map_err(FormatError::Decode)
}

#[cfg(test)]
mod tests {
    use std::io::{Error, ErrorKind};

    fn io(kind: ErrorKind) -> DiskError {
        DiskError::io(std::path::Path::new("log"), Error::from(kind))
    }

    #[tokio::test]
    async fn a_full_disk_is_waited_out_and_other_errors_are_not() {
        let mut tries = 0;
        let written = retry_while_disk_full("a test write", || {
            tries += 1;
            match tries {
                1 => Err(io(ErrorKind::StorageFull)),
                2 => Err(io(ErrorKind::QuotaExceeded)),
                _ => Ok(tries),
            }
        })
        .await;
        assert_eq!(written.ok(), Some(3));
        let mut tries = 0;
        let failed = retry_while_disk_full("a test write", || {
            tries += 1;
            Err::<(), _>(io(ErrorKind::PermissionDenied))
        })
        .await;
        assert!(failed.is_err_and(|e| !e.is_disk_full()));
        assert_eq!(tries, 1, "an error other than a full disk is not retried");
    }

    use super::*;

    #[test]
    fn an_envelope_that_does_not_decode_says_why() {
        let bytes = encode_envelope(STATE_MAGIC, b"body");
        let (body, len) = decode_envelope(&bytes, STATE_MAGIC, 16).unwrap();
        assert_eq!((body, len), (&b"body"[..], bytes.len()));
        let refused = |bytes: &[u8], max| decode_envelope(bytes, STATE_MAGIC, max).unwrap_err();
        assert!(matches!(
            refused(&bytes[..10], 16),
            FormatError::Truncated { part: "header" }
        ));
        assert!(matches!(
            refused(&bytes[..bytes.len() - 1], 16),
            FormatError::Truncated { part: "body" }
        ));
        assert!(matches!(
            refused(&bytes, 3),
            FormatError::TooLong {
                part: "body",
                len: 4,
                max: 3
            }
        ));
        let mut newer = bytes.clone();
        newer[8] = 2;
        assert!(matches!(refused(&newer, 16), FormatError::UnknownFormat(2)));
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let mismatch = refused(&flipped, 16);
        assert!(
            matches!(mismatch, FormatError::ChecksumMismatch { part: "body", expected, found } if expected != found),
            "{mismatch}"
        );
        let other = decode_envelope(&bytes, LOG_MAGIC, 16).unwrap_err();
        assert_eq!(other.to_string(), "wrong magic LMNVOTE1, expected LMNRLOG1");
    }
}
