//! Every `unsafe` of the Laminar workspace, each behind a safe, documented function: the system
//! calls, memory mappings and buffers that std, glommio and io-uring offer no safe form of. The
//! other crates forbid `unsafe_code` at their roots and call these instead, so the code that a
//! reviewer must check by hand for soundness is here and nowhere else (docs/ARCHITECTURE.md,
//! "Static gates"; `tests/unsafe_only_in_sys.rs` enforces it).
//!
//! Modules by topic: [`files`] and [`file_systems`] (calls on descriptors and paths),
//! [`page_cache`] (what of a file is cached), [`mapping`] (shared writable windows of files),
//! [`shared_memory`] (a record two processes share through a file), [`memory`] (aligned buffers,
//! prefetches, the allocator), [`sockets`], [`uring`] (io_uring operations), [`process`]
//! (signals, child processes, CPU time), [`limits`] (resource limits), [`namespaces`] (a
//! thread's network namespace), and `glommio` (handing
//! descriptors to glommio; behind the cargo feature of that name).
//!
//! Every unsafe block carries a `// SAFETY:` comment saying why it is sound.

// This crate is where the workspace keeps its unsafe code; every other crate forbids it.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

pub mod file_systems;
pub mod files;
#[cfg(feature = "glommio")]
pub mod glommio;
pub mod limits;
pub mod mapping;
pub mod memory;
pub mod namespaces;
pub mod page_cache;
pub mod process;
pub mod shared_memory;
pub mod sockets;
pub mod uring;

/// `value` as a file offset or length (`off_t`); `InvalidInput` saying `what` is too large
/// when it does not fit.
fn to_off_t(value: u64, what: &'static str) -> io::Result<libc::off_t> {
    libc::off_t::try_from(value)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{what} too large")))
}

/// `path` as the NUL-terminated string system calls take.
fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
}

/// `sysconf(name)`: a constant of the running system, negative when it has none.
fn sysconf(name: libc::c_int) -> libc::c_long {
    // SAFETY: sysconf reads a constant of the running system and touches no memory of ours.
    unsafe { libc::sysconf(name) }
}

#[cfg(test)]
mod scratch {
    /// A new, empty read-write file in a new directory under `parent`; it lives as long as
    /// the returned directory. Tests of the page cache and of mappings pass a directory on a
    /// disk (the checkout), since `/tmp` may be a tmpfs without writeback.
    pub fn scratch_file_in(parent: &std::path::Path) -> (tempfile::TempDir, std::fs::File) {
        let dir = tempfile::tempdir_in(parent).unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.path().join("f"))
            .unwrap();
        (dir, file)
    }

    /// A scratch file in the system's temporary directory.
    pub fn scratch_file() -> (tempfile::TempDir, std::fs::File) {
        scratch_file_in(&std::env::temp_dir())
    }
}
