//! Sequential reads or writes of a file through io_uring at a fixed queue depth: the disk
//! bandwidth probes.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::time::Instant;

use laminar_sys::memory::AlignedBuffer;
use laminar_sys::uring::{BlockRing, Completion, Direction};

/// Sequential I/O on `file` through one io_uring, one operation in flight per buffer (queue
/// depth = `buffers.len()`), each the size of its buffer, at increasing offsets that wrap at
/// `file_bytes`. Stops submitting at `deadline` or after `bytes_max`; returns the bytes done.
pub fn sequential_io(
    file: &File,
    direction: Direction,
    buffers: Vec<AlignedBuffer>,
    file_bytes: u64,
    bytes_max: u64,
    deadline: Instant,
) -> io::Result<u64> {
    // The ring owns the buffers: on an error with operations in flight it never frees theirs.
    let mut ring = BlockRing::new(buffers)?;
    let block = ring.block_bytes() as u64;
    assert!(
        file_bytes >= block && file_bytes.is_multiple_of(block),
        "whole blocks"
    );
    let fd = file.as_raw_fd();
    let (mut submitted, mut done) = (0u64, 0u64);
    let mut first_error: Option<io::Error> = None;
    loop {
        let stop = first_error.is_some() || submitted >= bytes_max || Instant::now() >= deadline;
        for slot in 0..ring.slots() {
            if stop || ring.is_busy(slot) {
                continue;
            }
            ring.queue(slot, fd, submitted % file_bytes, direction)?;
            submitted += block;
        }
        if ring.in_flight() == 0 {
            break;
        }
        let completions = match ring.submit_and_wait() {
            Ok(completions) => completions,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        for Completion { result, .. } in completions {
            match result {
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
