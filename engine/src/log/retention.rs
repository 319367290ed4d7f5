//! Retention (retention.ms, retention.bytes), DeleteRecords, and the log start offset file.
//!
//! `<dir>/log-start-offset` holds the log start offset when DeleteRecords moved it inside a
//! segment (otherwise it is the first segment's base offset). Format, 12 bytes:
//!
//! ```text
//! off len field
//!   0   8 log start offset  i64 BE
//!   8   4 checksum          u32 BE, CRC-32 (IEEE, crc32fast) of bytes 0..8
//! ```
//!
//! It is replaced atomically (temp file, fdatasync, rename, directory fsync). A damaged file is
//! ignored with a warning: the start offset then falls back to the first segment's base.

use super::segment::Segment;
use super::{Log, LogError};
use crate::io::{write_file_atomically, Storage, StorageFile};
use bytes::Bytes;
use laminar_model::Offset;
use std::io;
use std::path::Path;
use std::rc::Rc;

pub const START_OFFSET_FILE: &str = "log-start-offset";

/// What a retention pass removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    pub segments_deleted: usize,
    pub bytes_deleted: u64,
    pub log_start_offset: Offset,
}

pub fn encode_start_offset(offset: i64) -> [u8; 12] {
    let mut out = [0u8; 12];
    out[..8].copy_from_slice(&offset.to_be_bytes());
    let crc = crc32fast::hash(&out[..8]);
    out[8..].copy_from_slice(&crc.to_be_bytes());
    out
}

pub fn decode_start_offset(bytes: &[u8]) -> Option<i64> {
    let (value, crc) = (bytes.get(..8)?, bytes.get(8..12)?);
    let crc = u32::from_be_bytes(crc.try_into().ok()?);
    (bytes.len() == 12 && crc32fast::hash(value) == crc)
        .then(|| i64::from_be_bytes(value.try_into().expect("8 bytes")))
}

pub async fn read_start_offset<S: Storage>(storage: &S, dir: &Path) -> io::Result<Option<i64>> {
    let path = dir.join(START_OFFSET_FILE);
    if !storage.exists(&path).await? {
        return Ok(None);
    }
    let file = storage.open(&path, false).await?;
    let bytes = file.read_at(0, 64).await?;
    file.close().await?;
    let value = decode_start_offset(&bytes);
    if value.is_none() {
        tracing::warn!(path = %path.display(), "damaged log start offset file ignored");
    }
    Ok(value)
}

impl<S: Storage> Log<S> {
    /// Deletes whole non-active segments older than retention.ms (by their largest timestamp)
    /// or beyond retention.bytes (both only with `cleanup.policy` delete), and those below the
    /// log start offset.
    pub async fn apply_retention(&self, now_ms: i64) -> Result<RetentionOutcome, LogError> {
        let _writer = self.writer.lock().await;
        self.check_ok()?;
        let config = self.config();
        let segments = self.segments();
        let non_active = &segments[..segments.len() - 1];
        let log_start = self.log_start_offset();
        let by_size = config.cleanup_policy_delete && config.retention_bytes >= 0;
        let by_time = config.cleanup_policy_delete && config.retention_ms >= 0;
        let mut excess = if by_size {
            self.size_bytes() as i64 - config.retention_bytes
        } else {
            0
        };
        let mut count = 0;
        for (i, segment) in non_active.iter().enumerate() {
            let meta = segment.meta();
            let expired = by_time && now_ms - meta.max_timestamp > config.retention_ms;
            let too_big = by_size && excess - meta.size as i64 >= 0;
            // The next segment's base, not this one's end: compaction leaves gaps.
            let below_start = segments[i + 1].base_offset <= log_start;
            if !(expired || too_big || below_start) {
                break;
            }
            excess -= meta.size as i64;
            count += 1;
        }
        drop(segments); // the removed segments' only holder is then the log (`recycle.rs`)
        self.delete_front_segments(count).await
    }

