//! Linux namespaces: moving the calling thread into a network namespace (`setns`), for test
//! harnesses that place clients on a network of their own.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Moves the calling thread (only it) into the network namespace that `path` names, such as
/// `/run/netns/<name>` made by `ip netns add`. Threads it starts afterwards inherit the
/// namespace; threads started before, and the rest of the process, stay where they were.
pub fn enter_network_namespace(path: &Path) -> io::Result<()> {
    let namespace = File::open(path)?;
    // SAFETY: setns(2) takes a descriptor we own, open for the duration of the call, and a
    // flag; it touches no memory of ours.
    if unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
