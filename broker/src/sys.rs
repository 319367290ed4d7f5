//! The one place the protocol layer calls the OS directly.

use std::io::{self, IoSlice};
use std::os::fd::RawFd;

/// Sends as much of `chunks` as the socket takes now, in one `sendmsg`; `WouldBlock` when the
/// socket buffer is full. glommio's streams have no vectored write, and one call per answer
/// (instead of one per chunk) matters for fetch answers made of many shared batches. `more`
/// tells the kernel more of this frame follows at once (MSG_MORE), so a short header is not
/// sent as a packet of its own before the file bytes behind it.
pub fn send_vectored_now(fd: RawFd, chunks: &[IoSlice<'_>], more: bool) -> io::Result<usize> {
    // The kernel reads at most IOV_MAX entries per call; the rest goes in the next one.
    let count = chunks.len().min(IOV_MAX);
    let more = if more || count < chunks.len() {
        libc::MSG_MORE
    } else {
        0
    };
    // SAFETY: `IoSlice` is ABI-compatible with `struct iovec` on Unix (std guarantees it), and
    // the slices outlive the call; `msghdr` is zeroed (no name, no control data) and then points
    // at `count` of them. MSG_DONTWAIT makes the call non-blocking on glommio's socket, and
    // MSG_NOSIGNAL turns a closed peer into EPIPE instead of SIGPIPE.
    let sent = unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = chunks.as_ptr() as *mut libc::iovec;
        message.msg_iovlen = count as _;
        libc::sendmsg(fd, &message, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL | more)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

/// Sends up to `len` bytes of the file `file` from `position` with `sendfile`, as many as the
/// socket takes now: the kernel hands page-cache pages to the socket, nothing is copied here.
/// The socket must be in non-blocking mode ([`set_status_flags`]): sendfile has no
/// MSG_DONTWAIT. `WouldBlock` when the socket buffer is full; `Ok(0)` when the file ends before
/// `position`.
pub fn send_file_now(socket: RawFd, file: RawFd, position: u64, len: usize) -> io::Result<usize> {
    let mut offset = libc::off_t::try_from(position)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file position too large"))?;
    // SAFETY: sendfile reads at most `len` bytes from `file` at `offset` (a local the kernel
    // updates) into `socket`, and touches no user memory but `offset`.
    let sent = unsafe { libc::sendfile(socket, file, &mut offset, len) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

/// The descriptor's file status flags (`F_GETFL`).
pub fn status_flags(fd: RawFd) -> io::Result<libc::c_int> {
    // SAFETY: F_GETFL only reads the flags of a descriptor the caller keeps open.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(flags)
}

/// Sets the descriptor's file status flags (`F_SETFL`), e.g. O_NONBLOCK.
pub fn set_status_flags(fd: RawFd, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: F_SETFL only changes the status flags of a descriptor the caller keeps open.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Largest allocation glibc's malloc serves from its heaps instead of a mapping of its own: 32 MiB,
/// glibc's own upper bound for the threshold it otherwise adjusts at run time.
const MALLOC_MMAP_THRESHOLD_BYTES: i32 = 32 << 20;
/// Free memory at the top of a heap that glibc keeps instead of handing back to the kernel.
const MALLOC_TRIM_THRESHOLD_BYTES: i32 = 1 << 30;

/// Makes glibc's malloc keep the memory the broker frees for its next allocations instead of
/// handing it back to the kernel. Request frames are allocated and freed at the rate requests
/// arrive. glibc gave their memory back and `recv` then faulted fresh, zeroed pages in again:
/// 16–29 k page faults per 2 GB produced, where a virtio balloon with free page reporting adds a
/// host fault to each (docs/decisions/0008). With these thresholds it is ~2 k, and the peak RSS
/// stays the same, because the in-flight bounds already cap what is allocated at once. Does
/// nothing where the C library is not glibc.
pub fn keep_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets allocator parameters; called at start, before the shards run
    // (glibc documents it as safe at any time in any case).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD_BYTES);
        libc::mallopt(libc::M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD_BYTES);
    }
}

/// CPU time this process has used so far, user and system, all threads.
pub fn process_cpu_time() -> std::time::Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage into the pointer it is given, which points at a
    // zeroed, properly sized and aligned value owned by this frame.
    let usage = unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
            return std::time::Duration::ZERO;
        }
        usage.assume_init()
    };
    let time = |t: libc::timeval| {
        std::time::Duration::new(
            t.tv_sec.max(0) as u64,
            (t.tv_usec.clamp(0, 999_999) * 1000) as u32,
        )
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Hands the free memory glibc's malloc holds back to the kernel (all arenas).
pub fn release_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; glibc documents it as safe
    // to call at any time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Raises this process's soft limit on open files (RLIMIT_NOFILE) to its hard limit, and returns
/// the soft limit in force. The usual soft limit of 1024 exists for programs that use
/// `select(2)`, which the broker does not; every segment of every partition holds up to three files.
/// A raise the kernel refuses (a hard limit past `fs.nr_open`) keeps the soft limit.
pub fn raise_open_files_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the struct we own and pass by pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct passed by pointer.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.rlim_cur = limit.rlim_max;
        }
    }
    Ok(limit.rlim_cur)
}

/// Hands a bound std listener to glommio, which then owns its descriptor.
pub fn glommio_listener(listener: std::net::TcpListener) -> glommio::net::TcpListener {
    use std::os::fd::{FromRawFd, IntoRawFd};
    // SAFETY: the descriptor is a bound, listening TCP socket that `into_raw_fd` hands over, so
    // the glommio listener becomes its only owner.
    unsafe { glommio::net::TcpListener::from_raw_fd(listener.into_raw_fd()) }
}

/// A descriptor of its own for the socket `stream` serves (`F_DUPFD_CLOEXEC`): what a
/// connection moving to another shard takes there, while the stream, dropped here, closes its
/// own.
pub fn duplicate_socket(stream: &glommio::net::TcpStream) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: fcntl with F_DUPFD_CLOEXEC only reads the descriptor number, which the stream
    // keeps open for the length of the call.
    let duplicate = unsafe { libc::fcntl(stream.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if duplicate < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fcntl returned a new descriptor that nothing else owns.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(duplicate) })
}

/// glommio's stream on a connected TCP socket, served by this thread's executor from now on.
pub fn glommio_stream(socket: std::os::fd::OwnedFd) -> glommio::net::TcpStream {
    use std::os::fd::{FromRawFd, IntoRawFd};
    // SAFETY: `socket` is an open, connected TCP socket that the `OwnedFd` owned alone;
    // `into_raw_fd` hands it over, so the stream becomes its only owner and closes it.
    unsafe { glommio::net::TcpStream::from_raw_fd(socket.into_raw_fd()) }
}

const IOV_MAX: usize = 1024;
