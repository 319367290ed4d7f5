//! Reads meant for a socket: the batches stay in the segment file, as a [`FileRange`] the
//! network layer sends with sendfile, so record bytes are never copied in user space.
//!
//! Two limits shape it. sendfile of bytes that are not in the page cache blocks the calling
//! thread on the disk, and a shard must never block: a range missing a few pages (reclaim takes
//! pages here and there) has them read back in through io_uring first, and a range missing more
//! (catch-up reads of old data) is read into memory through io_uring instead. And a file range
//! must end on a batch boundary without reading the batches: it ends at the segment
//! end, or at the last sparse-index entry inside the byte limit (entries point at batch starts,
//! about every `index.interval.bytes`), or after the first batch.

use super::batch::BatchHeader;
use super::segment::Segment;
use crate::io::{FileRange, StorageFile};
use bytes::Bytes;
use std::io;
use std::ops::Range;

/// Most runs of missing pages a range for sendfile has read back in; a range missing more is
/// read into memory whole.
const WARM_RUNS_MAX: usize = 256;

/// Whole batches a read found, in offset order. Send: it crosses shards.
#[derive(Debug, Clone)]
pub enum RecordBytes {
    /// Read into memory.
    Memory(Vec<Bytes>),
    /// Left in the segment file; `offsets` are those the batches cover (compaction may have
    /// left gaps among them).
    File { range: FileRange, offsets: Range<i64> },
}

impl Default for RecordBytes {
    fn default() -> Self {
        RecordBytes::Memory(Vec::new())
    }
}

impl RecordBytes {
    pub fn len(&self) -> usize {
        match self {
            RecordBytes::Memory(batches) => batches.iter().map(Bytes::len).sum(),
            RecordBytes::File { range, .. } => range.len as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The offset after the last batch (`None` when there is none).
    pub fn next_offset(&self) -> Option<i64> {
        match self {
            RecordBytes::Memory(batches) => {
                let last = batches.last()?;
                BatchHeader::parse(last).ok().map(|h| h.next_offset())
            }
            RecordBytes::File { offsets, .. } if !offsets.is_empty() => Some(offsets.end),
            RecordBytes::File { .. } => None,
        }
    }
}

impl<F: StorageFile> Segment<F> {
    /// Whole batches from `position` (where `first` starts), as many as fit in `max_bytes` and
    /// at least one when `min_one_batch`: as a file range when they are cached, else in memory.
    pub async fn records_for_send(
        &self,
        position: u64,
        first: &BatchHeader,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> io::Result<RecordBytes> {
        let span = self
            .sendable_span(position, first, max_bytes, min_one_batch)
            .await?;
        let Some((len, next_offset)) = span else {
            return Ok(RecordBytes::default());
        };
        if self.cached_for_send(position, len).await? {
            if let Some(file) = self.log.sendable()? {
                self.note_read_end(position + len, next_offset);
                let file = std::sync::Arc::new(file);
                let range = FileRange { file, position, len };
                let offsets = first.base_offset..next_offset;
                return Ok(RecordBytes::File { range, offsets });
            }
        }
        let batches = self.read_batches(position, max_bytes, min_one_batch).await?;
        let last = batches.last().and_then(|last| BatchHeader::parse(last).ok());
        if let Some(last) = last {
            let len: usize = batches.iter().map(Bytes::len).sum();
            self.note_read_end(position + len as u64, last.next_offset());
        }
        Ok(RecordBytes::Memory(batches))
    }

    /// Whether `[position, position + len)` is all in the page cache, once the few pages of it
    /// that reclaim took here and there are read back in (decision 0028, ranges the host's reclaim thinned):
    /// up to
    /// [`WARM_RUNS_MAX`] runs of at most a quarter of the range, read through io_uring, so a
    /// page or two gone no longer sends the whole range through memory.
    async fn cached_for_send(&self, position: u64, len: u64) -> io::Result<bool> {
        if self.log.is_cached(position, len)? {
            return Ok(true);
        }
        let Some(runs) = self.log.uncached_runs(position, len, WARM_RUNS_MAX)? else {
            return Ok(false);
        };
        let missing: u64 = runs.iter().map(|run| run.end - run.start).sum();
        if missing > len / 4 {
            return Ok(false);
        }
        let reads = runs
            .iter()
            .map(|run| self.log.read_at(run.start, (run.end - run.start) as usize));
        futures::future::try_join_all(reads).await?;
        self.log.is_cached(position, len)
    }

    /// Length of the run of whole batches from `position` to send, and the offset after it.
    async fn sendable_span(
        &self,
        position: u64,
        first: &BatchHeader,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> io::Result<Option<(u64, i64)>> {
        let meta = self.meta();
        assert!(position < meta.size, "a located batch lies inside the segment");
        let limit = max_bytes as u64;
        if meta.size - position <= limit {
            return Ok(Some((meta.size - position, meta.next_offset)));
        }
        let first_len = first.total_len() as u64;
        if first_len > limit {
            // No batch starts inside the limit: the index has no cut to offer.
            return Ok(min_one_batch.then_some((first_len, first.next_offset())));
        }
        self.index.load().await?;
        let cut = self
            .index
            .last_where(|e| e.position as u64 <= position + limit)
            .filter(|e| e.position as u64 > position);
        if let Some(entry) = cut {
            let next_offset = self.base_offset + entry.relative_offset as i64;
            return Ok(Some((entry.position as u64 - position, next_offset)));
        }
        Ok(Some((first_len, first.next_offset())))
    }
}
