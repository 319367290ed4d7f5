//! Shared writable mappings of a file's end, for small appends (`io/mapped_appends.rs`,
//! docs/decisions/0018), and the SIGBUS handler that makes a fault in one a clear exit.

use std::io;
use std::ops::Range;
use std::os::fd::RawFd;
use std::ptr::NonNull;

/// `[file_offset, file_offset + len)` of one file, mapped `MAP_SHARED` read-write: bytes copied
/// in are in the page cache at once, as with `pwrite`, without a system call. Owned by one
/// shard (not Send); unmapped on drop.
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
        assert_eq!(file_offset % super::page_bytes(), 0, "windows start on a page");
        let offset = libc::off_t::try_from(file_offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        let protection = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a new mapping at an address the kernel picks, so it overlaps no memory Rust
        // owns; it acts on the caller's open descriptor, which the mapping outlives safely (the
        // kernel keeps the file referenced until munmap).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                protection,
                libc::MAP_SHARED,
                fd,
                offset,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(base.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        // Most of a window lies past the file's data: a fault with readahead would read (zero
        // fill) the pages around it, which the appends then overwrite. Advice only; a failure
        // costs that readahead and nothing else.
        // SAFETY: the range is the mapping just made, which nothing else has seen.
        unsafe { libc::madvise(base.as_ptr().cast(), len, libc::MADV_RANDOM) };
        Ok(MappedWindow {
            base,
            file_offset,
            len,
        })
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
        assert_eq!(
            range.start % super::page_bytes(),
            0,
            "population starts on a page"
        );
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
            super::prefetch(self.base.as_ptr().wrapping_add((pos - range.start) as usize), 1);
        }
    }
}

impl Drop for MappedWindow {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are exactly what mmap returned and mapped; the window is
        // dropped once, and no reference into the mapping outlives it (`write` lends none).
        let unmapped = unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
        debug_assert_eq!(
            unmapped,
            0,
            "munmap of our own window: {}",
            io::Error::last_os_error()
        );
    }
}

/// The exit status after a SIGBUS: EX_IOERR.
pub const BUS_ERROR_EXIT_STATUS: i32 = 74;

/// Makes a SIGBUS end the process at once with a message saying what it means: with mapped
/// appends, a page of a log file the kernel could not read or give disk blocks to (a disk
/// error, or a file system filled past the headroom check). Without it the process would die
/// with no word of why. Idempotent.
pub fn exit_on_bus_error() -> io::Result<()> {
    extern "C" fn on_bus_error(_signal: libc::c_int) {
        const MESSAGE: &[u8] = b"laminar: fatal: SIGBUS: a memory-mapped log file could not be read or \
given disk blocks (a disk I/O error, or its file system is full); exiting with status 74\n";
        // SAFETY: write(2) and _exit(2) are async-signal-safe; MESSAGE is static.
        unsafe {
            libc::write(2, MESSAGE.as_ptr().cast(), MESSAGE.len());
            libc::_exit(BUS_ERROR_EXIT_STATUS)
        }
    }
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

/// `ftruncate`: sets the length of the open file `fd`, on this thread, at once (no await in
/// between in which an append could map past the new end).
pub fn set_len(fd: RawFd, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length too large"))?;
    // SAFETY: ftruncate reads no user memory; it acts on the caller's open descriptor only.
    if unsafe { libc::ftruncate(fd, len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The bytes an unprivileged writer may still take on the file system holding the open file
/// `fd` (`fstatvfs`).
pub fn usable_bytes(fd: RawFd) -> io::Result<u64> {
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: fstatvfs writes at most one `struct statvfs` into the buffer, which is that size
    // and outlives the call.
    if unsafe { libc::fstatvfs(fd, stat.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatvfs succeeded, so it filled the struct (and zeroed memory is a valid one).
    let stat = unsafe { stat.assume_init() };
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;

    /// A new empty file in a directory of its own in the checkout, which is on a disk (`/tmp`
    /// may be a tmpfs, whose pages a sync leaves dirty: it has no writeback).
    fn file_on_disk() -> (tempfile::TempDir, std::fs::File) {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.path().join("f"))
            .unwrap();
        (dir, file)
    }

    #[test]
    fn a_window_writes_into_the_files_page_cache_where_reads_see_it() {
        let (_dir, file) = file_on_disk();
        set_len(file.as_raw_fd(), 3 * 4096).unwrap();
        let window = MappedWindow::map(file.as_raw_fd(), 4096, 2 * 4096).unwrap();
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
        assert!(usable_bytes(file.as_raw_fd()).unwrap() > 0);
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
        let entry = read_u64_at("/proc/self/pagemap", address as u64 / super::super::page_bytes())?;
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

    /// The child half of the next test: a write to a mapped page past the file's end.
    fn fault_in_a_mapped_page() -> ! {
        exit_on_bus_error().unwrap();
        let file = tempfile::tempfile().unwrap();
        set_len(file.as_raw_fd(), 4096).unwrap();
        let window = MappedWindow::map(file.as_raw_fd(), 0, 4096).unwrap();
        set_len(file.as_raw_fd(), 0).unwrap();
        window.write(0, &[b"past the end"]);
        unreachable!("the write raises SIGBUS");
    }

    #[test]
    fn a_bus_error_ends_the_process_with_a_message_and_status_74() {
        const CHILD: &str = "LAMINAR_TEST_BUS_ERROR_CHILD";
        let name = "sys::mapping::tests::a_bus_error_ends_the_process_with_a_message_and_status_74";
        if std::env::var_os(CHILD).is_some() {
            fault_in_a_mapped_page();
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(BUS_ERROR_EXIT_STATUS), "{stderr}");
        assert!(stderr.contains("SIGBUS: a memory-mapped log file"), "{stderr}");
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
