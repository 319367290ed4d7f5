//! Small appends to segment `.log` files through a shared mapping of the file's end, instead of
//! a `pwritev` each (docs/decisions/0018).
//!
//! Why: keyed records over thousands of partitions arrive as batches of a record or two, each
//! to a file not written for tens of milliseconds. A `pwritev` then pays the kernel's cold
//! path every time: the inode's time update (the coarse clock has ticked since the file's
//! last write) and the lookup of the file's last page and its buffers, 58 % of the broker's
//! CPU at that point (decision 0026, per-batch cost across many partitions). A copy into a mapped page pays
//! none of it:
//! the kernel is entered once per new page (its first write fault, which updates the time
//! once), not once per batch. Bytes copied are in the page cache at once, as with `pwritev`,
//! so what an acknowledgement means does not change: a process kill loses nothing, and
//! fdatasync makes them durable as before.
//!
//! Rules, and why each holds:
//! - Only appends under [`MAPPED_APPEND_BYTES_MAX`] go through a mapping. A larger one fills
//!   whole pages, where a fault (which zeroes each new page before the copy) costs more than the
//!   `pwritev` (measured: twice the broker's CPU at 100 partitions of 16 KiB batches).
//! - A window maps [`WINDOW_BYTES`] from the page of the append that made it. Writing a mapped
//!   page past the file's end raises SIGBUS, so the file's length is set to the window's end
//!   first: a sparse extension, no disk blocks. The file is then longer than its data; every
//!   length change that goes through the file (truncate, close, drop) unmaps and cuts it back
//!   first, so only a crash leaves the zeros, and recovery cuts them as it cuts any torn tail
//!   (the open sees a `.log` longer than its clean record and verifies past it).
//! - A write into pages not yet touched first populates them, and [`POPULATE_AHEAD_BYTES`]
//!   more, with one `MADV_POPULATE_WRITE`: one trap and one inode time update for several
//!   pages instead of one each. That also gives the pages their disk blocks before the copy.
//!   On a full file system a first write fault would be a SIGBUS, not an error code; the
//!   populate call fails instead, and the append goes through `pwritev`, whose ENOSPC the log
//!   turns into KAFKA_STORAGE_ERROR. A shard also populates only while the file system has
//!   [`USABLE_BYTES_HEADROOM`] free beyond what it populated since it last looked
//!   ([`ShardMappedAppends`]). Should a fault come anyway (a disk error reading a written-back
//!   page again), `exit_on_bus_error` ends the process with a message saying so.
//! - A file's first [`SMALL_APPENDS_BEFORE_MAPPING`] small appends since it was opened (or last
//!   unmapped) go through `pwritev`: a partition written once or twice, the common case among
//!   100 000, keeps no window, no memory and no length past its data (mapping its first
//!   append made one record to each of 30 000 partitions 1.8x slower).
//! - Windows in the whole process stay under [`WINDOWS_MAX`] and a quarter of
//!   `vm.max_map_count`; past that, appends go through `pwritev`. A checkpoint (the log's
//!   `sync_all` truncates the file to its data) gives an idle partition's window back.

use laminar_sys::files::set_len;
use laminar_sys::mapping::{exit_on_bus_error, MappedWindow};
use laminar_sys::memory::page_bytes;
use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

/// Appends of this many bytes or more are written with `pwritev`.
pub const MAPPED_APPEND_BYTES_MAX: u64 = 4096;
/// Small appends to a file that go through `pwritev` before its appends are mapped.
pub const SMALL_APPENDS_BEFORE_MAPPING: u32 = 4;
/// The bytes one window maps (virtual memory; only pages written take memory or disk).
pub const WINDOW_BYTES: u64 = 1 << 20;
/// A write into a page not yet populated populates it and the pages this far past the write's
/// end, in one system call (see [`MappedEnd::populate`]).
pub const POPULATE_AHEAD_BYTES: u64 = 16 << 10;
/// Appends are mapped only while the file system has this much free beyond what was mapped.
pub const USABLE_BYTES_HEADROOM: u64 = 1 << 30;
/// Windows mapped in the process at most (each one a kernel memory area).
pub const WINDOWS_MAX: usize = 16_384;
/// A shard reads the file system's free space again after mapping this many bytes...
const ROOM_RECHECK_BYTES: u64 = 64 << 20;
/// ...or after this long.
const ROOM_RECHECK_INTERVAL: Duration = Duration::from_millis(100);

/// What a SIGBUS means with mapped appends: a page of a log file the kernel could not read or
/// give disk blocks to (a disk error, or a file system filled past the headroom check).
const BUS_ERROR_MESSAGE: &str = "laminar: fatal: SIGBUS: a memory-mapped log file could not be read or \
given disk blocks (a disk I/O error, or its file system is full); exiting with status 74\n";
/// The exit status after a SIGBUS: EX_IOERR.
const BUS_ERROR_EXIT_STATUS: i32 = 74;

