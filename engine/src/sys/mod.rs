//! The engine's direct system calls, where std, glommio and io-uring offer no safe
//! equivalent. Every `unsafe` block of the engine lives here, each behind a safe function.
#![allow(unsafe_code)]

use std::io::{self, IoSlice};
use std::ops::Range;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};

pub mod mapping;

use io_uring::squeue::PushError;
use io_uring::{opcode, types, IoUring};

/// Asks the CPU to start loading the object an `Rc` points to, its counts included (at most
/// [`PREFETCH_BYTES_MAX`]), so that a pass over many cold objects overlaps their cache misses
/// instead of waiting for each in turn (docs/decisions/0026, per-batch cost across many partitions).
pub fn prefetch_rc<T>(value: &std::rc::Rc<T>) {
    // An `Rc`'s allocation holds its strong and weak counts, then the value.
    let counts_bytes = 2 * std::mem::size_of::<usize>();
    prefetch(
        std::rc::Rc::as_ptr(value).cast::<u8>().wrapping_sub(counts_bytes),
        counts_bytes + std::mem::size_of::<T>(),
    );
}

/// Asks the CPU to start loading `*value` (see [`prefetch_rc`]).
pub fn prefetch_value<T>(value: &T) {
    prefetch((value as *const T).cast(), std::mem::size_of::<T>());
}

/// Prefetches cover at most this many bytes of one object: its first cache lines.
pub const PREFETCH_BYTES_MAX: usize = 1024;

pub(crate) fn prefetch(start: *const u8, bytes: usize) {
    const CACHE_LINE_BYTES: usize = 64;
    for at in (0..bytes.min(PREFETCH_BYTES_MAX)).step_by(CACHE_LINE_BYTES) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint to the cache: it dereferences nothing and never faults
        // (an address that maps no memory is ignored), so any address is sound here.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                start.wrapping_add(at).cast(),
            )
        };
    }
}

/// The kernel takes at most this many iovecs per call (IOV_MAX); longer lists go in pieces.
const IOV_MAX: usize = 1024;

/// Allocates the disk blocks of `[pos, pos + len)` without changing the file's length
/// (`fallocate` with `FALLOC_FL_KEEP_SIZE`); the data there stays what it was (none, past the
/// end), and a truncate to the length frees the blocks again.
pub fn reserve_blocks(fd: RawFd, pos: u64, len: u64) -> io::Result<()> {
    let too_large = || io::Error::new(io::ErrorKind::InvalidInput, "range too large");
    let offset = libc::off_t::try_from(pos).map_err(|_| too_large())?;
    let len = libc::off_t::try_from(len).map_err(|_| too_large())?;
    // SAFETY: fallocate reads no user memory; it acts on the caller's open descriptor only.
    if unsafe { libc::fallocate(fd, libc::FALLOC_FL_KEEP_SIZE, offset, len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Writes every byte of `parts`, in order, at `pos` with `pwritev`, retrying short writes.
/// Returns the number of bytes written (the sum of the parts). A write of zero bytes while some
/// remain (a full disk or quota can do this) is an error, never a silent loss.
pub fn pwritev_all(fd: RawFd, parts: &[&[u8]], pos: u64) -> io::Result<u64> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let (mut index, mut skip, mut done) = (0, 0, 0usize);
    while done < total {
        let slices: Vec<IoSlice<'_>> = std::iter::once(&parts[index][skip..])
            .chain(parts[index + 1..].iter().copied())
            .take(IOV_MAX)
            .map(IoSlice::new)
            .collect();
        let offset = libc::off_t::try_from(pos + done as u64)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file position too large"))?;
        // SAFETY: `IoSlice` is ABI-compatible with `struct iovec` on Unix (std guarantees it);
        // the slices borrow `parts`, which outlive the call, and `slices.len()` is the count.
        let written =
            unsafe { libc::pwritev(fd, slices.as_ptr().cast(), slices.len() as libc::c_int, offset) };
        if written < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        if written == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "pwritev wrote nothing"));
        }
        let mut written = written as usize;
        done += written;
        while index < parts.len() && written >= parts[index].len() - skip {
            written -= parts[index].len() - skip;
            (index, skip) = (index + 1, 0);
        }
        skip += written;
    }
    Ok(total as u64)
}

/// A second descriptor for the open file `fd` (same file description, same inode), which stays
/// valid after `fd` is closed or the file is renamed or unlinked.
pub fn duplicate(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: the caller passes a descriptor it keeps open for the duration of this call;
    // borrowing it only to duplicate it does not take ownership or close it.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    borrowed.try_clone_to_owned()
}

/// The size in bytes of the file system holding `path` (`statvfs`: blocks times fragment size).
pub fn file_system_bytes(path: &std::path::Path) -> io::Result<u64> {
    file_system_space(path).map(|(total, _)| total)
}

