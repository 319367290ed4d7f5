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
//! one; both fields strictly increase. The entries live in memory, which lookups read (while
//! the segment is used: an unused index whose entries are all in its file leaves memory and is
//! read back at its next use, see [`EntryFile`]). They go
//! to the file [`WRITE_BEHIND_ENTRIES`] at a time, and all of them before the file is fsynced
//! (the segment rolls) or closed, so a clean shutdown leaves complete files. A crash may lose
//! the unwritten ones, which is no loss: recovery rebuilds the active segment's indexes from a
//! scan of its batches, since even written entries are not fsynced. Before, every append wrote
//! its one or two entries at once: two more `pwritev` for each produced batch.
//!
//! A file is made when its first entry is written ([`IndexFile`]): a segment under one index
//! interval (4 KiB by default) never has one, and a file that is not there reads as one with no
//! entries, which recovery treats as it treats a lost index: it scans the log (decision 0023,
//! partition files made at first write).

use crate::io::StorageFile;
use futures::future::LocalBoxFuture;
use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;

/// A fixed-size entry of an index file.
pub trait Entry: Copy + PartialEq + std::fmt::Debug {
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

/// Makes a segment's index file (`suffix` being `index` or `timeindex`) when its first entry is
/// written. One per log, shared by its segments.
pub trait MakeIndexFile<F> {
    fn make(&self, base_offset: i64, suffix: &'static str) -> LocalBoxFuture<'_, io::Result<Rc<F>>>;
}

/// An index file, or, until its first entry is written, where it is to be made. Owned by one
/// shard; not Send.
pub enum IndexFile<F> {
    Open(Rc<F>),
    NotMade {
        maker: Rc<dyn MakeIndexFile<F>>,
        base_offset: i64,
        suffix: &'static str,
    },
}

impl<F> Clone for IndexFile<F> {
    fn clone(&self) -> Self {
        match self {
            IndexFile::Open(file) => IndexFile::Open(file.clone()),
            IndexFile::NotMade {
                maker,
                base_offset,
                suffix,
            } => IndexFile::NotMade {
                maker: maker.clone(),
                base_offset: *base_offset,
                suffix,
            },
        }
    }
}

impl<F: StorageFile> IndexFile<F> {
    /// The file's length; a file not made has none.
    pub fn len(&self) -> u64 {
        match self {
            IndexFile::Open(file) => file.len(),
            IndexFile::NotMade { .. } => 0,
        }
    }

    /// Whether the file holds nothing (or is not made).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every whole entry of the file; none when it is not made.
    pub async fn read_entries<E: Entry>(&self) -> io::Result<Vec<E>> {
        match self {
            IndexFile::Open(file) => {
                let bytes = file.read_at(0, file.len() as usize).await?;
                Ok(decode_entries(&bytes))
            }
            IndexFile::NotMade { .. } => Ok(Vec::new()),
        }
    }

