//! The namespace operations: straight to the backing directory, durable at once.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata, Permissions};
use std::os::unix::fs::{fchown, lchown, symlink, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use fuser::{Errno, FileAttr, FileType, RenameFlags};

use super::{OpResult, State};
use crate::attr::file_type;
use crate::inodes::{BackingId, ROOT};

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

impl State {
    /// The path under the backing directory of `name` in directory `parent`.
    fn child_path(&self, parent: u64, name: &OsStr) -> OpResult<PathBuf> {
        Ok(self.inodes.get(parent)?.path.join(name))
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

    pub fn mkdir(&mut self, parent: u64, name: &OsStr, mode: u32, owner: Owner) -> OpResult<FileAttr> {
        let path = self.child_path(parent, name)?;
        let backing_path = self.backing.join(&path);
        fs::create_dir(&backing_path)?;
        fs::set_permissions(&backing_path, Permissions::from_mode(mode & 0o7777))?;
        lchown(&backing_path, Some(owner.uid), Some(owner.gid))?;
        self.entry(&path)
    }

    pub fn symlink(&mut self, parent: u64, name: &OsStr, target: &Path, owner: Owner) -> OpResult<FileAttr> {
        let path = self.child_path(parent, name)?;
        let backing_path = self.backing.join(&path);
        symlink(target, &backing_path)?;
        lchown(&backing_path, Some(owner.uid), Some(owner.gid))?;
        self.entry(&path)
    }

    /// A new name for the inode's file (a hard link).
    pub fn link(&mut self, ino: u64, new_parent: u64, new_name: &OsStr) -> OpResult<FileAttr> {
        let path = self.child_path(new_parent, new_name)?;
        fs::hard_link(self.backing_path(ino)?, self.backing.join(&path))?;
        self.entry(&path)
    }

    /// The `create`: a new file, open for the data operations that follow.
    pub fn create(
        &mut self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        flags: i32,
        owner: Owner,
    ) -> OpResult<FileAttr> {
        let path = self.child_path(parent, name)?;
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .create_new(flags & libc::O_EXCL != 0)
            .mode(mode & 0o7777)
            .open(self.backing.join(&path))?;
        // Exactly the mode asked for (the kernel applied the caller's umask; ours must not).
        file.set_permissions(Permissions::from_mode(mode & 0o7777))?;
        fchown(&file, Some(owner.uid), Some(owner.gid))?;
        let metadata = file.metadata()?;
        let ino = self.inodes.inode_for(&path, &metadata);
        self.inodes.add_lookup(ino);
        self.inodes.get_mut(ino)?.file.get_or_insert(file);
        Ok(self.attr(ino, &metadata))
    }

    pub fn unlink(&mut self, parent: u64, name: &OsStr) -> OpResult<()> {
        let backing_path = self.backing.join(self.child_path(parent, name)?);
        let metadata = fs::symlink_metadata(&backing_path)?;
        self.keep_reachable(&metadata);
        fs::remove_file(&backing_path)?;
        if metadata.nlink() <= 1 {
            self.inodes.unlinked(BackingId::of(&metadata));
        }
        Ok(())
    }

    pub fn rmdir(&mut self, parent: u64, name: &OsStr) -> OpResult<()> {
        let backing_path = self.backing.join(self.child_path(parent, name)?);
        let metadata = fs::symlink_metadata(&backing_path)?;
        fs::remove_dir(&backing_path)?;
        self.inodes.unlinked(BackingId::of(&metadata));
        Ok(())
    }

    /// The `rename`, over an existing target too (whose file, if that was its last name, is
    /// unlinked: its unsynced data can never reach the disk). `RENAME_EXCHANGE` is refused.
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
        let (from, to) = (
            self.child_path(parent, name)?,
            self.child_path(new_parent, new_name)?,
        );
        let (backing_from, backing_to) = (self.backing.join(&from), self.backing.join(&to));
        let source = fs::symlink_metadata(&backing_from)?;
        let replaced = fs::symlink_metadata(&backing_to).ok();
        if let Some(target) = &replaced {
            if flags.contains(RenameFlags::RENAME_NOREPLACE) {
                return Err(Errno::EEXIST);
            }
            if BackingId::of(target) == BackingId::of(&source) {
                return Ok(()); // Two names of one file: rename(2) does nothing.
            }
            self.keep_reachable(target);
        }
        fs::rename(&backing_from, &backing_to)?;
        if let Some(target) = replaced {
            if target.is_dir() || target.nlink() <= 1 {
                self.inodes.unlinked(BackingId::of(&target));
            }
        }
        self.inodes.renamed(&from, &to);
        Ok(())
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