/// The total and available-to-unprivileged bytes of the file system holding `path`.
pub fn file_system_space(path: &std::path::Path) -> io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `path` is a NUL-terminated string that outlives the call; statvfs writes at most
    // one `struct statvfs` into the buffer, which is that size.
    if unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs succeeded, so it filled the struct (and zeroed memory is a valid one).
    let stat = unsafe { stat.assume_init() };
    let total = stat.f_blocks.saturating_mul(stat.f_frsize);
    let usable = stat.f_bavail.saturating_mul(stat.f_frsize);
    Ok((total, usable))
}

/// A glommio file owning the descriptor of `file` (opened by std, on this thread).
pub fn buffered_file(file: std::fs::File) -> glommio::io::BufferedFile {
    use std::os::fd::{FromRawFd, IntoRawFd};
    let fd = file.into_raw_fd();
    // SAFETY: `into_raw_fd` gave up ownership of an open descriptor, which nothing else holds;
    // the glommio file takes it over and closes it once.
    unsafe { glommio::io::BufferedFile::from_raw_fd(fd) }
}

/// What `fstat` says of an open file: which file a descriptor names (device and inode),
/// whatever path it was opened by, and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub device: u64,
    pub inode: u64,
    pub len: u64,
}

/// [`FileStat`] of the open file `fd`: a plain `fstat` on this thread, which reads the inode in
/// memory (an io_uring statx would go to an io-wq worker and back).
pub fn file_stat(fd: RawFd) -> io::Result<FileStat> {
    let mut stat = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: fstat writes at most one `struct stat` into the buffer, which is that size and
    // outlives the call; it acts on the caller's open descriptor only.
    if unsafe { libc::fstat(fd, stat.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstat succeeded, so it filled the struct (and zeroed memory is a valid `stat`).
    let stat = unsafe { stat.assume_init() };
    Ok(FileStat {
        device: stat.st_dev,
        inode: stat.st_ino,
        len: u64::try_from(stat.st_size).unwrap_or(0),
    })
}

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
    let offset = libc::off_t::try_from(pos)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file position too large"))?;
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

/// Queues (does not submit) an `IORING_OP_SYNC_FILE_RANGE` of `[offset, offset + len)` of the
/// open file `fd` with `flags` on `ring`, tagged `user_data`. `Err` when the submission queue
/// is full. The caller keeps `fd` open until the op's completion is reaped: a descriptor closed
/// earlier makes the op fail or sync whichever file reuses the number.
pub fn push_sync_file_range(
    ring: &mut IoUring,
    fd: RawFd,
    (offset, len): (u64, u32),
    flags: u32,
    user_data: u64,
) -> Result<(), PushError> {
    let entry = opcode::SyncFileRange::new(types::Fd(fd), len)
        .offset(offset)
        .flags(flags)
        .build()
        .user_data(user_data);
    // SAFETY: `push` requires the entry's buffers to stay valid until the op completes; a
    // sync_file_range entry has none (a descriptor number and integers only), so the kernel
    // never touches memory of ours for it, whatever becomes of the descriptor meanwhile.
    unsafe { ring.submission().push(&entry) }
}

/// Linux's `struct cachestat` (include/uapi/linux/mman.h): pages of a file range in the page
/// cache, and how many of them are dirty, under writeback or were evicted.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Cachestat {
    pub nr_cache: u64,
    pub nr_dirty: u64,
    pub nr_writeback: u64,
    pub nr_evicted: u64,
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

/// Asks the kernel to drop the clean pages of `[pos, pos + len)` of a file from the page cache
/// (`len` 0: to the end; tests make data cold with it).
#[cfg(test)]
pub fn drop_cached(fd: RawFd, pos: u64, len: u64) -> io::Result<()> {
    let (pos, len) = (pos as libc::off_t, len as libc::off_t);
    // SAFETY: posix_fadvise only reads its integer arguments; it touches no memory of ours.
    let error = unsafe { libc::posix_fadvise(fd, pos, len, libc::POSIX_FADV_DONTNEED) };
    match error {
        0 => Ok(()),
        error => Err(io::Error::from_raw_os_error(error)),
    }
}

/// Set once `cachestat` answered ENOSYS: a kernel before 6.5, or built without it.
static CACHESTAT_MISSING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether every page of `[pos, pos + len)` of the open file `fd` is in the page cache, counted
/// by the kernel in one call (`cachestat`, Linux 6.5). `None` where the kernel cannot count
/// them (too old, or a file system without a page cache), so the caller probes instead.
pub fn range_cached(fd: RawFd, pos: u64, len: u64) -> io::Result<Option<bool>> {
    use std::sync::atomic::Ordering;
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
/// [`RUN_GAP_JOINED_BYTES`] apart joined); `None` when there are more than `runs_max` of them
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
    let offset = libc::off_t::try_from(pos)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file position too large"))?;
    let len = resident.len() * page_bytes() as usize;
    // SAFETY: a new read-only shared mapping of the caller's open descriptor, at an address the
    // kernel picks: it aliases no memory of ours, and nothing reads through it (mincore only
    // asks the page cache about its pages); it is unmapped below.
    let mapping = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            offset,
        )
    };
    if mapping == libc::MAP_FAILED {
        return match io::Error::last_os_error() {
            e if matches!(e.raw_os_error(), Some(libc::ENODEV | libc::EACCES | libc::EINVAL)) => Ok(false),
            e => Err(e),
        };
    }
    // SAFETY: `mapping` spans `len` bytes, `resident` has a byte for each of its pages, and
    // mincore writes no more than that.
    let rc = unsafe { libc::mincore(mapping, len, resident.as_mut_ptr()) };
    let mincore_error = (rc != 0).then(io::Error::last_os_error);
    // SAFETY: the mapping made above, of that length, used by nothing after this.
    if unsafe { libc::munmap(mapping, len) } != 0 {
        return Err(io::Error::last_os_error());
    }
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

/// The page size, asked once.
pub(crate) fn page_bytes() -> u64 {
    static PAGE_BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE_BYTES.get_or_init(|| {
        // SAFETY: sysconf reads no memory of ours.
        let answer = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        u64::try_from(answer)
            .ok()
            .filter(|bytes| bytes.is_power_of_two())
            .unwrap_or(4096)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;

    /// A new, empty read-write file; it lives as long as the returned directory.
    fn scratch_file() -> (tempfile::TempDir, std::fs::File) {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(dir.path().join("f"))
            .unwrap();
        (dir, file)
    }

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
            drop_cached(fd, first * page, count * page).unwrap();
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
        drop_cached(fd, 5 * page, page).unwrap();
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
    fn reserved_blocks_leave_the_length_alone_and_a_truncate_to_it_frees_them() {
        use std::os::unix::fs::MetadataExt;
        let (_dir, file) = scratch_file();
        file.write_all_at(&[1u8; 4096], 0).unwrap();
        let allocated = |file: &std::fs::File| file.metadata().unwrap().blocks() * 512;
        let before = allocated(&file);
        match reserve_blocks(file.as_raw_fd(), 4096, 8 << 20) {
            // A filesystem without fallocate (the caller treats it as a hint): nothing to see.
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => return,
            result => result.unwrap(),
        }
        assert_eq!(file.metadata().unwrap().len(), 4096);
        assert!(
            allocated(&file) >= before + (8 << 20),
            "blocks are reserved past the end"
        );
        // Appending into the reservation reads back what was written, and zeros nowhere else.
        file.write_all_at(&[2u8; 100], 4096).unwrap();
        let mut back = vec![0u8; 4196];
        file.read_exact_at(&mut back, 0).unwrap();
        assert!(back[..4096].iter().all(|b| *b == 1) && back[4096..].iter().all(|b| *b == 2));
        assert_eq!(file.metadata().unwrap().len(), 4196);
        file.set_len(4196).unwrap();
        assert!(
            allocated(&file) < (1 << 20),
            "a truncate to the length gives the rest back"
        );
    }

    #[test]
    fn pwritev_all_writes_every_part_in_order_at_the_position() {
        let (_dir, file) = scratch_file();
        let big = vec![7u8; 3 * 1024 * 1024];
        let parts: Vec<&[u8]> = vec![b"ab", b"", &big, b"cd"];
        assert_eq!(
            pwritev_all(file.as_raw_fd(), &parts, 5).unwrap(),
            big.len() as u64 + 4
        );
        let mut back = vec![0u8; big.len() + 9];
        file.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(&back[..7], b"\0\0\0\0\0ab");
        assert!(back[7..7 + big.len()].iter().all(|&b| b == 7));
        assert_eq!(&back[7 + big.len()..], b"cd");
    }

    #[test]
    fn pwritev_all_splits_more_parts_than_iov_max() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("f")).unwrap();
        let bytes: Vec<[u8; 1]> = (0..3000u32).map(|i| [(i % 251) as u8]).collect();
        let parts: Vec<&[u8]> = bytes.iter().map(|b| &b[..]).collect();
        assert_eq!(pwritev_all(file.as_raw_fd(), &parts, 0).unwrap(), 3000);
        let back = std::fs::read(dir.path().join("f")).unwrap();
        assert_eq!(back, bytes.concat());
    }

    #[test]
    fn a_duplicate_outlives_the_original_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"kept").unwrap();
        let original = std::fs::File::open(&path).unwrap();
        let copy = std::fs::File::from(duplicate(original.as_raw_fd()).unwrap());
        drop(original);
        std::fs::remove_file(&path).unwrap();
        let mut back = [0u8; 4];
        copy.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(&back, b"kept");
    }

    #[test]
    fn a_byte_just_written_is_cached_and_past_the_end_is_not_an_error() {
        let (_dir, file) = scratch_file();
        file.write_all_at(b"hot", 0).unwrap();
        assert!(is_cached(file.as_raw_fd(), 1).unwrap());
        // At the end of file there is nothing to read, and nothing to wait for either.
        assert!(is_cached(file.as_raw_fd(), 100).unwrap());
    }
}
