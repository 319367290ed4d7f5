//! Taking the mount down without hanging: unmount (the kernel first writes back the pages it
//! still holds dirty, which the daemon must still be serving), retried while busy, detached
//! lazily as a last resort; then the daemon thread is joined, with a deadline.
//!
//! fuser's `BackgroundSession::umount_and_join` gives up at the first `EBUSY` and would then
//! leave the thread running unjoined, so the unmount is done here. fuser still tries its own
//! `umount2` when its session drops afterwards (its is-it-mounted check answers yes even for a
//! closed connection): that finds nothing mounted there and fails with `EINVAL`, which fuser
//! only logs (a `log` warning).

use std::io;
use std::path::Path;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use fuser::BackgroundSession;

use laminar_sys::file_systems::{self, Unmount};

/// How long an unmount keeps retrying while the mount is busy (a killed process's files may
/// take a moment to be released).
const BUSY_FOR_AT_MOST: Duration = Duration::from_secs(5);
const BUSY_RETRY_PAUSE: Duration = Duration::from_millis(50);
/// How long the daemon thread may take to end once the mount is gone. After a clean unmount
/// the kernel has closed the connection, so it ends at once; after a lazy one it ends only
/// when the last user of the mount is gone, which may be never.
const JOIN_CLEAN_DEADLINE: Duration = Duration::from_secs(10);
const JOIN_DETACHED_DEADLINE: Duration = Duration::from_secs(1);

/// Unmounts `mountpoint` and ends `session`'s daemon thread. A mount still busy after
/// [`BUSY_FOR_AT_MOST`] is detached (said on stderr) and its daemon thread left running if it
/// does not end soon: the caller then turns the power off in the state, so what still reaches
/// the daemon fails and changes nothing.
pub fn unmount_and_join(session: BackgroundSession, mountpoint: &Path) -> io::Result<()> {
    let how = unmount_retrying(mountpoint)?;
    // Dropping the rest of the session drops fuser's handle of the mount and of the device.
    let BackgroundSession { guard, .. } = session;
    let deadline = match how {
        Unmount::Now => JOIN_CLEAN_DEADLINE,
        Unmount::Detach => JOIN_DETACHED_DEADLINE,
    };
    join_before(guard, deadline, mountpoint)
}

/// Unmounts, retrying while busy, then detaching; returns how it went.
fn unmount_retrying(mountpoint: &Path) -> io::Result<Unmount> {
    let started = Instant::now();
    loop {
        match file_systems::unmount(mountpoint, Unmount::Now) {
            Ok(()) => return Ok(Unmount::Now),
            Err(error) if error.raw_os_error() == Some(libc::EBUSY) => {
                if started.elapsed() >= BUSY_FOR_AT_MOST {
                    break;
                }
                thread::sleep(BUSY_RETRY_PAUSE);
            }
            Err(error) => return Err(error),
        }
    }
    file_systems::unmount(mountpoint, Unmount::Detach)?;
    eprintln!(
        "laminar-faultfs: {} still busy after {BUSY_FOR_AT_MOST:?}: detached lazily; \
         whatever still uses it gets EIO from now on",
        mountpoint.display()
    );
    Ok(Unmount::Detach)
}

fn join_before(guard: JoinHandle<io::Result<()>>, deadline: Duration, mountpoint: &Path) -> io::Result<()> {
    let started = Instant::now();
    while !guard.is_finished() {
        if started.elapsed() >= deadline {
            eprintln!(
                "laminar-faultfs: the daemon of {} still runs {deadline:?} after the unmount; \
                 left running, its requests failing",
                mountpoint.display()
            );
            return Ok(());
        }
        thread::sleep(Duration::from_millis(5));
    }
    let ended = guard
        .join()
        .map_err(|_| io::Error::other("the laminar-faultfs daemon thread panicked"))?;
    match ended {
        // fuser ends its loop cleanly on ENODEV only; a read racing the unmount may instead
        // find the connection aborted, which is the end this unmount asked for.
        Err(error) if error.raw_os_error() == Some(libc::ECONNABORTED) => Ok(()),
        ended => ended,
    }
}
