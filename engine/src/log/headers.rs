//! Walking the batch headers of a log without reading records: what rebuilding the producer
//! state after the last snapshot needs.

use super::batch::BatchHeader;
use super::control::{parse_marker, Marker};
use super::scan::{BatchScanner, Scanned, Verify};
use super::{Log, LogError};
use crate::io::Storage;
use std::io;

impl<S: Storage> Log<S> {
    /// Base offset of the active segment (it changes when the log rolls).
    pub fn active_base_offset(&self) -> i64 {
        self.active().base_offset
    }

    /// Calls `visit` with the header of every batch from the one holding `offset` to the log
    /// end, in order, and for a transaction marker what it says. Only headers are read (61
    /// bytes a batch) but for control batches, read whole (one small record each); CRCs are
    /// not checked: the batches were validated on append or by recovery. The caller keeps
    /// appends and truncations out while it runs.
    pub async fn for_each_header_from(
        &self,
        offset: i64,
        mut visit: impl FnMut(&BatchHeader, Option<Marker>),
    ) -> Result<(), LogError> {
        self.check_ok()?;
        for segment in self.segments() {
            let meta = segment.meta();
            if meta.next_offset <= offset {
                continue;
            }
            let start = if segment.base_offset >= offset {
                0
            } else {
                match segment.find_batch(offset).await? {
                    Some((position, _)) => position,
                    None => continue,
                }
            };
            let mut scanner = BatchScanner::new(&*segment.log, start, meta.size, Verify::HeadersOnly);
            loop {
                match scanner.next().await? {
                    Scanned::Batch { header, position } if header.is_control() => {
                        let bytes = scanner.whole_batch(position, &header).await?;
                        visit(&header, parse_marker(&bytes, &header));
                    }
                    Scanned::Batch { header, .. } => visit(&header, None),
                    Scanned::End => break,
                    Scanned::Invalid { position, error } => {
                        let at = format!("segment {} position {position}", segment.base_offset);
                        let error = io::Error::new(io::ErrorKind::InvalidData, format!("{at}: {error}"));
                        return Err(LogError::Io(error));
                    }
                }
            }
        }
        Ok(())
    }
}
