//! Start-up checks of the host: io_uring with the opcodes glommio and Laminar use, and enough
//! locked memory for one glommio executor per core.

use std::fmt;

use io_uring::{opcode, IoUring, Probe};
use serde::Serialize;

use laminar_sys::limits::locked_memory_limit_bytes;

/// Locked memory one glommio executor needs (its rings and buffers).
pub const MEMLOCK_PER_EXECUTOR_BYTES: u64 = 512 * 1024;

/// The io_uring operations glommio 0.9 and Laminar issue; the broker cannot run without them.
pub const REQUIRED_OPCODES: &[(&str, u8)] = &[
    ("NOP", opcode::Nop::CODE),
    ("READ", opcode::Read::CODE),
    ("WRITE", opcode::Write::CODE),
    ("READV", opcode::Readv::CODE),
    ("WRITEV", opcode::Writev::CODE),
    ("READ_FIXED", opcode::ReadFixed::CODE),
    ("WRITE_FIXED", opcode::WriteFixed::CODE),
    ("FSYNC", opcode::Fsync::CODE),
    ("FALLOCATE", opcode::Fallocate::CODE),
    ("OPENAT", opcode::OpenAt::CODE),
    ("CLOSE", opcode::Close::CODE),
    ("STATX", opcode::Statx::CODE),
    ("ACCEPT", opcode::Accept::CODE),
    ("CONNECT", opcode::Connect::CODE),
    ("SEND", opcode::Send::CODE),
    ("RECV", opcode::Recv::CODE),
    ("SENDMSG", opcode::SendMsg::CODE),
    ("RECVMSG", opcode::RecvMsg::CODE),
    ("POLL_ADD", opcode::PollAdd::CODE),
    ("TIMEOUT", opcode::Timeout::CODE),
    ("LINK_TIMEOUT", opcode::LinkTimeout::CODE),
    ("ASYNC_CANCEL", opcode::AsyncCancel::CODE),
    ("SPLICE", opcode::Splice::CODE),
];

/// What the probe found on a host that can run Laminar.
#[derive(Debug, Clone, Serialize)]
pub struct HostReport {
    pub kernel_release: String,
    /// Names of the required opcodes (all supported, or probing would have failed).
    pub io_uring_opcodes: Vec<&'static str>,
    /// `None` means unlimited.
    pub memlock_limit_bytes: Option<u64>,
    /// Executors the locked-memory limit allows (`None`: no limit).
    pub executors_max: Option<u64>,
}

/// One thing that stops Laminar from running here, with how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostProblem {
    IoUringUnavailable {
        reason: String,
    },
    MissingOpcodes {
        kernel_release: String,
        missing: Vec<&'static str>,
    },
    MemlockTooLow {
        limit_bytes: u64,
        executors: u64,
    },
    MemlockUnreadable {
        reason: String,
    },
}

impl fmt::Display for HostProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostProblem::IoUringUnavailable { reason } => write!(
                f,
                "io_uring is not available: {reason}. Laminar needs Linux >= 5.11 with io_uring \
                 enabled (sysctl kernel.io_uring_disabled=0; containers: allow io_uring_setup in \
                 the seccomp profile)"
            ),
            HostProblem::MissingOpcodes {
                kernel_release,
                missing,
            } => write!(
                f,
                "kernel {kernel_release} lacks io_uring operations {}: upgrade to Linux >= 5.11",
                missing.join(", ")
            ),
            HostProblem::MemlockTooLow {
                limit_bytes,
                executors,
            } => write!(
                f,
                "RLIMIT_MEMLOCK is {} KiB; glommio needs {} KiB per core ({} KiB for {executors} \
                 cores): run `ulimit -l unlimited` or set LimitMEMLOCK=infinity in the systemd \
                 unit (or lower laminar.cores)",
                limit_bytes / 1024,
                MEMLOCK_PER_EXECUTOR_BYTES / 1024,
                executors * MEMLOCK_PER_EXECUTOR_BYTES / 1024
            ),
            HostProblem::MemlockUnreadable { reason } => {
                write!(f, "cannot read RLIMIT_MEMLOCK: {reason}")
            }
        }
    }
}

