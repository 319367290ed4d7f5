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
//! one; both fields strictly increase. The entries live in memory and are appended to the file
//! as they are made; the file is fsynced when the segment rolls or the log closes, and
//! rebuilt by recovery when it is damaged.

use crate::io::StorageFile;
use std::cell::RefCell;
use std::io;
use std::rc::Rc;

/// A fixed-size entry of an index file.
pub trait Entry: Copy + std::fmt::Debug {
    const LEN: usize;
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(bytes: &[u8]) -> Self;
    /// The relative offset the entry points at (both indexes have one).
    fn relative_offset(&self) -> u32;
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
}

/// Entries of one index file, kept in memory and appended to the file. Owned by one shard;
/// not Send.
pub struct EntryFile<F, E> {
    file: Rc<F>,
    entries: RefCell<Vec<E>>,
}

/// Decodes whole entries; a trailing partial entry is ignored (a torn write).
pub fn decode_entries<E: Entry>(bytes: &[u8]) -> Vec<E> {
    bytes.chunks_exact(E::LEN).map(E::decode).collect()
}

impl<F: StorageFile, E: Entry> EntryFile<F, E> {
    pub fn new(file: Rc<F>, entries: Vec<E>) -> Self {
        EntryFile {
            file,
            entries: RefCell::new(entries),
        }
    }

    /// Reads the whole file.
    pub async fn read_all(file: &F) -> io::Result<Vec<E>> {
        let bytes = file.read_at(0, file.len() as usize).await?;
        Ok(decode_entries(&bytes))
    }

    pub fn file(&self) -> &Rc<F> {
        &self.file
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

    /// Appends entries to memory and file. The caller keeps them increasing.
    pub async fn append(&self, new: &[E]) -> io::Result<()> {
        if new.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(new.len() * E::LEN);
        new.iter().for_each(|e| e.encode(&mut buf));
        let pos = {
            let mut entries = self.entries.borrow_mut();
            let pos = (entries.len() * E::LEN) as u64;
            entries.extend_from_slice(new);
            pos
        };
        self.file.write_at(pos, &[&buf]).await
    }

    /// Keeps the entries whose relative offset is below `relative_offset`.
    pub async fn truncate_from(&self, relative_offset: u32) -> io::Result<()> {
        let keep = {
            let mut entries = self.entries.borrow_mut();
            let keep = entries.partition_point(|e| e.relative_offset() < relative_offset);
            entries.truncate(keep);
            keep
        };
        self.file.truncate((keep * E::LEN) as u64).await
    }

    /// Replaces the file's content with the in-memory entries plus `extra`.
    pub async fn rewrite(&self, keep: usize, extra: &[E]) -> io::Result<()> {
        {
            let mut entries = self.entries.borrow_mut();
            assert!(keep <= entries.len(), "rewrite keeps existing entries only");
            entries.truncate(keep);
        }
        self.file.truncate((keep * E::LEN) as u64).await?;
        self.append(extra).await
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
    sane_prefix(
        entries,
        |p, e| e.relative_offset > p.relative_offset && e.position > p.position,
        |e| (e.position as u64) < log_len,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
