//! Sequential reading of the batches in a `.log` file, in chunks.

use super::batch::{self, BatchError, BatchHeader};
use crate::io::StorageFile;
use bytes::Bytes;
use std::io;

/// Bytes read per I/O while scanning: a few index intervals.
const SCAN_CHUNK: usize = 64 * 1024;

/// Bytes read per I/O while looking for one batch from a sparse-index entry: about one index
/// interval (`index.interval.bytes`, 4 KiB by default), where the batch sought usually lies. A
/// fetch of a few KiB from each of thousands of partitions read 64 KiB to locate each.
pub const LOCATE_CHUNK: usize = 4096;

/// What the scanner found at its position.
#[derive(Debug)]
pub enum Scanned {
    /// A batch starting at `position` (CRC-checked when verifying).
    Batch { position: u64, header: BatchHeader },
    /// Clean end: the position reached the end of the range.
    End,
    /// The bytes at `position` are not a (whole, valid) batch.
    Invalid { position: u64, error: BatchError },
}

/// How much of each batch a [`BatchScanner`] reads and checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// Each batch is read whole and CRC-checked.
    Checksums,
    /// Only headers are read; bodies are skipped.
    HeadersOnly,
}

/// Walks batches from `position` to `end` of a file, reading what `verify` asks for.
pub struct BatchScanner<'a, F> {
    file: &'a F,
    position: u64,
    end: u64,
    verify: Verify,
    buf: Bytes,
    buf_start: u64,
    /// Bytes read per I/O at least.
    chunk: usize,
}

impl<'a, F: StorageFile> BatchScanner<'a, F> {
    pub fn new(file: &'a F, position: u64, end: u64, verify: Verify) -> Self {
        BatchScanner {
            file,
            position,
            end,
            verify,
            buf: Bytes::new(),
            buf_start: position,
            chunk: SCAN_CHUNK,
        }
    }

    /// Reads `chunk` bytes per I/O instead of [`SCAN_CHUNK`] (more when a batch needs them).
    pub fn with_chunk(mut self, chunk: usize) -> Self {
        assert!(chunk >= batch::HEADER_LEN, "a chunk holds a batch header");
        self.chunk = chunk;
        self
    }

    pub fn position(&self) -> u64 {
        self.position
    }

    /// Makes `[position, position + n)` available in `buf` (less at end of range or file).
    async fn fill(&mut self, n: usize) -> io::Result<Bytes> {
        let offset_in_buf = self.position.wrapping_sub(self.buf_start) as usize;
        let have = self.position >= self.buf_start && offset_in_buf + n <= self.buf.len();
        if !have {
            let len = n.max(self.chunk).min((self.end - self.position) as usize);
            self.buf = self.file.read_at(self.position, len).await?;
            self.buf_start = self.position;
        }
        let from = (self.position - self.buf_start) as usize;
        let upto = (from + n).min(self.buf.len());
        Ok(self.buf.slice(from..upto))
    }

    /// The whole bytes of the batch a verifying [`next`](Self::next) just returned at
    /// `position` (it read them to check the CRC).
    pub fn batch_bytes(&self, position: u64, header: &BatchHeader) -> Bytes {
        assert_eq!(
            self.verify,
            Verify::Checksums,
            "only a verifying scan holds whole batches"
        );
        let from = (position - self.buf_start) as usize;
        self.buf.slice(from..from + header.total_len())
    }

    /// The whole bytes of the batch [`next`](Self::next) just returned at `position`: from
    /// the chunk it read when they are in it (a headers-only scan reads 64 KiB at a time),
    /// else read on their own.
    pub async fn whole_batch(&self, position: u64, header: &BatchHeader) -> io::Result<Bytes> {
        let total = header.total_len();
        let from = position.checked_sub(self.buf_start).map(|from| from as usize);
        match from {
            Some(from) if from + total <= self.buf.len() => Ok(self.buf.slice(from..from + total)),
            _ => self.file.read_at(position, total).await,
        }
    }

    pub async fn next(&mut self) -> io::Result<Scanned> {
        if self.position >= self.end {
            return Ok(Scanned::End);
        }
        let position = self.position;
        let remaining = (self.end - position) as usize;
        let head = self.fill(batch::HEADER_LEN.min(remaining)).await?;
        let header = match BatchHeader::parse(&head) {
            Ok(h) => h,
            Err(error) => return Ok(Scanned::Invalid { position, error }),
        };
        let total = header.total_len();
        if total > remaining {
            let error = BatchError::NeedMore {
                needed: total,
                available: remaining,
            };
            return Ok(Scanned::Invalid { position, error });
        }
        if self.verify == Verify::Checksums {
            let whole = self.fill(total).await?;
            if let Err(error) = batch::validate(&whole, usize::MAX) {
                return Ok(Scanned::Invalid { position, error });
            }
        }
        self.position += total as u64;
        Ok(Scanned::Batch { position, header })
    }
}
