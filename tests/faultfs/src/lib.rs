//! `laminar-faultfs`: a FUSE file system for black-box power-cut tests, in the spirit of
//! LazyFS. It shows a backing directory at a mount point and passes everything through to it,
//! except what no sync has made durable: file data written since that file's last fsync lives
//! only in the daemon's memory, and directory entries changed since their directory's last sync
//! can be undone. [`FaultFs::cut_power`] unmounts and loses them (or keeps a seeded random part
//! of them), so the backing directory is then what a disk would hold after losing power; a test
//! then starts the broker again on it (mounted again, or directly).
//!
//! # The fault model
//!
//! - **Directory entries are durable when their directory is synced**, as POSIX has it (an
//!   fsync of a file does not make its entry in its directory durable; an fsync of the
//!   directory does). Each namespace operation is applied to the backing directory at once (so
//!   the mount shows it and reads stay simple) and also recorded, in order, in a journal of
//!   undoable operations, each tagged with the directory (or directories) whose entries it
//!   changed: create, mknod, symlink, link and mkdir (an entry added to the parent), unlink and
//!   rmdir (an entry removed from the parent), rename within one directory (that directory),
//!   rename across directories (both). Directories are told apart by their backing file, not
//!   their path: a directory renamed is the same directory.
//! - **An operation becomes durable** when every directory it changed has been synced after it:
//!   `fsyncdir` on the directory (what the kernel sends for an `fsync` or `fdatasync` of a
//!   directory's descriptor, e.g. `File::open(dir)?.sync_all()`), or `fsync` of a directory,
//!   should one come. A sync of a directory makes durable every earlier operation whose
//!   directories are all synced by then (each directory's "synced up to journal index N" is
//!   kept, and evaluated at the cut). Also durable: an operation that changed a name (an entry
//!   of a directory) which a later durable operation changed too, since a name's history
//!   reaches the disk in order (this matters only for a rename across directories of which one
//!   was synced, followed by a durable change of one of its names).
//! - **Removals are undoable.** An unlink, an rmdir, or a rename over an existing target does
//!   not delete the victim from the backing directory: it moves it into a trash, a directory
//!   named [`TRASH_DIR_NAME`] in the backing directory's root, created at the first removal,
//!   which the mount never shows (no lookup finds it, no listing has it, nothing can be created
//!   under its name), and which the cut deletes. The link count the mount reports does not
//!   count names in the trash.
//! - **The power cut** undoes the operations not durable, in reverse journal order: a created
//!   file, directory, link or symbolic link is removed (a directory with whatever is under it:
//!   its own entry lost, its subtree is unreachable anyway); an unlinked file or a removed
//!   directory comes back from the trash under its old name; a rename is reversed and the
//!   target it replaced comes back from the trash. Then the trash is emptied. `LoseUnsynced`
//!   undoes every operation not durable; `KeepRandomPages` keeps a random prefix of them (in
//!   journal order: a file system's journal commits in order, so any prefix is a state that
//!   existed), its length drawn from the seeded RNG after the pages, and undoes the rest.
//!   [`CutReport`] counts them (`entries_kept`, `entries_lost`).
//! - **Metadata is durable at once.** setattr (mode, owner, times), readdir, statfs (the backing
//!   file system's) and access go straight to the backing directory and survive any cut.
//! - **File data is not.** Each file has an overlay of 4096-byte pages and a logical length.
//!   A write goes into the overlay (a page written for the first time is first read from the
//!   backing file, zeros past its end) and extends the logical length; a read sees the
//!   overlay over the backing file; `stat` reports the logical length. Reads and writes go by
//!   inode, whatever handle they come through, so the kernel's writeback of pages dirtied
//!   through a shared writable mapping is unsynced data like any write.
//! - **fsync and fdatasync** of a file write its overlay to the backing file (never past the
//!   logical length), give the backing file the logical length and empty the overlay. A close
//!   (flush, release) persists nothing. An fsync of a file does not make its directory entry
//!   durable.
//! - **Truncation is durable at once** (setattr of the size, a truncating open, an fallocate
//!   that extends the size): the backing file gets the length at once, the overlay loses the
//!   pages past it and the tail of the page it cuts. A cut after growing a file with unsynced
//!   data then leaves zeros where that data was below the new length: a harsh, realistic fault.
//!   fallocate's mode is passed through; a range it punches or zeroes is zeroed in the overlay.
//! - **The power cut's data part** ([`Cut`]) comes before its namespace part: `LoseUnsynced`
//!   drops every overlay. `KeepRandomPages` decides for each unsynced page, with a RNG of the
//!   given seed, whether it is lost, kept whole, or torn (kept as a random non-empty proper
//!   prefix of its 512-byte sectors), and writes what is kept into the backing file (never past
//!   the logical length, extending the backing file where a kept page lies past its end). Files
//!   are visited in path order and pages in file order, so the same seed and the same writes
//!   give the same outcome. The overlay is per inode, so the namespace does not change what
//!   happens to the data; a file whose creation the cut then undoes is removed, data and all.
//! - **Unlinked files.** When a file loses its last name (unlink, rename over it), its unsynced
//!   data can never reach the disk: it is no longer counted, nor applied at a cut (if the cut
//!   brings the file back, it has the data its last fsync gave it). It stays readable through
//!   the kernel's open files until they close (the daemon keeps the backing file open), and a
//!   new file that gets the same backing inode number never sees it.
//!
//! The kernel's page cache is in write-through mode (no FUSE writeback cache), so each
//! `write(2)` reaches the daemon before it returns; shared writable mappings work, their dirty
//! pages reaching the daemon at `msync`, `fsync`/`fdatasync`, `munmap`, close, exit of the
//! process, or unmount.
//!
//! Mounting needs root (the mount is done with mount(2), there being no `fusermount3`) and
//! `/dev/fuse`; [`available`] tells.

#![forbid(unsafe_code)]

mod attr;
mod cut;
mod fuse;
mod inodes;
mod journal;
mod overlay;
mod state;
mod unmount;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use fuser::{BackgroundSession, Config, MountOption, SessionACL};

pub use crate::cut::{Cut, CutReport};
use crate::fuse::{lock, Daemon};
use crate::state::State;
pub use crate::state::TRASH_DIR_NAME;

/// A mounted fault-injecting view of a backing directory. Dropping it without
/// [`FaultFs::cut_power`] cuts the power with [`Cut::LoseUnsynced`]: unsynced data is never
/// applied, namespace operations not durable are undone.
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
    /// it first) and applies `cut` to what no sync covered (file data, then namespace
    /// operations); returns what happened to the unsynced pages and to the namespace operations
    /// not durable. When it returns, the mount is gone and the backing directory holds the
    /// post-cut state, without the trash. If the unmount fails, no unsynced data is applied and
    /// every namespace operation not durable is undone; if applying the cut fails, it still
    /// goes as far as it can (the error is the first failure).
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
        let report = cut::apply(&mut state, cut);
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

/// Whether a test that needs a mount can run here ([`available`]); when it cannot, says why on
/// stderr, and fails instead when `FAULTFS_TESTS_MUST_MOUNT` is set (`tests/run.sh` sets it for
/// root, so that a machine that should mount never skips these tests silently).
pub fn available_for_tests() -> bool {
    if available() {
        return true;
    }
    assert!(
        std::env::var_os("FAULTFS_TESTS_MUST_MOUNT").is_none(),
        "FAULTFS_TESTS_MUST_MOUNT is set, but this process cannot mount (needs root with \
         CAP_SYS_ADMIN and /dev/fuse)"
    );
    eprintln!("skipped: a FUSE mount needs root and /dev/fuse");
    false
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
