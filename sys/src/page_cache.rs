//! What of a file is in the page cache, and reading it from there without waiting on the disk:
//! `preadv2(RWF_NOWAIT)`, `cachestat`, `mincore` over a mapping made for the call, and
//! `posix_fadvise(POSIX_FADV_DONTNEED)` to drop pages (tests and probes make data cold with it).

use std::io;
use std::ops::Range;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::mapping::{map_file, unmap};
use crate::memory::page_bytes;

/// Whether the byte at `pos` of the open file `fd` is in the page cache: a one-byte `preadv2`
/// with `RWF_NOWAIT`, which fails with `EAGAIN` instead of going to the disk. `false` also where
/// the filesystem cannot say.
pub fn is_cached(fd: RawFd, pos: u64) -> io::Result<bool> {
    let mut byte = [0u8; 1];
    let slice = io::IoSliceMut::new(&mut byte);
    Ok(read_without_waiting(fd, slice, pos)?.is_some())
}

/// The `len` bytes of the open file `fd` from `pos` (fewer at its end), when all are in the
/// page cache: read on this thread with `preadv2(RWF_NOWAIT)` straight into the returned
/// buffer's uninitialised room. `None` when one is not cached (or the filesystem cannot say),
/// so the caller reads through io_uring instead and its thread never waits on the disk.
pub fn read_cached(fd: RawFd, pos: u64, len: usize) -> io::Result<Option<bytes::Bytes>> {
    let mut buffer = bytes::BytesMut::with_capacity(len);
    while buffer.len() < len {
        let held = buffer.len();
        let spare = &mut buffer.spare_capacity_mut()[..len - held];
        // SAFETY: `spare` is allocated, writable memory owned by `buffer`; it is only written
        // (by the kernel) before the bytes counted are marked initialised below.
        let room = io::IoSliceMut::new(unsafe {
            std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<u8>(), spare.len())
        });
        let Some(read) = read_without_waiting(fd, room, pos + held as u64)? else {
            return Ok(None);
        };
        if read == 0 {
            break; // the end of the file
        }
        assert!(read <= len - held, "preadv2 read past the room it was given");
        // SAFETY: the kernel just wrote `read` bytes at the start of the spare capacity.
        unsafe { buffer.set_len(held + read) };
    }
    Ok(Some(buffer.freeze()))
}

/// One `preadv2(RWF_NOWAIT)` into `room` at `pos`: the bytes read (0 at the end of the file),
/// or `None` when the first is not in the page cache or the filesystem cannot tell.
fn read_without_waiting(fd: RawFd, room: io::IoSliceMut<'_>, pos: u64) -> io::Result<Option<usize>> {
    let offset = crate::to_off_t(pos, "file position")?;
    loop {
        // SAFETY: `IoSliceMut` is ABI-compatible with `struct iovec`; `room` outlives the call,
        // which writes at most its length into it.
        let read = unsafe {
            libc::preadv2(
                fd,
                (&room as *const io::IoSliceMut<'_>).cast(),
                1,
                offset,
                libc::RWF_NOWAIT,
            )
        };
        if read >= 0 {
            return Ok(Some(read as usize));
        }
        match io::Error::last_os_error() {
            e if e.kind() == io::ErrorKind::Interrupted => continue,
            e if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            // A filesystem that cannot tell (no RWF_NOWAIT reads): treated as not cached, so
            // the caller takes its path that cannot block.
            e if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL)) => return Ok(None),
            e => return Err(e),
        }
    }
}

/// Linux's `struct cachestat` (include/uapi/linux/mman.h): pages of a file range in the page
/// cache, and how many of them are dirty, under writeback or were evicted.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Cachestat {
    /// Pages in the page cache.
    pub nr_cache: u64,
    /// Of those, dirty.
    pub nr_dirty: u64,
    /// Of those, under writeback.
    pub nr_writeback: u64,
    /// Pages evicted.
    pub nr_evicted: u64,
    /// Pages evicted recently (their shadow entries still held).
    pub nr_recently_evicted: u64,
}

/// Linux's `struct cachestat_range`.
#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