    fn opened(&self) -> Option<Rc<F>> {
        match self {
            IndexFile::Open(file) => Some(file.clone()),
            IndexFile::NotMade { .. } => None,
        }
    }
}

/// Entries of one index file, kept in memory and appended to the file behind them. Owned by
/// one shard; not Send.
///
/// Memory comes back when a segment goes unused: [`EntryFile::release_if_unused`] (called by
/// the shard's maintenance) drops the entries of an index whose entries are all in its file and
/// that no lookup or append used since the previous call, and the next use reads them back,
/// checking that the file holds exactly what was released (their number, order and last
/// entry); anything else is an `InvalidData` error, never a wrong lookup. So an idle segment
/// holds no index in memory, only its entry count and last entry.
pub struct EntryFile<F, E> {
    file: RefCell<IndexFile<F>>,
    /// The entries; `None` while released (all of them are then in the file).
    entries: RefCell<Option<Vec<E>>>,
    /// How many entries there are, in memory or not.
    count: Cell<usize>,
    last: Cell<Option<E>>,
    /// The first `written` entries are in the file.
    written: Cell<usize>,
    /// Used since the last [`EntryFile::release_if_unused`].
    used: Cell<bool>,
    /// The file may hold what no fdatasync covered yet: [`sync`](EntryFile::sync) skips the
    /// fdatasync otherwise (a checkpoint of a partition under one index interval then syncs
    /// only its log). True until the first sync of a file opened from disk.
    unsynced: Cell<bool>,
}

/// Decodes whole entries; a trailing partial entry is ignored (a torn write).
pub fn decode_entries<E: Entry>(bytes: &[u8]) -> Vec<E> {
    bytes.chunks_exact(E::LEN).map(E::decode).collect()
}

impl<F: StorageFile, E: Entry> EntryFile<F, E> {
    /// `entries` are those the file already holds, strictly increasing (recovery keeps only
    /// the sane prefix of what it reads); a file not made holds none.
    pub fn new(file: IndexFile<F>, entries: Vec<E>) -> Self {
        assert_increasing(None, &entries);
        let made = matches!(file, IndexFile::Open(_));
        assert!(made || entries.is_empty(), "entries read from a file not made");
        EntryFile {
            file: RefCell::new(file),
            written: Cell::new(entries.len()),
            count: Cell::new(entries.len()),
            last: Cell::new(entries.last().copied()),
            entries: RefCell::new(Some(entries)),
            used: Cell::new(true),
            // A file opened from disk may hold what no fdatasync covered; one not made, nothing.
            unsynced: Cell::new(made),
        }
    }

    /// Whether the file exists (its first entry was written, or it was there when opened).
    pub fn is_made(&self) -> bool {
        self.file.borrow().opened().is_some()
    }

    /// The file, made now if it is not yet. Two callers making it at once both open the same
    /// path; the first to finish is kept.
    async fn made(&self) -> io::Result<Rc<F>> {
        let (maker, base_offset, suffix) = match &*self.file.borrow() {
            IndexFile::Open(file) => return Ok(file.clone()),
            IndexFile::NotMade {
                maker,
                base_offset,
                suffix,
            } => (maker.clone(), *base_offset, *suffix),
        };
        let file = maker.make(base_offset, suffix).await?;
        let mut slot = self.file.borrow_mut();
        if let Some(first) = slot.opened() {
            return Ok(first);
        }
        *slot = IndexFile::Open(file.clone());
        Ok(file)
    }

    /// Says the file holds nothing unsynced: only for a file just created, empty, whose
    /// creation the caller's directory fsync covers.
    pub fn assume_synced(&self) {
        assert_eq!(
            self.written.get(),
            0,
            "only an empty new file is synced by its creation"
        );
        self.unsynced.set(false);
    }

    /// Brings the entries back into memory if they were released, and marks them used.
    pub async fn load(&self) -> io::Result<()> {
        self.used.set(true);
        if self.entries.borrow().is_some() {
            return Ok(());
        }
        // Released entries were all written, so their file is made.
        let file = self.file.borrow().clone();
        assert!(
            matches!(file, IndexFile::Open(_)),
            "released entries are in a file"
        );
        let read: Vec<E> = file.read_entries().await?;
        // Nothing changes the entries while they are released (every writer loads them first).
        let increasing = read.windows(2).all(|pair| pair[1].follows(&pair[0]));
        let same = read.len() == self.count.get() && read.last().copied() == self.last.get();
        if !(increasing && same) {
            let message = format!(
                "index file holds {} entries, not the {} released (or out of order)",
                read.len(),
                self.count.get()
            );
            return Err(io::Error::new(io::ErrorKind::InvalidData, message));
        }
        let mut entries = self.entries.borrow_mut();
        if entries.is_none() {
            *entries = Some(read); // else another use loaded them meanwhile
        }
        Ok(())
    }

