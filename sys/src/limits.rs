//! Resource limits (`getrlimit`, `setrlimit`): open files, for this process and for a child it
//! spawns, and locked memory, which io_uring's rings count against.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The type of a resource's number, which glibc declares as an enum of its own.
#[cfg(target_env = "gnu")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type Resource = libc::c_int;

/// A resource limit: the soft limit in force and the hard limit it may be raised to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// What the process may use now.
    pub soft: u64,
    /// The most the soft limit may be raised to.
    pub hard: u64,
}

/// This process's limit on `resource`.
fn limit(resource: Resource) -> io::Result<Limit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into `limit`, a local that outlives the call.
    if unsafe { libc::getrlimit(resource, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Limit {
        soft: limit.rlim_cur,
        hard: limit.rlim_max,
    })
}

/// Sets this process's limit on `resource`.
fn set_limit(resource: Resource, limit: Limit) -> io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: limit.soft,
        rlim_max: limit.hard,
    };
    // SAFETY: setrlimit reads one `rlimit` from `limit`, a local that outlives the call.
    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// This process's limit on open files (RLIMIT_NOFILE).
pub fn open_files_limit() -> io::Result<Limit> {
    limit(libc::RLIMIT_NOFILE)
}

/// Raises this process's soft limit on open files (RLIMIT_NOFILE) to its hard limit and
/// returns the limits in force afterwards. The usual soft limit of 1024 exists for programs
/// that use `select(2)`, which Laminar does not; a broker holds up to three files per segment,
/// a benchmark thousands of sockets. An error when the kernel refuses the raise (a hard limit
/// past `fs.nr_open`): the soft limit is then unchanged.
pub fn raise_open_files_limit() -> io::Result<Limit> {
    let limit = open_files_limit()?;
    if limit.soft >= limit.hard {
        return Ok(limit);
    }
    let raised = Limit {
        soft: limit.hard,
        hard: limit.hard,
    };
    set_limit(libc::RLIMIT_NOFILE, raised)?;
    Ok(raised)
}

/// Sets the soft and hard RLIMIT_NOFILE of the process `command` spawns to `limit`.
pub fn limit_open_files_of_child(command: &mut Command, limit: u64) {
    let limit = Limit {
        soft: limit,
        hard: limit,
    };
    // SAFETY: pre_exec runs between fork and exec in the child; `set_limit` only calls
    // setrlimit, which is async-signal-safe, reads `limit` (a copy owned by the closure) and
    // makes its error from errno without allocating.
    unsafe {
        command.pre_exec(move || set_limit(libc::RLIMIT_NOFILE, limit));
    }
}

/// The soft limit on locked memory (RLIMIT_MEMLOCK) in bytes; `None` means unlimited.
pub fn locked_memory_limit_bytes() -> io::Result<Option<u64>> {
    let limit = limit(libc::RLIMIT_MEMLOCK)?;
    Ok((limit.soft != libc::RLIM_INFINITY).then_some(limit.soft))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_files_limit_raised_is_the_hard_limit() {
        let before = open_files_limit().unwrap();
        match raise_open_files_limit() {
            Ok(raised) => assert_eq!(
                raised,
                Limit {
                    soft: before.hard,
                    hard: before.hard
                }
            ),
            Err(_) => assert_eq!(
                open_files_limit().unwrap(),
                before,
                "a refused raise changes nothing"
            ),
        }
    }

    #[test]
    fn a_child_runs_with_the_open_files_limit_given() {
        let mut command = Command::new("sh");
        command.args(["-c", "ulimit -n"]);
        limit_open_files_of_child(&mut command, 256);
        let out = command.output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "256");
    }

    #[test]
    fn a_locked_memory_limit_is_read() {
        locked_memory_limit_bytes().unwrap();
    }
}
