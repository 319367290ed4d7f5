//! Kafka's `.lock` file: at most one broker process per log dir.
//!
//! Two brokers on one data directory would open the same partitions and append to the same
//! segment files. Each log dir therefore holds an empty file `.lock` on which the broker takes
//! an exclusive advisory lock (`flock(LOCK_EX | LOCK_NB)`, through std's `File::try_lock`) before
//! it reads or writes anything else there, and keeps it until the process exits. The kernel
//! drops the lock with the process, so a crash leaves no stale lock behind; the file itself
//! stays, as in Kafka.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

/// The lock file's name in every log dir (Kafka's).
pub const LOCK_FILE: &str = ".lock";

/// The exclusive lock on one log dir, held while this value lives. Created before the shards
/// start and kept in [`crate::broker::BrokerShared`]; no shard touches it.
#[derive(Debug)]
pub struct LogDirLock {
    dir: PathBuf,
    _file: File,
}

impl LogDirLock {
    /// Locks `dir` (which must exist), or says which directory another process holds.
    pub fn acquire(dir: &Path) -> anyhow::Result<LogDirLock> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| anyhow::anyhow!("log.dirs: cannot open {}: {e}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(LogDirLock {
                dir: dir.to_path_buf(),
                _file: file,
            }),
            Err(TryLockError::WouldBlock) => anyhow::bail!(
                "log.dirs: {} is in use by another broker process (it holds the lock on {}); \
                 stop that broker or give this one another log dir",
                dir.display(),
                path.display()
            ),
            Err(TryLockError::Error(e)) => {
                anyhow::bail!("log.dirs: cannot lock {}: {e}", path.display())
            }
        }
    }

    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_dir_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = LogDirLock::acquire(dir.path()).unwrap();
        let refused = LogDirLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(refused.contains("in use by another broker process"), "{refused}");
        assert!(refused.contains(&dir.path().display().to_string()), "{refused}");
        drop(first);
        let again = LogDirLock::acquire(dir.path()).unwrap();
        assert_eq!(again.dir(), dir.path());
    }
}
