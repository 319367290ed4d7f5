//! The storage I/O seam. The log reads and writes files only through [`Storage`] and
//! [`StorageFile`], so glommio can be replaced (or faults injected) without touching it.
//!
//! The traits use `async fn` without `Send` bounds on purpose: a shard owns its files and
//! never moves their futures across threads.

mod descriptors;
mod dir_syncs;
pub mod direct_appends;
mod durable_dirs;
// Fault injection for tests: never in a production build.
#[cfg(any(test, feature = "testing"))]
mod faulty;
mod file_cache;
mod glommio_storage;
pub mod mapped_appends;
mod own_ring;
mod path_index;
pub mod prewrite;
pub mod recent_writes;
mod reservations;
mod retired_dirs;
pub mod writeback;

pub use descriptors::{
    is_out_of_descriptors, is_out_of_space, DescriptorBudget, DescriptorSlots, LentSlot, ShardDescriptors,
    LEND_SHARE_DIVISOR,
};
pub use dir_syncs::SharedDirSyncs;
pub use direct_appends::DirectAppendStats;
pub use durable_dirs::{create_dir_all_durably, replace_file_durably};
#[cfg(any(test, feature = "testing"))]
pub use faulty::{CrashMode, FaultyStorage, MemHandle};
pub use file_cache::{CachedFile, FileCache, FileCacheStats};
pub use glommio_storage::{GlommioFile, GlommioStorage, WriteMode, DIR_SYNCS_IN_FLIGHT_MAX};
pub use prewrite::PrewriteStats;
pub use reservations::ReserveBudget;
pub use retired_dirs::{
    is_retired_name, remove_dir_durably, remove_retired_dirs, set_aside_blocking, set_aside_durably,
};
pub use writeback::{WriteBehind, WriteBehindStats};

/// The total and usable bytes of the file system holding `path` (`statvfs`; usable is what an
/// unprivileged writer may still take, as Java's `FileStore.getUsableSpace`).
pub fn file_system_space(path: &Path) -> io::Result<(u64, u64)> {
    let stats = laminar_sys::file_systems::stats(path)?;
    Ok((stats.total_bytes(), stats.usable_bytes()))
}

/// The storage a broker shard runs on: glommio files behind the shard's [`FileCache`].
pub type ShardStorage = FileCache<GlommioStorage>;

/// Which file an open file is, whatever path it was opened by: device and inode for kernel
/// files, a number for in-memory ones. A file reopened by its path must be the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    pub device: u64,
    pub inode: u64,
}

impl FileId {
    pub fn of(stat: &laminar_sys::files::FileStat) -> FileId {
        FileId {
            device: stat.device,
            inode: stat.inode,
        }
    }
}

use bytes::Bytes;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// A range of a file that another thread may send to a socket without copying it. The handle
/// keeps the bytes readable even after the segment is closed, removed or replaced by compaction
/// (log data below the end is never rewritten in place). Send + Sync: it crosses shards.
#[derive(Debug, Clone)]
pub struct FileRange {
    pub file: Arc<LentFile>,
    pub position: u64,
    pub len: u64,
}

/// A storage file's descriptor lent to another thread: a duplicate made for one send, valid
/// after the file itself is closed, renamed or removed, and counted in the descriptor budget
/// until dropped (its [`LentSlot`]). Send + Sync.
#[derive(Debug)]
pub struct LentFile {
    file: std::fs::File,
    _slot: Option<LentSlot>,
}

impl LentFile {
    pub fn new(file: std::fs::File, slot: Option<LentSlot>) -> Self {
        LentFile { file, _slot: slot }
    }
}

/// A file outside any budget (tests, tools).
impl From<std::fs::File> for LentFile {
    fn from(file: std::fs::File) -> Self {
        LentFile::new(file, None)
    }
}

impl std::ops::Deref for LentFile {
    type Target = std::fs::File;

    fn deref(&self) -> &std::fs::File {
        &self.file
    }
}

