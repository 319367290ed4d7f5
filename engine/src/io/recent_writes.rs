//! The shard's cache of recently written segment bytes, for O_DIRECT files (docs/decisions/0049).
//! Owned by one shard; not Send.
//!
//! Why: O_DIRECT writes leave nothing in the page cache, so without this every read of data
//! just written (a consumer at the tail, a follower fetching) would go to the disk: a consume
//! right after a produce ran at 398–425 MB/s and 3.7–4.0 s of broker CPU per GB against
//! 1289–1633 MB/s and 0.6–0.7 s/GB buffered.
//!
//! What it holds: the bytes each completed O_DIRECT append write carried for the first time
//! (not its rewritten head nor its zero padding), as one chunk per write, keyed by file and
//! offset, at most `bytes_max` bytes in all. A read wholly inside one chunk is a slice of it
//! (no copy); one across contiguous chunks is copied once; anything else goes to the disk.
//! The oldest chunks go first when the bound is reached. A file's chunks are dropped when it
//! is truncated below them, emptied for reuse, overwritten or closed.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::{Bytes, BytesMut};

use super::FileId;

/// One shard's recent writes. Owned by one shard; not Send.
#[derive(Debug, Default)]
pub struct RecentWrites {
    bytes_max: u64,
    bytes: Cell<u64>,
    /// Each file's chunks by their offset: contiguous runs, never overlapping.
    files: RefCell<HashMap<FileId, BTreeMap<u64, Bytes>>>,
    /// Chunks in the order they came, for eviction; an entry whose chunk is gone is skipped.
    order: RefCell<VecDeque<(FileId, u64)>>,
    /// Chunks held.
    chunks: Cell<usize>,
}

impl RecentWrites {
    /// A cache of at most `bytes_max` bytes (0: none).
    pub fn new(bytes_max: u64) -> RecentWrites {
        RecentWrites {
            bytes_max,
            ..RecentWrites::default()
        }
    }

    /// Whether it keeps anything.
    pub fn is_on(&self) -> bool {
        self.bytes_max > 0
    }

    /// Bytes held now.
    pub fn bytes(&self) -> u64 {
        self.bytes.get()
    }

    /// Keeps `chunk`, the bytes of `file` at `at`, which directly follow what the file held
    /// before; evicts the oldest chunks past the bound.
    pub fn insert(&self, file: FileId, at: u64, chunk: Bytes) {
        let len = chunk.len() as u64;
        if len == 0 || len > self.bytes_max {
            return;
        }
        while self.bytes.get() + len > self.bytes_max && self.evict_oldest() {}
        let mut files = self.files.borrow_mut();
        let chunks = files.entry(file).or_default();
        match chunks.insert(at, chunk) {
            Some(old) => self.bytes.set(self.bytes.get() - old.len() as u64),
            None => self.chunks.set(self.chunks.get() + 1),
        }
        drop(files);
        self.bytes.set(self.bytes.get() + len);
        self.order.borrow_mut().push_back((file, at));
        self.compact_order();
    }

    fn evict_oldest(&self) -> bool {
        let Some((file, at)) = self.order.borrow_mut().pop_front() else {
            return false;
        };
        let mut files = self.files.borrow_mut();
        if let Some(chunks) = files.get_mut(&file) {
            // Whatever chunk is there now (a cut may have shortened it) is the oldest at `at`.
            if let Some(chunk) = chunks.remove(&at) {
                self.bytes.set(self.bytes.get() - chunk.len() as u64);
                self.chunks.set(self.chunks.get() - 1);
            }
            if chunks.is_empty() {
                files.remove(&file);
            }
        }
        true
    }

    /// Drops the entries of chunks no longer held once they outnumber the chunks, so that the
    /// eviction order stays within twice the chunks held.
    fn compact_order(&self) {
        let mut order = self.order.borrow_mut();
        if order.len() <= 2 * self.chunks.get() + 64 {
            return;
        }
        let files = self.files.borrow();
        order.retain(|(file, at)| files.get(file).is_some_and(|chunks| chunks.contains_key(at)));
    }

