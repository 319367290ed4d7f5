//! Directories created at start-up (a log dir, the metadata directories in it) made durable
//! before anything in them is promised: a directory's own entry lives in its parent, which an
//! fsync of the directory does not cover; and small files replaced whole (the topic table, the
//! producer-id block). Blocking `std::fs`, off the shards' data path.

use std::io;
use std::path::Path;

/// Creates `dir` and its missing ancestors, and fsyncs the parent of each directory it created,
/// so that a power cut after it returns keeps the whole path. An existing `dir` costs one
/// `stat` and no fsync.
pub fn create_dir_all_durably(dir: &Path) -> io::Result<()> {
    create_dir_all_syncing(dir, sync_dir_blocking)
}

/// Replaces the file at `path` with `bytes` so that a crash leaves the old file or the new one,
/// whole: written to `<name>.tmp` beside it, fdatasync'd, renamed over it, and its directory
/// fsynced.
pub fn replace_file_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let mut out = std::fs::File::create(&tmp)?;
    out.write_all(bytes)?;
    out.sync_data()?;
    std::fs::rename(&tmp, path)?;
    sync_dir_blocking(super::parent_dir(path))
}

pub(super) fn sync_dir_blocking(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// [`create_dir_all_durably`] with the fsync of a directory given.
fn create_dir_all_syncing(dir: &Path, mut sync_dir: impl FnMut(&Path) -> io::Result<()>) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut at = dir;
    loop {
        match std::fs::metadata(at) {
            Ok(found) if found.is_dir() => break,
            Ok(_) => {
                let why = format!("{} is not a directory", at.display());
                return Err(io::Error::new(io::ErrorKind::AlreadyExists, why));
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                missing.push(at);
                match at.parent() {
                    Some(parent) if !parent.as_os_str().is_empty() => at = parent,
                    _ => break, // a relative path's first component: its parent is `.`
                }
            }
            Err(error) => return Err(error),
        }
    }
    std::fs::create_dir_all(dir)?;
    for created in missing {
        sync_dir(super::parent_dir(created))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn create_noting_syncs(dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut synced = Vec::new();
        create_dir_all_syncing(dir, |parent| {
            synced.push(parent.to_path_buf());
            Ok(())
        })?;
        Ok(synced)
    }

    #[test]
    fn the_parent_of_every_directory_created_is_fsynced_and_nothing_when_all_exist() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b/c");
        let synced = create_noting_syncs(&dir).unwrap();
        assert!(dir.is_dir());
        let expected: Vec<PathBuf> = ["a/b", "a", ""].iter().map(|p| root.path().join(p)).collect();
        let expected: Vec<PathBuf> = expected.iter().map(|p| p.components().collect()).collect();
        assert_eq!(synced, expected);
        assert_eq!(create_noting_syncs(&dir).unwrap(), Vec::<PathBuf>::new());
        let sibling = root.path().join("a/d");
        assert_eq!(
            create_noting_syncs(&sibling).unwrap(),
            vec![root.path().join("a")]
        );
    }

    #[test]
    fn a_replaced_file_holds_the_new_bytes_and_no_temporary_is_left() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("table.json");
        replace_file_durably(&path, b"old").unwrap();
        replace_file_durably(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let names: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("table.json")]);
    }

    #[test]
    fn a_file_in_the_way_is_an_error_and_a_failed_fsync_is_returned() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("f"), b"").unwrap();
        let error = create_noting_syncs(&root.path().join("f")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
        let failed = create_dir_all_syncing(&root.path().join("g"), |_| Err(io::Error::other("EIO")));
        assert_eq!(failed.unwrap_err().to_string(), "EIO");
        create_dir_all_durably(&root.path().join("h/i")).unwrap();
        assert!(root.path().join("h/i").is_dir());
    }
}
