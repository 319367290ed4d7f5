//! [`FaultyStorage`]: in-memory files that remember what was synced, for crash and fault tests.
//!
//! Each file keeps its current bytes and the bytes as of its last fdatasync. A [`crash`]
//! replaces every file by its synced bytes plus (depending on [`CrashMode`]) a random prefix of
//! what was written after, and optionally garbage — what a power cut can leave behind. Errors
//! can be injected on the Nth write or sync, and the disk can be made to fill up
//! ([`FaultyStorage::set_space_left`]). A file or directory created is lost in a crash, with
//! all under it, until the directory holding it is synced after the creation (the log syncs
//! a directory after creating files in it, and the log directory at a new log's first durable
//! point). Removing and renaming files are modelled as immediately durable.
//!
//! Every open returns a [`MemHandle`] of its own, which holds a descriptor from the shard's
//! budget when the storage has one ([`FaultyStorage::with_descriptors`]) until it is closed or
//! dropped, and refuses every operation once closed, as a kernel file does.
//!
//! [`crash`]: FaultyStorage::crash

use super::descriptors::{DescriptorSlots, ShardDescriptors};
use super::{moved_below, FileId, Storage, StorageFile};
use bytes::Bytes;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// What survives of unsynced writes in a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Exactly the synced bytes.
    LoseUnsynced,
    /// Synced bytes plus a random prefix of the unsynced suffix (a torn write).
    TornTail,
    /// As `TornTail`, then random garbage appended to files that had unsynced bytes.
    TornTailWithGarbage,
}

#[derive(Default)]
struct Faults {
    writes: Cell<u64>,
    /// Bytes returned by reads so far ([`FaultyStorage::bytes_read`]).
    bytes_read: Cell<u64>,
    syncs: Cell<u64>,
    fail_write_at: Cell<Option<u64>>,
    fail_sync_at: Cell<Option<u64>>,
    dir_ops: Cell<u64>,
    fail_dir_op_at: Cell<Option<u64>>,
    rng: Cell<u64>,
    /// Bytes the files may still grow by, all together; `None`: no bound.
    space_left: Cell<Option<u64>>,
    /// Files created so far (each gets the next number as its inode).
    files_created: Cell<u64>,
    /// fdatasyncs give way once before they complete ([`FaultyStorage::yield_in_syncs`]).
    syncs_yield: Cell<bool>,
}

impl Faults {
    /// Where a write that would end at `end` in a file of `len` bytes must stop for the space
    /// left, and accounts for the growth up to there.
    fn grow_to(&self, len: usize, end: usize) -> usize {
        let Some(left) = self.space_left.get() else {
            return end;
        };
        let stop = end.min(len.saturating_add(left as usize));
        self.space_left.set(Some(left - stop.saturating_sub(len) as u64));
        stop
    }

    /// Gives back the space of `bytes` removed bytes.
    fn free(&self, bytes: usize) {
        if let Some(left) = self.space_left.get() {
            self.space_left.set(Some(left + bytes as u64));
        }
    }

