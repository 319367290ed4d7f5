//! Recycled segment files: where the storage says written blocks are worth keeping
//! (`Storage::recycles_segments`, O_DIRECT), the `.log` file of a segment retention removes is
//! renamed to [`SPARE_NAME`] instead of unlinked, and the next new segment takes it: its blocks
//! are written already, so appends overwrite them in place, and the fdatasync after them
//! writes no metadata (docs/decisions/0048, as databases recycle their write-ahead log).
//!
//! Rules, and why each holds:
//! - One spare per log at most, kept only while the log is open (its close removes it): the
//!   disk it holds is one segment of an active partition, beyond what retention keeps.
//! - A segment file is recycled only when the log held its last reference (no fetch reading
//!   it), and only once its file is closed: two handles on one inode, one of them cutting the
//!   file to its old length at its close, would cut the new segment.
//! - The new segment's file keeps its length, its old bytes past the new data: reads stop at
//!   the data. A crash leaves them there, and recovery (`recovery.rs`) must never take them for
//!   records: the active segment's batches must follow on from its base offset, and every old
//!   batch lies below it (the spare held older offsets of the same partition), so the scan
//!   stops at the first one; zeros and torn blocks stop it too. A clean close cuts the file to
//!   its data.

use std::io;
use std::path::PathBuf;
use std::rc::Rc;

use super::segment::{remove_segment_files, segment_path, Segment, SegmentFileMaker, LOG_SUFFIX};
use crate::io::{Storage, StorageFile};

/// The spare segment file's name in the log's directory (never taken for a segment: it does
/// not end in `.log`).
pub const SPARE_NAME: &str = "spare.segment";

impl<S: Storage> SegmentFileMaker<S> {
    fn spare_path(&self) -> PathBuf {
        self.dir.join(SPARE_NAME)
    }

    /// At open: a spare left by the last run is adopted where the storage recycles, else
    /// removed.
    pub async fn adopt_spare(&self, names: &[String]) -> io::Result<()> {
        if !names.iter().any(|name| name == SPARE_NAME) {
            return Ok(());
        }
        if self.storage.recycles_segments() {
            self.spare.set(true);
            return Ok(());
        }
        self.remove_spare().await
    }

    /// Removes the segment's files, or keeps its `.log` as the spare (see the module's rules).
    pub async fn remove_or_recycle(&self, segment: Rc<Segment<S::File>>) -> io::Result<()> {
        let base_offset = segment.base_offset;
        let recyclable = self.storage.recycles_segments() && !self.spare.get();
        match Rc::try_unwrap(segment) {
            Ok(segment) if recyclable => {
                segment.log.close().await?;
                drop(segment);
                let log = segment_path(&self.dir, base_offset, LOG_SUFFIX);
                self.storage.rename(&log, &self.spare_path()).await?;
                self.spare.set(true);
                // The `.log` is gone: only its index files are left to remove.
                remove_segment_files(&*self.storage, &self.dir, base_offset).await
            }
            _ => remove_segment_files(&*self.storage, &self.dir, base_offset).await,
        }
    }

    /// The spare, renamed to the new segment's `.log` and emptied for its appends; `None` when
    /// there is none.
    pub(super) async fn reuse_spare(&self, base_offset: i64) -> io::Result<Option<Rc<S::File>>> {
        if !self.spare.replace(false) {
            return Ok(None);
        }
        let path = segment_path(&self.dir, base_offset, LOG_SUFFIX);
        match self.storage.rename(&self.spare_path(), &path).await {
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            renamed => renamed?,
        }
        let log = self.storage.open(&path, false).await?;
        log.reuse_blocks().await?;
        Ok(Some(log))
    }

    /// Removes the spare, if any (the log closes).
    pub async fn remove_spare(&self) -> io::Result<()> {
        self.spare.set(false);
        match self.storage.remove_file(&self.spare_path()).await {
            Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        }
    }
}
