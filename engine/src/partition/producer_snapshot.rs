//! Producer state snapshots: `<dir>/<20-digit offset>.snapshot`, and rebuilding the producer
//! state when a partition opens.
//!
//! A snapshot holds the producer state as it was after every batch below its offset. One is
//! written when the log rolls (at the new segment's base offset, whose batches below were just
//! fsynced) and on a clean close (at the log end). Opening loads the newest snapshot not past
//! the log end (newer ones describe batches a crash took away and are deleted), then replays
//! the headers of the batches after it (and the markers: their transactions end there), and
//! writes again the aborted-transaction index entries of the ABORT markers it replays (see
//! `log/txn_index.rs`). The two newest snapshots are kept.
//!
//! Format (Laminar's own; integers big endian):
//!
//! ```text
//! off len field
//!   0   4 magic "LPSS"
//!   4   2 format version (2; 1 is still read)
//!   6   4 CRC-32 (IEEE, crc32fast) of every byte after this field
//!  10   8 snapshot offset (equals the file name's)
//!  18   4 producer count
//!  22   … producers by ascending id, each:
//!           8 producer id, 2 epoch, 8 last timestamp (ms),
//!           version 2 only: 4 coordinator epoch (-1: none), 8 first offset of the open
//!           transaction (-1: none),
//!           1 batch count (0..=5; version 1: 1..=5),
//!           then per batch, oldest first: 4 first sequence, 4 last sequence,
//!           8 first offset, 8 last offset, 8 max timestamp (32 bytes)
//! ```
//!
//! Version 1 had no transactions: its producers have none open and no coordinator epoch.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};

use bytes::{BufMut, Bytes, BytesMut};

use super::producer_state::{BatchMetadata, ProducerEntry, ProducerStateTable, BATCHES_KEPT};
use crate::io::{replace_file, DirSync, Storage, StorageFile};
use crate::log::{Log, LogError};

const MAGIC: &[u8; 4] = b"LPSS";
const FORMAT_VERSION: u16 = 2;
/// The format before transactions.
const FORMAT_VERSION_1: u16 = 1;
const HEADER_LEN: usize = 22;
const CRC_FROM: usize = 10;
const ENTRY_HEAD_LEN: usize = 31;
const BATCH_LEN: usize = 32;
const SUFFIX: &str = ".snapshot";
/// Snapshots kept after writing one: the new one and the one before it.
const SNAPSHOTS_KEPT: usize = 2;

pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}{SUFFIX}"))
}

fn parse_snapshot_name(name: &str) -> Option<i64> {
    let stem = name.strip_suffix(SUFFIX)?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

pub fn encode(table: &ProducerStateTable, offset: i64) -> Bytes {
    let entries = table.entries_sorted();
    let mut out = BytesMut::with_capacity(HEADER_LEN + entries.len() * (ENTRY_HEAD_LEN + 2 * BATCH_LEN));
    out.put_slice(MAGIC);
    out.put_u16(FORMAT_VERSION);
    out.put_u32(0);
    out.put_i64(offset);
    out.put_u32(entries.len() as u32);
    for (id, entry) in entries {
        out.put_i64(id);
        out.put_i16(entry.epoch);
        out.put_i64(entry.last_timestamp_ms);
        out.put_i32(entry.coordinator_epoch);
        out.put_i64(entry.txn_first_offset.unwrap_or(-1));
        out.put_u8(entry.batches.len() as u8);
        for b in &entry.batches {
            out.put_i32(b.first_seq);
            out.put_i32(b.last_seq);
            out.put_i64(b.first_offset);
            out.put_i64(b.last_offset);
            out.put_i64(b.max_timestamp);
        }
    }
    let crc = crc32fast::hash(&out[CRC_FROM..]);
    out[6..10].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// A bounds-checked big-endian reader over a snapshot.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let end = self.pos + N;
        let bytes = self.buf.get(self.pos..end).ok_or_else(|| {
            invalid(format!(
                "snapshot ends at {} inside a field at {}",
                self.buf.len(),
                self.pos
            ))
        })?;
        self.pos = end;
        Ok(bytes.try_into().expect("N bytes"))
    }
    fn i64(&mut self) -> io::Result<i64> {
        self.take().map(i64::from_be_bytes)
    }
    fn i32(&mut self) -> io::Result<i32> {
        self.take().map(i32::from_be_bytes)
    }
    fn i16(&mut self) -> io::Result<i16> {
        self.take().map(i16::from_be_bytes)
    }
}

