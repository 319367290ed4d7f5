//! Every `unsafe` of the limits probe lives here: page-aligned buffers for O_DIRECT, sequential
//! I/O through io_uring, sendfile, and dropping a file's pages from the page cache.
#![allow(unsafe_code)]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::time::Instant;

use io_uring::{opcode, types, IoUring};

/// O_DIRECT needs buffers aligned to the logical block size; a page covers every disk.
pub const DIRECT_ALIGN: usize = 4096;

/// A zeroed heap buffer aligned to [`DIRECT_ALIGN`]. Owned by one thread.
#[derive(Debug)]
pub struct AlignedBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

impl AlignedBuffer {
    /// A zeroed buffer of `len` bytes (`len` a positive multiple of [`DIRECT_ALIGN`]).
    pub fn new(len: usize) -> AlignedBuffer {
        assert!(
            len > 0 && len.is_multiple_of(DIRECT_ALIGN),
            "aligned buffer length {len}"
        );
        let layout = Layout::from_size_align(len, DIRECT_ALIGN).expect("valid layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuffer { ptr, len }
    }

    /// The bytes.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` points to `len` initialised (zeroed) bytes owned by `self`, and the
        // `&mut self` borrow makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len, DIRECT_ALIGN).expect("valid layout");
        // SAFETY: allocated in `new` with this very layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), layout) }
    }
}

/// Reading or writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Read the file.
    Read,
    /// Write the file.
    Write,
}

/// Sequential I/O on `file` through one io_uring, one operation in flight per buffer (queue
/// depth = `buffers.len()`), each the size of its buffer, at increasing offsets that wrap at
/// `file_bytes`. Stops submitting at `deadline` or after `bytes_max`; returns the bytes done.
pub fn sequential_io(
    file: &File,
    direction: Direction,
    mut buffers: Vec<AlignedBuffer>,
    file_bytes: u64,
    bytes_max: u64,
    deadline: Instant,
) -> io::Result<u64> {
    let depth = buffers.len();
    assert!(depth > 0, "at least one buffer");
    let block = buffers[0].len as u64;
    assert!(buffers.iter().all(|b| b.len as u64 == block), "equal buffers");
    assert!(
        file_bytes >= block && file_bytes.is_multiple_of(block),
        "whole blocks"
    );
    let mut ring = IoUring::new(depth.next_power_of_two() as u32)?;
    let fd = types::Fd(file.as_raw_fd());
    let mut busy = vec![false; depth];
    let mut in_flight = 0usize;
    let (mut submitted, mut done) = (0u64, 0u64);
    let mut first_error: Option<io::Error> = None;
    loop {
        let stop = first_error.is_some() || submitted >= bytes_max || Instant::now() >= deadline;
        for slot in 0..depth {
            if stop || busy[slot] {
                continue;
            }
            let offset = submitted % file_bytes;
            let buffer = buffers[slot].as_mut_slice().as_mut_ptr();
            let entry = match direction {
                Direction::Read => opcode::Read::new(fd, buffer, block as u32).offset(offset).build(),
                Direction::Write => opcode::Write::new(fd, buffer, block as u32)
                    .offset(offset)
                    .build(),
            };
            // SAFETY: the buffer stays allocated and untouched by Rust code until its completion
            // is reaped below: `buffers` is owned here, each slot has at most one operation in
            // flight, and on a ring failure the buffers are leaked rather than freed.
            let pushed = unsafe { ring.submission().push(&entry.user_data(slot as u64)) };
            pushed.expect("the ring has an entry per buffer");
            busy[slot] = true;
            in_flight += 1;
            submitted += block;
        }
        if in_flight == 0 {
            break;
        }
        if let Err(error) = ring.submit_and_wait(1) {
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // Operations may still be in flight: never free their buffers.
            std::mem::forget(buffers);
            return Err(error);
        }
        for completion in ring.completion() {
            let slot = completion.user_data() as usize;
            busy[slot] = false;
            in_flight -= 1;
            match completion.result() {
                result if result < 0 => {
                    first_error.get_or_insert(io::Error::from_raw_os_error(-result));
                }
                result => done += result as u64,
            }
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(done),
    }
}

/// Sends up to `len` bytes of `file` from `offset` to the (blocking) `socket` with sendfile;
/// returns the bytes sent.
pub fn send_file(socket: &std::net::TcpStream, file: &File, offset: u64, len: usize) -> io::Result<usize> {
    let mut offset = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset too large"))?;
    // SAFETY: sendfile reads at most `len` bytes of `file` at `offset` (a local the kernel
    // updates) into the socket; both descriptors stay open for the call.
    let sent = unsafe { libc::sendfile(socket.as_raw_fd(), file.as_raw_fd(), &mut offset, len) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

/// Asks the kernel to drop `file`'s clean pages from the page cache, so a buffered read that
/// follows comes from the disk.
pub fn drop_page_cache(file: &File) -> io::Result<()> {
    // SAFETY: posix_fadvise only reads its integer arguments; the fd is open for `file`'s life.
    let result = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    match result {
        0 => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}