    /// `file`'s bytes `[pos, pos + len)`, if every one of them is held.
    pub fn read(&self, file: FileId, pos: u64, len: usize) -> Option<Bytes> {
        let files = self.files.borrow();
        let chunks = files.get(&file)?;
        let end = pos + len as u64;
        let (&first_at, first) = chunks.range(..=pos).next_back()?;
        let first_end = first_at + first.len() as u64;
        if end <= first_end {
            let from = (pos - first_at) as usize;
            return Some(first.slice(from..from + len));
        }
        if first_end <= pos {
            return None;
        }
        let mut out = BytesMut::with_capacity(len);
        out.extend_from_slice(&first[(pos - first_at) as usize..]);
        let mut next = first_end;
        for (&at, chunk) in chunks.range(first_end..end) {
            if at != next {
                return None;
            }
            let take = chunk.len().min((end - at) as usize);
            out.extend_from_slice(&chunk[..take]);
            next = at + chunk.len() as u64;
        }
        (next >= end).then(|| out.freeze())
    }

    /// Drops what `file` holds at or past `len`.
    pub fn cut(&self, file: FileId, len: u64) {
        let mut files = self.files.borrow_mut();
        let Some(chunks) = files.get_mut(&file) else {
            return;
        };
        let gone = chunks.split_off(&len);
        self.chunks.set(self.chunks.get() - gone.len());
        let mut freed: u64 = gone.values().map(|chunk| chunk.len() as u64).sum();
        if let Some((&at, chunk)) = chunks.range_mut(..len).next_back() {
            let keep = (len - at) as usize;
            if chunk.len() > keep {
                freed += (chunk.len() - keep) as u64;
                chunk.truncate(keep);
            }
        }
        self.bytes.set(self.bytes.get() - freed);
        if chunks.is_empty() {
            files.remove(&file);
        }
    }

    /// Drops everything `file` holds.
    pub fn forget(&self, file: FileId) {
        self.cut(file, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: FileId = FileId { device: 1, inode: 2 };
    const OTHER: FileId = FileId { device: 1, inode: 3 };

    fn cache_with(chunks: &[(u64, &'static [u8])], bytes_max: u64) -> RecentWrites {
        let cache = RecentWrites::new(bytes_max);
        for &(at, chunk) in chunks {
            cache.insert(FILE, at, Bytes::from_static(chunk));
        }
        cache
    }

    #[test]
    fn reads_inside_a_chunk_across_contiguous_chunks_and_not_past_a_gap() {
        let cache = cache_with(&[(0, b"hello "), (6, b"world"), (20, b"later")], 100);
        assert_eq!(cache.read(FILE, 1, 3).as_deref(), Some(&b"ell"[..]));
        assert_eq!(cache.read(FILE, 3, 6).as_deref(), Some(&b"lo wor"[..]));
        assert_eq!(cache.read(FILE, 0, 11).as_deref(), Some(&b"hello world"[..]));
        assert_eq!(cache.read(FILE, 8, 10), None, "past the held bytes");
        assert_eq!(cache.read(FILE, 12, 2), None, "in the gap");
        assert_eq!(cache.read(FILE, 21, 4).as_deref(), Some(&b"ater"[..]));
        assert_eq!(cache.read(OTHER, 0, 1), None);
        assert_eq!(cache.bytes(), 16);
    }

    #[test]
    fn the_oldest_chunks_go_first_at_the_bound() {
        let cache = cache_with(&[(0, b"aaaa"), (4, b"bbbb"), (8, b"cccc")], 10);
        assert_eq!(
            cache.bytes(),
            8,
            "the first chunk went to make room for the third"
        );
        assert_eq!(cache.read(FILE, 0, 1), None);
        assert_eq!(cache.read(FILE, 4, 8).as_deref(), Some(&b"bbbbcccc"[..]));
        cache.insert(FILE, 12, Bytes::from_static(b"too large for the whole cache"));
        assert_eq!(cache.bytes(), 8, "a chunk past the bound is not kept");
    }

    #[test]
    fn a_cut_drops_and_shortens_chunks_and_a_forget_drops_them_all() {
        let cache = cache_with(&[(0, b"hello "), (6, b"world")], 100);
        cache.cut(FILE, 8);
        assert_eq!(cache.bytes(), 8);
        assert_eq!(cache.read(FILE, 0, 8).as_deref(), Some(&b"hello wo"[..]));
        assert_eq!(cache.read(FILE, 0, 9), None);
        cache.insert(FILE, 8, Bytes::from_static(b"nder"));
        assert_eq!(cache.read(FILE, 4, 8).as_deref(), Some(&b"o wonder"[..]));
        cache.forget(FILE);
        assert_eq!(cache.bytes(), 0);
        assert_eq!(cache.read(FILE, 0, 1), None);
        // Entries of chunks no longer there are skipped by eviction, never double-counted.
        cache.insert(FILE, 0, Bytes::from_static(b"x"));
        assert_eq!(cache.bytes(), 1);
    }
}