/// Decodes a snapshot; returns its offset and table. Damage of any kind is `InvalidData`.
pub fn decode(bytes: &[u8]) -> io::Result<(i64, ProducerStateTable)> {
    if bytes.len() < HEADER_LEN || &bytes[..4] != MAGIC {
        return Err(invalid("not a producer snapshot".into()));
    }
    let version = u16::from_be_bytes([bytes[4], bytes[5]]);
    if version != FORMAT_VERSION && version != FORMAT_VERSION_1 {
        return Err(invalid(format!("unknown snapshot format {version}")));
    }
    let stored = u32::from_be_bytes(bytes[6..10].try_into().expect("4 bytes"));
    let computed = crc32fast::hash(&bytes[CRC_FROM..]);
    if stored != computed {
        return Err(invalid(format!(
            "snapshot CRC {stored:#010x}, computed {computed:#010x}"
        )));
    }
    let mut r = Reader {
        buf: bytes,
        pos: CRC_FROM,
    };
    let offset = r.i64()?;
    let count = u32::from_be_bytes(r.take()?);
    let mut table = ProducerStateTable::default();
    let mut previous_id = -1;
    for _ in 0..count {
        let (id, entry) = decode_entry(&mut r, version, offset)?;
        if id <= previous_id {
            return Err(invalid(format!("snapshot entry {id} after {previous_id}")));
        }
        previous_id = id;
        table.insert(id, entry);
    }
    if r.pos != bytes.len() {
        return Err(invalid(format!(
            "{} bytes after the last entry",
            bytes.len() - r.pos
        )));
    }
    Ok((offset, table))
}

/// One producer of a snapshot at `offset` in format `version`.
fn decode_entry(r: &mut Reader<'_>, version: u16, offset: i64) -> io::Result<(i64, ProducerEntry)> {
    let id = r.i64()?;
    let epoch = r.i16()?;
    let last_timestamp_ms = r.i64()?;
    let (coordinator_epoch, txn_first_offset) = match version {
        FORMAT_VERSION_1 => (-1, -1),
        _ => (r.i32()?, r.i64()?),
    };
    let [batch_count] = r.take::<1>()?;
    let min_batches = usize::from(version == FORMAT_VERSION_1);
    let txn_ok = txn_first_offset == -1 || (0..offset).contains(&txn_first_offset);
    if id < 0 || !txn_ok || !(min_batches..=BATCHES_KEPT).contains(&(batch_count as usize)) {
        return Err(invalid(format!(
            "snapshot entry {id} with {batch_count} batches, transaction at {txn_first_offset}"
        )));
    }
    let mut batches = VecDeque::with_capacity(batch_count as usize);
    for _ in 0..batch_count {
        batches.push_back(BatchMetadata {
            first_seq: r.i32()?,
            last_seq: r.i32()?,
            first_offset: r.i64()?,
            last_offset: r.i64()?,
            max_timestamp: r.i64()?,
        });
    }
    let entry = ProducerEntry {
        epoch,
        batches,
        last_timestamp_ms,
        coordinator_epoch,
        txn_first_offset: (txn_first_offset >= 0).then_some(txn_first_offset),
    };
    Ok((id, entry))
}

async fn snapshot_offsets<S: Storage>(storage: &S, dir: &Path) -> io::Result<Vec<i64>> {
    let mut offsets: Vec<i64> = storage
        .list_dir(dir)
        .await?
        .iter()
        .filter_map(|n| parse_snapshot_name(n))
        .collect();
    offsets.sort_unstable();
    Ok(offsets)
}

