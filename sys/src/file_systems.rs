//! Calls on whole file systems that std has no function for: their sizes and free space
//! (`statvfs`, `fstatvfs`), writing out their dirty pages (`syncfs`), and unmounting one
//! (`umount2`).

use std::fs::File;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;

/// A file system's sizes and counts, as `statvfs` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSystemStats {
    /// Size in fragments (`f_blocks`, in units of [`Self::fragment_size`]).
    pub blocks: u64,
    /// Free fragments.
    pub blocks_free: u64,
    /// Free fragments an unprivileged writer may take.
    pub blocks_available: u64,
    /// Inodes.
    pub files: u64,
    /// Free inodes.
    pub files_free: u64,
    /// The preferred block size for I/O (`f_bsize`).
    pub block_size: u64,
    /// The fragment size, the unit of the block counts (`f_frsize`).
    pub fragment_size: u64,
    /// The longest file name.
    pub name_max: u64,
}

impl FileSystemStats {
    /// The file system's size in bytes (blocks times fragment size).
    pub fn total_bytes(&self) -> u64 {
        self.blocks.saturating_mul(self.fragment_size)
    }

    /// The bytes an unprivileged writer may still take, as Java's `FileStore.getUsableSpace`.
    pub fn usable_bytes(&self) -> u64 {
        self.blocks_available.saturating_mul(self.fragment_size)
    }

    fn from_statvfs(stats: &libc::statvfs) -> FileSystemStats {
        FileSystemStats {
            blocks: stats.f_blocks,
            blocks_free: stats.f_bfree,
            blocks_available: stats.f_bavail,
            files: stats.f_files,
            files_free: stats.f_ffree,
            block_size: stats.f_bsize,
            fragment_size: stats.f_frsize,
            name_max: stats.f_namemax,
        }
    }
}

/// The statistics of the file system holding `path` (`statvfs`).
pub fn stats(path: &Path) -> io::Result<FileSystemStats> {
    let path = crate::c_path(path)?;
    let mut stats = MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `path` is a NUL-terminated string that outlives the call; statvfs writes at most
    // one `struct statvfs` into the buffer, which is that size.
    if unsafe { libc::statvfs(path.as_ptr(), stats.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs succeeded, so it filled the struct (and zeroed memory is a valid one).
    let stats = unsafe { stats.assume_init() };
    Ok(FileSystemStats::from_statvfs(&stats))
}

/// The statistics of the file system holding the open file `fd` (`fstatvfs`).
pub fn stats_of_open_file(fd: RawFd) -> io::Result<FileSystemStats> {
    let mut stats = MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: fstatvfs writes at most one `struct statvfs` into the buffer, which is that size
    // and outlives the call; it acts on the caller's open descriptor only.
    if unsafe { libc::fstatvfs(fd, stats.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatvfs succeeded, so it filled the struct (and zeroed memory is a valid one).
    let stats = unsafe { stats.assume_init() };
    Ok(FileSystemStats::from_statvfs(&stats))
}

/// Writes out the dirty pages of the file system holding the directory `dir` (`syncfs`).
pub fn sync_file_system(dir: &Path) -> io::Result<()> {
    let dir = File::open(dir)?;
    // SAFETY: syncfs takes a descriptor, which `dir` keeps open for the call.
    if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// How to unmount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unmount {
    /// Fails with `EBUSY` while a process still uses the mount.
    Now,
    /// `MNT_DETACH`: the mount leaves the namespace at once and goes when its last user does.
    Detach,
}

/// Unmounts the file system mounted at `mountpoint` (`umount2`).
pub fn unmount(mountpoint: &Path, how: Unmount) -> io::Result<()> {
    let path = crate::c_path(mountpoint)?;
    let flags = match how {
        Unmount::Now => 0,
        Unmount::Detach => libc::MNT_DETACH,
    };
    // SAFETY: `path` is a NUL-terminated string that outlives the call; umount2 only reads it.
    if unsafe { libc::umount2(path.as_ptr(), flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_and_an_open_file_on_it_name_the_same_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("f")).unwrap();
        let by_path = stats(dir.path()).unwrap();
        let by_file = stats_of_open_file(file.as_raw_fd()).unwrap();
        assert_eq!(by_path.total_bytes(), by_file.total_bytes());
        assert!(by_path.total_bytes() > 0 && by_file.usable_bytes() > 0);
        assert!(by_path.usable_bytes() <= by_path.total_bytes());
        sync_file_system(dir.path()).unwrap();
    }

    #[test]
    fn a_path_with_a_nul_byte_is_invalid_input() {
        let error = stats(Path::new("a\0b")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    }
}