/// One open file, read+write. Owned by one shard; not Send. Shared as `Rc` so that an
/// fdatasync can be in flight while appends continue.
#[allow(async_fn_in_trait)] // single-threaded by design: no Send bound wanted
pub trait StorageFile {
    /// Reads up to `len` bytes at `pos`; shorter only at end of file.
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes>;
    /// Writes `parts`, one after the other, at `pos` (a short write is retried, a zero-length
    /// one is an error). Several parts let the log write a batch from the request buffer with
    /// only its patched header prefix coming from elsewhere, in one system call.
    async fn write_at(&self, pos: u64, parts: &[&[u8]]) -> io::Result<()>;
    async fn fdatasync(&self) -> io::Result<()>;
    /// Waits until every byte written so far is in the kernel's hands, so that a kill of the
    /// process no longer loses it (a power cut still may, until an fdatasync). Storage that
    /// stages writes in the process's memory (O_DIRECT appends) waits for them; by default
    /// nothing to wait for.
    async fn wait_written(&self) -> io::Result<()> {
        Ok(())
    }
    async fn truncate(&self, len: u64) -> io::Result<()>;
    /// Reserves disk blocks up to `end` without changing the file's length, so that appends up
    /// to there find their blocks allocated; a `truncate` to the length gives back what is left
    /// past it. A hint: storage without it, or a disk without room, reserves nothing, and the
    /// appends allocate their blocks as they go.
    fn reserve(&self, end: u64) {
        let _ = end;
    }
    /// Bytes reserved past the length now.
    fn reserved_bytes(&self) -> u64 {
        0
    }
    /// A handle other threads may read this file through for one send (the network layer's
    /// sendfile), still valid after this file is closed, renamed or removed; `None` for files
    /// that are not kernel files (the in-memory test storage), and when the budget has no
    /// descriptor to lend.
    fn sendable(&self) -> io::Result<Option<LentFile>> {
        Ok(None)
    }
    /// Whether reading `[pos, pos + len)` now would not wait for the disk (every page of it is
    /// in the page cache). Files without a page cache say yes.
    fn is_cached(&self, pos: u64, len: u64) -> io::Result<bool> {
        let _ = (pos, len);
        Ok(true)
    }
    /// The runs of `[pos, pos + len)` not in the page cache, in order, at most `runs_max` of
    /// them; `None` when there are more or the file cannot tell. Files without a page cache
    /// have none.
    fn uncached_runs(&self, pos: u64, len: u64, runs_max: usize) -> io::Result<Option<Vec<Range<u64>>>> {
        let _ = (pos, len, runs_max);
        Ok(Some(Vec::new()))
    }
    /// One pass of a prefetch over many files about to take an append at `pos` (see
    /// `ShardPartitions::prefetch`): each level is reached through the one before. Nothing by
    /// default.
    fn prefetch_append(&self, _level: u8, _pos: u64) {}
    /// Current length as seen by this process (written bytes, synced or not).
    fn len(&self) -> u64;
    /// Which file this is (read when it was opened).
    fn id(&self) -> FileId;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    async fn close(&self) -> io::Result<()>;
    /// Empties the file for appends from its start. Storage that overwrites written blocks
    /// cheaply (O_DIRECT: a recycled segment file, decision 0048) keeps its blocks and its
    /// length, the old bytes past the new data never read; by default, a truncate to 0.
    async fn reuse_blocks(&self) -> io::Result<()> {
        self.truncate(0).await
    }
    /// Gives the file's descriptor back until its next use, where the storage opens files
    /// again by itself (the shard's file cache parks it, if idle); a hint other storage
    /// ignores. For files a shard will not need soon, so that the descriptors go to those it
    /// reads (decision 0021, file cache and descriptor budget).
    async fn close_until_used(&self) {}
}