/// Everything wrong with the host, one problem a line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct HostError {
    pub problems: Vec<HostProblem>,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.problems.iter().map(ToString::to_string).collect();
        write!(f, "this host cannot run Laminar:\n  {}", lines.join("\n  "))
    }
}

/// Probes for one executor per available core.
pub fn probe_host() -> Result<HostReport, HostError> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    probe_host_for(cores as u64)
}

/// Probes io_uring and checks locked memory for `executors` glommio executors.
pub fn probe_host_for(executors: u64) -> Result<HostReport, HostError> {
    let kernel_release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string());
    let mut problems = Vec::new();
    match supported_opcodes() {
        Ok(probe) => {
            let missing: Vec<&'static str> = REQUIRED_OPCODES
                .iter()
                .filter(|(_, code)| !probe.is_supported(*code))
                .map(|(name, _)| *name)
                .collect();
            if !missing.is_empty() {
                problems.push(HostProblem::MissingOpcodes {
                    kernel_release: kernel_release.clone(),
                    missing,
                });
            }
        }
        Err(reason) => problems.push(HostProblem::IoUringUnavailable { reason }),
    }
    let memlock = locked_memory_limit_bytes();
    match &memlock {
        &Ok(Some(limit_bytes)) if limit_bytes < executors * MEMLOCK_PER_EXECUTOR_BYTES => {
            problems.push(HostProblem::MemlockTooLow {
                limit_bytes,
                executors,
            })
        }
        Ok(_) => {}
        Err(e) => problems.push(HostProblem::MemlockUnreadable {
            reason: e.to_string(),
        }),
    }
    if !problems.is_empty() {
        return Err(HostError { problems });
    }
    let memlock_limit_bytes = memlock.ok().flatten();
    Ok(HostReport {
        kernel_release,
        io_uring_opcodes: REQUIRED_OPCODES.iter().map(|(name, _)| *name).collect(),
        memlock_limit_bytes,
        executors_max: memlock_limit_bytes.map(|b| b / MEMLOCK_PER_EXECUTOR_BYTES),
    })
}

fn supported_opcodes() -> Result<Probe, String> {
    let ring = IoUring::new(4).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel has no io_uring_setup (ENOSYS)".to_string(),
        Some(libc::EPERM) => "io_uring_setup is forbidden (EPERM)".to_string(),
        _ => format!("io_uring_setup failed: {e}"),
    })?;
    let mut probe = Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| format!("IORING_REGISTER_PROBE failed ({e}); the kernel is older than 5.6"))?;
    Ok(probe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_host_passes_for_one_executor() {
        // This machine runs glommio tests, so it has io_uring and >= 512 KiB of memlock.
        let report = probe_host_for(1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(report.io_uring_opcodes.len(), REQUIRED_OPCODES.len());
        assert!(report.executors_max.is_none_or(|n| n >= 1));
    }

    #[test]
    fn too_many_executors_fail_with_a_fix() {
        let Ok(Some(limit)) = locked_memory_limit_bytes() else {
            println!("skipped: RLIMIT_MEMLOCK is unlimited here");
            return;
        };
        let executors = limit / MEMLOCK_PER_EXECUTOR_BYTES + 1;
        let err = probe_host_for(executors).unwrap_err();
        assert_eq!(
            err.problems,
            vec![HostProblem::MemlockTooLow {
                limit_bytes: limit,
                executors
            }]
        );
        let text = err.to_string();
        assert!(
            text.contains(&format!("RLIMIT_MEMLOCK is {} KiB", limit / 1024)),
            "{text}"
        );
        assert!(text.contains("ulimit -l unlimited"), "{text}");
        assert!(text.contains("LimitMEMLOCK=infinity"), "{text}");
    }

    #[test]
    fn missing_opcodes_are_named() {
        let problem = HostProblem::MissingOpcodes {
            kernel_release: "5.4.0".into(),
            missing: vec!["SPLICE", "SEND"],
        };
        assert_eq!(
            problem.to_string(),
            "kernel 5.4.0 lacks io_uring operations SPLICE, SEND: upgrade to Linux >= 5.11"
        );
    }
}
