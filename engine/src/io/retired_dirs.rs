//! Removing a log's directory so that neither a crash nor a power cut brings it back.
//!
//! `remove_dir_all` unlinks one entry at a time, and none of it is durable until the parent
//! directory is fsynced: a power cut can return the directory whole or in part, and a topic
//! created again under the same name would open the old records. So a directory is first
//! *retired*: renamed to `<name>.<id>-delete` (the form Kafka uses) and its parent fsynced.
//! From then on the log is gone, since no partition name ends in `-delete`. Then the retired
//! directory is removed; whatever a crash leaves of it, start-up removes
//! ([`remove_retired_dirs`]). A directory found to be another topic's is only set aside
//! (`<name>.<id>-stray`, as Kafka does with stray logs), for an operator to remove.

use super::Storage;
use std::io;
use std::path::{Path, PathBuf};

/// The suffix of a retired directory's name.
const RETIRED_SUFFIX: &str = "-delete";

/// The suffix of a directory set aside, not removed (Kafka's stray logs).
const SET_ASIDE_SUFFIX: &str = "-stray";

/// Renames `dir` to its retired name, fsyncs its parent, then removes it. Once this returns
/// `Ok` or fails in the removal step, a power cut no longer brings `dir` back.
pub async fn remove_dir_durably<S: Storage>(storage: &S, dir: &Path) -> io::Result<()> {
    let retired = rename_durably(storage, dir, RETIRED_SUFFIX).await?;
    storage.remove_dir_all(&retired).await
}

/// Renames `dir` to `<name>.<id>-stray` and fsyncs its parent: out of the way for good, kept for
/// an operator to look at (nothing removes it). Returns the new path.
pub async fn set_aside_durably<S: Storage>(storage: &S, dir: &Path) -> io::Result<PathBuf> {
    rename_durably(storage, dir, SET_ASIDE_SUFFIX).await
}

/// Sets aside each of `dirs` (renamed to `<name>.<id>-stray`, nothing removed) and fsyncs
/// `log_dir`, their parent, once; returns the new paths, in order. Blocking `std::fs`, for
/// start-up. A power cut before the fsync may bring a directory back under its old name: the
/// next start finds it, and sets it aside, again.
pub fn set_aside_blocking(log_dir: &Path, dirs: &[PathBuf]) -> io::Result<Vec<PathBuf>> {
    let mut set_aside = Vec::with_capacity(dirs.len());
    for dir in dirs {
        assert_eq!(
            super::parent_dir(dir),
            log_dir,
            "{} is in the log dir",
            dir.display()
        );
        let renamed = renamed_aside(dir, SET_ASIDE_SUFFIX)?;
        std::fs::rename(dir, &renamed)?;
        set_aside.push(renamed);
    }
    if !set_aside.is_empty() {
        super::durable_dirs::sync_dir_blocking(log_dir)?;
    }
    Ok(set_aside)
}

async fn rename_durably<S: Storage>(storage: &S, dir: &Path, suffix: &str) -> io::Result<PathBuf> {
    let renamed = renamed_aside(dir, suffix)?;
    storage.rename(dir, &renamed).await?;
    storage.sync_dir(super::parent_dir(dir)).await?;
    Ok(renamed)
}

/// Removes every retired directory in `log_dir` (what a crash left of a removal) and fsyncs
/// `log_dir` when there were any; returns how many. Blocking `std::fs`, for start-up.
pub fn remove_retired_dirs(log_dir: &Path) -> io::Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(log_dir)? {
        let entry = entry?;
        let retired = entry.file_name().to_str().is_some_and(is_retired_name);
        if retired && entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
            removed += 1;
        }
    }
    if removed > 0 {
        super::durable_dirs::sync_dir_blocking(log_dir)?;
    }
    Ok(removed)
}

/// Whether `name` is a retired directory's (`<name>.<id>-delete`).
pub fn is_retired_name(name: &str) -> bool {
    name.strip_suffix(RETIRED_SUFFIX)
        .and_then(|rest| rest.rsplit_once('.'))
        .is_some_and(|(_, id)| !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `<dir>.<id><suffix>`, the id the current time in nanoseconds (hex): a partition retired,
/// created again and retired again gets a new name, as removals of one name are serialised.
fn renamed_aside(dir: &Path, suffix: &str) -> io::Result<PathBuf> {
    let name = dir.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} has no name", dir.display()),
        )
    })?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    Ok(dir.with_file_name(format!("{name}.{nanos:x}{suffix}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retired_names_are_recognised_and_partition_names_are_not() {
        let retired = renamed_aside(Path::new("/data/orders-3"), RETIRED_SUFFIX).unwrap();
        let name = retired.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("orders-3."), "{name}");
        assert!(is_retired_name(name), "{name}");
        for kept in [
            "orders-3",
            "orders-delete",
            "a.xyz-delete",
            "x.-delete",
            "cleaner-offset-checkpoint",
        ] {
            assert!(!is_retired_name(kept), "{kept}");
        }
    }

    #[test]
    fn directories_set_aside_at_start_up_keep_their_files_under_a_name_no_partition_has() {
        let root = tempfile::tempdir().unwrap();
        let log_dir = root.path();
        for dir in ["gone-0", "gone-1", "kept-0"] {
            std::fs::create_dir(log_dir.join(dir)).unwrap();
            std::fs::write(log_dir.join(dir).join("00000000000000000000.log"), dir).unwrap();
        }
        let strays = [log_dir.join("gone-0"), log_dir.join("gone-1")];
        let aside = set_aside_blocking(log_dir, &strays).unwrap();
        assert_eq!(aside.len(), 2);
        for (stray, aside) in strays.iter().zip(&aside) {
            assert!(!stray.exists(), "{} renamed", stray.display());
            let name = aside.file_name().unwrap().to_str().unwrap();
            let old_name = stray.file_name().unwrap().to_str().unwrap();
            assert!(name.starts_with(&format!("{old_name}.")) && name.ends_with(SET_ASIDE_SUFFIX));
            let kept = std::fs::read(aside.join("00000000000000000000.log")).unwrap();
            assert_eq!(kept, old_name.as_bytes());
            assert_eq!(crate::shard::partitions::parse_partition_dir_name(name), None);
        }
        assert!(log_dir.join("kept-0").is_dir());
        assert!(set_aside_blocking(log_dir, &[]).unwrap().is_empty());
    }

    #[test]
    fn start_up_removes_retired_directories_only() {
        let root = tempfile::tempdir().unwrap();
        let log_dir = root.path();
        std::fs::create_dir_all(log_dir.join("orders-0.17a2b-delete/inner")).unwrap();
        std::fs::write(log_dir.join("orders-0.17a2b-delete/inner/f"), b"x").unwrap();
        std::fs::create_dir(log_dir.join("orders-0")).unwrap();
        std::fs::write(log_dir.join("notes.ab-delete"), b"a file, not a directory").unwrap();
        assert_eq!(remove_retired_dirs(log_dir).unwrap(), 1);
        let mut left: Vec<_> = std::fs::read_dir(log_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["notes.ab-delete", "orders-0"]);
        assert_eq!(remove_retired_dirs(log_dir).unwrap(), 0);
    }
}
