//! Backing files' metadata as the attributes the mount reports.

use std::cmp::max;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo};

use crate::overlay::PAGE_SIZE;

/// The unit of `st_blocks`.
const STAT_BLOCK_SIZE: u64 = 512;

/// The attributes of inode `ino`, whose backing file has `metadata`; `logical_len` is the
/// length its unsynced writes give it, if it has any.
pub fn file_attr(ino: u64, metadata: &Metadata, logical_len: Option<u64>) -> FileAttr {
    let (size, blocks) = match logical_len {
        Some(len) => (len, max(metadata.blocks(), len.div_ceil(STAT_BLOCK_SIZE))),
        None => (metadata.len(), metadata.blocks()),
    };
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks,
        atime: system_time(metadata.atime(), metadata.atime_nsec()),
        mtime: system_time(metadata.mtime(), metadata.mtime_nsec()),
        ctime: system_time(metadata.ctime(), metadata.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind: file_type(metadata),
        perm: (metadata.mode() & 0o7777) as u16,
        nlink: u32::try_from(metadata.nlink()).unwrap_or(u32::MAX),
        uid: metadata.uid(),
        gid: metadata.gid(),
        rdev: u32::try_from(metadata.rdev()).unwrap_or(0),
        blksize: PAGE_SIZE as u32,
        flags: 0,
    }
}

pub fn file_type(metadata: &Metadata) -> FileType {
    FileType::from_std(metadata.file_type()).unwrap_or(FileType::RegularFile)
}

/// A `stat` time (seconds and nanoseconds since the epoch, negative before it).
fn system_time(seconds: i64, nanoseconds: i64) -> SystemTime {
    let since_epoch = Duration::new(seconds.unsigned_abs(), 0);
    let whole_seconds = if seconds >= 0 {
        UNIX_EPOCH.checked_add(since_epoch)
    } else {
        UNIX_EPOCH.checked_sub(since_epoch)
    };
    let nanoseconds = Duration::from_nanos(u64::try_from(nanoseconds).unwrap_or(0));
    whole_seconds
        .and_then(|time| time.checked_add(nanoseconds))
        .unwrap_or(UNIX_EPOCH)
}
