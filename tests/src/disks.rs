//! Disks a test can fill: a size-limited tmpfs mounted for the test's lifetime, and a filler
//! file that takes whatever space is left on it.

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{ensure, Context, Result};

/// A tmpfs mounted on a directory for the test's lifetime (lazily unmounted on drop, so that a
/// broker still holding files there cannot keep it mounted). Mounting needs root.
pub struct Tmpfs {
    pub path: PathBuf,
    /// The mount point when the tmpfs made it: removed once unmounted.
    _made: Option<tempfile::TempDir>,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (mount's syntax: `8m`, `256m`) on the existing directory `path`.
    pub fn mount(path: &Path, size: &str) -> Result<Tmpfs> {
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .status()
            .context("running mount")?;
        ensure!(
            status.success(),
            "mount -t tmpfs on {} failed: {status}",
            path.display()
        );
        Ok(Tmpfs {
            path: path.to_path_buf(),
            _made: None,
        })
    }

    /// A tmpfs of `size` on a new temporary directory, removed with it.
    pub fn mount_temporary(size: &str) -> Result<Tmpfs> {
        let dir = tempfile::Builder::new().prefix("laminar-tmpfs-").tempdir()?;
        let mut tmpfs = Tmpfs::mount(dir.path(), size)?;
        tmpfs._made = Some(dir);
        Ok(tmpfs)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("--lazy").arg(&self.path).status();
    }
}

/// Writes zeros to a new file at `path` until its file system is full.
pub fn fill(path: &Path) -> Result<()> {
    let mut filler = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let chunk = vec![0u8; 64 << 10];
    loop {
        match filler.write_all(&chunk) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::StorageFull => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}