/// `cachestat(2)` of `[off, off + len)` of the open file `fd` (Linux 6.5+; the same system call
/// number on every architecture). `ENOSYS` where the kernel lacks it.
pub fn cachestat(fd: RawFd, off: u64, len: u64) -> io::Result<Cachestat> {
    const SYS_CACHESTAT: libc::c_long = 451;
    let range = CachestatRange { off, len };
    let mut out = Cachestat::default();
    // SAFETY: `range` and `out` are live, laid out as the kernel's structs (repr(C)) and outlive
    // the call, which reads the one and writes the other; the flags argument must be 0.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd,
            &range as *const CachestatRange,
            &mut out as *mut Cachestat,
            0u32,
        )
    };
    match rc {
        0 => Ok(out),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Asks the kernel to drop the clean pages of `[pos, pos + len)` of the open file `fd` from the
/// page cache (`len` 0: to the end), so that a buffered read that follows comes from the disk.
pub fn drop_page_cache(fd: RawFd, pos: u64, len: u64) -> io::Result<()> {
    let (pos, len) = (
        crate::to_off_t(pos, "file position")?,
        crate::to_off_t(len, "length")?,
    );
    // SAFETY: posix_fadvise only reads its integer arguments; it touches no memory of ours.
    let error = unsafe { libc::posix_fadvise(fd, pos, len, libc::POSIX_FADV_DONTNEED) };
    match error {
        0 => Ok(()),
        error => Err(io::Error::from_raw_os_error(error)),
    }
}

/// Set once `cachestat` answered ENOSYS: a kernel before 6.5, or built without it.
static CACHESTAT_MISSING: AtomicBool = AtomicBool::new(false);

/// Whether every page of `[pos, pos + len)` of the open file `fd` is in the page cache, counted
/// by the kernel in one call (`cachestat`, Linux 6.5). `None` where the kernel cannot count
/// them (too old, or a file system without a page cache), so the caller probes instead.
pub fn range_cached(fd: RawFd, pos: u64, len: u64) -> io::Result<Option<bool>> {
    if len == 0 {
        return Ok(Some(true));
    }
    if CACHESTAT_MISSING.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let counts = match cachestat(fd, pos, len) {
        Ok(counts) => counts,
        Err(error) if error.raw_os_error() == Some(libc::ENOSYS) => {
            CACHESTAT_MISSING.store(true, Ordering::Relaxed);
            return Ok(None);
        }
        Err(error) if error.raw_os_error() == Some(libc::EOPNOTSUPP) => return Ok(None),
        Err(error) => return Err(error),
    };
    let pages = pages_of(pos, len);
    Ok(Some(counts.nr_cache >= pages.end - pages.start))
}

/// Missing pages closer than this join one run: reading a few cached pages with them costs less
/// than one more read.
const RUN_GAP_JOINED_BYTES: u64 = 64 * 1024;

/// Pages `mincore` reports on per call: the window mapped at a time (16 MiB of 4 KiB pages).
const MINCORE_WINDOW_PAGES: usize = 4096;

/// The runs of pages of `[pos, pos + len)` of the open file `fd` that are not in the page
/// cache, in order, as byte ranges clipped to the range (runs less than
/// `RUN_GAP_JOINED_BYTES` apart joined); `None` when there are more than `runs_max` of them
/// or the file cannot be mapped. Reclaim takes pages one or two at a time, hundreds in a
/// range of 50 MiB: `mincore` tells them all from one mapping of the range, a window at a
/// time, where counting with `cachestat` would take a call per halving.
pub fn uncached_runs(fd: RawFd, pos: u64, len: u64, runs_max: usize) -> io::Result<Option<Vec<Range<u64>>>> {
    let mut runs: Vec<Range<u64>> = Vec::new();
    if len == 0 {
        return Ok(Some(runs));
    }
    let page = page_bytes();
    let pages = pages_of(pos, len);
    let mut resident = [0u8; MINCORE_WINDOW_PAGES];
    let mut first = pages.start;
    while first < pages.end {
        let count = (pages.end - first).min(MINCORE_WINDOW_PAGES as u64) as usize;
        if !pages_resident(fd, first * page, &mut resident[..count])? {
            return Ok(None);
        }
        for (index, flags) in (first..).zip(&resident[..count]) {
            if flags & 1 == 1 {
                continue;
            }
            let missing = (index * page).max(pos)..((index + 1) * page).min(pos + len);
            let held = runs.len();
            match runs.last_mut() {
                Some(last) if missing.start <= last.end + RUN_GAP_JOINED_BYTES => last.end = missing.end,
                _ if held == runs_max => return Ok(None),
                _ => runs.push(missing),
            }
        }
        first += count as u64;
    }
    Ok(Some(runs))
}

/// `mincore` of `resident.len()` pages of `fd` from `pos` (page-aligned), through a read-only
/// mapping made for the call: a byte per page, bit 0 set when the page is in the page cache.
/// `false` when the file cannot be mapped.
fn pages_resident(fd: RawFd, pos: u64, resident: &mut [u8]) -> io::Result<bool> {
    let len = resident.len() * page_bytes() as usize;
    // Nothing reads through this mapping: mincore only asks the page cache about its pages.
    let mapping = match map_file(fd, pos, len, false) {
        Ok(mapping) => mapping,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENODEV | libc::EACCES | libc::EINVAL)) => {
            return Ok(false)
        }
        Err(e) => return Err(e),
    };
    // SAFETY: `mapping` spans `len` bytes, `resident` has a byte for each of its pages, and
    // mincore writes no more than that.
    let rc = unsafe { libc::mincore(mapping.as_ptr().cast(), len, resident.as_mut_ptr()) };
    let mincore_error = (rc != 0).then(io::Error::last_os_error);
    // SAFETY: the mapping made above, of that length, used by nothing after this.
    unsafe { unmap(mapping, len) }?;
    match mincore_error {
        Some(error) => Err(error),
        None => Ok(true),
    }
}

