//! The file system's state behind the daemon's one lock, and its file data operations: the
//! namespace operations are in `namespace`, the trash of removed files in `trash`, their undoing
//! at a power cut in `undo`. Every operation returns the errno to reply.

mod namespace;
mod trash;
mod undo;

use std::collections::HashMap;
use std::fs::{self, File, FileTimes, Metadata, Permissions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{fchown, lchown, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use fuser::{Errno, FileAttr};
use laminar_sys::file_systems::{self, FileSystemStats};
use laminar_sys::files;

pub use self::namespace::{DirEntry, Owner};
use self::trash::Trash;
pub use self::trash::TRASH_DIR_NAME;
use crate::attr::file_attr;
use crate::inodes::{BackingId, Inode, InodeTable, ROOT};
use crate::journal::Journal;
use crate::overlay::{read_at_most, Overlay};

/// What an operation replies: its result, or the errno.
pub type OpResult<T> = Result<T, Errno>;

/// The attributes a `setattr` changes (those it leaves are `None`).
#[derive(Default)]
pub struct AttrChanges {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub accessed: Option<SystemTime>,
    pub modified: Option<SystemTime>,
}

/// The file system: the backing directory, the inodes, the journal of namespace operations,
/// the trash, the open directories' listings.
pub struct State {
    backing: PathBuf,
    pub inodes: InodeTable,
    pub journal: Journal,
    trash: Trash,
    /// The listing each open directory reads from, by its file handle.
    listings: HashMap<u64, Vec<DirEntry>>,
    next_dir_handle: u64,
    /// Set by the power cut: whatever still reaches the daemon afterwards fails with `EIO`.
    pub powered_off: bool,
}

impl State {
    /// The state of a mount of `backing` (an existing directory), nothing written yet.
    pub fn new(backing: PathBuf) -> io::Result<State> {
        let root = fs::metadata(&backing)?;
        Ok(State {
            trash: Trash::new(&backing)?,
            backing,
            inodes: InodeTable::new(&root),
            journal: Journal::default(),
            listings: HashMap::new(),
            next_dir_handle: 1,
            powered_off: false,
        })
    }

    /// The backing path of the inode (its current name).
    fn backing_path(&self, ino: u64) -> OpResult<PathBuf> {
        Ok(self.backing.join(&self.inodes.get(ino)?.path))
    }

    /// The current metadata of the inode's backing file.
    fn metadata(&self, ino: u64) -> OpResult<Metadata> {
        let inode = self.inodes.get(ino)?;
        let metadata = match &inode.file {
            Some(file) => file.metadata()?,
            None => fs::symlink_metadata(self.backing.join(&inode.path))?,
        };
        if BackingId::of(&metadata) != inode.backing_id {
            // Its last known name now names another file.
            return Err(Errno::ENOENT);
        }
        Ok(metadata)
    }

    /// The attributes the mount reports for the inode: the backing file's, with the length
    /// its unsynced writes give it, and the links the trash holds not counted.
    fn attr(&self, ino: u64, metadata: &Metadata) -> FileAttr {
        let unsynced = self
            .inodes
            .get(ino)
            .ok()
            .and_then(|inode| inode.unsynced.as_ref());
        let mut attr = file_attr(ino, metadata, unsynced.map(Overlay::len));
        let links = if !metadata.is_dir() {
            self.trash.visible_links(metadata)
        } else if ino == ROOT && self.trash.exists() {
            metadata.nlink().saturating_sub(1) // the trash's `..`
        } else {
            metadata.nlink()
        };
        attr.nlink = u32::try_from(links).unwrap_or(u32::MAX);
        attr
    }

    pub fn getattr(&self, ino: u64) -> OpResult<FileAttr> {
        let metadata = self.metadata(ino)?;
        Ok(self.attr(ino, &metadata))
    }

    /// The `setattr`: the size first (a truncate, durable at once), then mode, owner and times,
    /// all straight on the backing file.
    pub fn setattr(&mut self, ino: u64, changes: &AttrChanges) -> OpResult<FileAttr> {
        if let Some(size) = changes.size {
            self.truncate(ino, size)?;
        }
        let metadata = self.metadata(ino)?;
        if metadata.file_type().is_symlink() {
            // A symbolic link's mode and times are not its own on Linux; its owner is.
            if changes.uid.is_some() || changes.gid.is_some() {
                lchown(self.backing_path(ino)?, changes.uid, changes.gid)?;
            }
            return Ok(self.attr(ino, &metadata));
        }
        let handle = self.handle(ino)?;
        if let Some(mode) = changes.mode {
            handle.set_permissions(Permissions::from_mode(mode & 0o7777))?;
        }
        if changes.uid.is_some() || changes.gid.is_some() {
            fchown(&handle, changes.uid, changes.gid)?;
        }
        if changes.accessed.is_some() || changes.modified.is_some() {
            let mut times = FileTimes::new();
            if let Some(accessed) = changes.accessed {
                times = times.set_accessed(accessed);
            }
            if let Some(modified) = changes.modified {
                times = times.set_modified(modified);
            }
            handle.set_times(times)?;
        }
        self.getattr(ino)
    }

    /// A descriptor of the inode's backing file or directory, for its metadata.
    fn handle(&self, ino: u64) -> OpResult<File> {
        if let Some(file) = &self.inodes.get(ino)?.file {
            return Ok(file.try_clone()?);
        }
        let file = File::open(self.backing_path(ino)?)?;
        if BackingId::of(&file.metadata()?) != self.inodes.get(ino)?.backing_id {
            return Err(Errno::ENOENT);
        }
        Ok(file)
    }

    /// The inode's backing file, opened at the first need, and its unsynced data.
    fn file_data(&mut self, ino: u64) -> OpResult<(&File, &mut Option<Overlay>)> {
        let inode = self.inodes.get_mut(ino)?;
        if inode.file.is_none() {
            inode.file = Some(open_backing_file(&self.backing, inode)?);
        }
        let Inode { file, unsynced, .. } = inode;
        Ok((file.as_ref().expect("opened above"), unsynced))
    }

    /// The `open`: checks the file is there; a truncating open truncates at once.
    pub fn open(&mut self, ino: u64, flags: i32) -> OpResult<()> {
        self.metadata(ino)?;
        if flags & libc::O_TRUNC != 0 {
            self.truncate(ino, 0)?;
        }
        Ok(())
    }

    /// The file's bytes at `offset`, at most `size`: its unsynced pages over its backing file.
    pub fn read(&mut self, ino: u64, offset: u64, size: u32) -> OpResult<Vec<u8>> {
        let (file, unsynced) = self.file_data(ino)?;
        if let Some(overlay) = unsynced {
            return Ok(overlay.read(file, offset, size)?);
        }
        let mut buf = vec![0; size as usize];
        let read = read_at_most(file, offset, &mut buf)?;
        buf.truncate(read);
        Ok(buf)
    }

    /// The `write`: into the file's unsynced pages, none of it to the backing file.
    pub fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> OpResult<u32> {
        let (file, unsynced) = self.file_data(ino)?;
        if unsynced.is_none() {
            *unsynced = Some(Overlay::new(file.metadata()?.len()));
        }
        let overlay = unsynced.as_mut().expect("set above");
        overlay.write(file, offset, data)?;
        Ok(u32::try_from(data.len()).expect("FUSE writes are at most 16 MiB"))
    }

    /// The `fsync` and `fdatasync`: the unsynced pages go to the backing file. Of a directory
    /// (the kernel sends `fsyncdir` for those, but any may come): its entries become durable.
    pub fn fsync(&mut self, ino: u64) -> OpResult<()> {
        if self.metadata(ino)?.is_dir() {
            return self.fsyncdir(ino);
        }
        let (file, unsynced) = self.file_data(ino)?;
        if let Some(overlay) = unsynced {
            overlay.write_back(file)?;
        }
        *unsynced = None;
        Ok(())
    }

    /// A truncate, durable at once: the backing file gets the length, the unsynced pages lose
    /// what lies past it.
    fn truncate(&mut self, ino: u64, len: u64) -> OpResult<()> {
        let (file, unsynced) = self.file_data(ino)?;
        file.set_len(len)?;
        if let Some(overlay) = unsynced {
            overlay.truncate(len);
            if overlay.is_empty() {
                *unsynced = None;
            }
        }
        Ok(())
    }

    /// The `fallocate`, passed to the backing file at once; a range it zeroes is zeroed in the
    /// unsynced pages too, and a length it extends extends the logical length.
    pub fn fallocate(&mut self, ino: u64, offset: u64, length: u64, mode: i32) -> OpResult<()> {
        let (file, unsynced) = self.file_data(ino)?;
        files::fallocate(file.as_raw_fd(), mode, offset, length)?;
        if let Some(overlay) = unsynced {
            if mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) != 0 {
                overlay.zero_range(offset, length);
            }
            if mode & libc::FALLOC_FL_KEEP_SIZE == 0 {
                overlay.extend_len(offset.saturating_add(length));
            }
        }
        Ok(())
    }

    /// The backing file system's statistics.
    pub fn statfs(&self) -> OpResult<FileSystemStats> {
        Ok(file_systems::stats(&self.backing)?)
    }
}

/// Opens the inode's backing file by its current name: read-write (read-only where that is
/// refused), and only if the name still names the inode's file.
fn open_backing_file(backing: &Path, inode: &Inode) -> OpResult<File> {
    let path = backing.join(&inode.path);
    let file = File::options()
        .read(true)
        .write(true)
        .open(&path)
        .or_else(|_| File::open(&path))?;
    if BackingId::of(&file.metadata()?) != inode.backing_id {
        return Err(Errno::ENOENT);
    }
    Ok(file)
}
