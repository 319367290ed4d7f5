//! Shared mappings of files (`mmap`, `madvise`, `munmap`): a writable window over part of a
//! file, written by copying into it (the engine's small appends, docs/decisions/0018; the
//! power-cut tests' writes through a mapping), and the SIGBUS handler that makes a fault in one
//! a clear exit. Every mapping of the crate is made by `map_file`.

use std::io;
use std::ops::Range;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::OnceLock;

use crate::memory::page_bytes;

/// Maps `len` bytes (> 0) of the open file `fd` from `offset` (page aligned) `MAP_SHARED`, at an
/// address the kernel picks, readable, and writable when `writable`. The error is the kernel's
/// (`last_os_error`). The mapping outlives `fd` (the kernel keeps the file referenced) until
/// [`unmap`]; nothing reads or writes through it here.
pub(crate) fn map_file(fd: RawFd, offset: u64, len: usize, writable: bool) -> io::Result<NonNull<u8>> {
    let offset = crate::to_off_t(offset, "offset")?;
    let protection = match writable {
        true => libc::PROT_READ | libc::PROT_WRITE,
        false => libc::PROT_READ,
    };
    // SAFETY: a new mapping at an address the kernel picks, so it overlaps no memory Rust owns;
    // it acts on the caller's open descriptor, and the result is checked against MAP_FAILED.
    let start = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            protection,
            libc::MAP_SHARED,
            fd,
            offset,
        )
    };
    if start == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(start.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))
}

