//! The inode table: the mount's inode numbers, each mapped to a file of the backing directory
//! (by its device and inode number there), with the file's current path, its open backing
//! file and its unsynced data.

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use fuser::Errno;

use crate::overlay::Overlay;

/// The inode number of the mount's root directory (FUSE fixes it).
pub const ROOT: u64 = 1;

/// A file of the backing file system, whatever its name: `(st_dev, st_ino)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BackingId {
    dev: u64,
    ino: u64,
}

impl BackingId {
    #[cfg(test)]
    pub fn new(dev: u64, ino: u64) -> BackingId {
        BackingId { dev, ino }
    }

    pub fn of(metadata: &Metadata) -> BackingId {
        BackingId {
            dev: metadata.dev(),
            ino: metadata.ino(),
        }
    }
}

/// One inode of the mount.
pub struct Inode {
    /// Its path under the backing directory. A directory's is always current; a file with
    /// several links keeps the last name it was seen by, which may since have been removed
    /// (its open `file` then still reaches it).
    pub path: PathBuf,
    pub backing_id: BackingId,
    /// False once its last name is gone: its data can never reach the disk again, and the
    /// backing file system may reuse its inode number for a new file.
    pub linked: bool,
    /// The kernel's references (lookups not yet forgotten).
    lookups: u64,
    /// The backing file, read-write, opened at the first data operation and kept open, so
    /// that an unlinked file stays readable while the kernel still uses it.
    pub file: Option<File>,
    /// The data written since the last fsync; `None` when the backing file holds it all.
    pub unsynced: Option<Overlay>,
}

/// The inodes the kernel may name, by their inode number on the mount.
pub struct InodeTable {
    inodes: HashMap<u64, Inode>,
    /// The linked inodes by their backing file (an unlinked one is no longer here, so a new
    /// file that reuses its backing inode number gets a new inode, never its stale data).
    by_backing_id: HashMap<BackingId, u64>,
    next_ino: u64,
}

impl InodeTable {
    /// A table holding only the root, the backing directory itself.
    pub fn new(root: &Metadata) -> InodeTable {
        let mut table = InodeTable {
            inodes: HashMap::new(),
            by_backing_id: HashMap::new(),
            next_ino: ROOT + 1,
        };
        table.insert(ROOT, PathBuf::new(), BackingId::of(root));
        table
    }

    fn insert(&mut self, ino: u64, path: PathBuf, backing_id: BackingId) {
        let inode = Inode {
            path,
            backing_id,
            linked: true,
            lookups: 0,
            file: None,
            unsynced: None,
        };
        self.inodes.insert(ino, inode);
        self.by_backing_id.insert(backing_id, ino);
    }

    pub fn get(&self, ino: u64) -> Result<&Inode, Errno> {
        self.inodes.get(&ino).ok_or(Errno::ENOENT)
    }

    pub fn get_mut(&mut self, ino: u64) -> Result<&mut Inode, Errno> {
        self.inodes.get_mut(&ino).ok_or(Errno::ENOENT)
    }

    /// The linked inode of this backing file, if the mount has one.
    pub fn find(&self, backing_id: BackingId) -> Option<u64> {
        self.by_backing_id.get(&backing_id).copied()
    }

    /// The inode of the entry at `path` (of backing file `metadata`): the known one, with its
    /// path brought up to date, or a new one.
    pub fn inode_for(&mut self, path: &Path, metadata: &Metadata) -> u64 {
        let backing_id = BackingId::of(metadata);
        if let Some(ino) = self.find(backing_id) {
            let inode = self.inodes.get_mut(&ino).expect("indexed inodes exist");
            path.clone_into(&mut inode.path);
            return ino;
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.insert(ino, path.to_path_buf(), backing_id);
        ino
    }

    /// Counts a reference handed to the kernel (an entry reply).
    pub fn add_lookup(&mut self, ino: u64) {
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.lookups += 1;
        }
    }

    /// The kernel dropped `count` references. An inode nobody references goes unless it still
    /// holds unsynced data of a linked file (which the next lookup finds again).
    pub fn forget(&mut self, ino: u64, count: u64) {
        let Some(inode) = self.inodes.get_mut(&ino) else {
            return;
        };
        inode.lookups = inode.lookups.saturating_sub(count);
        let keep = inode.lookups > 0 || ino == ROOT || (inode.linked && inode.unsynced.is_some());
        if !keep {
            let inode = self.inodes.remove(&ino).expect("found above");
            if inode.linked {
                self.by_backing_id.remove(&inode.backing_id);
            }
        }
    }

    /// The backing file's last name is gone: its inode keeps serving the kernel's open files,
    /// but its data is no longer the disk's concern.
    pub fn unlinked(&mut self, backing_id: BackingId) {
        if let Some(ino) = self.by_backing_id.remove(&backing_id) {
            let inode = self.inodes.get_mut(&ino).expect("indexed inodes exist");
            inode.linked = false;
        }
    }

    /// `from` was renamed to `to`: the paths of the inodes at and under it follow.
    pub fn renamed(&mut self, from: &Path, to: &Path) {
        for inode in self.inodes.values_mut() {
            if let Ok(rest) = inode.path.strip_prefix(from) {
                inode.path = if rest.as_os_str().is_empty() {
                    to.to_path_buf()
                } else {
                    to.join(rest)
                };
            }
        }
    }

    /// The linked inodes, in path order (the order a seeded power cut draws their pages in).
    pub fn linked_by_path(&mut self) -> Vec<&mut Inode> {
        let mut linked: Vec<&mut Inode> = self.inodes.values_mut().filter(|inode| inode.linked).collect();
        linked.sort_by(|a, b| a.path.cmp(&b.path));
        linked
    }

    /// The bytes written to linked files since their last fsync.
    pub fn unsynced_bytes(&self) -> u64 {
        self.inodes
            .values()
            .filter(|inode| inode.linked)
            .filter_map(|inode| inode.unsynced.as_ref())
            .map(Overlay::unsynced_bytes)
            .sum()
    }
}
