//! The power cut's effect on the namespace: the operations no directory sync made durable are
//! undone, from the last, on the backing directory; then the trash is emptied.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::trash::Trash;
use super::State;
use crate::inodes::BackingId;
use crate::journal::{Entry, Op};

/// Every directory under the backing directory (the trash's too), by its backing file: its
/// path under the backing directory, kept current as the undo moves things.
struct DirPaths {
    paths: HashMap<BackingId, PathBuf>,
}

impl DirPaths {
    /// The directories under `backing`, found by walking it (symbolic links not followed).
    fn scan(backing: &Path) -> io::Result<DirPaths> {
        let mut paths = HashMap::new();
        paths.insert(BackingId::of(&fs::symlink_metadata(backing)?), PathBuf::new());
        let mut to_visit = vec![PathBuf::new()];
        while let Some(dir) = to_visit.pop() {
            for child in fs::read_dir(backing.join(&dir))? {
                let child = child?;
                let metadata = fs::symlink_metadata(child.path())?;
                if metadata.is_dir() {
                    let path = dir.join(child.file_name());
                    paths.insert(BackingId::of(&metadata), path.clone());
                    to_visit.push(path);
                }
            }
        }
        Ok(DirPaths { paths })
    }

    /// The path (under the backing directory) of the name.
    fn of(&self, entry: &Entry) -> io::Result<PathBuf> {
        let dir = self.paths.get(&entry.dir).ok_or_else(|| {
            let why = format!("undoing a change of {:?}: its directory is gone", entry.name);
            io::Error::new(io::ErrorKind::NotFound, why)
        })?;
        Ok(dir.join(&entry.name))
    }

    /// What was at `from` is now at `to`: the directories at and under it follow.
    fn moved(&mut self, from: &Path, to: &Path) {
        for path in self.paths.values_mut() {
            if let Ok(rest) = path.strip_prefix(from) {
                *path = if rest.as_os_str().is_empty() {
                    to.to_path_buf()
                } else {
                    to.join(rest)
                };
            }
        }
    }

    /// What was at `path` is gone, with whatever was under it.
    fn removed(&mut self, path: &Path) {
        self.paths.retain(|_, dir| !dir.starts_with(path));
    }
}

impl State {
    /// Undoes `ops` (in journal order, none of them durable: for each name they change, the
    /// last changes of it) from the last, then empties the trash. Goes on after a failure;
    /// returns the first.
    pub fn undo(&mut self, ops: &[Op]) -> io::Result<()> {
        let mut result = Ok(());
        if !ops.is_empty() {
            result = DirPaths::scan(&self.backing).and_then(|mut dirs| {
                let mut first_failure = Ok(());
                for op in ops.iter().rev() {
                    let undone = self.undo_op(&mut dirs, op);
                    first_failure = first_failure.and(undone);
                }
                first_failure
            });
        }
        result.and(self.trash.empty())
    }

    fn undo_op(&mut self, dirs: &mut DirPaths, op: &Op) -> io::Result<()> {
        match op {
            Op::Added(entry) => {
                let path = dirs.of(entry)?;
                let backing_path = self.backing.join(&path);
                if fs::symlink_metadata(&backing_path)?.is_dir() {
                    fs::remove_dir_all(&backing_path)?;
                    dirs.removed(&path);
                } else {
                    fs::remove_file(&backing_path)?;
                }
            }
            Op::Removed { entry, trashed } => self.take_back(dirs, trashed, &dirs.of(entry)?)?,
            Op::Renamed { from, to, replaced } => {
                let (from, to) = (dirs.of(from)?, dirs.of(to)?);
                fs::rename(self.backing.join(&to), self.backing.join(&from))?;
                dirs.moved(&to, &from);
                if let Some(replaced) = replaced {
                    self.take_back(dirs, replaced, &to)?;
                }
            }
        }
        Ok(())
    }

    /// Moves what the trash holds as `trashed` back to `path`.
    fn take_back(&mut self, dirs: &mut DirPaths, trashed: &OsString, path: &Path) -> io::Result<()> {
        let in_trash = Trash::path_of(trashed);
        let metadata = fs::symlink_metadata(self.backing.join(&in_trash))?;
        self.trash
            .take_back(trashed, &self.backing.join(path), &metadata)?;
        dirs.moved(&in_trash, path);
        Ok(())
    }
}