    async fn delete_front_segments(&self, count: usize) -> Result<RetentionOutcome, LogError> {
        if count > 0 {
            // The segment that rolled may be among those removed: synced first (`rolled.rs`).
            self.sync_rolled().await?;
            self.mark_dirty().await?;
        }
        let removed: Vec<Rc<Segment<S::File>>> = {
            let mut state = self.state.borrow_mut();
            let removed: Vec<_> = state.segments.drain(..count).collect();
            let first_base = state.segments[0].base_offset;
            state.log_start_offset = state.log_start_offset.max(first_base);
            removed
        };
        let mut outcome = RetentionOutcome {
            segments_deleted: removed.len(),
            log_start_offset: Offset::new(self.log_start_offset()),
            ..Default::default()
        };
        for segment in removed {
            outcome.bytes_deleted += segment.meta().size;
            let base_offset = segment.base_offset;
            let removal = self.files.remove_or_recycle(segment).await;
            removal.map_err(|e| self.fail(e))?;
            tracing::info!(base_offset, dir = %self.dir.display(), "segment deleted");
        }
        if outcome.segments_deleted > 0 {
            self.storage.sync_dir(&self.dir).await.map_err(|e| self.fail(e))?;
        }
        Ok(outcome)
    }

    /// DeleteRecords: moves the log start offset to `offset` (-1: the log end) and deletes the
    /// segments wholly below it. Returns the new log start offset.
    pub async fn delete_records_before(&self, offset: i64) -> Result<i64, LogError> {
        let _writer = self.writer.lock().await;
        self.check_ok()?;
        let (log_start, log_end) = (self.log_start_offset(), self.log_end_offset());
        let offset = if offset == -1 { log_end } else { offset };
        if offset < 0 || offset > log_end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start,
                log_end,
            });
        }
        if offset <= log_start {
            return Ok(log_start);
        }
        self.mark_dirty().await?;
        // The new start must never lie beyond what survives a crash: the log's bytes, and for a
        // new log its directory's entry in the data dir (the state file's write below syncs
        // only the log's own directory).
        self.sync().await?;
        let bytes = Bytes::copy_from_slice(&encode_start_offset(offset));
        let path = self.dir.join(START_OFFSET_FILE);
        // Refused without space: the old file stays in place until the rename.
        let written = write_file_atomically(&*self.storage, &path, bytes).await;
        written.map_err(|e| self.refuse_or_fail(e))?;
        self.state.borrow_mut().log_start_offset = offset;
        if self.active().meta().size > 0 && offset == log_end {
            self.roll().await?;
        }
        let segments = self.segments();
        let covered = segments[1..]
            .iter()
            .take_while(|next| next.base_offset <= offset)
            .count();
        self.delete_front_segments(covered).await?;
        Ok(offset)
    }
}

impl<S: Storage> Log<S> {
    /// Empties the log and starts it again at `offset`, past its end: a follower whose leader's
    /// log now starts beyond everything it has (Kafka's "truncate fully and start at"). The new
    /// start is written before the old segments go, so a crash in between leaves a log that
    /// recovery starts at `offset` or the old one whole.
    pub async fn start_again_at(&self, offset: i64) -> Result<(), LogError> {
        let _writer = self.writer.lock().await;
        self.check_ok()?;
        let (log_start, log_end) = (self.log_start_offset(), self.log_end_offset());
        if offset <= log_end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start,
                log_end,
            });
        }
        self.forget_synced_prefix().await?;
        self.mark_dirty().await?;
        let segment = Self::new_segment(&self.files, offset).await;
        let segment = segment.map_err(|e| self.refuse_or_fail(e))?;
        let bytes = Bytes::copy_from_slice(&encode_start_offset(offset));
        let written = write_file_atomically(&*self.storage, &self.dir.join(START_OFFSET_FILE), bytes).await;
        written.map_err(|e| self.refuse_or_fail(e))?;
        let removed: Vec<Rc<Segment<S::File>>> = {
            let mut state = self.state.borrow_mut();
            let removed = std::mem::replace(&mut state.segments, vec![Rc::new(segment)]);
            state.log_start_offset = offset;
            state.log_end_offset = offset;
            removed
        };
        for old in &removed {
            old.remove_files(&*self.storage, &self.dir)
                .await
                .map_err(|e| self.fail(e))?;
        }
        self.storage.sync_dir(&self.dir).await.map_err(|e| self.fail(e))?;
        tracing::info!(dir = %self.dir.display(), offset, "log started again");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_start_offset_file() {
        let bytes = encode_start_offset(0x0102);
        assert_eq!(&bytes[..8], &[0, 0, 0, 0, 0, 0, 0x01, 0x02]); // offset 258
        assert_eq!(&bytes[8..], &crc32fast::hash(&bytes[..8]).to_be_bytes()); // CRC-32
        assert_eq!(decode_start_offset(&bytes), Some(258));
        let mut bad = bytes;
        bad[7] ^= 1;
        assert_eq!(decode_start_offset(&bad), None);
    }
}