    /// Whether entries are in memory for [`release_if_unused`](Self::release_if_unused) to drop.
    pub fn holds_entries(&self) -> bool {
        self.count.get() > 0 && self.entries.borrow().is_some()
    }

    /// Drops the entries from memory when all of them are in the file and nothing used them
    /// since the last call; returns whether it did.
    pub fn release_if_unused(&self) -> bool {
        let unused = !self.used.replace(false);
        let all_written = self.written.get() == self.count.get();
        if !(unused && all_written) || self.count.get() == 0 {
            return false;
        }
        self.entries.borrow_mut().take().is_some()
    }

    /// Writes what the file lacks, then fdatasyncs it if anything was written since the last.
    pub async fn sync(&self) -> io::Result<()> {
        self.write_pending().await?;
        if !self.unsynced.get() {
            return Ok(());
        }
        let file = self.file.borrow().opened();
        if let Some(file) = file {
            file.fdatasync().await?;
        }
        self.unsynced.set(false);
        Ok(())
    }

    /// Gives the file's descriptor back until its next use (see
    /// `StorageFile::close_until_used`); the entries stay as they are.
    pub async fn close_until_used(&self) {
        let file = self.file.borrow().opened();
        if let Some(file) = file {
            file.close_until_used().await;
        }
    }

    /// Writes what the file lacks, then closes it (if it was ever made).
    pub async fn close(&self) -> io::Result<()> {
        self.write_pending().await?;
        let file = self.file.borrow().opened();
        match file {
            Some(file) => file.close().await,
            None => Ok(()),
        }
    }

    pub fn len(&self) -> usize {
        self.count.get()
    }

