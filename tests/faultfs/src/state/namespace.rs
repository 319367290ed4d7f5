//! The namespace operations: applied to the backing directory at once, and recorded in the
//! journal so that a power cut can undo those no directory sync made durable. A name removed
//! (unlink, rmdir, rename over it) sends its file to the trash, from where the cut can bring it
//! back. The trash is hidden: no name of the mount's root leads to it.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata, Permissions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{fchown, lchown, symlink, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use fuser::{Errno, FileAttr, FileType, RenameFlags};
use laminar_sys::files;

use super::trash::TRASH_DIR_NAME;
use super::{OpResult, State};
use crate::attr::file_type;
use crate::inodes::{BackingId, ROOT};
use crate::journal::{Entry, Op};

/// Who creates a file: it is chowned to them (the daemon itself runs as root).
#[derive(Clone, Copy)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// One entry of a directory listing.
#[derive(Clone)]
pub struct DirEntry {
    pub ino: u64,
    pub kind: FileType,
    pub name: OsString,
}

/// Whether `name` in directory `parent` is the trash.
fn is_trash(parent: u64, name: &OsStr) -> bool {
    parent == ROOT && name == TRASH_DIR_NAME
}

impl State {
    /// The path under the backing directory of `name` in directory `parent` (the trash's name
    /// names nothing).
    fn child_path(&self, parent: u64, name: &OsStr) -> OpResult<PathBuf> {
        if is_trash(parent, name) {
            return Err(Errno::ENOENT);
        }
        Ok(self.inodes.get(parent)?.path.join(name))
    }

    /// The path for a new `name` in directory `parent`, and its journal entry (the trash's name
    /// is refused).
    fn new_child(&self, parent: u64, name: &OsStr) -> OpResult<(PathBuf, Entry)> {
        if is_trash(parent, name) {
            return Err(Errno::EPERM);
        }
        Ok((
            self.inodes.get(parent)?.path.join(name),
            self.journal_entry(parent, name)?,
        ))
    }

    /// `name` in directory `parent`, as the journal names it.
    fn journal_entry(&self, parent: u64, name: &OsStr) -> OpResult<Entry> {
        Ok(Entry {
            dir: self.inodes.get(parent)?.backing_id,
            name: name.to_os_string(),
        })
    }

    /// The entry at `path` (under the backing directory), handed to the kernel: one more
    /// reference to its inode.
    fn entry(&mut self, path: &Path) -> OpResult<FileAttr> {
        let metadata = fs::symlink_metadata(self.backing.join(path))?;
        let ino = self.inodes.inode_for(path, &metadata);
        self.inodes.add_lookup(ino);
        Ok(self.attr(ino, &metadata))
    }

    pub fn lookup(&mut self, parent: u64, name: &OsStr) -> OpResult<FileAttr> {
        let path = self.child_path(parent, name)?;
        self.entry(&path)
    }

    pub fn forget(&mut self, ino: u64, count: u64) {
        self.inodes.forget(ino, count);
    }

    /// The `access` (the kernel checks permissions itself: `default_permissions`).
    pub fn access(&self, ino: u64) -> OpResult<()> {
        self.metadata(ino).map(drop)
    }

    pub fn readlink(&self, ino: u64) -> OpResult<PathBuf> {
        Ok(fs::read_link(self.backing_path(ino)?)?)
    }

    /// The `fsyncdir` (and `fsync` of a directory): the directory's entries as they now are
    /// become durable.
    pub fn fsyncdir(&mut self, ino: u64) -> OpResult<()> {
        let dir = self.inodes.get(ino)?.backing_id;
        self.journal.sync_dir(dir);
        Ok(())
    }

    pub fn mkdir(&mut self, parent: u64, name: &OsStr, mode: u32, owner: Owner) -> OpResult<FileAttr> {
        let (path, entry) = self.new_child(parent, name)?;
        let backing_path = self.backing.join(&path);
        fs::create_dir(&backing_path)?;
        self.journal.record(Op::Added(entry));
        fs::set_permissions(&backing_path, Permissions::from_mode(mode & 0o7777))?;
        lchown(&backing_path, Some(owner.uid), Some(owner.gid))?;
        self.entry(&path)
    }

    /// The `mknod`: a file of any type but a directory or a symbolic link (a FIFO, a socket, a
    /// device, a regular file).
    pub fn mknod(
        &mut self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        rdev: u32,
        owner: Owner,
    ) -> OpResult<FileAttr> {
        let (path, entry) = self.new_child(parent, name)?;
        let backing_path = self.backing.join(&path);
        files::mknod(&backing_path, mode, rdev)?;
        self.journal.record(Op::Added(entry));
        fs::set_permissions(&backing_path, Permissions::from_mode(mode & 0o7777))?;
        lchown(&backing_path, Some(owner.uid), Some(owner.gid))?;
        self.entry(&path)
    }

