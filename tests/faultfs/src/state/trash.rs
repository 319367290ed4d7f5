//! The trash: where a name's file goes when the mount removes the name (unlink, rmdir, rename
//! over it), so that a power cut can bring it back. A directory in the backing directory's
//! root that the mount never shows, created at the first removal and deleted by the cut.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::{self, DirBuilder, Metadata};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::inodes::BackingId;

/// The trash's name in the backing directory's root: hidden from the mount.
pub const TRASH_DIR_NAME: &str = ".laminar-faultfs-trash";

pub struct Trash {
    /// `<backing>/<TRASH_DIR_NAME>`.
    dir: PathBuf,
    created: bool,
    /// The name the next file put in the trash gets.
    next: u64,
    /// The names in the trash of each file that is not a directory: not counted in the link
    /// count the mount reports.
    links: HashMap<BackingId, u64>,
}

impl Trash {
    /// The trash of the backing directory. One left over (by a process gone before its power
    /// cut) is deleted: its files are those of removals nothing can undo any more.
    pub fn new(backing: &Path) -> io::Result<Trash> {
        let dir = backing.join(TRASH_DIR_NAME);
        match fs::remove_dir_all(&dir) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
            _ => {}
        }
        Ok(Trash {
            dir,
            created: false,
            next: 0,
            links: HashMap::new(),
        })
    }

    /// Whether the trash exists (a subdirectory of the backing root the mount hides).
    pub fn exists(&self) -> bool {
        self.created
    }

    /// The path (under the backing directory) of a name in the trash.
    pub fn path_of(name: &OsString) -> PathBuf {
        Path::new(TRASH_DIR_NAME).join(name)
    }

    /// Moves the file at `path` (of `metadata`) into the trash; returns its name there.
    pub fn put(&mut self, path: &Path, metadata: &Metadata) -> io::Result<OsString> {
        if !self.created {
            DirBuilder::new().mode(0o700).create(&self.dir)?;
            self.created = true;
        }
        let name = OsString::from(self.next.to_string());
        fs::rename(path, self.dir.join(&name))?;
        self.next += 1;
        if !metadata.is_dir() {
            *self.links.entry(BackingId::of(metadata)).or_default() += 1;
        }
        Ok(name)
    }

    /// Moves the file put in the trash as `name` (of `metadata`) back to `path`.
    pub fn take_back(&mut self, name: &OsString, path: &Path, metadata: &Metadata) -> io::Result<()> {
        fs::rename(self.dir.join(name), path)?;
        if let Some(links) = self.links.get_mut(&BackingId::of(metadata)) {
            *links = links.saturating_sub(1);
        }
        Ok(())
    }

    /// The file's link count without its names in the trash.
    pub fn visible_links(&self, metadata: &Metadata) -> u64 {
        let trashed = self.links.get(&BackingId::of(metadata)).copied().unwrap_or(0);
        metadata.nlink().saturating_sub(trashed)
    }

    /// Deletes the trash and all it holds.
    pub fn empty(&mut self) -> io::Result<()> {
        if self.created {
            fs::remove_dir_all(&self.dir)?;
            self.created = false;
            self.links.clear();
        }
        Ok(())
    }
}
