//! The unsynced data of one file: the pages written since its last fsync, held in memory
//! over the backing file, which keeps what the last fsync left there.

use std::cmp::{max, min};
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;

/// The unit of the overlay, and of what a power cut keeps or loses.
pub const PAGE_SIZE: usize = 4096;
/// The unit a torn page is torn at: a disk writes a page's sectors in order and may stop between.
pub const SECTOR_SIZE: usize = 512;

const PAGE: u64 = PAGE_SIZE as u64;

/// One page of unsynced data: the whole page as the file now holds it (bytes nobody wrote are
/// the backing file's, zeros past the logical length) and the span written since the last sync.
pub struct Page {
    bytes: Box<[u8; PAGE_SIZE]>,
    written: Range<usize>,
}

/// A file's unsynced pages, by page index, and its logical length (what `stat` reports: the
/// backing file's length, extended by the unsynced writes past it).
///
/// Invariants: no page lies wholly past `len`; bytes of a page past `len` are zero; the
/// backing file is never longer than `len`.
pub struct Overlay {
    pages: BTreeMap<u64, Page>,
    len: u64,
}

impl Overlay {
    /// An overlay with no pages over a backing file of `backing_len` bytes.
    pub fn new(backing_len: u64) -> Overlay {
        Overlay {
            pages: BTreeMap::new(),
            len: backing_len,
        }
    }

    /// The logical length of the file.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// The number of bytes written since the last sync (each page counts the span from its
    /// first to its last written byte).
    pub fn unsynced_bytes(&self) -> u64 {
        self.pages.values().map(|page| page.written.len() as u64).sum()
    }

    /// The unsynced pages in file order, with their indexes.
    pub fn pages(&self) -> impl Iterator<Item = (u64, &Page)> {
        self.pages.iter().map(|(index, page)| (*index, page))
    }

    /// Copies `data` into the pages at `offset` (a page written for the first time is first
    /// read from `backing`) and extends the logical length to cover it.
    pub fn write(&mut self, backing: &File, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut done = 0;
        while done < data.len() {
            let pos = offset + done as u64;
            let in_page = (pos % PAGE) as usize;
            let take = min(PAGE_SIZE - in_page, data.len() - done);
            let page = self.page_to_write(backing, pos / PAGE)?;
            page.bytes[in_page..in_page + take].copy_from_slice(&data[done..done + take]);
            page.written = span_union(&page.written, &(in_page..in_page + take));
            done += take;
        }
        self.len = max(self.len, offset + data.len() as u64);
        Ok(())
    }

    fn page_to_write(&mut self, backing: &File, index: u64) -> io::Result<&mut Page> {
        if !self.pages.contains_key(&index) {
            let mut bytes = Box::new([0u8; PAGE_SIZE]);
            let start = index * PAGE;
            if start < self.len {
                let valid = min(PAGE, self.len - start) as usize;
                read_at_most(backing, start, &mut bytes[..valid])?;
            }
            self.pages.insert(index, Page { bytes, written: 0..0 });
        }
        Ok(self.pages.get_mut(&index).expect("inserted above"))
    }

    /// The file's bytes in `[offset, offset + size)`, cut at the logical length: the pages'
    /// where there are pages, the backing file's elsewhere, zeros past the backing file's end.
    pub fn read(&self, backing: &File, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        let end = min(offset.saturating_add(u64::from(size)), self.len);
        if offset >= end {
            return Ok(Vec::new());
        }
        let mut buf = vec![0; (end - offset) as usize];
        read_at_most(backing, offset, &mut buf)?;
        for (index, page) in self.pages.range(offset / PAGE..=(end - 1) / PAGE) {
            let page_start = index * PAGE;
            let from = max(offset, page_start);
            let to = min(end, page_start + PAGE);
            buf[(from - offset) as usize..(to - offset) as usize]
                .copy_from_slice(&page.bytes[(from - page_start) as usize..(to - page_start) as usize]);
        }
        Ok(buf)
    }

    /// Sets the logical length (a truncate, which the caller applies to the backing file
    /// too): pages wholly past it go, the tail of the page it cuts becomes zeros.
    pub fn truncate(&mut self, len: u64) {
        self.pages.split_off(&len.div_ceil(PAGE));
        let cut_in_page = (len % PAGE) as usize;
        if cut_in_page != 0 {
            if let Some(page) = self.pages.get_mut(&(len / PAGE)) {
                page.bytes[cut_in_page..].fill(0);
                page.written.end = min(page.written.end, cut_in_page);
                if page.written.start >= page.written.end {
                    // Nothing written below the cut: the page is the backing file's again.
                    self.pages.remove(&(len / PAGE));
                }
            }
        }
        self.len = len;
    }

