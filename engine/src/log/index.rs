//! The sparse offset index (`<base offset>.index`) and the entry-file machinery shared with
//! the time index.
//!
//! Format: a sequence of 8-byte entries, no header:
//!
//! ```text
//! off len field
//!   0   4 relative offset  u32 BE: base offset of a batch minus the segment's base offset
//!   4   4 position         u32 BE: byte position of that batch in the `.log` file
//! ```
//!
//! One entry is added for the first batch appended after `index.interval.bytes` bytes without
//! one; both fields strictly increase. The entries live in memory, which lookups read. They go
//! to the file [`WRITE_BEHIND_ENTRIES`] at a time, and all of them before the file is fsynced
//! (the segment rolls) or closed, so a clean shutdown leaves complete files. A crash may lose
//! the unwritten ones, which is no loss: recovery rebuilds the active segment's indexes from a
//! scan of its batches, since even written entries are not fsynced. Before, every append wrote
//! its one or two entries at once: two more `pwritev` for each produced batch.

use crate::io::StorageFile;
use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;

/// A fixed-size entry of an index file.
pub trait Entry: Copy + std::fmt::Debug {
    const LEN: usize;
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(bytes: &[u8]) -> Self;
    /// The relative offset the entry points at (both indexes have one).
    fn relative_offset(&self) -> u32;
    /// Whether the entry may come after `earlier` in its file: every field strictly greater.
    fn follows(&self, earlier: &Self) -> bool;
}

/// Asserts that `entries` strictly increase, starting after `last` (if any).
fn assert_increasing<E: Entry>(last: Option<&E>, entries: &[E]) {
    let mut previous = last;
    for entry in entries {
        if let Some(earlier) = previous {
            assert!(entry.follows(earlier), "index entry {entry:?} after {earlier:?}");
        }
        previous = Some(entry);
    }
}

/// One offset-index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub relative_offset: u32,
    pub position: u32,
}

impl Entry for IndexEntry {
    const LEN: usize = 8;
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
        out.extend_from_slice(&self.position.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        IndexEntry {
            relative_offset: u32::from_be_bytes(b[0..4].try_into().expect("4 bytes")),
            position: u32::from_be_bytes(b[4..8].try_into().expect("4 bytes")),
        }
    }
    fn relative_offset(&self) -> u32 {
        self.relative_offset
    }
    fn follows(&self, earlier: &Self) -> bool {
        self.relative_offset > earlier.relative_offset && self.position > earlier.position
    }
}

/// Entries made but not yet written that make the index files catch up (about 4 KiB of offset
/// index, one entry per 4 KiB of log by default: one write per ~2 MiB appended).
pub const WRITE_BEHIND_ENTRIES: usize = 512;

/// Entries of one index file, kept in memory and appended to the file behind them. Owned by
/// one shard; not Send.
pub struct EntryFile<F, E> {
    file: Rc<F>,
    entries: RefCell<Vec<E>>,
    /// The first `written` entries are in the file.
    written: Cell<usize>,
}

/// Decodes whole entries; a trailing partial entry is ignored (a torn write).
pub fn decode_entries<E: Entry>(bytes: &[u8]) -> Vec<E> {
    bytes.chunks_exact(E::LEN).map(E::decode).collect()
}

impl<F: StorageFile, E: Entry> EntryFile<F, E> {
    /// `entries` are those the file already holds, strictly increasing (recovery keeps only
    /// the sane prefix of what it reads).
    pub fn new(file: Rc<F>, entries: Vec<E>) -> Self {
        assert_increasing(None, &entries);
        EntryFile {
            file,
            written: Cell::new(entries.len()),
            entries: RefCell::new(entries),
        }
    }

    /// Reads the whole file.
    pub async fn read_all(file: &F) -> io::Result<Vec<E>> {
        let bytes = file.read_at(0, file.len() as usize).await?;
        Ok(decode_entries(&bytes))
    }

    /// Writes what the file lacks, then fdatasyncs it.
    pub async fn sync(&self) -> io::Result<()> {
        self.write_pending().await?;
        self.file.fdatasync().await
    }