    pub fn symlink(&mut self, parent: u64, name: &OsStr, target: &Path, owner: Owner) -> OpResult<FileAttr> {
        let (path, entry) = self.new_child(parent, name)?;
        let backing_path = self.backing.join(&path);
        symlink(target, &backing_path)?;
        self.journal.record(Op::Added(entry));
        lchown(&backing_path, Some(owner.uid), Some(owner.gid))?;
        self.entry(&path)
    }

    /// A new name for the inode's file (a hard link): made through the daemon's descriptor of
    /// it if it has one (the name it was last seen by may have been removed since), else by
    /// that name, if it still names the file.
    pub fn link(&mut self, ino: u64, new_parent: u64, new_name: &OsStr) -> OpResult<FileAttr> {
        let (path, entry) = self.new_child(new_parent, new_name)?;
        let new_path = self.backing.join(&path);
        match &self.inodes.get(ino)?.file {
            Some(file) => files::link_open_file(file.as_raw_fd(), &new_path)?,
            None => {
                self.metadata(ino)?; // ENOENT unless its name still names it
                fs::hard_link(self.backing_path(ino)?, &new_path)?;
            }
        }
        self.journal.record(Op::Added(entry));
        self.entry(&path)
    }

    /// The `create`: a new file, open for the data operations that follow (or the existing
    /// one, opened, unless `O_EXCL` is set).
    pub fn create(
        &mut self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        flags: i32,
        owner: Owner,
    ) -> OpResult<FileAttr> {
        let (path, entry) = self.new_child(parent, name)?;
        let (file, created) = create_file(&self.backing.join(&path), mode, flags)?;
        if created {
            self.journal.record(Op::Added(entry));
            // Exactly the mode asked for (the kernel applied the caller's umask; ours must not).
            file.set_permissions(Permissions::from_mode(mode & 0o7777))?;
            fchown(&file, Some(owner.uid), Some(owner.gid))?;
        }
        let metadata = file.metadata()?;
        let ino = self.inodes.inode_for(&path, &metadata);
        self.inodes.add_lookup(ino);
        self.inodes.get_mut(ino)?.file.get_or_insert(file);
        Ok(self.attr(ino, &metadata))
    }

    /// The `unlink`: the file goes to the trash (if that was its last name, its unsynced data
    /// can never reach the disk).
    pub fn unlink(&mut self, parent: u64, name: &OsStr) -> OpResult<()> {
        let backing_path = self.backing.join(self.child_path(parent, name)?);
        let metadata = fs::symlink_metadata(&backing_path)?;
        if metadata.is_dir() {
            return Err(Errno::EISDIR);
        }
        let last_name = self.trash.visible_links(&metadata) <= 1;
        self.keep_reachable(&metadata);
        self.remove_entry(parent, name, &backing_path, &metadata)?;
        if last_name {
            self.inodes.unlinked(BackingId::of(&metadata));
        }
        Ok(())
    }

    /// The `rmdir`: the directory, empty, goes to the trash.
    pub fn rmdir(&mut self, parent: u64, name: &OsStr) -> OpResult<()> {
        let backing_path = self.backing.join(self.child_path(parent, name)?);
        let metadata = fs::symlink_metadata(&backing_path)?;
        if !metadata.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        if fs::read_dir(&backing_path)?.next().is_some() {
            return Err(Errno::ENOTEMPTY);
        }
        self.remove_entry(parent, name, &backing_path, &metadata)?;
        self.inodes.unlinked(BackingId::of(&metadata));
        Ok(())
    }

    /// Moves the file at `path` (of `metadata`), `name` in directory `parent`, to the trash,
    /// and records it.
    fn remove_entry(&mut self, parent: u64, name: &OsStr, path: &Path, metadata: &Metadata) -> OpResult<()> {
        let entry = self.journal_entry(parent, name)?;
        let trashed = self.trash.put(path, metadata)?;
        self.journal.record(Op::Removed { entry, trashed });
        Ok(())
    }

