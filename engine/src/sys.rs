//! The engine's direct system calls, where std and glommio offer no safe equivalent. Every
//! `unsafe` block of the engine lives here.

use std::io::{self, IoSlice};
use std::os::fd::RawFd;

/// The kernel takes at most this many iovecs per call (IOV_MAX); longer lists go in pieces.
const IOV_MAX: usize = 1024;

/// Writes every byte of `parts`, in order, at `pos` with `pwritev`, retrying short writes.
/// Returns the number of bytes written (the sum of the parts). A write of zero bytes while some
/// remain (a full disk or quota can do this) is an error, never a silent loss.
pub fn pwritev_all(fd: RawFd, parts: &[&[u8]], pos: u64) -> io::Result<u64> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let (mut index, mut skip, mut done) = (0, 0, 0usize);
    while done < total {
        let slices: Vec<IoSlice<'_>> = std::iter::once(&parts[index][skip..])
            .chain(parts[index + 1..].iter().copied())
            .take(IOV_MAX)
            .map(IoSlice::new)
            .collect();
        let offset = libc::off_t::try_from(pos + done as u64)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file position too large"))?;
        // SAFETY: `IoSlice` is ABI-compatible with `struct iovec` on Unix (std guarantees it);
        // the slices borrow `parts`, which outlive the call, and `slices.len()` is the count.
        let written =
            unsafe { libc::pwritev(fd, slices.as_ptr().cast(), slices.len() as libc::c_int, offset) };
        if written < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        if written == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "pwritev wrote nothing"));
        }
        let mut written = written as usize;
        done += written;
        while index < parts.len() && written >= parts[index].len() - skip {
            written -= parts[index].len() - skip;
            (index, skip) = (index + 1, 0);
        }
        skip += written;
    }
    Ok(total as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;

    #[test]
    fn pwritev_all_writes_every_part_in_order_at_the_position() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(dir.path().join("f"))
            .unwrap();
        let big = vec![7u8; 3 * 1024 * 1024];
        let parts: Vec<&[u8]> = vec![b"ab", b"", &big, b"cd"];
        assert_eq!(
            pwritev_all(file.as_raw_fd(), &parts, 5).unwrap(),
            big.len() as u64 + 4
        );
        let mut back = vec![0u8; big.len() + 9];
        file.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(&back[..7], b"\0\0\0\0\0ab");
        assert!(back[7..7 + big.len()].iter().all(|&b| b == 7));
        assert_eq!(&back[7 + big.len()..], b"cd");
    }

    #[test]
    fn pwritev_all_splits_more_parts_than_iov_max() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("f")).unwrap();
        let bytes: Vec<[u8; 1]> = (0..3000u32).map(|i| [(i % 251) as u8]).collect();
        let parts: Vec<&[u8]> = bytes.iter().map(|b| &b[..]).collect();
        assert_eq!(pwritev_all(file.as_raw_fd(), &parts, 0).unwrap(), 3000);
        let back = std::fs::read(dir.path().join("f")).unwrap();
        assert_eq!(back, bytes.concat());
    }
}
