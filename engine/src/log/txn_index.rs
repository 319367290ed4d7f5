//! The aborted-transaction index: `<dir>/<20-digit segment base offset>.txnindex`, Kafka's
//! format, one file per segment that holds an ABORT marker, made at its first entry.
//!
//! Each entry (34 bytes, integers big endian) records one aborted transaction, in the segment
//! that holds its ABORT marker, in marker order:
//!
//! ```text
//! off len field
//!   0   2 version (0)
//!   2   8 producer id
//!  10   8 first offset        of the transaction
//!  18   8 last offset         the ABORT marker's offset
//!  26   8 last stable offset  the first offset of the earliest other transaction open at the
//!                             marker, else the marker's offset + 1
//! ```
//!
//! The last stable offset is the log's, not the high watermark's, so every replica writes the
//! same bytes. It lets a search stop early: past an entry whose last stable offset is above the
//! searched range's end, no later abort can have records in the range (every transaction open
//! then starts at or after it, and later ones after the marker).
//!
//! The files are appended without fsync. The partition syncs them ([`Log::sync_txn_indexes`])
//! before each producer snapshot, and rebuilding the producer state after the newest snapshot
//! first drops the entries from there and then writes them again from the markers it replays
//! (`producer_snapshot::rebuild`): a crash can lose or tear only entries the next open writes
//! again. A segment's removal removes its file (`segment::remove_segment_files`).
//!
//! Memory: no entry is kept in memory; a search reads the files of the segments it covers,
//! one at a time and 34 KiB at a time ([`READ_CHUNK`]), and keeps only the matching entries.
//! Only the base offsets of segments that have a file are kept (one `i64` per segment with an
//! abort).

use super::segment::{segment_path, TXN_INDEX_SUFFIX};
use super::{Log, LogError};
use crate::io::{Storage, StorageFile};
use std::collections::BTreeSet;
use std::io;

/// Bytes of one entry.
pub const ENTRY_LEN: usize = 34;
const VERSION: i16 = 0;

