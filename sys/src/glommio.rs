//! Hands descriptors opened by std to glommio, whose files and sockets offer no safe
//! constructor from one (only `FromRawFd`): a bound listener, a connected socket moving to
//! another thread's executor, a file std opened with flags glommio cannot give.

use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};

/// Hands a bound std listener to glommio, which then owns its descriptor.
pub fn tcp_listener(listener: std::net::TcpListener) -> ::glommio::net::TcpListener {
    // SAFETY: the descriptor is a bound, listening TCP socket that `into_raw_fd` hands over, so
    // the glommio listener becomes its only owner.
    unsafe { ::glommio::net::TcpListener::from_raw_fd(listener.into_raw_fd()) }
}

/// glommio's stream on the connected TCP socket `socket`, served by this thread's executor from
/// now on.
pub fn tcp_stream(socket: OwnedFd) -> ::glommio::net::TcpStream {
    // SAFETY: `socket` is an open, connected TCP socket that the `OwnedFd` owned alone;
    // `into_raw_fd` hands it over, so the stream becomes its only owner and closes it.
    unsafe { ::glommio::net::TcpStream::from_raw_fd(socket.into_raw_fd()) }
}

/// A glommio file owning the descriptor of `file` (opened by std, on this thread).
pub fn buffered_file(file: std::fs::File) -> ::glommio::io::BufferedFile {
    // SAFETY: `into_raw_fd` gave up ownership of an open descriptor, which nothing else holds;
    // the glommio file takes it over and closes it once.
    unsafe { ::glommio::io::BufferedFile::from_raw_fd(file.into_raw_fd()) }
}
