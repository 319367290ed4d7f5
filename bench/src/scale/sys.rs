//! Every `unsafe` of `laminar bench scale`: the open-file limit, signals to the broker it
//! started, and figures std has no call for (clock ticks, free disk space).
#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};

/// The soft and hard RLIMIT_NOFILE of this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFilesLimit {
    /// What the process may open now.
    pub soft: u64,
    /// The most the soft limit may be raised to.
    pub hard: u64,
}

/// Raises this process's soft open-file limit to its hard limit (the idle-connection step holds
/// thousands of sockets) and returns the limits in force afterwards. The broker it spawns
/// inherits them; it raises its own soft limit the same way anyway.
pub fn raise_open_files_limit() -> io::Result<OpenFilesLimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into `limit`, a local that outlives the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads one `rlimit` from `raised`, a local that outlives the call.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(io::Error::last_os_error());
        }
        limit = raised;
    }
    Ok(OpenFilesLimit {
        soft: limit.rlim_cur,
        hard: limit.rlim_max,
    })
}

/// Sends SIGTERM to `child`. The caller has not reaped it (no successful wait), so its pid
/// still names it and no other process.
pub fn send_sigterm(child: &Child) -> io::Result<()> {
    let pid = libc::pid_t::try_from(child.id())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: kill(2) takes two integers and touches no memory of ours.
    if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes the process `command` spawns get SIGKILL when the thread that spawned it dies
/// (`PR_SET_PDEATHSIG`), so a harness killed mid-run leaves no broker behind holding the data
/// dir and the ports.
pub fn kill_with_parent(command: &mut Command) {
    // SAFETY: pre_exec runs between fork and exec in the child; prctl is async-signal-safe and
    // touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Clock ticks per second (`_SC_CLK_TCK`), the unit of `/proc/<pid>/stat` CPU times; at least 1.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf reads a constant of the running system and touches no memory of ours.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ticks.max(1) as u64
}

/// Bytes an unprivileged writer may still allocate on the filesystem holding `path`.
pub fn free_bytes(path: &Path) -> io::Result<u64> {
    let path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))?;
    // SAFETY: an all-zero `statvfs` is a valid value of this plain C struct.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string and `stats` a local the call fills; both
    // outlive the call.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stats) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stats.f_bavail.saturating_mul(stats.f_frsize))
}

/// Writes out the dirty pages of the filesystem holding `dir` (syncfs(2)).
pub fn sync_filesystem(dir: &Path) -> io::Result<()> {
    let dir = File::open(dir)?;
    // SAFETY: syncfs takes a descriptor, which `dir` keeps open for the call.
    if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
