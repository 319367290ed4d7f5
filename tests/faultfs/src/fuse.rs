//! The FUSE daemon: each request runs its operation on the state under the one lock and
//! replies with the result or the errno.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::state::{AttrChanges, OpResult, Owner, State};

/// How long the kernel may cache entries and attributes.
const TTL: Duration = Duration::from_secs(1);
/// Inode numbers are never reused, so every inode is of generation 0.
const GENERATION: Generation = Generation(0);

/// The daemon's side of the mount: the state it shares with the [`crate::FaultFs`] handle.
pub struct Daemon {
    state: Arc<Mutex<State>>,
}

impl Daemon {
    pub fn new(state: Arc<Mutex<State>>) -> Daemon {
        Daemon { state }
    }

    /// Runs `op` on the state, unless the power is off.
    fn run<T>(&self, op: impl FnOnce(&mut State) -> OpResult<T>) -> OpResult<T> {
        let mut state = lock(&self.state);
        if state.powered_off {
            return Err(Errno::EIO);
        }
        op(&mut state)
    }

    fn reply_entry(&self, reply: ReplyEntry, op: impl FnOnce(&mut State) -> OpResult<fuser::FileAttr>) {
        match self.run(op) {
            Ok(attr) => reply.entry(&TTL, &attr, GENERATION),
            Err(errno) => reply.error(errno),
        }
    }

    fn reply_empty(&self, reply: ReplyEmpty, op: impl FnOnce(&mut State) -> OpResult<()>) {
        match self.run(op) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }
}

/// The state, even if a panic poisoned its lock (the power cut must still be able to run).
pub fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn owner(req: &Request) -> Owner {
    Owner {
        uid: req.uid(),
        gid: req.gid(),
    }
}

fn system_time(time: TimeOrNow) -> SystemTime {
    match time {
        TimeOrNow::SpecificTime(time) => time,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl Filesystem for Daemon {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.reply_entry(reply, |state| state.lookup(parent.0, name));
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        lock(&self.state).forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.run(|state| state.getattr(ino.0)) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(errno) => reply.error(errno),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let changes = AttrChanges {
            mode,
            uid,
            gid,
            size,
            accessed: atime.map(system_time),
            modified: mtime.map(system_time),
        };
        match self.run(|state| state.setattr(ino.0, &changes)) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(errno) => reply.error(errno),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.run(|state| state.readlink(ino.0)) {
            Ok(target) => reply.data(target.as_os_str().as_encoded_bytes()),
            Err(errno) => reply.error(errno),
        }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        self.reply_entry(reply, |state| state.mkdir(parent.0, name, mode, owner(req)));
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.reply_entry(reply, |state| state.mknod(parent.0, name, mode, rdev, owner(req)));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.reply_empty(reply, |state| state.unlink(parent.0, name));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.reply_empty(reply, |state| state.rmdir(parent.0, name));
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        self.reply_entry(reply, |state| {
            state.symlink(parent.0, link_name, target, owner(req))
        });
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        self.reply_empty(reply, |state| {
            state.rename(parent.0, name, newparent.0, newname, flags)
        });
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        self.reply_entry(reply, |state| state.link(ino.0, newparent.0, newname));
    }

    /// Files need no handle: data operations go by inode (the kernel's writeback of mapped
    /// pages may come through any of the file's handles).
    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.run(|state| state.open(ino.0, flags.0)) {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(errno) => reply.error(errno),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.run(|state| state.read(ino.0, offset, size)) {
            Ok(data) => reply.data(&data),
            Err(errno) => reply.error(errno),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.run(|state| state.write(ino.0, offset, data)) {
            Ok(written) => reply.written(written),
            Err(errno) => reply.error(errno),
        }
    }

    /// A close persists nothing: only an fsync does.
    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    /// `fsync` and `fdatasync` alike write the unsynced pages to the backing file (of a
    /// directory: make its entries durable).
    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        self.reply_empty(reply, |state| state.fsync(ino.0));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.run(|state| state.opendir(ino.0)) {
            Ok(handle) => reply.opened(FileHandle(handle), FopenFlags::empty()),
            Err(errno) => reply.error(errno),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let entries = match self.run(|state| state.readdir(ino.0, fh.0, offset)) {
            Ok(entries) => entries,
            Err(errno) => return reply.error(errno),
        };
        for (next_offset, entry) in (offset + 1..).zip(entries) {
            if reply.add(INodeNo(entry.ino), next_offset, entry.kind, &entry.name) {
                break; // The reply is full: the kernel asks again from `next_offset - 1`.
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        lock(&self.state).releasedir(fh.0);
        reply.ok();
    }

    /// What the kernel sends for an fsync (or fdatasync) of a directory: its entries become
    /// durable.
    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        self.reply_empty(reply, |state| state.fsyncdir(ino.0));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.run(|state| state.statfs()) {
            Ok(s) => reply.statfs(
                s.blocks,
                s.blocks_free,
                s.blocks_available,
                s.files,
                s.files_free,
                u32_or_max(s.block_size),
                u32_or_max(s.name_max),
                u32_or_max(s.fragment_size),
            ),
            Err(errno) => reply.error(errno),
        }
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        self.reply_empty(reply, |state| state.access(ino.0));
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.run(|state| state.create(parent.0, name, mode, flags, owner(req))) {
            Ok(attr) => reply.created(&TTL, &attr, GENERATION, FileHandle(0), FopenFlags::empty()),
            Err(errno) => reply.error(errno),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.reply_empty(reply, |state| state.fallocate(ino.0, offset, length, mode));
    }
}

/// `value` as the `u32` a FUSE reply holds, `u32::MAX` when larger.
fn u32_or_max(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}
