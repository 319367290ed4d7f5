//! `laminar-faultfs`: a FUSE file system for black-box power-cut tests, in the spirit of
//! LazyFS. It shows a backing directory at a mount point and passes everything through to it,
//! except file data written since that file's last fsync: that lives only in the daemon's
//! memory. [`FaultFs::cut_power`] unmounts and loses it (or keeps a seeded random subset of
//! its pages, some torn), so the backing directory is then what a disk would hold after
//! losing power; a test then starts the broker again on it (mounted again, or directly).
//!
//! # The fault model
//!
//! - **Namespace and metadata are durable at once.** lookup, getattr, setattr (mode, owner,
//!   times), mkdir, rmdir, create, unlink, rename (over an existing file too, and of
//!   directories), link, symlink, readdir, statfs (the backing file system's) and access go
//!   straight to the backing directory and survive any cut, with or without an fsync of the
//!   directory (`fsyncdir` does nothing). So this model tests the durability of file data,
//!   not that of directory entries.
//! - **File data is not.** Each file has an overlay of 4096-byte pages and a logical length.
//!   A write goes into the overlay (a page written for the first time is first read from the
//!   backing file, zeros past its end) and extends the logical length; a read sees the
//!   overlay over the backing file; `stat` reports the logical length. Reads and writes go by
//!   inode, whatever handle they come through, so the kernel's writeback of pages dirtied
//!   through a shared writable mapping is unsynced data like any write.
//! - **fsync and fdatasync** of a file write its overlay to the backing file (never past the
//!   logical length), give the backing file the logical length and empty the overlay. A close
//!   (flush, release) persists nothing.
//! - **Truncation is durable at once** (setattr of the size, a truncating open, an fallocate
//!   that extends the size): the backing file gets the length at once, the overlay loses the
//!   pages past it and the tail of the page it cuts. A cut after growing a file with unsynced
//!   data then leaves zeros where that data was below the new length: a harsh, realistic fault.
//!   fallocate's mode is passed through; a range it punches or zeroes is zeroed in the overlay.
//! - **The power cut** ([`Cut`]): `LoseUnsynced` drops every overlay. `KeepRandomPages`
//!   decides for each unsynced page, with a RNG of the given seed, whether it is lost, kept
//!   whole, or torn (kept as a random non-empty proper prefix of its 512-byte sectors), and
//!   writes what is kept into the backing file (never past the logical length, extending the
//!   backing file where a kept page lies past its end). Files are visited in path order and
//!   pages in file order, so the same seed and the same writes give the same outcome.
//! - **Unlinked files.** When a file loses its last name (unlink, rename over it), its unsynced
//!   data can never reach the disk: it is no longer counted, nor applied at a cut. It stays
//!   readable through the kernel's open files until they close (the daemon keeps the backing
//!   file open), and a new file that gets the same backing inode number never sees it.
//!
//! The kernel's page cache is in write-through mode (no FUSE writeback cache), so each
//! `write(2)` reaches the daemon before it returns; shared writable mappings work, their dirty
//! pages reaching the daemon at `msync`, `fsync`/`fdatasync`, `munmap`, close, exit of the
//! process, or unmount.
//!
//! Mounting needs root (the mount is done with mount(2), there being no `fusermount3`) and
//! `/dev/fuse`; [`available`] tells.

mod attr;
mod cut;
mod fuse;
mod inodes;
mod overlay;
mod state;
mod sys;
mod unmount;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use fuser::{BackgroundSession, Config, MountOption, SessionACL};

pub use crate::cut::{Cut, CutReport};
use crate::fuse::{lock, Daemon};
use crate::state::State;

/// A mounted fault-injecting view of a backing directory. Dropping it without
/// [`FaultFs::cut_power`] cuts the power with [`Cut::LoseUnsynced`]: unsynced data is never
/// applied.
pub struct FaultFs {
    /// The daemon thread; `None` once the power was cut.
    session: Option<BackgroundSession>,
    state: Arc<Mutex<State>>,
    mountpoint: PathBuf,
}

impl FaultFs {
    /// Mounts a fault-injecting view of `backing` at `mountpoint` (both existing directories).
    /// Needs root and /dev/fuse.
    pub fn mount(backing: &Path, mountpoint: &Path) -> io::Result<FaultFs> {
        let mountpoint = mountpoint.canonicalize()?;
        let state = Arc::new(Mutex::new(State::new(backing.canonicalize()?)?));
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("laminar-faultfs".into()),
            MountOption::Subtype("laminar-faultfs".into()),
            // The kernel checks permissions, as for any file system.
            MountOption::DefaultPermissions,
        ];
        // Any user may use the mount (the broker under test need not run as root).
        config.acl = SessionACL::All;
        let session = fuser::spawn_mount(Daemon::new(Arc::clone(&state)), &mountpoint, &config)?;
        Ok(FaultFs {
            session: Some(session),
            state,
            mountpoint,
        })
    }

    /// Bytes written but not yet covered by an fsync, over all files (for tests' assertions).
    /// Each 4096-byte page counts the span from its first to its last byte written since the
    /// file's last fsync.
    pub fn unsynced_bytes(&self) -> u64 {
        lock(&self.state).inodes.unsynced_bytes()
    }

    /// The power cut: unmounts (every process using the mount must be gone: the caller kills
    /// it first) and applies `cut` to what no fsync covered; returns what happened to the
    /// unsynced pages. When it returns, the mount is gone and the backing directory holds the
    /// post-cut state. On an error, no unsynced data was applied.
    pub fn cut_power(mut self, cut: Cut) -> io::Result<CutReport> {
        self.power_off(cut)
    }

    fn power_off(&mut self, cut: Cut) -> io::Result<CutReport> {
        let Some(session) = self.session.take() else {
            return Ok(CutReport::default());
        };
        // Without the lock: the unmount makes the kernel write back dirty pages, which the
        // daemon must serve.
        let unmounted = unmount::unmount_and_join(session, &self.mountpoint);
        let mut state = lock(&self.state);
        state.powered_off = true;
        let cut = if unmounted.is_ok() { cut } else { Cut::LoseUnsynced };
        let report = cut::apply(&mut state.inodes, cut);
        unmounted?;
        report
    }
}

impl Drop for FaultFs {
    fn drop(&mut self) {
        if let Err(error) = self.power_off(Cut::LoseUnsynced) {
            eprintln!(
                "laminar-faultfs: unmounting {}: {error}",
                self.mountpoint.display()
            );
        }
    }
}

/// True when this process can mount (root and /dev/fuse present); tests that need a mount print
/// why and return early otherwise.
pub fn available() -> bool {
    let dev_fuse = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .is_ok();
    dev_fuse && is_root_with_sys_admin()
}

/// Whether the effective user is root and holds `CAP_SYS_ADMIN` (which mount(2) needs; root in
/// a container may lack it), from /proc/self/status.
fn is_root_with_sys_admin() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    let Ok(status) = fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(|rest| rest.split_whitespace().collect::<Vec<_>>())
    };
    // "Uid:" lists the real, effective, saved and file-system user ids.
    let effective_root = field("Uid:").is_some_and(|ids| ids.get(1) == Some(&"0"));
    let sys_admin = field("CapEff:")
        .and_then(|caps| u64::from_str_radix(caps.first()?, 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0);
    effective_root && sys_admin
}