/// Writes the snapshot of `table` at `offset` durably, then removes all but the newest
/// [`SNAPSHOTS_KEPT`].
/// Writes the snapshot of `table` at `offset` and removes the older ones but one; with
/// `DirSync::ByCaller` the caller fsyncs `dir` after (a crash before that leaves an older
/// snapshot, from which the open replays more of the log).
pub async fn write<S: Storage>(
    storage: &S,
    dir: &Path,
    (table, offset): (&ProducerStateTable, i64),
    dir_sync: DirSync,
) -> io::Result<()> {
    replace_file(
        storage,
        &snapshot_path(dir, offset),
        encode(table, offset),
        dir_sync,
    )
    .await?;
    let offsets = snapshot_offsets(storage, dir).await?;
    let old = offsets.len().saturating_sub(SNAPSHOTS_KEPT);
    for &stale in &offsets[..old] {
        storage.remove_file(&snapshot_path(dir, stale)).await?;
    }
    Ok(())
}

/// Removes every producer snapshot of the partition in `dir` (its log starts again empty).
pub async fn remove_all<S: Storage>(storage: &S, dir: &Path) -> io::Result<()> {
    for offset in snapshot_offsets(storage, dir).await? {
        storage.remove_file(&snapshot_path(dir, offset)).await?;
    }
    storage.sync_dir(dir).await
}

/// Loads the newest readable snapshot at or below the log end (deleting newer ones, which
/// describe batches that are gone) and replays the batch headers after it. Entries replayed
/// from the log are stamped `now_ms`, so a producer's state outlives a restart by at least the
/// expiration bound rather than trusting client-set batch timestamps.
pub async fn rebuild<S: Storage>(
    storage: &S,
    log: &Log<S>,
    now_ms: i64,
) -> Result<ProducerStateTable, LogError> {
    let dir = log.dir();
    let log_end = log.log_end_offset();
    let mut loaded = None;
    for offset in snapshot_offsets(storage, dir).await?.into_iter().rev() {
        let path = snapshot_path(dir, offset);
        if offset > log_end {
            tracing::info!(path = %path.display(), log_end, "removing producer snapshot past the log end");
            storage.remove_file(&path).await?;
            storage.sync_dir(dir).await?;
            continue;
        }
        let file = storage.open(&path, false).await?;
        let bytes = file.read_at(0, file.len() as usize).await?;
        file.close().await?;
        match decode(&bytes) {
            Ok((stored_offset, table)) if stored_offset == offset => {
                loaded = Some((offset, table));
                break;
            }
            Ok((stored_offset, _)) => {
                tracing::warn!(path = %path.display(), stored_offset, "producer snapshot names another offset: ignored");
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "damaged producer snapshot: ignored")
            }
        }
    }
    let (from, table) = loaded.unwrap_or_default();
    replay_from(log, from.max(log.log_start_offset()), table, now_ms).await
}

