//! A record two processes share through a file, mapped for the rest of the process: counters
//! both may update, and bytes one writes while the other waits (the fuzzer's board, which its
//! in-process supervisor and worker share). Sound because every byte pattern, a zeroed new file
//! included, is a valid [`SharedBoard`].

use std::cell::UnsafeCell;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicU64;

use crate::mapping::map_file;

/// Counters and one run of bytes, laid out the same in every process of one build (`repr(C)`):
/// `WORDS` counters, a table of `ROWS` × `COLUMNS` more, and `BYTES` bytes that one process
/// writes at a time. Reached only through [`SharedBoard::map`].
#[repr(C)]
pub struct SharedBoard<const WORDS: usize, const ROWS: usize, const COLUMNS: usize, const BYTES: usize> {
    /// Counters, each named by its index by the board's user.
    pub words: [AtomicU64; WORDS],
    /// A table of counters.
    pub table: [[AtomicU64; COLUMNS]; ROWS],
    /// Bytes written by one process while the other does not read them.
    pub bytes: SingleWriterBytes<BYTES>,
}

impl<const WORDS: usize, const ROWS: usize, const COLUMNS: usize, const BYTES: usize>
    SharedBoard<WORDS, ROWS, COLUMNS, BYTES>
{
    /// The bytes a board's file holds.
    pub const SIZE_BYTES: usize = std::mem::size_of::<Self>();

    /// Maps `file`, which holds exactly [`Self::SIZE_BYTES`] bytes (a new file of zeros is an
    /// empty board), shared and for the rest of the process. `InvalidData` for a file of
    /// another size (a board of another build).
    pub fn map(file: &File) -> io::Result<&'static Self> {
        let len = Self::SIZE_BYTES;
        let file_len = file.metadata()?.len();
        if file_len != len as u64 {
            let error = format!("the file holds {file_len} bytes, not {len}");
            return Err(io::Error::new(io::ErrorKind::InvalidData, error));
        }
        let start = map_file(file.as_raw_fd(), 0, len, true)?;
        // SAFETY: the mapping is page-aligned (more than any field needs), `len` bytes long and
        // never unmapped; the struct is `repr(C)` of atomics and `SingleWriterBytes`, each valid
        // for any bytes, so a `'static` shared reference to it is sound whatever the file holds
        // and whatever the other process writes.
        Ok(unsafe { start.cast::<Self>().as_ref() })
    }
}

/// Bytes in shared memory: written by one process (one run at a time) and read by the other
/// only once the writer has stopped. Valid for any bit pattern.
#[repr(C)]
pub struct SingleWriterBytes<const N: usize>(UnsafeCell<[u8; N]>);

// SAFETY: the single-writer discipline above: one process writes, the other reads only after
// the writer has died or been stopped, so no read overlaps a write.
unsafe impl<const N: usize> Sync for SingleWriterBytes<N> {}

impl<const N: usize> SingleWriterBytes<N> {
    /// Copies in at most `N` bytes of `bytes`; returns how many. Call from the writer only.
    pub fn write(&self, bytes: &[u8]) -> usize {
        let len = bytes.len().min(N);
        // SAFETY: only the writer calls this, one run at a time (see the type's comment).
        unsafe { (&mut *self.0.get())[..len].copy_from_slice(&bytes[..len]) };
        len
    }

    /// The first `len` bytes (at most `N`). Call only while the writer is stopped.
    pub fn read(&self, len: usize) -> Vec<u8> {
        // SAFETY: the writer has stopped (see the type's comment).
        unsafe { (&*self.0.get())[..len.min(N)].to_vec() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    type Board = SharedBoard<2, 3, 4, 16>;

    #[test]
    fn a_board_is_shared_through_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("board");
        let open = || {
            File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .unwrap()
        };
        open().set_len(Board::SIZE_BYTES as u64).unwrap();
        let writer = Board::map(&open()).unwrap();
        let reader = Board::map(&open()).unwrap();
        writer.words[1].store(41, Ordering::Release);
        writer.table[2][3].fetch_add(2, Ordering::Relaxed);
        assert_eq!(writer.bytes.write(b"more than sixteen bytes"), 16);
        assert_eq!(reader.words[1].load(Ordering::Acquire), 41);
        assert_eq!(reader.table[2][3].load(Ordering::Relaxed), 2);
        assert_eq!(reader.bytes.read(100), b"more than sixtee");
    }

    #[test]
    fn a_file_of_another_size_is_no_board() {
        let file = tempfile::tempfile().unwrap();
        file.set_len(Board::SIZE_BYTES as u64 + 1).unwrap();
        let error = Board::map(&file).err().unwrap();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    }
}