    /// The `rename`, over an existing target too (which goes to the trash; if that was its last
    /// name, its unsynced data can never reach the disk). `RENAME_EXCHANGE` is refused.
    pub fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        flags: RenameFlags,
    ) -> OpResult<()> {
        if !(flags - RenameFlags::RENAME_NOREPLACE).is_empty() {
            return Err(Errno::EINVAL);
        }
        let (from, from_entry) = (self.child_path(parent, name)?, self.journal_entry(parent, name)?);
        let (to, to_entry) = self.new_child(new_parent, new_name)?;
        let (backing_from, backing_to) = (self.backing.join(&from), self.backing.join(&to));
        let source = fs::symlink_metadata(&backing_from)?;
        let target = match fs::symlink_metadata(&backing_to) {
            Ok(target) => Some(target),
            Err(error) if error.kind() == io::ErrorKind::NotFound => None,
            Err(error) => return Err(error.into()),
        };
        let mut replaced = None;
        if let Some(target) = &target {
            if flags.contains(RenameFlags::RENAME_NOREPLACE) {
                return Err(Errno::EEXIST);
            }
            if BackingId::of(target) == BackingId::of(&source) {
                return Ok(()); // Two names of one file: rename(2) does nothing.
            }
            replaced = Some(self.trash_replaced(&source, target, &backing_to)?);
        }
        if let Err(error) = fs::rename(&backing_from, &backing_to) {
            if let (Some((trashed, _)), Some(target)) = (&replaced, &target) {
                // Best effort: the target was moved to the trash just now.
                let _ = self.trash.take_back(trashed, &backing_to, target);
            }
            return Err(error.into());
        }
        if let (Some((_, true)), Some(target)) = (&replaced, &target) {
            self.inodes.unlinked(BackingId::of(target));
        }
        self.journal.record(Op::Renamed {
            from: from_entry,
            to: to_entry,
            replaced: replaced.map(|(trashed, _)| trashed),
        });
        self.inodes.renamed(&from, &to);
        Ok(())
    }

    /// Before a rename of `source` over `target` (at `path`): checks that it may replace it
    /// (as rename(2) does) and moves it to the trash. Returns its name in the trash, and
    /// whether that was its last name.
    fn trash_replaced(
        &mut self,
        source: &Metadata,
        target: &Metadata,
        path: &Path,
    ) -> OpResult<(OsString, bool)> {
        match (source.is_dir(), target.is_dir()) {
            (false, true) => return Err(Errno::EISDIR),
            (true, false) => return Err(Errno::ENOTDIR),
            (true, true) if fs::read_dir(path)?.next().is_some() => return Err(Errno::ENOTEMPTY),
            _ => {}
        }
        let last_name = target.is_dir() || self.trash.visible_links(target) <= 1;
        self.keep_reachable(target);
        Ok((self.trash.put(path, target)?, last_name))
    }

    /// Before a regular file loses a name: opens the backing file of its inode, if the mount
    /// has one, so that the kernel's open files still reach it by descriptor.
    fn keep_reachable(&mut self, metadata: &Metadata) {
        if !metadata.is_file() {
            return;
        }
        if let Some(ino) = self.inodes.find(BackingId::of(metadata)) {
            // Best effort: if it cannot be opened, reads after the unlink fail instead.
            let _ = self.file_data(ino);
        }
    }

    /// The `opendir`: a handle for the listings of this directory.
    pub fn opendir(&mut self, ino: u64) -> OpResult<u64> {
        self.metadata(ino)?;
        let handle = self.next_dir_handle;
        self.next_dir_handle += 1;
        self.listings.insert(handle, Vec::new());
        Ok(handle)
    }

    pub fn releasedir(&mut self, handle: u64) {
        self.listings.remove(&handle);
    }

    /// The entries of the directory from `offset` (their index) on. The listing is read at
    /// offset 0 and kept with the handle, so that an entry removed while a reader goes through
    /// the directory does not make it skip another.
    pub fn readdir(&mut self, ino: u64, handle: u64, offset: u64) -> OpResult<Vec<DirEntry>> {
        if offset == 0 || !self.listings.contains_key(&handle) {
            let listing = self.list_directory(ino)?;
            self.listings.insert(handle, listing);
        }
        let listing = &self.listings[&handle];
        let from = usize::try_from(offset).unwrap_or(usize::MAX).min(listing.len());
        Ok(listing[from..].to_vec())
    }

    /// The directory's entries, `.` and `..` first, then its children in name order.
    fn list_directory(&mut self, ino: u64) -> OpResult<Vec<DirEntry>> {
        let dir = self.inodes.get(ino)?.path.clone();
        let mut children: Vec<(OsString, Metadata)> = fs::read_dir(self.backing.join(&dir))?
            .filter_map(Result::ok) // an entry removed meanwhile is just not listed
            .filter(|entry| !is_trash(ino, &entry.file_name()))
            .filter_map(|entry| Some((entry.file_name(), entry.metadata().ok()?)))
            .collect();
        children.sort_by(|a, b| a.0.cmp(&b.0));
        let parent = match dir.parent() {
            Some(parent_dir) => {
                let metadata = fs::metadata(self.backing.join(parent_dir))?;
                self.inodes.inode_for(parent_dir, &metadata)
            }
            None => ROOT,
        };
        let dot = |ino: u64, name: &str| DirEntry {
            ino,
            kind: FileType::Directory,
            name: name.into(),
        };
        let mut listing = vec![dot(ino, "."), dot(parent, "..")];
        for (name, metadata) in children {
            listing.push(DirEntry {
                ino: self.inodes.inode_for(&dir.join(&name), &metadata),
                kind: file_type(&metadata),
                name,
            });
        }
        Ok(listing)
    }
}

/// Creates the file at `path` with `mode`, or opens the existing one unless `flags` has
/// `O_EXCL`; says whether it created it.
fn create_file(path: &Path, mode: u32, flags: i32) -> io::Result<(File, bool)> {
    let mut options = File::options();
    options.read(true).write(true).mode(mode & 0o7777);
    match options.clone().create_new(true).open(path) {
        Ok(file) => Ok((file, true)),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists && flags & libc::O_EXCL == 0 => {
            Ok((options.open(path)?, false))
        }
        Err(error) => Err(error),
    }
}