/// Indexes of the pages `[pos, pos + len)` touches (`len` > 0).
fn pages_of(pos: u64, len: u64) -> Range<u64> {
    let page = page_bytes();
    pos / page..(pos + len - 1) / page + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;

    use crate::scratch::scratch_file;

    /// A scratch file of `pages` pages written and synced, so that each can be dropped from the
    /// page cache alone: written page by page, since a page the kernel caches in a larger folio
    /// cannot be.
    fn clean_pages(pages: u64) -> (tempfile::TempDir, std::fs::File) {
        let (dir, file) = scratch_file();
        let page = page_bytes();
        for index in 0..pages {
            file.write_all_at(&vec![7u8; page as usize], index * page)
                .unwrap();
        }
        file.sync_data().unwrap();
        (dir, file)
    }

    /// A kernel without `cachestat` must be older than 6.5.
    fn assert_kernel_before_cachestat() {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let version: Vec<u32> = release
            .split(['.', '-'])
            .take(2)
            .map(|n| n.parse().unwrap())
            .collect();
        assert!(
            version < vec![6, 5],
            "cachestat is in Linux 6.5 and later, this is {release}"
        );
    }

    #[test]
    fn the_runs_of_pages_not_cached_are_found_in_order_and_clipped_to_the_range() {
        let (_dir, file) = clean_pages(128);
        let (page, fd) = (page_bytes(), file.as_raw_fd());
        let none = uncached_runs(fd, 0, 128 * page, 8).unwrap().unwrap();
        assert!(none.is_empty(), "every page was just written: {none:?}");
        // Dropped before any read: a read can start a read-ahead that brings pages back.
        for (first, count) in [(5, 2), (40, 1), (44, 1), (100, 1)] {
            drop_page_cache(fd, first * page, count * page).unwrap();
        }
        assert_eq!(
            uncached_runs(fd, 0, 128 * page, 8).unwrap(),
            Some(vec![
                5 * page..7 * page,
                40 * page..45 * page,
                100 * page..101 * page
            ]),
            "pages 40 and 44, close together, are one run"
        );
        assert_eq!(
            uncached_runs(fd, 6 * page + 100, 35 * page - 200, 8).unwrap(),
            Some(vec![6 * page + 100..7 * page, 40 * page..41 * page - 100]),
            "clipped to a range that starts and ends inside missing pages"
        );
        assert_eq!(uncached_runs(fd, 45 * page, 50 * page, 8).unwrap(), Some(vec![]));
        assert_eq!(
            uncached_runs(fd, 0, 128 * page, 2).unwrap(),
            None,
            "more runs than asked for"
        );
        // A hole never read is not cached: one run across three mincore windows.
        let long = 3 * MINCORE_WINDOW_PAGES as u64 + 10;
        file.set_len(long * page).unwrap();
        assert_eq!(
            uncached_runs(fd, 0, long * page, 8).unwrap(),
            Some(vec![
                5 * page..7 * page,
                40 * page..45 * page,
                100 * page..101 * page,
                128 * page..long * page
            ])
        );
        assert_eq!(uncached_runs(fd, 3 * page, 0, 0).unwrap(), Some(vec![]));
    }

    #[test]
    fn a_range_counts_as_cached_only_when_every_page_is() {
        let (_dir, file) = clean_pages(16);
        let (page, fd) = (page_bytes(), file.as_raw_fd());
        let Some(cached) = range_cached(fd, 0, 16 * page).unwrap() else {
            assert_kernel_before_cachestat();
            return;
        };
        assert!(cached, "every page was just written");
        // A page none of the three probes would look at (first, middle, last). Checked before
        // any read: a probe's read can start a read-ahead that brings the page back.
        drop_page_cache(fd, 5 * page, page).unwrap();
        assert_eq!(range_cached(fd, 0, 16 * page).unwrap(), Some(false));
        assert_eq!(range_cached(fd, 5 * page + 100, 1).unwrap(), Some(false));
        assert_eq!(
            range_cached(fd, 6 * page, 10 * page).unwrap(),
            Some(true),
            "the pages after it"
        );
        assert_eq!(
            range_cached(fd, page - 1, 2).unwrap(),
            Some(true),
            "a range across two cached pages"
        );
    }

    #[test]
    fn a_byte_just_written_is_cached_and_past_the_end_is_not_an_error() {
        let (_dir, file) = scratch_file();
        file.write_all_at(b"hot", 0).unwrap();
        assert!(is_cached(file.as_raw_fd(), 1).unwrap());
        // At the end of file there is nothing to read, and nothing to wait for either.
        assert!(is_cached(file.as_raw_fd(), 100).unwrap());
    }

    #[test]
    fn a_cached_read_returns_the_bytes_and_stops_at_the_end() {
        let (_dir, file) = scratch_file();
        file.write_all_at(b"hot bytes", 0).unwrap();
        let read = read_cached(file.as_raw_fd(), 4, 100).unwrap();
        assert_eq!(read.as_deref(), Some(&b"bytes"[..]));
    }
}