/// One aborted transaction, as the index records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxnEntry {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The ABORT marker's offset.
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl AbortedTxnEntry {
    pub fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut out = [0; ENTRY_LEN];
        out[0..2].copy_from_slice(&VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    /// One entry; `None` for another version or offsets out of order.
    pub fn decode(bytes: &[u8; ENTRY_LEN]) -> Option<AbortedTxnEntry> {
        let i64_at = |at: usize| i64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        if i16::from_be_bytes([bytes[0], bytes[1]]) != VERSION {
            return None;
        }
        let entry = AbortedTxnEntry {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        };
        let sane = entry.producer_id >= 0 && (0..=entry.last_offset).contains(&entry.first_offset);
        sane.then_some(entry)
    }
}

/// Bytes of entries read per I/O: a search or a cut holds one such chunk at a time.
const READ_CHUNK: usize = 1024 * ENTRY_LEN;

/// One entry of a file, whose bytes are damaged if it does not decode (`InvalidData`).
fn decode_stored(bytes: &[u8; ENTRY_LEN]) -> io::Result<AbortedTxnEntry> {
    AbortedTxnEntry::decode(bytes)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad txnindex entry"))
}

/// What a cut of segment `base`'s index at `offset` keeps: the leading entries that decode,
/// follow each other and belong to the segment, with markers below `offset`. What follows
/// them is dropped: after a crash that may be torn or garbage (never synced), or entries
/// the cut removes.
struct KeptBefore {
    previous: i64,
    offset: i64,
}

impl KeptBefore {
    /// Whether the next entry is kept (after the first that is not, none is).
    fn keeps(&mut self, bytes: &[u8; ENTRY_LEN]) -> bool {
        let Some(entry) = AbortedTxnEntry::decode(bytes) else {
            return false;
        };
        let in_order = (self.previous..self.offset).contains(&entry.last_offset);
        self.previous = entry.last_offset;
        in_order
    }
}

/// Which segments have an index file. Owned with its log by one shard.
#[derive(Debug, Default)]
pub struct TxnIndexes {
    /// Base offsets of segments with a `.txnindex` (some may since have been removed with
    /// their segment: a search treats a missing file as empty).
    with_file: BTreeSet<i64>,
    /// Base offsets of files appended since they were last synced.
    unsynced: BTreeSet<i64>,
    /// A file was made since the directory was last synced.
    made_unsynced: bool,
}

impl TxnIndexes {
    /// From the names an open listed.
    pub fn listed(names: &[String]) -> TxnIndexes {
        let with_file = names.iter().filter_map(|n| parse_txn_index_name(n)).collect();
        TxnIndexes {
            with_file,
            unsynced: BTreeSet::new(),
            made_unsynced: false,
        }
    }
}

fn parse_txn_index_name(name: &str) -> Option<i64> {
    let stem = name.strip_suffix(TXN_INDEX_SUFFIX)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

impl<S: Storage> Log<S> {
    /// Base offset of the segment holding `offset` (the first one when below the log start).
    fn segment_base_holding(&self, offset: i64) -> i64 {
        let state = self.state.borrow();
        let at = state.segments.partition_point(|s| s.base_offset <= offset);
        state.segments[at.saturating_sub(1)].base_offset
    }

    /// Appends `entry` to the index of the segment holding its marker. The marker is in the
    /// log already: a failure here fails the log (the next open rebuilds the entry).
    pub async fn append_aborted_txn(&self, entry: AbortedTxnEntry) -> Result<(), LogError> {
        let base = self.segment_base_holding(entry.last_offset);
        let path = segment_path(&self.dir, base, TXN_INDEX_SUFFIX);
        let written = async {
            let file = self.storage.open(&path, true).await?;
            let len = file.len();
            // A torn entry from before a crash is overwritten, not followed.
            let end = len - len % ENTRY_LEN as u64;
            file.write_at(end, &[&entry.encode()]).await?;
            file.close().await
        }
        .await;
        written.map_err(|e| self.fail(e))?;
        let first_base = self.segment_base_holding(i64::MIN);
        let mut indexes = self.txn_indexes.borrow_mut();
        // Segments deleted from the front took their files along: forget them.
        indexes.with_file = indexes.with_file.split_off(&first_base);
        indexes.made_unsynced |= indexes.with_file.insert(base);
        indexes.unsynced.insert(base);
        Ok(())
    }

    /// Calls `visit` with each whole entry of segment `base`'s file (none without one), in
    /// order, until it answers false. Reads [`READ_CHUNK`] bytes at a time; a torn last
    /// entry (a crash inside an append) is left out.
    async fn scan_txn_index(
        &self,
        base: i64,
        mut visit: impl FnMut(&[u8; ENTRY_LEN]) -> io::Result<bool>,
    ) -> io::Result<()> {
        let path = segment_path(&self.dir, base, TXN_INDEX_SUFFIX);
        let file = match self.storage.open(&path, false).await {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            opened => opened?,
        };
        let scanned = async {
            let end = file.len() - file.len() % ENTRY_LEN as u64;
            let mut at = 0;
            while at < end {
                let chunk = file
                    .read_at(at, (end - at).min(READ_CHUNK as u64) as usize)
                    .await?;
                for bytes in chunk.chunks_exact(ENTRY_LEN) {
                    if !visit(bytes.try_into().expect("exact chunks"))? {
                        return Ok(());
                    }
                }
                if chunk.len() < ENTRY_LEN {
                    break; // the file ended early
                }
                at += (chunk.len() - chunk.len() % ENTRY_LEN) as u64;
            }
            Ok(())
        }
        .await;
        file.close().await?;
        scanned
    }

    /// The aborted transactions with records in `[from, to)`: entries whose marker is at or
    /// past `from` and whose first offset is below `to`, in marker order.
    pub async fn aborted_txns_between(&self, from: i64, to: i64) -> Result<Vec<AbortedTxnEntry>, LogError> {
        self.check_ok()?;
        let first_base = self.segment_base_holding(from);
        let bases: Vec<i64> = self
            .txn_indexes
            .borrow()
            .with_file
            .range(first_base..)
            .copied()
            .collect();
        let mut found = Vec::new();
        let mut complete = false;
        for base in bases {
            self.scan_txn_index(base, |bytes| {
                let entry = decode_stored(bytes)?;
                if entry.last_offset >= from && entry.first_offset < to {
                    found.push(entry);
                }
                complete = entry.last_stable_offset > to;
                Ok(!complete)
            })
            .await?;
            if complete {
                break;
            }
        }
        Ok(found)
    }

    /// Drops every entry whose marker is at or past `offset` (before a truncation's rebuild
    /// writes again those it replays). Removes files left empty.
    pub async fn truncate_txn_indexes_from(&self, offset: i64) -> Result<(), LogError> {
        let first_base = self.segment_base_holding(offset);
        let bases: Vec<i64> = self
            .txn_indexes
            .borrow()
            .with_file
            .range(first_base..)
            .copied()
            .collect();
        for base in bases {
            let cut = self.truncate_txn_index(base, offset).await;
            cut.map_err(|e| self.fail(e))?;
        }
        Ok(())
    }

    async fn truncate_txn_index(&self, base: i64, offset: i64) -> io::Result<()> {
        let path = segment_path(&self.dir, base, TXN_INDEX_SUFFIX);
        let mut kept = 0;
        let mut cut = KeptBefore {
            previous: base,
            offset,
        };
        self.scan_txn_index(base, |bytes| {
            let keeps = cut.keeps(bytes);
            kept += usize::from(keeps);
            Ok(keeps)
        })
        .await?;
        let len = (kept * ENTRY_LEN) as u64;
        if len > 0 {
            let file = self.storage.open(&path, false).await?;
            let cut = async {
                if file.len() != len {
                    file.truncate(len).await?;
                    self.txn_indexes.borrow_mut().unsynced.insert(base);
                }
                Ok::<_, io::Error>(())
            }
            .await;
            file.close().await?;
            cut?;
        }
        if len == 0 {
            match self.storage.remove_file(&path).await {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let mut indexes = self.txn_indexes.borrow_mut();
            indexes.with_file.remove(&base);
            indexes.unsynced.remove(&base);
        }
        Ok(())
    }

    /// fdatasyncs the index files appended since their last sync, and the directory when one
    /// of them is new (before a producer snapshot: the entries below it are not written again
    /// at the next open).
    pub async fn sync_txn_indexes(&self) -> Result<(), LogError> {
        let unsynced = std::mem::take(&mut self.txn_indexes.borrow_mut().unsynced);
        let made = std::mem::take(&mut self.txn_indexes.borrow_mut().made_unsynced);
        for base in unsynced {
            let path = segment_path(&self.dir, base, TXN_INDEX_SUFFIX);
            let synced = async {
                let file = match self.storage.open(&path, false).await {
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                    opened => opened?,
                };
                file.fdatasync().await?;
                file.close().await
            }
            .await;
            synced.map_err(|e| self.fail(e))?;
        }
        if made {
            self.storage.sync_dir(&self.dir).await.map_err(|e| self.fail(e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_entry_bytes() {
        let entry = AbortedTxnEntry {
            producer_id: 0x0102,
            first_offset: 16,
            last_offset: 20,
            last_stable_offset: 21,
        };
        #[rustfmt::skip]
        let expected: Vec<u8> = [
            &[0, 0][..],                      // version 0
            &[0, 0, 0, 0, 0, 0, 1, 2],        // producer id 258
            &[0, 0, 0, 0, 0, 0, 0, 16],       // first offset 16
            &[0, 0, 0, 0, 0, 0, 0, 20],       // last offset 20 (the ABORT marker)
            &[0, 0, 0, 0, 0, 0, 0, 21],       // last stable offset 21
        ]
        .concat();
        assert_eq!(entry.encode().to_vec(), expected);
        let bytes: &[u8; ENTRY_LEN] = expected.as_slice().try_into().unwrap();
        assert_eq!(decode_stored(bytes).unwrap(), entry);
    }

    /// How many entries of `bytes` a cut of segment `base`'s index at `offset` keeps.
    fn kept_before(bytes: &[u8], base: i64, offset: i64) -> usize {
        let mut cut = KeptBefore {
            previous: base,
            offset,
        };
        let entries = bytes.chunks_exact(ENTRY_LEN);
        entries
            .take_while(|b| cut.keeps((*b).try_into().unwrap()))
            .count()
    }

    #[test]
    fn a_cut_keeps_the_sane_entries_below_it_and_drops_garbage() {
        let entry = |last| AbortedTxnEntry {
            producer_id: 1,
            first_offset: 10,
            last_offset: last,
            last_stable_offset: last + 1,
        };
        let mut bytes = [entry(12).encode(), entry(15).encode(), entry(18).encode()].concat();
        assert_eq!(kept_before(&bytes, 10, 16), 2);
        assert_eq!(kept_before(&bytes, 10, 12), 0);
        assert_eq!(kept_before(&bytes, 13, 100), 0, "a marker below the segment");
        bytes[2 * ENTRY_LEN] = 0xAB;
        assert_eq!(kept_before(&bytes, 10, 100), 2, "garbage ends what is kept");
        let backwards = [entry(15).encode(), entry(12).encode()].concat();
        assert_eq!(kept_before(&backwards, 10, 100), 1);
    }

    #[test]
    fn a_bad_entry_is_refused() {
        let entry = |first| AbortedTxnEntry {
            producer_id: 1,
            first_offset: first,
            last_offset: 9,
            last_stable_offset: 10,
        };
        assert_eq!(decode_stored(&entry(1).encode()).unwrap(), entry(1));
        let mut bad_version = entry(1).encode();
        bad_version[1] = 1;
        assert!(decode_stored(&bad_version).is_err());
        let past_the_marker = entry(10).encode();
        assert!(
            decode_stored(&past_the_marker).is_err(),
            "first offset past the marker"
        );
        assert_eq!(parse_txn_index_name("00000000000000000028.txnindex"), Some(28));
        assert_eq!(parse_txn_index_name("28.txnindex"), None);
    }
}
