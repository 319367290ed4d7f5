//! The harness's direct system calls, each behind a safe function. Every `unsafe` block of the
//! test crate lives here.
#![allow(unsafe_code)]

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// Sends SIGTERM to `child`. The caller has not reaped it (no successful wait), so its pid
/// still names it and no other process.
pub fn send_sigterm(child: &Child) -> io::Result<()> {
    send_signal(child, libc::SIGTERM)
}

/// Sends SIGSTOP to `child` (not reaped, as for [`send_sigterm`]): it freezes until SIGCONT,
/// its sockets open but unanswered, as a hung machine looks to its peers.
pub fn send_sigstop(child: &Child) -> io::Result<()> {
    send_signal(child, libc::SIGSTOP)
}

/// Sends SIGCONT to `child` (not reaped, as for [`send_sigterm`]).
pub fn send_sigcont(child: &Child) -> io::Result<()> {
    send_signal(child, libc::SIGCONT)
}

fn send_signal(child: &Child, signal: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(child.id())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: kill(2) takes two integers and touches no memory of ours.
    let rc = unsafe { libc::kill(pid, signal) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes the process `command` spawns get SIGKILL when its parent thread dies
/// (`PR_SET_PDEATHSIG`), so a crashed test run leaves no broker behind.
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

/// Sets the soft and hard RLIMIT_NOFILE of the process `command` spawns to `limit`.
pub fn limit_open_files(command: &mut Command, limit: u64) {
    let limit = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: pre_exec runs between fork and exec in the child; setrlimit is async-signal-safe
    // and reads only `limit`, a copy owned by the closure.
    unsafe {
        command.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
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