/// Windows mapped now, in the whole process.
static WINDOWS_MAPPED: AtomicUsize = AtomicUsize::new(0);

/// The most windows the process may map: [`WINDOWS_MAX`], and a quarter of the kernel's limit
/// of memory areas per process (the allocator, glommio and thread stacks need the rest).
fn windows_limit() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let kernel = std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()
            .and_then(|text| text.trim().parse::<usize>().ok())
            .unwrap_or(65_530);
        WINDOWS_MAX.min(kernel / 4)
    })
}

/// A window counted in [`WINDOWS_MAPPED`] while it lives.
#[derive(Debug)]
struct CountedWindow(MappedWindow);

impl CountedWindow {
    /// Takes a place under the process's limit, then maps; `None` when there is no place.
    fn map(fd: RawFd, start: u64) -> Option<io::Result<CountedWindow>> {
        let limit = windows_limit();
        WINDOWS_MAPPED
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()?;
        Some(match MappedWindow::map(fd, start, WINDOW_BYTES as usize) {
            Ok(window) => {
                // Most of a window lies past the file's data: a fault with readahead would read
                // (zero fill) the pages around it, which the appends then overwrite.
                window.advise_random_access();
                Ok(CountedWindow(window))
            }
            Err(error) => {
                WINDOWS_MAPPED.fetch_sub(1, Ordering::AcqRel);
                Err(error)
            }
        })
    }
}

