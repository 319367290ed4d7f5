//! Calls on open files and paths that std has no function for: `fallocate`, `pwritev` of many
//! slices, `fstat` on a raw descriptor, `ftruncate` on this thread, duplicating a descriptor
//! another type owns, `mknod`, and a name for an open file (`linkat`).

use std::io::{self, IoSlice};
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::path::Path;

/// The kernel takes at most this many iovecs per call (IOV_MAX); longer lists go in pieces.
pub(crate) const IOV_MAX: usize = 1024;

/// `fallocate(fd, mode, offset, len)`, the mode (`FALLOC_FL_*` flags) passed through as the
/// caller gave it. `EFBIG` when the range does not fit a file offset.
pub fn fallocate(fd: RawFd, mode: i32, offset: u64, len: u64) -> io::Result<()> {
    let too_large = || io::Error::from_raw_os_error(libc::EFBIG);
    let offset = libc::off_t::try_from(offset).map_err(|_| too_large())?;
    let len = libc::off_t::try_from(len).map_err(|_| too_large())?;
    // SAFETY: fallocate reads no user memory; it acts on the caller's open descriptor only.
    if unsafe { libc::fallocate(fd, mode, offset, len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Allocates the disk blocks of `[pos, pos + len)` without changing the file's length
/// (`fallocate` with `FALLOC_FL_KEEP_SIZE`); the data there stays what it was (none, past the
/// end), and a truncate to the length frees the blocks again.
pub fn reserve_blocks(fd: RawFd, pos: u64, len: u64) -> io::Result<()> {
    fallocate(fd, libc::FALLOC_FL_KEEP_SIZE, pos, len)
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
        let offset = crate::to_off_t(pos + done as u64, "file position")?;
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

/// A descriptor of its own (close-on-exec) for the open file or socket `fd`: the same file
/// description, which stays open after `fd` is closed or the file renamed or unlinked. What a
/// connection moving to another thread takes there, or a file kept past its owner's close.
pub fn duplicate(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: the caller passes a descriptor it keeps open for the duration of this call;
    // borrowing it only to duplicate it does not take ownership or close it.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    borrowed.try_clone_to_owned()
}

/// What `fstat` says of an open file: which file a descriptor names (device and inode),
/// whatever path it was opened by, and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    /// The device of the file system holding the file.
    pub device: u64,
    /// The file's inode number on that device.
    pub inode: u64,
    /// The file's length in bytes.
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

/// `ftruncate`: sets the length of the open file `fd`, on this thread, at once (no await in
/// between in which an append could map past the new end).
pub fn set_len(fd: RawFd, len: u64) -> io::Result<()> {
    let len = crate::to_off_t(len, "length")?;
    // SAFETY: ftruncate reads no user memory; it acts on the caller's open descriptor only.
    if unsafe { libc::ftruncate(fd, len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `mknod(path, mode, rdev)`: a file of the type `mode`'s `S_IFMT` bits give (a device's
/// number `rdev`), its permissions `mode`'s others less the process's umask.
pub fn mknod(path: &Path, mode: u32, rdev: u32) -> io::Result<()> {
    let path = crate::c_path(path)?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call; mknod only reads it.
    if unsafe { libc::mknod(path.as_ptr(), mode as libc::mode_t, libc::dev_t::from(rdev)) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A new name `path` for the open file `fd` (`linkat` with `AT_EMPTY_PATH`, which needs
/// `CAP_DAC_READ_SEARCH`).
pub fn link_open_file(fd: RawFd, path: &Path) -> io::Result<()> {
    let path = crate::c_path(path)?;
    let empty = c"";
    // SAFETY: both strings are NUL-terminated and outlive the call, which only reads them; it
    // acts on the caller's open descriptor.
    let linked = unsafe {
        libc::linkat(
            fd,
            empty.as_ptr(),
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    if linked < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;

    use crate::scratch::scratch_file;

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
        set_len(file.as_raw_fd(), 4196).unwrap();
        assert!(
            allocated(&file) < (1 << 20),
            "a truncate to the length gives the rest back"
        );
    }

    #[test]
    fn a_range_past_any_file_offset_is_too_large() {
        let (_dir, file) = scratch_file();
        let error = fallocate(file.as_raw_fd(), 0, u64::MAX, 1).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EFBIG));
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
    fn a_stat_names_the_file_whatever_descriptor_it_comes_from() {
        let (dir, file) = scratch_file();
        file.write_all_at(b"12345", 0).unwrap();
        let again = std::fs::File::open(dir.path().join("f")).unwrap();
        let (first, second) = (
            file_stat(file.as_raw_fd()).unwrap(),
            file_stat(again.as_raw_fd()).unwrap(),
        );
        assert_eq!(first, second);
        assert_eq!(first.len, 5);
    }
}