    fn next_random(&self) -> u64 {
        // xorshift64*: deterministic from the seed, good enough to pick cut points.
        let mut x = self.rng.get().max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Counts a rename or removal; the chosen one fails (and changes nothing).
    fn dir_op(&self) -> io::Result<()> {
        let n = self.dir_ops.get() + 1;
        self.dir_ops.set(n);
        if self.fail_dir_op_at.get() == Some(n) {
            return Err(io::Error::other("injected directory operation error"));
        }
        Ok(())
    }
}

/// An in-memory file (an inode). Owned by one shard; not Send.
struct MemFile {
    data: RefCell<Vec<u8>>,
    synced: RefCell<Vec<u8>>,
    faults: Rc<Faults>,
    inode: u64,
}

impl MemFile {
    fn new(faults: &Rc<Faults>, data: Vec<u8>, synced: Vec<u8>) -> Rc<MemFile> {
        let inode = faults.files_created.get() + 1;
        faults.files_created.set(inode);
        Rc::new(MemFile {
            data: RefCell::new(data),
            synced: RefCell::new(synced),
            faults: faults.clone(),
            inode,
        })
    }
}

/// One open of an in-memory file: what [`FaultyStorage::open`] returns. Owned by one shard;
/// not Send.
pub struct MemHandle {
    file: Rc<MemFile>,
    /// The descriptor this open holds, when the storage has a budget; `None` once closed.
    descriptor: RefCell<Option<DescriptorSlots>>,
    closed: Cell<bool>,
}

impl MemHandle {
    fn file(&self) -> io::Result<&MemFile> {
        if self.closed.get() {
            return Err(io::Error::other("file already closed"));
        }
        Ok(&self.file)
    }
}

/// In-memory storage with fault injection. Owned by one shard (or test); not Send.
#[derive(Clone)]
pub struct FaultyStorage {
    files: Rc<RefCell<BTreeMap<PathBuf, Rc<MemFile>>>>,
    dirs: Rc<RefCell<BTreeSet<PathBuf>>>,
    /// Files created since their directory was last synced: a crash loses them.
    created_unsynced: Rc<RefCell<BTreeSet<PathBuf>>>,
    faults: Rc<Faults>,
    /// Where opens take a descriptor from; `None`: no bound.
    descriptors: Option<Rc<ShardDescriptors>>,
}

/// Wakes the task and gives way once: polled again, it is done.
async fn give_way_once() {
    let mut gave_way = false;
    std::future::poll_fn(|cx| {
        if std::mem::replace(&mut gave_way, true) {
            return std::task::Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{} not found", path.display()))
}

impl FaultyStorage {
    /// Moves a directory and everything under it (durable at once, as file renames are).
    fn rename_dir(&self, from: &Path, to: &Path) {
        let mut files = self.files.borrow_mut();
        let moved: Vec<_> = files.keys().filter(|p| p.starts_with(from)).cloned().collect();
        for path in moved {
            if let (Some(file), Some(new)) = (files.remove(&path), moved_below(&path, from, to)) {
                files.insert(new, file);
            }
        }
        for set in [&self.dirs, &self.created_unsynced] {
            let mut set = set.borrow_mut();
            let moved: Vec<_> = set.iter().filter(|p| p.starts_with(from)).cloned().collect();
            for path in moved {
                set.remove(&path);
                set.extend(moved_below(&path, from, to));
            }
        }
    }

    pub fn new(seed: u64) -> Self {
        let faults = Faults::default();
        faults.rng.set(seed ^ 0x9E37_79B9_7F4A_7C15);
        FaultyStorage {
            files: Rc::default(),
            dirs: Rc::default(),
            created_unsynced: Rc::default(),
            faults: Rc::new(faults),
            descriptors: None,
        }
    }

    /// Every open from now on holds one descriptor of `shard`'s account until it is closed, and
    /// an open past the budget fails with EMFILE, as [`super::GlommioStorage`] does.
    pub fn with_descriptors(mut self, shard: Rc<ShardDescriptors>) -> Self {
        self.descriptors = Some(shard);
        self
    }

    /// The `n`th write from now (1 = the next one) fails with an I/O error.
    pub fn fail_write_after(&self, n: u64) {
        self.faults.fail_write_at.set(Some(self.faults.writes.get() + n));
    }

    /// The `n`th fdatasync from now (1 = the next one) fails with an I/O error.
    pub fn fail_sync_after(&self, n: u64) {
        self.faults.fail_sync_at.set(Some(self.faults.syncs.get() + n));
    }

    /// The `n`th rename or file removal from now (1 = the next one) fails with an I/O error
    /// and changes nothing: with a crash after it, a power cut between two directory updates.
    pub fn fail_dir_op_after(&self, n: u64) {
        self.faults
            .fail_dir_op_at
            .set(Some(self.faults.dir_ops.get() + n));
    }

    /// From now on every fdatasync gives way to other tasks once before it completes, as one
    /// that waits for a disk does, so that tests can see what runs while syncs are in flight.
    pub fn yield_in_syncs(&self) {
        self.faults.syncs_yield.set(true);
    }

    /// fdatasync calls made so far (to check group commit).
    pub fn sync_count(&self) -> u64 {
        self.faults.syncs.get()
    }

    /// Bytes all reads have returned so far (to check what an open reads).
    pub fn bytes_read(&self) -> u64 {
        self.faults.bytes_read.get()
    }

    /// Lets the files grow by `bytes` more, all together (`None`: without bound). A write that
    /// would grow them further writes the part that fits and fails with ENOSPC, as a full disk
    /// does; truncations and removals give space back.
    pub fn set_space_left(&self, bytes: Option<u64>) {
        self.faults.space_left.set(bytes);
    }

    pub fn clear_faults(&self) {
        self.faults.fail_write_at.set(None);
        self.faults.fail_sync_at.set(None);
        self.faults.fail_dir_op_at.set(None);
    }

    /// Simulates a power cut. Handles opened before keep pointing at the pre-crash files, so a
    /// log that is still alive cannot write into the post-crash state.
    pub fn crash(&self, mode: CrashMode) {
        let mut files = self.files.borrow_mut();
        for file in files.values_mut() {
            let data = file.data.borrow();
            let mut kept = file.synced.borrow().clone();
            let extends_synced = data.len() > kept.len() && data.starts_with(&kept);
            let dirty = *data != kept;
            if mode != CrashMode::LoseUnsynced && extends_synced {
                let unsynced = (data.len() - kept.len()) as u64;
                let keep = (self.faults.next_random() % (unsynced + 1)) as usize;
                kept.extend_from_slice(&data[kept.len()..kept.len() + keep]);
            }
            if mode == CrashMode::TornTailWithGarbage && dirty {
                let garbage = self.faults.next_random() % 200;
                for _ in 0..garbage {
                    kept.push(self.faults.next_random() as u8);
                }
            }
            drop(data);
            *file = MemFile::new(&self.faults, kept.clone(), kept);
        }
        // An entry created since its directory's last sync goes, with all under it.
        let lost = std::mem::take(&mut *self.created_unsynced.borrow_mut());
        files.retain(|path, _| !lost.iter().any(|gone| path.starts_with(gone)));
        self.dirs
            .borrow_mut()
            .retain(|dir| !lost.iter().any(|gone| dir.starts_with(gone)));
    }

    /// Current bytes of a file (for tests that cut or corrupt files by hand).
    pub fn file_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        self.files.borrow().get(path).map(|f| f.data.borrow().clone())
    }

    /// Replaces a file's bytes, as synced.
    pub fn set_file_bytes(&self, path: &Path, bytes: Vec<u8>) {
        let file = MemFile::new(&self.faults, bytes.clone(), bytes);
        self.files.borrow_mut().insert(path.to_path_buf(), file);
    }
}

impl StorageFile for MemHandle {
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        let file = self.file()?;
        let data = file.data.borrow();
        let start = (pos as usize).min(data.len());
        let end = start.saturating_add(len).min(data.len());
        let read = &file.faults.bytes_read;
        read.set(read.get() + (end - start) as u64);
        Ok(Bytes::copy_from_slice(&data[start..end]))
    }

    async fn write_at(&self, pos: u64, parts: &[&[u8]]) -> io::Result<()> {
        let file = self.file()?;
        let n = file.faults.writes.get() + 1;
        file.faults.writes.set(n);
        if file.faults.fail_write_at.get() == Some(n) {
            return Err(io::Error::other("injected write error"));
        }
        let mut data = file.data.borrow_mut();
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let stop = file.faults.grow_to(data.len(), pos as usize + total);
        let mut at = pos as usize;
        for part in parts {
            let end = (at + part.len()).min(stop);
            if end <= at {
                break;
            }
            if data.len() < end {
                data.resize(end, 0);
            }
            data[at..end].copy_from_slice(&part[..end - at]);
            at = end;
        }
        if stop < pos as usize + total {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }

    async fn fdatasync(&self) -> io::Result<()> {
        if self.file()?.faults.syncs_yield.get() {
            give_way_once().await;
        }
        let file = self.file()?;
        let n = file.faults.syncs.get() + 1;
        file.faults.syncs.set(n);
        if file.faults.fail_sync_at.get() == Some(n) {
            return Err(io::Error::other("injected fdatasync error"));
        }
        *file.synced.borrow_mut() = file.data.borrow().clone();
        Ok(())
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        let file = self.file()?;
        let mut data = file.data.borrow_mut();
        file.faults.free(data.len().saturating_sub(len as usize));
        data.resize(len as usize, 0);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.file.data.borrow().len() as u64
    }

    fn id(&self) -> FileId {
        FileId {
            device: 0,
            inode: self.file.inode,
        }
    }

    async fn close(&self) -> io::Result<()> {
        self.closed.set(true);
        self.descriptor.borrow_mut().take();
        Ok(())
    }
}

impl Storage for FaultyStorage {
    type File = MemHandle;

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut dirs = self.dirs.borrow_mut();
        // Only the directory asked for counts as created: the ones above it stand for the
        // log directory and its parents, which exist before the broker.
        if !dirs.contains(path) && path.parent().is_some() {
            self.created_unsynced.borrow_mut().insert(path.to_path_buf());
        }
        for dir in path.ancestors() {
            dirs.insert(dir.to_path_buf());
        }
        Ok(())
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        if !self.dirs.borrow().contains(path) {
            return Err(not_found(path));
        }
        let files = self.files.borrow();
        let dirs = self.dirs.borrow();
        let children = files
            .keys()
            .chain(dirs.iter())
            .filter(|p| p.parent() == Some(path));
        Ok(children
            .filter_map(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .collect())
    }

    async fn open(&self, path: &Path, create: bool) -> io::Result<Rc<MemHandle>> {
        let descriptor = match &self.descriptors {
            Some(shard) => Some(shard.take(1)?),
            None => None,
        };
        let mut files = self.files.borrow_mut();
        let file = match files.get(path) {
            Some(file) => file.clone(),
            None => {
                let parent = path.parent().unwrap_or(Path::new(""));
                if !create || !self.dirs.borrow().contains(parent) {
                    return Err(not_found(path));
                }
                let file = MemFile::new(&self.faults, Vec::new(), Vec::new());
                files.insert(path.to_path_buf(), file.clone());
                self.created_unsynced.borrow_mut().insert(path.to_path_buf());
                file
            }
        };
        Ok(Rc::new(MemHandle {
            file,
            descriptor: RefCell::new(descriptor),
            closed: Cell::new(false),
        }))
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.faults.dir_op()?;
        let removed = self
            .files
            .borrow_mut()
            .remove(path)
            .ok_or_else(|| not_found(path))?;
        self.created_unsynced.borrow_mut().remove(path);
        self.faults.free(removed.data.borrow().len());
        Ok(())
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.files.borrow_mut().retain(|p, file| {
            let kept = !p.starts_with(path);
            if !kept {
                self.faults.free(file.data.borrow().len());
            }
            kept
        });
        self.dirs.borrow_mut().retain(|p| !p.starts_with(path));
        self.created_unsynced
            .borrow_mut()
            .retain(|p| !p.starts_with(path));
        Ok(())
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.faults.dir_op()?;
        if self.dirs.borrow().contains(from) {
            self.rename_dir(from, to);
            return Ok(());
        }
        let mut files = self.files.borrow_mut();
        let file = files.remove(from).ok_or_else(|| not_found(from))?;
        if let Some(replaced) = files.insert(to.to_path_buf(), file) {
            self.faults.free(replaced.data.borrow().len());
        }
        let mut created_unsynced = self.created_unsynced.borrow_mut();
        if created_unsynced.remove(from) {
            created_unsynced.insert(to.to_path_buf());
        } else {
            created_unsynced.remove(to);
        }
        Ok(())
    }

    async fn exists(&self, path: &Path) -> io::Result<bool> {
        Ok(self.files.borrow().contains_key(path) || self.dirs.borrow().contains(path))
    }

    async fn file_len(&self, path: &Path) -> io::Result<u64> {
        let file = self.files.borrow().get(path).cloned();
        let file = file.ok_or_else(|| not_found(path))?;
        let len = file.data.borrow().len() as u64;
        Ok(len)
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut created_unsynced = self.created_unsynced.borrow_mut();
        created_unsynced.retain(|file| file.parent() != Some(path));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;

    #[test]
    fn crash_keeps_synced_bytes_and_fault_injection_fires() {
        block_on(async {
            let s = FaultyStorage::new(1);
            s.create_dir_all(Path::new("/d")).await.unwrap();
            s.sync_dir(Path::new("/")).await.unwrap();
            let f = s.open(Path::new("/d/a"), true).await.unwrap();
            let unlisted = s.open(Path::new("/d/b"), true).await.unwrap();
            f.write_at(0, &[b"hello"]).await.unwrap();
            f.fdatasync().await.unwrap();
            s.sync_dir(Path::new("/d")).await.unwrap();
            let created_after = s.open(Path::new("/d/c"), true).await.unwrap();
            created_after.fdatasync().await.unwrap();
            f.write_at(5, &[b" world"]).await.unwrap();
            s.crash(CrashMode::LoseUnsynced);
            assert_eq!(s.file_bytes(Path::new("/d/a")).unwrap(), b"hello");
            assert!(
                s.file_bytes(Path::new("/d/b")).is_some(),
                "its directory was synced"
            );
            assert!(
                s.file_bytes(Path::new("/d/c")).is_none(),
                "created after the directory's sync: lost, synced or not"
            );
            drop(unlisted);
            let f = s.open(Path::new("/d/a"), false).await.unwrap();
            s.fail_sync_after(1);
            assert!(f.fdatasync().await.is_err());
            assert!(f.fdatasync().await.is_ok());
            s.fail_write_after(2);
            f.write_at(5, &[b"!"]).await.unwrap();
            assert!(f.write_at(6, &[b"?"]).await.is_err());
            assert_eq!(
                s.list_dir(Path::new("/d")).await.unwrap(),
                vec!["a".to_string(), "b".to_string()]
            );
        });
    }

    #[test]
    fn a_full_disk_writes_what_fits_and_space_comes_back_with_truncates_and_removals() {
        block_on(async {
            let s = FaultyStorage::new(2);
            s.create_dir_all(Path::new("/d")).await.unwrap();
            let f = s.open(Path::new("/d/a"), true).await.unwrap();
            f.write_at(0, &[b"0123"]).await.unwrap();
            s.set_space_left(Some(3));
            // Overwriting takes no space; growing by 5 writes the 3 bytes that fit.
            f.write_at(0, &[b"ab"]).await.unwrap();
            let full = f.write_at(4, &[b"45", b"678"]).await.unwrap_err();
            assert!(crate::io::is_out_of_space(&full), "{full}");
            assert_eq!(s.file_bytes(Path::new("/d/a")).unwrap(), b"ab23456");
            assert!(f.write_at(7, &[b"x"]).await.is_err(), "nothing left");
            f.truncate(5).await.unwrap();
            f.write_at(5, &[b"yz"]).await.unwrap();
            let g = s.open(Path::new("/d/b"), true).await.unwrap();
            assert!(g.write_at(0, &[b"q"]).await.is_err());
            s.remove_file(Path::new("/d/a")).await.unwrap();
            g.write_at(0, &[b"0123456"]).await.unwrap();
            s.set_space_left(None);
            g.write_at(7, &[&[0u8; 4096]]).await.unwrap();
        });
    }
}