    /// Entries in the file (the first ones; the rest wait in memory).
    pub fn written(&self) -> usize {
        self.written.get()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn last(&self) -> Option<E> {
        self.last.get()
    }

    /// The last entry for which `is_before` holds, entries being sorted so that `is_before` is
    /// true for a prefix. `None` too while the entries are released: callers that need the
    /// answer [`load`](Self::load) them first; the others fall back to reading the log.
    pub fn last_where(&self, is_before: impl Fn(&E) -> bool) -> Option<E> {
        self.used.set(true);
        let entries = self.entries.borrow();
        let entries = entries.as_ref()?;
        let n = entries.partition_point(is_before);
        n.checked_sub(1).map(|i| entries[i])
    }

    /// Appends entries to memory, and to the file once [`WRITE_BEHIND_ENTRIES`] are waiting.
    /// They strictly increase, from the last entry on.
    pub async fn append(&self, new: &[E]) -> io::Result<()> {
        if new.is_empty() {
            return Ok(());
        }
        self.load().await?;
        let waiting = {
            let mut entries = self.entries.borrow_mut();
            let entries = entries.as_mut().expect("loaded above, and nothing awaits since");
            assert_increasing(entries.last(), new);
            entries.extend_from_slice(new);
            self.count.set(entries.len());
            self.last.set(entries.last().copied());
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
            let Some(entries) = entries.as_ref() else {
                return Ok(()); // released: all of them are in the file
            };
            let from = self.written.get();
            let mut buf = Vec::with_capacity((entries.len() - from) * E::LEN);
            entries[from..].iter().for_each(|e| e.encode(&mut buf));
            (from, buf)
        };
        if buf.is_empty() {
            return Ok(());
        }
        let file = self.made().await?;
        self.unsynced.set(true);
        file.write_at((from * E::LEN) as u64, &[&buf]).await?;
        self.written.set(from + buf.len() / E::LEN);
        Ok(())
    }

    /// Keeps the entries whose relative offset is below `relative_offset`.
    pub async fn truncate_from(&self, relative_offset: u32) -> io::Result<()> {
        self.load().await?;
        let keep = {
            let mut entries = self.entries.borrow_mut();
            let entries = entries.as_mut().expect("loaded above, and nothing awaits since");
            let keep = entries.partition_point(|e| e.relative_offset() < relative_offset);
            entries.truncate(keep);
            self.count.set(keep);
            self.last.set(entries.last().copied());
            keep
        };
        self.keep_written(keep).await
    }

    /// Cuts the file to at most `keep` entries (it may hold fewer: the rest are unwritten). A
    /// file not made holds none.
    async fn keep_written(&self, keep: usize) -> io::Result<()> {
        let written = self.written.get().min(keep);
        self.written.set(written);
        let file = self.file.borrow().opened();
        let Some(file) = file else {
            return Ok(());
        };
        self.unsynced.set(true);
        file.truncate((written * E::LEN) as u64).await
    }

    /// Replaces the file's content with the in-memory entries plus `extra`.
    pub async fn rewrite(&self, keep: usize, extra: &[E]) -> io::Result<()> {
        self.load().await?;
        {
            let mut entries = self.entries.borrow_mut();
            let entries = entries.as_mut().expect("loaded above, and nothing awaits since");
            assert!(keep <= entries.len(), "rewrite keeps existing entries only");
            entries.truncate(keep);
            self.count.set(keep);
            self.last.set(entries.last().copied());
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
    use crate::log::segment::SegmentFileMaker;
    use futures::executor::block_on;
    use std::path::Path;

    fn entry(relative_offset: u32) -> IndexEntry {
        IndexEntry {
            relative_offset,
            position: relative_offset * 100,
        }
    }

    async fn on_file(file: &Rc<crate::io::MemHandle>) -> Vec<IndexEntry> {
        IndexFile::Open(file.clone()).read_entries().await.unwrap()
    }

    /// In-memory storage with the directory `/d`, and the maker of its segments' files.
    async fn storage_and_maker() -> (Rc<FaultyStorage>, Rc<SegmentFileMaker<FaultyStorage>>) {
        let storage = Rc::new(FaultyStorage::new(1));
        let dir = Path::new("/d");
        storage.create_dir_all(dir).await.unwrap();
        let maker = SegmentFileMaker::new(storage.clone(), dir.to_path_buf());
        (storage, maker)
    }

    #[test]
    fn an_index_file_is_made_at_its_first_written_entry_and_not_before() {
        block_on(async {
            let (storage, maker) = storage_and_maker().await;
            let files = maker.open(0).await.unwrap();
            assert!(
                matches!(files.index, IndexFile::NotMade { .. }),
                "not there: not made"
            );
            let index = EntryFile::<_, IndexEntry>::new(files.index, Vec::new());
            let path = Path::new("/d/00000000000000000000.index");
            // Nothing to write: syncs, cuts and closes make nothing.
            index.sync().await.unwrap();
            index.truncate_from(0).await.unwrap();
            index.append(&[entry(1), entry(2)]).await.unwrap();
            assert!(
                !index.is_made() && storage.file_bytes(path).is_none(),
                "entries wait in memory"
            );
            index.truncate_from(2).await.unwrap();
            assert_eq!(index.last_where(|_| true), Some(entry(1)));
            index.sync().await.unwrap();
            assert!(index.is_made(), "the first written entry makes it");
            assert_eq!(storage.file_bytes(path).unwrap().len(), IndexEntry::LEN);
            // Opened again, it is the file, with what was written.
            let files = maker.open(0).await.unwrap();
            assert_eq!(
                files.index.read_entries::<IndexEntry>().await.unwrap(),
                vec![entry(1)]
            );
            let other = EntryFile::<_, IndexEntry>::new(maker.open(5).await.unwrap().time_index, Vec::new());
            other.close().await.unwrap();
            assert!(storage
                .file_bytes(Path::new("/d/00000000000000000005.timeindex"))
                .is_none());
        });
    }

    /// Only recovery looks for a segment's index files: a new segment's are not made yet, even
    /// where a file of that name is left over (it is opened, and written from its start, when
    /// the first entry makes it), so a new partition costs one open.
    #[test]
    fn a_new_segment_opens_its_log_only() {
        block_on(async {
            let (storage, maker) = storage_and_maker().await;
            storage.set_file_bytes(Path::new("/d/00000000000000000000.index"), vec![0; 8]);
            let created = maker.create(0).await.unwrap();
            assert!(matches!(created.index, IndexFile::NotMade { .. }));
            assert!(matches!(created.time_index, IndexFile::NotMade { .. }));
            assert!(storage
                .file_bytes(Path::new("/d/00000000000000000000.log"))
                .is_some());
            let opened = maker.open(0).await.unwrap();
            assert!(matches!(opened.index, IndexFile::Open(_)), "recovery finds it");
        });
    }

    #[test]
    fn entries_reach_the_file_in_bulk_and_all_of_them_by_sync_or_close() {
        block_on(async {
            let storage = FaultyStorage::new(1);
            storage.create_dir_all(Path::new("/d")).await.unwrap();
            let path = Path::new("/d/0.index");
            let file = storage.open(path, true).await.unwrap();
            let index = EntryFile::new(IndexFile::Open(file.clone()), Vec::new());
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
            assert_eq!(on_file(&file).await, wanted);

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
            let on_file = on_file(&reopened).await;
            assert_eq!(on_file, vec![entry(1), entry(2), entry(10)]);
        });
    }

    #[test]
    fn unused_entries_leave_memory_and_come_back_from_the_file_as_they_were() {
        block_on(async {
            let storage = FaultyStorage::new(1);
            storage.create_dir_all(Path::new("/d")).await.unwrap();
            let path = Path::new("/d/0.index");
            let file = storage.open(path, true).await.unwrap();
            let index = EntryFile::new(IndexFile::Open(file.clone()), Vec::new());
            let wanted: Vec<IndexEntry> = (1..=10).map(entry).collect();
            index.append(&wanted).await.unwrap();
            assert!(!index.release_if_unused(), "used since");
            assert!(!index.release_if_unused(), "not all in the file yet");
            index.write_pending().await.unwrap();
            assert!(
                index.release_if_unused(),
                "unused since the last call, all written"
            );
            assert_eq!((index.len(), index.last()), (10, Some(entry(10))));
            assert_eq!(
                index.last_where(|e| e.relative_offset <= 4),
                None,
                "not in memory"
            );
            index.load().await.unwrap();
            assert_eq!(index.last_where(|e| e.relative_offset <= 4), Some(entry(4)));
            // Appending to released entries brings them back first.
            index.release_if_unused();
            assert!(index.release_if_unused());
            index.append(&[entry(11)]).await.unwrap();
            assert_eq!(index.last_where(|e| e.relative_offset <= 11), Some(entry(11)));

            // A file that no longer holds what was released is refused, not used.
            index.write_pending().await.unwrap();
            index.release_if_unused();
            assert!(index.release_if_unused());
            let mut bytes = storage.file_bytes(path).unwrap();
            bytes.truncate(bytes.len() - IndexEntry::LEN);
            storage.set_file_bytes(path, bytes);
            let reopened = storage.open(path, false).await.unwrap();
            let tampered = EntryFile::<_, IndexEntry>::new(IndexFile::Open(reopened), Vec::new());
            tampered.count.set(11);
            tampered.last.set(Some(entry(11)));
            tampered.entries.borrow_mut().take();
            let error = tampered.load().await.unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
        });
    }

    #[test]
    #[should_panic(expected = "index entry")]
    fn appending_an_entry_that_does_not_follow_the_last_is_a_bug() {
        block_on(async {
            let storage = FaultyStorage::new(1);
            storage.create_dir_all(Path::new("/d")).await.unwrap();
            let file = storage.open(Path::new("/d/0.index"), true).await.unwrap();
            let index = EntryFile::new(IndexFile::Open(file), vec![entry(5)]);
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