    /// Writes what the file lacks, then closes it.
    pub async fn close(&self) -> io::Result<()> {
        self.write_pending().await?;
        self.file.close().await
    }

    pub fn len(&self) -> usize {
        self.entries.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn last(&self) -> Option<E> {
        self.entries.borrow().last().copied()
    }

    /// The last entry for which `is_before` holds, entries being sorted so that `is_before` is
    /// true for a prefix.
    pub fn last_where(&self, is_before: impl Fn(&E) -> bool) -> Option<E> {
        let entries = self.entries.borrow();
        let n = entries.partition_point(is_before);
        n.checked_sub(1).map(|i| entries[i])
    }

    /// Appends entries to memory, and to the file once [`WRITE_BEHIND_ENTRIES`] are waiting.
    /// They strictly increase, from the last entry on.
    pub async fn append(&self, new: &[E]) -> io::Result<()> {
        let waiting = {
            let mut entries = self.entries.borrow_mut();
            assert_increasing(entries.last(), new);
            entries.extend_from_slice(new);
            entries.len() - self.written.get()
        };
        if waiting >= WRITE_BEHIND_ENTRIES {
            self.write_pending().await?;
        }
        Ok(())
    }

    /// Writes the entries the file lacks.
    pub async fn write_pending(&self) -> io::Result<()> {
        let (from, buf) = {
            let entries = self.entries.borrow();
            let from = self.written.get();
            let mut buf = Vec::with_capacity((entries.len() - from) * E::LEN);
            entries[from..].iter().for_each(|e| e.encode(&mut buf));
            (from, buf)
        };
        if buf.is_empty() {
            return Ok(());
        }
        self.file.write_at((from * E::LEN) as u64, &[&buf]).await?;
        self.written.set(from + buf.len() / E::LEN);
        Ok(())
    }

    /// Keeps the entries whose relative offset is below `relative_offset`.
    pub async fn truncate_from(&self, relative_offset: u32) -> io::Result<()> {
        let keep = {
            let mut entries = self.entries.borrow_mut();
            let keep = entries.partition_point(|e| e.relative_offset() < relative_offset);
            entries.truncate(keep);
            keep
        };
        self.keep_written(keep).await
    }

    /// Cuts the file to at most `keep` entries (it may hold fewer: the rest are unwritten).
    async fn keep_written(&self, keep: usize) -> io::Result<()> {
        let written = self.written.get().min(keep);
        self.written.set(written);
        self.file.truncate((written * E::LEN) as u64).await
    }

    /// Replaces the file's content with the in-memory entries plus `extra`.
    pub async fn rewrite(&self, keep: usize, extra: &[E]) -> io::Result<()> {
        {
            let mut entries = self.entries.borrow_mut();
            assert!(keep <= entries.len(), "rewrite keeps existing entries only");
            entries.truncate(keep);
        }
        self.keep_written(keep).await?;
        self.append(extra).await?;
        self.write_pending().await
    }
}

/// Length of the longest prefix of `entries` in which every entry is `valid` and every entry
/// after the first `increases` over the one before it (recovery keeps that prefix).
pub fn sane_prefix<E>(
    entries: &[E],
    increases: impl Fn(&E, &E) -> bool,
    valid: impl Fn(&E) -> bool,
) -> usize {
    (0..entries.len())
        .find(|&i| !valid(&entries[i]) || (i > 0 && !increases(&entries[i - 1], &entries[i])))
        .unwrap_or(entries.len())
}

/// Length of the sane prefix: both fields strictly increase and positions lie in the log.
pub fn offset_index_sane_prefix(entries: &[IndexEntry], log_len: u64) -> usize {
    sane_prefix(entries, |p, e| e.follows(p), |e| u64::from(e.position) < log_len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FaultyStorage, Storage};
    use futures::executor::block_on;
    use std::path::Path;

    fn entry(relative_offset: u32) -> IndexEntry {
        IndexEntry {
            relative_offset,
            position: relative_offset * 100,
        }
    }

    #[test]
    fn entries_reach_the_file_in_bulk_and_all_of_them_by_sync_or_close() {
        block_on(async {
            let storage = FaultyStorage::new(1);
            storage.create_dir_all(Path::new("/d")).await.unwrap();
            let path = Path::new("/d/0.index");
            let file = storage.open(path, true).await.unwrap();
            let index = EntryFile::new(file.clone(), Vec::new());
            let wanted: Vec<IndexEntry> = (1..=WRITE_BEHIND_ENTRIES as u32 + 3).map(entry).collect();
            for e in &wanted[..WRITE_BEHIND_ENTRIES - 1] {
                index.append(&[*e]).await.unwrap();
            }
            // Lookups read memory; the file has nothing yet.
            assert_eq!(index.len(), WRITE_BEHIND_ENTRIES - 1);
            assert_eq!(index.last_where(|e| e.relative_offset <= 7), Some(entry(7)));
            assert_eq!(file.len(), 0);
            index
                .append(&wanted[WRITE_BEHIND_ENTRIES - 1..WRITE_BEHIND_ENTRIES])
                .await
                .unwrap();
            assert_eq!(file.len(), (WRITE_BEHIND_ENTRIES * IndexEntry::LEN) as u64);
            index.append(&wanted[WRITE_BEHIND_ENTRIES..]).await.unwrap();
            assert_eq!(file.len(), (WRITE_BEHIND_ENTRIES * IndexEntry::LEN) as u64);
            index.sync().await.unwrap();
            assert_eq!(
                EntryFile::<_, IndexEntry>::read_all(&*file).await.unwrap(),
                wanted
            );

            // Cutting below the written part shortens the file; cutting inside the unwritten
            // part never lengthens it, and close writes the rest.
            index.append(&[entry(9000), entry(9001)]).await.unwrap();
            index.truncate_from(9001).await.unwrap();
            assert_eq!(file.len(), (wanted.len() * IndexEntry::LEN) as u64);
            index.truncate_from(3).await.unwrap();
            assert_eq!(file.len(), (2 * IndexEntry::LEN) as u64);
            index.append(&[entry(10)]).await.unwrap();
            index.close().await.unwrap();
            let reopened = storage.open(path, false).await.unwrap();
            let on_file = EntryFile::<_, IndexEntry>::read_all(&*reopened).await.unwrap();
            assert_eq!(on_file, vec![entry(1), entry(2), entry(10)]);
        });
    }

    #[test]
    #[should_panic(expected = "index entry")]
    fn appending_an_entry_that_does_not_follow_the_last_is_a_bug() {
        block_on(async {
            let storage = FaultyStorage::new(1);
            storage.create_dir_all(Path::new("/d")).await.unwrap();
            let file = storage.open(Path::new("/d/0.index"), true).await.unwrap();
            let index = EntryFile::new(file, vec![entry(5)]);
            let same_offset_further = IndexEntry {
                relative_offset: 5,
                position: 600,
            };
            index.append(&[same_offset_further]).await.unwrap();
        });
    }

    #[test]
    fn golden_index_entry() {
        let e = IndexEntry {
            relative_offset: 0x0102_0304,
            position: 0x0A0B_0C0D,
        };
        let mut out = Vec::new();
        e.encode(&mut out);
        assert_eq!(
            out,
            [
                0x01, 0x02, 0x03, 0x04, // relative offset
                0x0A, 0x0B, 0x0C, 0x0D, // position
            ]
        );
        assert_eq!(IndexEntry::decode(&out), e);
    }

    #[test]
    fn sanity_finds_first_bad_entry() {
        let e = |r, p| IndexEntry {
            relative_offset: r,
            position: p,
        };
        let entries = [e(1, 10), e(5, 50), e(4, 60), e(9, 90)];
        assert_eq!(offset_index_sane_prefix(&entries, 100), 2);
        assert_eq!(offset_index_sane_prefix(&entries[..2], 50), 1);
        assert_eq!(decode_entries::<IndexEntry>(&[0u8; 12]).len(), 1);
    }
}
