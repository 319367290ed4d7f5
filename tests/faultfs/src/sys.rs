//! The system calls std has no safe function for: unmount, statvfs, fallocate, mknod and a
//! link to an open file. Every
//! `unsafe` block of the crate lives here, each behind a safe function.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

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
    let path = c_path(mountpoint)?;
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

/// A file system's sizes and counts, as `statvfs` reports them.
pub struct FsStats {
    pub blocks: u64,
    pub blocks_free: u64,
    pub blocks_available: u64,
    pub files: u64,
    pub files_free: u64,
    pub block_size: u32,
    pub name_max: u32,
    pub fragment_size: u32,
}

/// The statistics of the file system holding `path` (`statvfs`).
pub fn statvfs(path: &Path) -> io::Result<FsStats> {
    let path = c_path(path)?;
    let mut stats = MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is NUL-terminated and outlives the call; `stats` is writable memory of the
    // struct's size, which statvfs fills in full when it returns 0.
    if unsafe { libc::statvfs(path.as_ptr(), stats.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it initialised the whole struct.
    let stats = unsafe { stats.assume_init() };
    Ok(FsStats {
        blocks: stats.f_blocks,
        blocks_free: stats.f_bfree,
        blocks_available: stats.f_bavail,
        files: stats.f_files,
        files_free: stats.f_ffree,
        block_size: u32::try_from(stats.f_bsize).unwrap_or(u32::MAX),
        name_max: u32::try_from(stats.f_namemax).unwrap_or(u32::MAX),
        fragment_size: u32::try_from(stats.f_frsize).unwrap_or(u32::MAX),
    })
}

/// `fallocate(file, mode, offset, len)`, the mode passed through as the caller gave it.
pub fn fallocate(file: &File, mode: i32, offset: u64, len: u64) -> io::Result<()> {
    let too_large = || io::Error::from_raw_os_error(libc::EFBIG);
    let offset = libc::off_t::try_from(offset).map_err(|_| too_large())?;
    let len = libc::off_t::try_from(len).map_err(|_| too_large())?;
    // SAFETY: fallocate reads no user memory; it acts on `file`'s descriptor, open for the call.
    if unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `mknod(path, mode, rdev)`: a file of the type `mode`'s `S_IFMT` bits give (a device's
/// number `rdev`), its permissions `mode`'s others less the process's umask.
pub fn mknod(path: &Path, mode: u32, rdev: u32) -> io::Result<()> {
    let path = c_path(path)?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call; mknod only reads it.
    if unsafe { libc::mknod(path.as_ptr(), mode as libc::mode_t, libc::dev_t::from(rdev)) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A new name `path` for the open `file` (`linkat` with `AT_EMPTY_PATH`, which needs
/// `CAP_DAC_READ_SEARCH`: the daemon runs as root).
pub fn link_open_file(file: &File, path: &Path) -> io::Result<()> {
    let path = c_path(path)?;
    let empty = c"";
    // SAFETY: both strings are NUL-terminated and outlive the call, which only reads them; it
    // acts on `file`'s descriptor, open for the call.
    let linked = unsafe {
        libc::linkat(
            file.as_raw_fd(),
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

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
}