/// A file system. Owned by one shard; not Send.
#[allow(async_fn_in_trait)] // single-threaded by design: no Send bound wanted
pub trait Storage: 'static {
    type File: StorageFile;
    async fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Names of the entries of a directory (not recursive), in no particular order.
    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Opens read+write, creating the file when `create` (an existing one is kept).
    async fn open(&self, path: &Path, create: bool) -> io::Result<Rc<Self::File>>;
    async fn remove_file(&self, path: &Path) -> io::Result<()>;
    async fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    async fn exists(&self, path: &Path) -> io::Result<bool>;
    /// The length of the file at `path` as the file system has it, without opening it (no
    /// descriptor taken): sizes of partitions that are not open.
    async fn file_len(&self, path: &Path) -> io::Result<u64>;
    /// Whether the segment files retention removes are worth keeping to take a new segment's
    /// appends ([`StorageFile::reuse_blocks`]): their blocks are written, so appends overwriting
    /// them change no metadata a sync must write. False by default.
    fn recycles_segments(&self) -> bool {
        false
    }
    /// Makes creations, renames and removals in `path` durable. The directory's descriptor is
    /// the storage's own, bounded by it, and not taken from a descriptor budget.
    async fn sync_dir(&self, path: &Path) -> io::Result<()>;
}

/// The directory holding `path`, whose fsync makes `path`'s entry durable: `.` for a bare name.
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// `path` once a rename moved `from` (itself, or a directory holding it) to `to`; `None` when
/// `path` is not `from` nor below it.
pub(crate) fn moved_below(path: &Path, from: &Path, to: &Path) -> Option<PathBuf> {
    let below = path.strip_prefix(from).ok()?;
    Some(if below.as_os_str().is_empty() {
        to.to_path_buf()
    } else {
        to.join(below)
    })
}

/// Who makes a replaced file's new name durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirSync {
    /// The replacement fsyncs the directory itself.
    Now,
    /// The caller fsyncs the directory afterwards (one fsync for several changes to it).
    ByCaller,
}

/// Writes `data` to a new file at `path` durably: temp file, fdatasync, rename, sync_dir.
pub async fn write_file_atomically<S: Storage>(storage: &S, path: &Path, data: Bytes) -> io::Result<()> {
    replace_file(storage, path, data, DirSync::Now).await
}

/// Where [`replace_file`] writes before its rename: `<name>.tmp`, appended rather than
/// replacing an extension, so files that differ only in theirs (one checkpoint per shard,
/// `….shard-0`, `….shard-1`, written at the same moment) never share a temporary file.
fn temporary_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

/// Writes `data` to a new file at `path`: temp file, fdatasync, rename, and a directory fsync
/// when `dir_sync` says so (until it, a crash leaves the old file or the new one).
pub async fn replace_file<S: Storage>(
    storage: &S,
    path: &Path,
    data: Bytes,
    dir_sync: DirSync,
) -> io::Result<()> {
    let tmp = temporary_path(path);
    let file = storage.open(&tmp, true).await?;
    file.truncate(0).await?;
    file.write_at(0, &[&data]).await?;
    file.fdatasync().await?;
    file.close().await?;
    storage.rename(&tmp, path).await?;
    if dir_sync == DirSync::ByCaller {
        return Ok(());
    }
    storage.sync_dir(parent_dir(path)).await
}

#[cfg(test)]
mod temporary_path_tests {
    use super::*;

    #[test]
    fn files_differing_only_in_extension_get_their_own_temporary_file() {
        let shard_0 = temporary_path(Path::new("/d/replication-offset-checkpoint.shard-0"));
        let shard_1 = temporary_path(Path::new("/d/replication-offset-checkpoint.shard-1"));
        assert_ne!(shard_0, shard_1);
        assert_eq!(shard_0, Path::new("/d/replication-offset-checkpoint.shard-0.tmp"));
        assert_eq!(
            temporary_path(Path::new("/d/topics.json")),
            Path::new("/d/topics.json.tmp")
        );
    }
}