/// Replays the batches from `from` into `table`, and writes again the aborted-transaction
/// index entries of the markers it replays (dropping those from `from` on first: a crash or
/// a truncation may have left some that the log no longer holds, or lost some).
async fn replay_from<S: Storage>(
    log: &Log<S>,
    from: i64,
    mut table: ProducerStateTable,
    now_ms: i64,
) -> Result<ProducerStateTable, LogError> {
    log.truncate_txn_indexes_from(from).await?;
    let mut aborted = Vec::new();
    log.for_each_header_from(from, |header, marker| {
        if header.producer_id >= 0 && header.next_offset() > from {
            aborted.extend(table.record(header, marker, now_ms));
        }
    })
    .await?;
    for entry in aborted {
        log.append_aborted_txn(entry).await?;
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::BatchHeader;

    fn header(id: i64, epoch: i16, seq: i32, count: i32, offset: i64, ts: i64) -> BatchHeader {
        super::super::producer_state::test_header(id, epoch, seq, count, offset, (ts, ts))
    }

    /// The golden snapshot's producer: 258 at epoch 3, one batch of 2 records at 16.
    fn golden_producer_bytes() -> Vec<u8> {
        [
            &[0, 0, 0, 0, 0, 0, 1, 2][..],   // producer id 258
            &[0, 3],                         // epoch 3
            &[0, 0, 0, 0, 0, 0, 0x0A, 0x0B], // last timestamp 0x0A0B ms
        ]
        .concat()
    }

    #[rustfmt::skip]
    fn golden_batch_bytes() -> Vec<u8> {
        [
            &[1][..],                        // one batch
            &[0, 0, 0, 0],                   // first sequence 0
            &[0, 0, 0, 1],                   // last sequence 1
            &[0, 0, 0, 0, 0, 0, 0, 16],      // first offset 16
            &[0, 0, 0, 0, 0, 0, 0, 17],      // last offset 17
            &[0, 0, 0, 0, 0, 0, 1, 2],       // max timestamp 0x0102
        ]
        .concat()
    }

    /// A snapshot of `version` at offset 18 with one producer, `transaction` its version 2
    /// fields; the CRC is computed.
    fn golden_snapshot(version: u8, transaction: &[u8]) -> Vec<u8> {
        #[rustfmt::skip]
        let mut bytes: Vec<u8> = [
            &b"LPSS"[..],                    // magic
            &[0, version],                   // format version
            &[0, 0, 0, 0],                   // CRC, patched below
            &[0, 0, 0, 0, 0, 0, 0, 18],      // snapshot offset 18
            &[0, 0, 0, 1],                   // one producer
            &golden_producer_bytes(),
            transaction,
            &golden_batch_bytes(),
        ]
        .concat();
        let crc = crc32fast::hash(&bytes[10..]);
        bytes[6..10].copy_from_slice(&crc.to_be_bytes());
        bytes
    }

    #[test]
    fn golden_bytes() {
        let mut table = ProducerStateTable::default();
        let mut data = header(258, 3, 0, 2, 16, 0x0102);
        data.attributes = 0x10; // transactional: opens a transaction at 16
        table.record(&data, None, 0x0A0B);
        let bytes = encode(&table, 18);
        #[rustfmt::skip]
        let transaction: Vec<u8> = [
            &[0xFF, 0xFF, 0xFF, 0xFF][..],   // coordinator epoch -1: no marker seen
            &[0, 0, 0, 0, 0, 0, 0, 16],      // open transaction from offset 16
        ]
        .concat();
        assert_eq!(bytes.to_vec(), golden_snapshot(2, &transaction));
        let (offset, decoded) = decode(&bytes).unwrap();
        assert_eq!((offset, &decoded), (18, &table));
        assert_eq!(decoded.first_open_txn(), Some(16));
    }

    #[test]
    fn a_version_1_snapshot_still_decodes_without_transactions() {
        let mut table = ProducerStateTable::default();
        table.record(&header(258, 3, 0, 2, 16, 0x0102), None, 0x0A0B);
        assert_eq!(decode(&golden_snapshot(1, &[])).unwrap(), (18, table));
        let mut no_batch = golden_snapshot(1, &[]);
        no_batch.truncate(no_batch.len() - 32);
        let at = no_batch.len() - 1;
        no_batch[at] = 0;
        let crc = crc32fast::hash(&no_batch[10..]);
        no_batch[6..10].copy_from_slice(&crc.to_be_bytes());
        assert!(decode(&no_batch).is_err(), "version 1 kept at least one batch");
    }

    #[test]
    fn damage_is_detected() {
        let mut table = ProducerStateTable::default();
        for i in 0..7 {
            table.record(&header(i % 3, 0, i as i32 * 4, 4, i * 4, 50), None, 60);
        }
        let good = encode(&table, 28).to_vec();
        assert_eq!(decode(&good).unwrap(), (28, table));
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            assert!(decode(&bad).is_err(), "flipped byte {at}");
        }
        for len in 0..good.len() {
            assert!(decode(&good[..len]).is_err(), "cut at {len}");
        }
        assert_eq!(parse_snapshot_name("00000000000000000028.snapshot"), Some(28));
        assert_eq!(parse_snapshot_name("28.snapshot"), None);
        assert_eq!(parse_snapshot_name("00000000000000000028.log"), None);
    }
}