    /// Zeros `[offset, offset + length)` in the pages (a hole punched or a range zeroed in the
    /// backing file at once, which must not come back from the overlay).
    pub fn zero_range(&mut self, offset: u64, length: u64) {
        let end = offset.saturating_add(length);
        if end <= offset {
            return;
        }
        for (index, page) in self.pages.range_mut(offset / PAGE..=(end - 1) / PAGE) {
            let page_start = index * PAGE;
            let from = (max(offset, page_start) - page_start) as usize;
            let to = (min(end, page_start + PAGE) - page_start) as usize;
            page.bytes[from..to].fill(0);
        }
    }

    /// Extends the logical length to at least `len` (a preallocation the backing file took
    /// at once).
    pub fn extend_len(&mut self, len: u64) {
        self.len = max(self.len, len);
    }

    /// True when no page is left (the backing file then holds the whole file).
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// The fsync: writes every page to `backing` (never past the logical length) and sets the
    /// backing file's length to the logical length.
    pub fn write_back(&self, backing: &File) -> io::Result<()> {
        for (index, page) in &self.pages {
            page.write_prefix(backing, *index, PAGE_SIZE, self.len)?;
        }
        backing.set_len(self.len)
    }
}

impl Page {
    /// Writes the page's first `bytes` bytes at its place (page `index`) in `backing`, never
    /// past `file_len` (the logical length).
    pub fn write_prefix(&self, backing: &File, index: u64, bytes: usize, file_len: u64) -> io::Result<()> {
        let start = index * PAGE;
        let len = min(bytes as u64, file_len.saturating_sub(start)) as usize;
        backing.write_all_at(&self.bytes[..len], start)
    }
}

/// Reads from `file` at `offset` until `buf` is full or the file ends; what lies past the end
/// stays as it was in `buf`. Returns the bytes read.
pub fn read_at_most(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(done)
}

/// The smallest span covering both (an empty span covers nothing).
fn span_union(a: &Range<usize>, b: &Range<usize>) -> Range<usize> {
    if a.is_empty() {
        return b.clone();
    }
    min(a.start, b.start)..max(a.end, b.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backing_with(contents: &[u8]) -> File {
        let file = tempfile::tempfile().unwrap();
        file.write_all_at(contents, 0).unwrap();
        file
    }

    #[test]
    fn reads_overlay_over_backing_and_zeros_in_holes() {
        let backing = backing_with(&[1; 100]);
        let mut overlay = Overlay::new(100);
        overlay.write(&backing, 50, &[2; 10]).unwrap();
        overlay.write(&backing, 3 * PAGE + 10, &[3; 5]).unwrap();
        assert_eq!(overlay.len(), 3 * PAGE + 15);
        let all = overlay.read(&backing, 0, u32::MAX).unwrap();
        assert_eq!(all.len() as u64, 3 * PAGE + 15);
        assert_eq!(&all[..50], &[1; 50]);
        assert_eq!(&all[50..60], &[2; 10]);
        assert_eq!(&all[60..100], &[1; 40]);
        assert!(all[100..3 * PAGE_SIZE + 10].iter().all(|&b| b == 0));
        assert_eq!(&all[3 * PAGE_SIZE + 10..], &[3; 5]);
        assert_eq!(overlay.unsynced_bytes(), 15);
    }

    #[test]
    fn truncate_zeroes_the_tail_and_drops_later_pages() {
        let backing = backing_with(&[]);
        let mut overlay = Overlay::new(0);
        overlay.write(&backing, 0, &[7; 3 * PAGE_SIZE]).unwrap();
        overlay.truncate(PAGE + 100);
        overlay.extend_len(3 * PAGE);
        let all = overlay.read(&backing, 0, u32::MAX).unwrap();
        assert_eq!(&all[..PAGE_SIZE + 100], &[7; PAGE_SIZE + 100][..]);
        assert!(all[PAGE_SIZE + 100..].iter().all(|&b| b == 0));
        assert_eq!(overlay.unsynced_bytes(), PAGE + 100);
    }

    #[test]
    fn write_back_stops_at_the_logical_length() {
        let backing = backing_with(&[1; 10]);
        let mut overlay = Overlay::new(10);
        overlay.write(&backing, 5, &[9; 20]).unwrap();
        overlay.write_back(&backing).unwrap();
        assert_eq!(backing.metadata().unwrap().len(), 25);
        let mut buf = [0; 25];
        backing.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf[..5], &[1; 5]);
        assert_eq!(&buf[5..], &[9; 20]);
    }
}
