//! Processes: signals to a child (`kill`), a child that dies with its parent (`prctl` between
//! fork and exec), and figures std has no call for (clock ticks per second, this process's CPU
//! time).

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::Duration;

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

/// Sends SIGHUP to `child` (not reaped, as for [`send_sigterm`]): a broker reloads its TLS
/// certificates.
pub fn send_sighup(child: &Child) -> io::Result<()> {
    send_signal(child, libc::SIGHUP)
}

/// Sends SIGCONT to `child` (not reaped, as for [`send_sigterm`]).
pub fn send_sigcont(child: &Child) -> io::Result<()> {
    send_signal(child, libc::SIGCONT)
}

fn send_signal(child: &Child, signal: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(child.id())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: kill(2) takes two integers and touches no memory of ours.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes the process `command` spawns get SIGKILL when the thread that spawned it dies
/// (`PR_SET_PDEATHSIG`), so a harness killed mid-run leaves no broker behind holding its data
/// dir and ports.
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
    crate::sysconf(libc::_SC_CLK_TCK).max(1) as u64
}

/// CPU time this process has used so far, user and system, all threads; zero if unknown.
pub fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage into the pointer it is given, which points at a
    // zeroed, properly sized and aligned value owned by this frame.
    let usage = unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
            return Duration::ZERO;
        }
        usage.assume_init()
    };
    let time = |t: libc::timeval| {
        Duration::new(
            t.tv_sec.max(0) as u64,
            (t.tv_usec.clamp(0, 999_999) * 1000) as u32,
        )
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_child_stopped_continues_and_a_child_terminated_dies_of_sigterm() {
        let mut command = Command::new("sleep");
        command.arg("30");
        kill_with_parent(&mut command);
        let mut child = command.spawn().unwrap();
        send_sigstop(&child).unwrap();
        send_sigcont(&child).unwrap();
        send_sigterm(&child).unwrap();
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGTERM));
    }

    #[test]
    fn cpu_time_grows_and_ticks_are_counted() {
        let before = cpu_time();
        let mut spin = 0u64;
        while cpu_time() == before {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        assert!(clock_ticks_per_second() >= 1);
    }
}