/// Unmaps `len` bytes from `start`.
///
/// # Safety
/// `start` and `len` are a mapping [`map_file`] made, unmapped once, and no reference into it
/// outlives this call.
pub(crate) unsafe fn unmap(start: NonNull<u8>, len: usize) -> io::Result<()> {
    // SAFETY: the caller's contract: our own mapping, with nothing pointing into it any more.
    if unsafe { libc::munmap(start.as_ptr().cast(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `[file_offset, file_offset + len)` of one file, mapped `MAP_SHARED` read-write: bytes copied
/// in are in the page cache at once, as with `pwrite`, without a system call. Owned by one
/// thread (not Send); unmapped on drop.
///
/// A page written must lie inside the file's length (past it the write raises SIGBUS): the
/// owner extends the file before mapping and never shortens it below the window while mapped.
#[derive(Debug)]
pub struct MappedWindow {
    base: NonNull<u8>,
    file_offset: u64,
    len: usize,
}

impl MappedWindow {
    /// Maps `len` bytes of `fd` from `file_offset`, which must be page aligned.
    pub fn map(fd: RawFd, file_offset: u64, len: usize) -> io::Result<MappedWindow> {
        assert!(len > 0, "an empty window");
        assert_eq!(file_offset % page_bytes(), 0, "windows start on a page");
        let base = map_file(fd, file_offset, len, true)?;
        Ok(MappedWindow {
            base,
            file_offset,
            len,
        })
    }

    /// Tells the kernel the window's pages are accessed in no order (`MADV_RANDOM`), so a fault
    /// reads no pages around the one faulted. Advice only: a failure changes nothing else.
    pub fn advise_random_access(&self) {
        // SAFETY: the range is this window's whole mapping; madvise reads and writes no memory
        // of ours, it only sets how the kernel pages the range in.
        unsafe { libc::madvise(self.base.as_ptr().cast(), self.len, libc::MADV_RANDOM) };
    }

    /// The file bytes the window maps.
    pub fn range(&self) -> Range<u64> {
        self.file_offset..self.file_offset + self.len as u64
    }

    /// Copies `parts`, one after the other, to the file at `pos`; they must lie in the window.
    pub fn write(&self, pos: u64, parts: &[&[u8]]) {
        let total: u64 = parts.iter().map(|part| part.len() as u64).sum();
        let range = self.range();
        assert!(
            pos >= range.start && pos + total <= range.end,
            "a write of {total} bytes at {pos} inside the window {range:?}"
        );
        let mut at = (pos - self.file_offset) as usize;
        for part in parts {
            // SAFETY: `[at, at + part.len())` lies inside the mapping (asserted above), which
            // this window alone owns and never lends as a Rust reference, so nothing aliases the
            // destination; the source is a caller's slice, outside any mapping of ours. Pages
            // inside the file's length are valid memory; a page the kernel cannot provide (a
            // disk error, no blocks left) raises SIGBUS, which `exit_on_bus_error` handles.
            unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), self.base.as_ptr().add(at), part.len()) };
            at += part.len();
        }
    }

    /// Faults in `range` (file offsets inside the window, page aligned) for writing, in one
    /// system call (`MADV_POPULATE_WRITE`): each page is given its blocks and marked dirty as
    /// a first write would, but without a fault per page. An error (no blocks left on the
    /// disk, a read error, a kernel before 5.14) is returned, not raised as SIGBUS.
    pub fn populate_for_write(&self, range: Range<u64>) -> io::Result<()> {
        let window = self.range();
        assert!(
            range.start >= window.start && range.end <= window.end && range.start < range.end,
            "populating {range:?} inside the window {window:?}"
        );
        assert_eq!(range.start % page_bytes(), 0, "population starts on a page");
        let at = (range.start - self.file_offset) as usize;
        // SAFETY: `[at, at + len)` lies inside this window's mapping (asserted above); madvise
        // reads and writes no memory of ours through Rust references, it only faults the pages
        // in as writes would.
        let advised = unsafe {
            libc::madvise(
                self.base.as_ptr().add(at).cast(),
                (range.end - range.start) as usize,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if advised < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Asks the CPU to load the cache line at `pos` (inside the window), walking the page
    /// tables for it, ahead of a copy there.
    pub fn prefetch(&self, pos: u64) {
        let range = self.range();
        if range.contains(&pos) {
            crate::memory::prefetch(self.base.as_ptr().wrapping_add((pos - range.start) as usize), 1);
        }
    }
}

impl Drop for MappedWindow {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are exactly what `map_file` mapped; the window is dropped
        // once, and no reference into the mapping outlives it (`write` lends none).
        let unmapped = unsafe { unmap(self.base, self.len) };
        debug_assert!(unmapped.is_ok(), "munmap of our own window: {unmapped:?}");
    }
}

/// What [`exit_on_bus_error`] writes to stderr, and the status the process exits with.
#[derive(Debug)]
struct BusErrorExit {
    message: &'static str,
    status: i32,
}

/// Set once by [`exit_on_bus_error`]; read by the signal handler.
static BUS_ERROR_EXIT: OnceLock<BusErrorExit> = OnceLock::new();

/// Makes a SIGBUS end the process at once, writing `message` to stderr and exiting with
/// `status`: with a file mapped, a page the kernel could not read or give disk blocks to raises
/// SIGBUS, and without a handler the process dies with no word of why. Idempotent: the first
/// message and status stay.
pub fn exit_on_bus_error(message: &'static str, status: i32) -> io::Result<()> {
    extern "C" fn on_bus_error(_signal: libc::c_int) {
        // `OnceLock::get` is one atomic load: no lock, no allocation, safe in a signal handler.
        let (message, status) = match BUS_ERROR_EXIT.get() {
            Some(exit) => (exit.message, exit.status),
            None => ("SIGBUS\n", libc::EXIT_FAILURE),
        };
        // SAFETY: write(2) and _exit(2) are async-signal-safe; `message` is static.
        unsafe {
            libc::write(2, message.as_ptr().cast(), message.len());
            libc::_exit(status)
        }
    }
    BUS_ERROR_EXIT.get_or_init(|| BusErrorExit { message, status });
    let handler: extern "C" fn(libc::c_int) = on_bus_error;
    // SAFETY: zeroed memory is a valid `sigaction` (empty mask, no flags) that we fill in.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = handler as libc::sighandler_t;
    // SAFETY: installs a handler that only calls async-signal-safe functions; the action
    // struct outlives the call, and the old action is not asked for.
    if unsafe { libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::set_len;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;

    /// A new empty file in a directory of its own in the checkout, which is on a disk (`/tmp`
    /// may be a tmpfs, whose pages a sync leaves dirty: it has no writeback).
    /// A scratch file on the checkout's disk: windows need writeback, which a tmpfs lacks.
    fn file_on_disk() -> (tempfile::TempDir, std::fs::File) {
        crate::scratch::scratch_file_in(std::path::Path::new(env!("CARGO_MANIFEST_DIR")))
    }

    #[test]
    fn a_window_writes_into_the_files_page_cache_where_reads_see_it() {
        let (_dir, file) = file_on_disk();
        set_len(file.as_raw_fd(), 3 * 4096).unwrap();
        let window = MappedWindow::map(file.as_raw_fd(), 4096, 2 * 4096).unwrap();
        window.advise_random_access();
        assert_eq!(window.range(), 4096..3 * 4096);
        window.write(4096 + 4090, &[b"abc", b"defghij"]);
        let mut read = [0u8; 10];
        file.read_exact_at(&mut read, 4096 + 4090).unwrap();
        assert_eq!(
            &read, b"abcdefghij",
            "a write across a page boundary, seen by pread"
        );
        drop(window);
        file.read_exact_at(&mut read, 4096 + 4090).unwrap();
        assert_eq!(&read, b"abcdefghij", "the bytes stay after the unmap");
    }

    /// Whether the page-cache page behind `address` (mapped in this process) is dirty, from
    /// `/proc/self/pagemap` and `/proc/kpageflags`; `None` without the privilege to see page
    /// frames (CAP_SYS_ADMIN) or when the page is not mapped.
    fn page_dirty(address: usize) -> Option<bool> {
        const PRESENT: u64 = 1 << 63;
        const FRAME_MASK: u64 = (1 << 55) - 1;
        const KPF_DIRTY: u64 = 1 << 4;
        let read_u64_at = |path: &str, index: u64| -> Option<u64> {
            let file = std::fs::File::open(path).ok()?;
            let mut entry = [0u8; 8];
            file.read_exact_at(&mut entry, index * 8).ok()?;
            Some(u64::from_ne_bytes(entry))
        };
        let entry = read_u64_at("/proc/self/pagemap", address as u64 / page_bytes())?;
        let frame = entry & FRAME_MASK;
        if entry & PRESENT == 0 || frame == 0 {
            return None;
        }
        Some(read_u64_at("/proc/kpageflags", frame)? & KPF_DIRTY != 0)
    }

    /// What decision 0018 rests on: bytes copied into a window are dirty page-cache pages that
    /// `fdatasync` writes like those of a `pwritev`, and so are bytes copied into the same page
    /// after a sync (the kernel write-protects a page it writes back, so the next copy faults
    /// and dirties it again), so an acknowledgement after a sync means the same either way.
    #[test]
    fn fdatasync_writes_back_what_a_window_dirtied_and_again_after_more_copies() {
        let (_dir, file) = file_on_disk();
        set_len(file.as_raw_fd(), 4096).unwrap();
        let window = MappedWindow::map(file.as_raw_fd(), 0, 4096).unwrap();
        let address = window.base.as_ptr() as usize;
        window.write(0, &[b"first"]);
        let Some(dirty) = page_dirty(address) else {
            return; // page frames are hidden from this process (not root): nothing to check
        };
        assert!(dirty, "a copy into the window dirties the page");
        file.sync_data().unwrap();
        assert_eq!(page_dirty(address), Some(false), "the sync wrote it back");
        window.write(5, &[b", then more"]);
        assert_eq!(
            page_dirty(address),
            Some(true),
            "a copy after the sync dirties it again"
        );
        file.sync_data().unwrap();
        assert_eq!(
            page_dirty(address),
            Some(false),
            "and the next sync writes that back"
        );
    }

    #[test]
    fn populating_dirties_the_pages_before_any_copy_and_past_the_files_end_is_an_error() {
        let (_dir, file) = file_on_disk();
        set_len(file.as_raw_fd(), 2 * 4096).unwrap();
        let window = MappedWindow::map(file.as_raw_fd(), 0, 4 * 4096).unwrap();
        window.populate_for_write(0..2 * 4096).unwrap();
        let address = window.base.as_ptr() as usize;
        if let Some(dirty) = page_dirty(address + 4096) {
            assert!(dirty, "a populated page is dirty, as after a first write");
        }
        let past_end = window.populate_for_write(2 * 4096..3 * 4096);
        assert!(
            past_end.is_err(),
            "a page a copy would raise SIGBUS on is refused: {past_end:?}"
        );
        window.write(4090, &[b"across a page"]);
        let mut read = [0u8; 13];
        file.read_exact_at(&mut read, 4090).unwrap();
        assert_eq!(&read, b"across a page");
    }

    const BUS_ERROR_MESSAGE: &str = "test: fatal: SIGBUS in a mapped window\n";
    const BUS_ERROR_STATUS: i32 = 74;

    /// The child half of the next test: a write to a mapped page past the file's end.
    fn fault_in_a_mapped_page() -> ! {
        exit_on_bus_error(BUS_ERROR_MESSAGE, BUS_ERROR_STATUS).unwrap();
        let file = tempfile::tempfile().unwrap();
        set_len(file.as_raw_fd(), 4096).unwrap();
        let window = MappedWindow::map(file.as_raw_fd(), 0, 4096).unwrap();
        set_len(file.as_raw_fd(), 0).unwrap();
        window.write(0, &[b"past the end"]);
        unreachable!("the write raises SIGBUS");
    }

    #[test]
    fn a_bus_error_ends_the_process_with_the_message_and_status_given() {
        const CHILD: &str = "LAMINAR_TEST_BUS_ERROR_CHILD";
        let name = "mapping::tests::a_bus_error_ends_the_process_with_the_message_and_status_given";
        if std::env::var_os(CHILD).is_some() {
            fault_in_a_mapped_page();
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(BUS_ERROR_STATUS), "{stderr}");
        assert!(stderr.contains(BUS_ERROR_MESSAGE), "{stderr}");
    }

    #[test]
    #[should_panic(expected = "inside the window")]
    fn a_write_past_the_window_is_a_bug() {
        let file = tempfile::tempfile().unwrap();
        set_len(file.as_raw_fd(), 4096).unwrap();
        let window = MappedWindow::map(file.as_raw_fd(), 0, 4096).unwrap();
        window.write(4090, &[b"1234567"]);
    }
}