impl Drop for CountedWindow {
    fn drop(&mut self) {
        WINDOWS_MAPPED.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One shard's view of the free space of the file systems it maps appends on, by device.
/// Owned by one shard; not Send.
#[derive(Debug, Default)]
pub struct ShardMappedAppends {
    rooms: RefCell<HashMap<u64, Room>>,
}

#[derive(Debug, Clone, Copy)]
struct Room {
    usable_bytes: u64,
    mapped_since_bytes: u64,
    looked_at: Instant,
}

impl ShardMappedAppends {
    /// Whether `bytes` more may be appended through a mapping on `device` (the file system of
    /// `fd`), counting them if so. Looks at the free space again when the last look is old.
    fn has_room(&self, fd: RawFd, device: u64, bytes: u64) -> bool {
        let mut rooms = self.rooms.borrow_mut();
        let now = Instant::now();
        let stale = |room: &Room| {
            room.mapped_since_bytes >= ROOM_RECHECK_BYTES
                || now.duration_since(room.looked_at) >= ROOM_RECHECK_INTERVAL
        };
        let room = match rooms.get_mut(&device) {
            Some(room) if !stale(room) => room,
            _ => {
                let Ok(usable_bytes) =
                    laminar_sys::file_systems::stats_of_open_file(fd).map(|stats| stats.usable_bytes())
                else {
                    rooms.remove(&device);
                    return false;
                };
                let fresh = Room {
                    usable_bytes,
                    mapped_since_bytes: 0,
                    looked_at: now,
                };
                rooms.entry(device).insert_entry(fresh).into_mut()
            }
        };
        let left = room.usable_bytes.saturating_sub(room.mapped_since_bytes);
        if left < USABLE_BYTES_HEADROOM + bytes {
            return false;
        }
        room.mapped_since_bytes += bytes;
        true
    }
}

/// The mapped end of one open file, and how far its length was set past its data. Owned by
/// the shard that owns the file; not Send.
#[derive(Debug, Default)]
pub struct MappedEnd {
    window: Option<CountedWindow>,
    /// The length this set the file to (0: never set): past the data while it exceeds it.
    length_set: u64,
    /// The file could not be mapped (a file system without shared writable mappings).
    unmappable: bool,
    /// Small appends written with `pwritev` since the file was opened or last unmapped, up to
    /// [`SMALL_APPENDS_BEFORE_MAPPING`].
    small_appends_unmapped: u32,
    /// The window's pages are populated for writing up to here (file offset; 0: none).
    populated_end: u64,
}

impl MappedEnd {
    /// Writes `parts` at `pos` through the window, mapping one first when none covers them, and
    /// returns the bytes written; `None`, having written nothing, when the append should go
    /// through `pwritev` instead. `data_len`: the file's length as its owner knows it (at least every byte
    /// written); `device`: the file's file system.
    pub fn write(
        &mut self,
        shard: &ShardMappedAppends,
        (fd, device, data_len): (RawFd, u64, u64),
        pos: u64,
        parts: &[&[u8]],
    ) -> Option<u64> {
        let total: u64 = parts.iter().map(|part| part.len() as u64).sum();
        if self.unmappable || total == 0 || total >= MAPPED_APPEND_BYTES_MAX {
            return None;
        }
        if self.window.is_none() && self.small_appends_unmapped < SMALL_APPENDS_BEFORE_MAPPING {
            self.small_appends_unmapped += 1;
            return None;
        }
        let end = pos + total;
        let covered = self.window.as_ref().is_some_and(|w| {
            let range = w.0.range();
            range.start <= pos && end <= range.end
        });
        if !covered && !self.map_from(fd, data_len, pos) {
            return None;
        }
        if end > self.populated_end && !self.populate(shard, (fd, device), pos, end) {
            return None;
        }
        let Some(window) = &self.window else {
            unreachable!("a window covers the append")
        };
        window.0.write(pos, parts);
        Some(total)
    }

    /// Populates the window's pages from the one holding `pos` (or the first not yet
    /// populated) to [`POPULATE_AHEAD_BYTES`] past `end`, in one `MADV_POPULATE_WRITE`; false,
    /// with the window dropped, when the append should go through `pwritev` instead.
    ///
    /// Why: a page's first write fault costs a trap, a zeroed page-cache page, its blocks'
    /// reservation and, since the coarse clock has ticked since this file's last fault, the
    /// inode's time update. Populating a few pages at once pays the trap and the time update
    /// once for all of them (broker CPU 0.82x keyed into 10 000 partitions, decision 0018).
    /// It also gives the pages their blocks before any copy: on a full disk the call fails
    /// (and the append goes through `pwritev`, which says ENOSPC) where a copy would raise
    /// SIGBUS. The pages ahead hold zeros past the data until appends fill them; they are
    /// bounded by [`POPULATE_AHEAD_BYTES`] per window and go when the file is cut back to its
    /// data (every unmap).
    fn populate(
        &mut self,
        shard: &ShardMappedAppends,
        (fd, device): (RawFd, u64),
        pos: u64,
        end: u64,
    ) -> bool {
        let Some(window) = &self.window else {
            unreachable!("a window covers the append")
        };
        let page = page_bytes();
        let start = (pos - pos % page).max(self.populated_end);
        let populate_end = window
            .0
            .range()
            .end
            .min((end + POPULATE_AHEAD_BYTES).next_multiple_of(page));
        if !shard.has_room(fd, device, populate_end - start) {
            self.window = None; // a full disk must not find pages mapped over holes
            return false;
        }
        match window.0.populate_for_write(start..populate_end) {
            Ok(()) => {
                self.populated_end = populate_end;
                true
            }
            Err(error) => {
                if error.raw_os_error() == Some(libc::EINVAL) {
                    tracing::debug!(%error, "a kernel that cannot populate a mapping (before 5.14): appends go through pwritev");
                    self.unmappable = true;
                }
                self.window = None;
                false
            }
        }
    }

    /// Maps a window from the page holding `pos`, setting the file's length to its end first.
    fn map_from(&mut self, fd: RawFd, data_len: u64, pos: u64) -> bool {
        self.window = None;
        self.populated_end = 0;
        let start = pos - pos % page_bytes();
        let window_end = start + WINDOW_BYTES;
        if window_end > self.length_set.max(data_len) {
            if set_len(fd, window_end).is_err() {
                return false; // the pwritev will say why, if it fails too
            }
            self.length_set = window_end;
        }
        match CountedWindow::map(fd, start) {
            None => false,
            Some(Ok(window)) => {
                static HANDLER: Once = Once::new();
                HANDLER.call_once(|| {
                    if let Err(error) = exit_on_bus_error(BUS_ERROR_MESSAGE, BUS_ERROR_EXIT_STATUS) {
                        tracing::warn!(%error, "cannot handle SIGBUS: a disk error in a mapped append kills the broker silently");
                    }
                });
                self.window = Some(window);
                true
            }
            Some(Err(error)) => {
                tracing::debug!(%error, "a file the file system cannot map: its appends go through pwritev");
                self.unmappable = true;
                false
            }
        }
    }

    /// Prefetches the cache line (and the page-table walk) of a write at `pos`, if the window
    /// covers it and its page is populated.
    pub fn prefetch_write(&self, pos: u64) {
        if let Some(window) = &self.window {
            if pos < self.populated_end {
                window.0.prefetch(pos);
            }
        }
    }

    /// Whether a window is mapped (the file's length may lie past its data).
    pub fn is_mapped(&self) -> bool {
        self.window.is_some()
    }

    /// Drops the window, before the file's length changes or the file closes; returns whether
    /// the file's length was set past `data_len` (its owner must then cut it back).
    pub fn unmap(&mut self, data_len: u64) -> bool {
        self.window = None;
        self.small_appends_unmapped = 0;
        self.populated_end = 0;
        let past_data = self.length_set > data_len;
        self.length_set = 0;
        past_data
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{FileExt, MetadataExt};

    /// A scratch file, its descriptor and device, and a shard's view of its file system; `None`
    /// when that file system has too little room for mapped appends (nothing to check then).
    fn scratch_with_room() -> Option<(std::fs::File, RawFd, u64, ShardMappedAppends)> {
        let file = tempfile::tempfile().unwrap();
        let (fd, device) = (file.as_raw_fd(), file.metadata().unwrap().dev());
        let shard = ShardMappedAppends::default();
        shard.has_room(fd, device, 0).then_some((file, fd, device, shard))
    }

    /// The file range the end's window maps, if it has one (the process-wide count moves with
    /// other tests' windows, which run at once).
    fn window_range(end: &MappedEnd) -> Option<std::ops::Range<u64>> {
        end.window.as_ref().map(|window| window.0.range())
    }

    /// A file's mapped end past its first small appends: the next one maps.
    fn mapping_its_next_append() -> MappedEnd {
        MappedEnd {
            small_appends_unmapped: SMALL_APPENDS_BEFORE_MAPPING,
            ..MappedEnd::default()
        }
    }

    #[test]
    fn small_appends_go_through_one_window_and_unmap_says_the_length_was_set() {
        let Some((file, fd, device, shard)) = scratch_with_room() else {
            return;
        };
        let mut end = MappedEnd::default();
        for _ in 0..SMALL_APPENDS_BEFORE_MAPPING {
            assert_eq!(
                end.write(&shard, (fd, device, 0), 0, &[b"abc"]),
                None,
                "pwritev's"
            );
        }
        assert_eq!(file.metadata().unwrap().len(), 0, "nothing written for them");
        assert_eq!(end.write(&shard, (fd, device, 0), 0, &[b"abc"]), Some(3));
        let window = window_range(&end);
        assert_eq!(window, Some(0..WINDOW_BYTES));
        assert_eq!(end.write(&shard, (fd, device, 3), 3, &[b"de", b"f"]), Some(3));
        assert_eq!(window_range(&end), window, "one window for both");
        assert_eq!(
            file.metadata().unwrap().len(),
            WINDOW_BYTES,
            "length set to the window's end"
        );
        let mut read = [0u8; 6];
        file.read_exact_at(&mut read, 0).unwrap();
        assert_eq!(&read, b"abcdef");
        assert_eq!(
            end.write(&shard, (fd, device, 6), 6, &[&[7u8; 4096]]),
            None,
            "a page-sized append is pwritev's"
        );
        assert!(end.unmap(6), "the length is past the data");
        assert_eq!(window_range(&end), None);
        assert!(!end.unmap(6), "and said once");
        assert_eq!(
            end.write(&shard, (fd, device, 6), 6, &[b"g"]),
            None,
            "after an unmap, the first small appends are pwritev's again"
        );
    }

    #[test]
    fn an_append_whose_pages_cannot_be_populated_goes_through_pwritev_instead_of_faulting() {
        let Some((file, fd, device, shard)) = scratch_with_room() else {
            return;
        };
        let mut end = mapping_its_next_append();
        assert_eq!(end.write(&shard, (fd, device, 0), 0, &[b"abc"]), Some(3));
        let populated = end.populated_end;
        assert_eq!(populated, (3 + POPULATE_AHEAD_BYTES).next_multiple_of(4096));
        assert_eq!(
            end.write(&shard, (fd, device, 3), 3, &[b"de"]),
            Some(2),
            "inside the populated pages"
        );
        assert_eq!(end.populated_end, populated, "nothing more populated");
        // Another writer cuts the file under the window: a copy past the populated pages
        // would raise SIGBUS, so the append is refused and the window dropped.
        set_len(fd, 5).unwrap();
        assert_eq!(
            end.write(&shard, (fd, device, populated), populated, &[b"f"]),
            None
        );
        assert_eq!(window_range(&end), None);
        assert_eq!(file.metadata().unwrap().len(), 5);
    }

    #[test]
    fn an_append_past_the_window_maps_the_next_one_without_shortening_the_file() {
        let Some((file, fd, device, shard)) = scratch_with_room() else {
            return;
        };
        let mut end = mapping_its_next_append();
        let near_end = WINDOW_BYTES - 2;
        set_len(fd, near_end).unwrap();
        assert_eq!(
            end.write(&shard, (fd, device, near_end), near_end, &[b"wxyz"]),
            Some(4)
        );
        let mut read = [0u8; 4];
        file.read_exact_at(&mut read, near_end).unwrap();
        assert_eq!(&read, b"wxyz", "an append across the old window's end");
        assert!(file.metadata().unwrap().len() >= near_end + 4);
        let pos = near_end + 4;
        assert_eq!(end.write(&shard, (fd, device, pos), pos, &[b"!"]), Some(1));
        file.read_exact_at(&mut read[..1], pos).unwrap();
        assert_eq!(&read[..1], b"!");
    }
}
