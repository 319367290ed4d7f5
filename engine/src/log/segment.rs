//! One segment: `<dir>/<20-digit base offset>.log` plus its `.index` and `.timeindex`, each
//! made when its first entry is written (decision 0023, partition files made at first write),
//! and its `.txnindex` (`txn_index.rs`, written by the log, not by the segment).
//!
//! The `.log` file is a plain concatenation of RecordBatch v2 batches exactly as stored (see
//! `batch.rs`), offsets increasing and contiguous from the base offset. Index formats are
//! documented in `index.rs` and `timeindex.rs`.

use super::batch::{BatchHeader, HEADER_LEN};
use super::index::{EntryFile, IndexEntry, IndexFile, MakeIndexFile};
use super::scan::{BatchScanner, Scanned, Verify, LOCATE_CHUNK};
use super::timeindex::TimeEntry;
use crate::io::{Storage, StorageFile};
use bytes::Bytes;
use futures::future::LocalBoxFuture;
use std::cell::Cell;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

pub const LOG_SUFFIX: &str = "log";
pub const INDEX_SUFFIX: &str = "index";
pub const TIME_INDEX_SUFFIX: &str = "timeindex";
/// The aborted-transaction index (`txn_index.rs`).
pub const TXN_INDEX_SUFFIX: &str = "txnindex";

pub fn segment_path(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}.{suffix}"))
}

/// Parses `<20 digits>.log` into its base offset.
pub fn parse_log_name(name: &str) -> Option<i64> {
    let stem = name.strip_suffix(".log")?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Mutable facts about a segment, updated after each append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentMeta {
    /// Bytes of whole batches in the `.log` file.
    pub size: u64,
    /// Offset after the last batch (= base offset when empty).
    pub next_offset: i64,
    /// Largest batch max timestamp (-1 when none): retention's age of the segment.
    pub max_timestamp: i64,
    /// When `segment.ms` starts counting: the wall clock at the segment's first append (or at
    /// the first append after a restart). Kafka counts from the first batch's own timestamp,
    /// which makes producers with old timestamps roll a segment per batch (and consumers then
    /// fetch one batch per request); Laminar counts broker time instead. `None` while unset.
    pub rolling_timestamp: Option<i64>,
    /// Bytes appended since the last offset-index entry.
    pub bytes_since_index: u64,
}

/// One segment of a partition log. Owned by one shard; not Send.
pub struct Segment<F> {
    pub base_offset: i64,
    pub log: Rc<F>,
    pub index: EntryFile<F, IndexEntry>,
    pub time_index: EntryFile<F, TimeEntry>,
    meta: Cell<SegmentMeta>,
    /// The `.log` file's blocks are reserved up to here (see [`reserve_ahead_bytes`]).
    reserved_to: Cell<u64>,
    /// How fast appends arrive, for how far ahead to reserve.
    rate: Cell<AppendRate>,
    /// Where the batch the next read is likely to ask for starts (see [`ReadHint`]).
    read_hint: Cell<Option<ReadHint>>,
}

/// The start of the batch holding `offset`: the one a read found last (`Log::locate`), or the
/// one after the batches a read sent (a consumer's next fetch starts there). A consumer
/// fetches from the same offset until it is granted bytes, and then from where the last read
/// ended, so a lookup that finds its offset here needs no index entry and no scan of the
/// segment: at 10 000 partitions
/// a fetch that granted a partition less than its first batch looked the batch up again in
/// every fetch (decision 0027, fetches over thousands of partitions). The bytes before `position` never
/// change while the
/// segment lives, except by a cut (`truncate_at`) or recovery, which both drop the hint.
#[derive(Debug, Clone, Copy)]
struct ReadHint {
    offset: i64,
    position: u64,
    /// The batch's header once read (a hint left by a read that sent up to `position` has none).
    header: Option<BatchHeader>,
}

/// A segment reserves nothing ahead until it holds this much: a tiny or idle partition holds
/// no disk but its bytes.
pub const RESERVE_FROM_BYTES: u64 = 1 << 20;
/// The least and the most disk a segment reserves ahead of its appends.
pub const RESERVE_AHEAD_MIN_BYTES: u64 = 1 << 20;
pub const RESERVE_AHEAD_MAX_BYTES: u64 = 16 << 20;
/// Appends are counted over windows of this length to tell the write rate.
pub const RATE_WINDOW_MS: i64 = 1000;
/// A segment that took no append for this long gives back its reservation
/// ([`Segment::release_reservation_if_idle`]).
pub const RESERVE_IDLE_MS: i64 = 10_000;

/// How far past an append the `.log` file's disk blocks are reserved once appends use half of
/// what was reserved (`StorageFile::reserve`), for a segment `segment_size` bytes long that took
/// `rate` bytes in the last second. ext4 then maps each new page of an append to a reserved
/// block instead of making a delayed-allocation reservation per 4 KiB block (decision 0008).
/// Nothing below [`RESERVE_FROM_BYTES`]; then the segment's length or a second of appends,
/// whichever is less, within 1–16 MiB: a busy partition reserves rarely and far ahead, a slow
/// one 1 MiB, a tiny one nothing. The log dir's budget bounds the total (`io::ReserveBudget`);
/// `sync_all` (the segment rolls, the log closes), a truncate, closing the file while idle, or
/// [`RESERVE_IDLE_MS`] without appends give back the rest.
pub fn reserve_ahead_bytes(segment_size: u64, rate: u64) -> u64 {
    if segment_size < RESERVE_FROM_BYTES {
        return 0;
    }
    segment_size
        .min(rate)
        .clamp(RESERVE_AHEAD_MIN_BYTES, RESERVE_AHEAD_MAX_BYTES)
}

/// Bytes appended to a segment per [`RATE_WINDOW_MS`]: the last whole window's and the current
/// one's. Plain data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendRate {
    window_start_ms: i64,
    window_bytes: u64,
    /// Bytes per window over the last window that ended (scaled to one window).
    last_rate: u64,
    /// When the last append came (0: none yet).
    last_append_ms: i64,
}

impl AppendRate {
    /// Counts `bytes` appended at `now_ms`.
    pub fn record(&mut self, now_ms: i64, bytes: u64) {
        if self.last_append_ms == 0 {
            self.window_start_ms = now_ms;
        }
        let elapsed = now_ms.saturating_sub(self.window_start_ms);
        if elapsed >= RATE_WINDOW_MS {
            let scaled = u128::from(self.window_bytes) * RATE_WINDOW_MS as u128 / elapsed as u128;
            self.last_rate = u64::try_from(scaled).unwrap_or(u64::MAX);
            (self.window_start_ms, self.window_bytes) = (now_ms, 0);
        }
        self.window_bytes = self.window_bytes.saturating_add(bytes);
        self.last_append_ms = now_ms.max(1);
    }

    /// Bytes per window: the larger of the last window's and what the current one took so far.
    pub fn bytes_per_window(&self) -> u64 {
        self.last_rate.max(self.window_bytes)
    }

    /// Whether no append came in the last `idle_ms` before `now_ms`.
    pub fn is_idle(&self, now_ms: i64, idle_ms: i64) -> bool {
        now_ms.saturating_sub(self.last_append_ms) >= idle_ms
    }
}

/// The index entries a run of batches adds, by the rule documented in `index.rs`.
pub struct IndexBuilder {
    pub interval: u64,
    pub offsets: Vec<IndexEntry>,
    pub times: Vec<TimeEntry>,
    last_time: i64,
    last_indexed_relative: Option<u32>,
}

impl IndexBuilder {
    pub fn new(interval: u32, last_time: Option<TimeEntry>, last: Option<IndexEntry>) -> Self {
        IndexBuilder {
            interval: interval as u64,
            offsets: Vec::new(),
            times: Vec::new(),
            last_time: last_time.map_or(-1, |t| t.timestamp),
            last_indexed_relative: last.map(|e| e.relative_offset),
        }
    }

    /// Accounts for one batch at `position` and updates `meta` (size excluded). The batch must
    /// fit the index: its offset within 32 bits of `base`, its position within 32 bits
    /// (appends roll first; batches read from disk are checked before they get here).
    pub fn add(&mut self, meta: &mut SegmentMeta, base: i64, position: u64, h: &BatchHeader) {
        let relative =
            u32::try_from(h.base_offset - base).expect("a batch offset within 32 bits of the segment's");
        let position = u32::try_from(position).expect("a batch position within 32 bits");
        meta.max_timestamp = meta.max_timestamp.max(h.max_timestamp);
        let fresh = self.last_indexed_relative.is_none_or(|r| relative > r);
        if meta.bytes_since_index >= self.interval && fresh && position > 0 {
            self.offsets.push(IndexEntry {
                relative_offset: relative,
                position,
            });
            self.last_indexed_relative = Some(relative);
            meta.bytes_since_index = 0;
            if meta.max_timestamp > self.last_time {
                let timestamp = meta.max_timestamp;
                self.times.push(TimeEntry {
                    timestamp,
                    relative_offset: relative,
                });
                self.last_time = timestamp;
            }
        }
        meta.bytes_since_index += h.total_len() as u64;
        meta.next_offset = h.next_offset();
    }
}

/// The files of one segment: its `.log`, and its two index files, open or still to be made.
pub struct SegmentFiles<F> {
    pub log: Rc<F>,
    pub index: IndexFile<F>,
    pub time_index: IndexFile<F>,
}

impl<F> Clone for SegmentFiles<F> {
    fn clone(&self) -> Self {
        SegmentFiles {
            log: self.log.clone(),
            index: self.index.clone(),
            time_index: self.time_index.clone(),
        }
    }
}

/// Opens and makes the files of one log's segments: its storage and directory. One per log
/// (owned by the log's shard), shared by its segments' index files that are not made yet.
pub struct SegmentFileMaker<S> {
    pub(super) storage: Rc<S>,
    pub(super) dir: PathBuf,
    /// A segment file retention removed is kept for the next segment (`recycle.rs`).
    pub(super) spare: Cell<bool>,
}

impl<S: Storage> SegmentFileMaker<S> {
    pub fn new(storage: Rc<S>, dir: PathBuf) -> Rc<Self> {
        Rc::new(SegmentFileMaker {
            storage,
            dir,
            spare: Cell::new(false),
        })
    }

    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// The segment's files: its `.log` (made when missing) and the index files that exist.
    pub async fn open(self: &Rc<Self>, base_offset: i64) -> io::Result<SegmentFiles<S::File>> {
        let log = self.open_log(base_offset).await?;
        Ok(SegmentFiles {
            log,
            index: self.open_index(base_offset, INDEX_SUFFIX).await?,
            time_index: self.open_index(base_offset, TIME_INDEX_SUFFIX).await?,
        })
    }

    /// A new segment's files: its `.log`, made, and its index files still to be made. Nothing
    /// looks for index files first: a new segment has none, and two opens that fail with
    /// NotFound per new partition would each count against the descriptor budget's soft limit
    /// and park other files for nothing (docs/decisions/0023, partition files made at first write).
    pub async fn create(self: &Rc<Self>, base_offset: i64) -> io::Result<SegmentFiles<S::File>> {
        let log = match self.reuse_spare(base_offset).await? {
            Some(log) => log,
            None => self.open_log(base_offset).await?,
        };
        Ok(SegmentFiles {
            log,
            index: self.not_made(base_offset, INDEX_SUFFIX),
            time_index: self.not_made(base_offset, TIME_INDEX_SUFFIX),
        })
    }

    async fn open_log(&self, base_offset: i64) -> io::Result<Rc<S::File>> {
        let path = segment_path(&self.dir, base_offset, LOG_SUFFIX);
        self.storage.open(&path, true).await
    }

    fn not_made(self: &Rc<Self>, base_offset: i64, suffix: &'static str) -> IndexFile<S::File> {
        IndexFile::NotMade {
            maker: self.clone(),
            base_offset,
            suffix,
        }
    }

    async fn open_index(
        self: &Rc<Self>,
        base_offset: i64,
        suffix: &'static str,
    ) -> io::Result<IndexFile<S::File>> {
        let path = segment_path(&self.dir, base_offset, suffix);
        match self.storage.open(&path, false).await {
            Ok(file) => Ok(IndexFile::Open(file)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(self.not_made(base_offset, suffix)),
            Err(e) => Err(e),
        }
    }
}

impl<S: Storage> MakeIndexFile<S::File> for SegmentFileMaker<S> {
    fn make(&self, base_offset: i64, suffix: &'static str) -> LocalBoxFuture<'_, io::Result<Rc<S::File>>> {
        Box::pin(async move {
            let path = segment_path(&self.dir, base_offset, suffix);
            self.storage.open(&path, true).await
        })
    }
}

impl<F: StorageFile> Segment<F> {
    pub fn new(
        base_offset: i64,
        files: SegmentFiles<F>,
        index: Vec<IndexEntry>,
        times: Vec<TimeEntry>,
        meta: SegmentMeta,
    ) -> Self {
        Segment {
            base_offset,
            log: files.log,
            index: EntryFile::new(files.index, index),
            time_index: EntryFile::new(files.time_index, times),
            meta: Cell::new(meta),
            reserved_to: Cell::new(0),
            rate: Cell::new(AppendRate::default()),
            read_hint: Cell::new(None),
        }
    }

    pub fn empty_meta(base_offset: i64) -> SegmentMeta {
        SegmentMeta {
            size: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            rolling_timestamp: None,
            bytes_since_index: 0,
        }
    }

    pub fn meta(&self) -> SegmentMeta {
        self.meta.get()
    }

    /// The segment as its files hold it: its length and the index entries written to them (all
    /// fdatasync'd when the log is clean; see `disk_state.rs`).
    pub fn synced_prefix(&self) -> super::disk_state::SyncedPrefix {
        super::disk_state::SyncedPrefix {
            base_offset: self.base_offset,
            log_len: self.meta.get().size,
            offset_entries: u32::try_from(self.index.written()).expect("fewer entries than u32"),
            time_entries: u32::try_from(self.time_index.written()).expect("fewer entries than u32"),
        }
    }

    /// Sets the segment's extent after a cut or recovery, which may move batch boundaries: the
    /// read hint goes with it.
    pub fn set_meta(&self, meta: SegmentMeta) {
        self.read_hint.set(None);
        self.meta.set(meta);
    }

    /// Appends whole, already patched batches, given as consecutive byte `parts`; `headers` are
    /// their headers in order. All or nothing: when a write fails, what it left is cut off again
    /// and the segment is as before (see [`Segment::undo_append`]).
    pub async fn append(
        &self,
        parts: &[&[u8]],
        headers: &[BatchHeader],
        interval: u32,
        now_ms: i64,
    ) -> io::Result<()> {
        let before = self.meta.get();
        let mut meta = before;
        let mut builder = IndexBuilder::new(interval, self.time_index.last(), self.index.last());
        let mut position = meta.size;
        for h in headers {
            builder.add(&mut meta, self.base_offset, position, h);
            position += h.total_len() as u64;
        }
        assert_eq!(
            position - meta.size,
            parts.iter().map(|p| p.len() as u64).sum::<u64>(),
            "headers describe the data"
        );
        if meta.rolling_timestamp.is_none() {
            meta.rolling_timestamp = Some(now_ms);
        }
        let mut rate = self.rate.get();
        rate.record(now_ms, position - meta.size);
        self.rate.set(rate);
        let ahead = reserve_ahead_bytes(position, rate.bytes_per_window());
        // Asked again once half of it is used: pre-written blocks (`io::prewrite`) take time
        // to write, and appends reaching blocks still being written wait for them.
        if ahead > 0 && position + ahead / 2 > self.reserved_to.get() {
            self.reserved_to.set(position + ahead);
            self.log.reserve(self.reserved_to.get());
        }
        if let Err(error) = self.write_appended(meta.size, parts, &builder).await {
            self.undo_append(before).await?;
            return Err(error);
        }
        meta.size = position;
        self.meta.set(meta);
        Ok(())
    }

    async fn write_appended(&self, at: u64, parts: &[&[u8]], builder: &IndexBuilder) -> io::Result<()> {
        self.log.write_at(at, parts).await?;
        self.index.append(&builder.offsets).await?;
        self.time_index.append(&builder.times).await
    }

    /// Cuts off what a failed append left: bytes past the last whole batch (a write that found
    /// the disk full may have written part of its data) and index entries for batches that are
    /// not there. A retry then writes where the failed append began, and a crash meanwhile finds
    /// nothing of it. Fails only if the truncation itself fails.
    async fn undo_append(&self, before: SegmentMeta) -> io::Result<()> {
        // The rest of the metadata was never updated.
        self.truncate_at(before.size, before.next_offset).await
    }

    /// Writes the index entries not yet in their files (before [`Segment::sync_all`], so that a
    /// write refused for lack of space can be told from a failed fdatasync).
    pub async fn write_indexes(&self) -> io::Result<()> {
        self.index.write_pending().await?;
        self.time_index.write_pending().await
    }

    /// Position and header of the batch holding `offset`, if this segment has it.
    pub async fn find_batch(&self, offset: i64) -> io::Result<Option<(u64, BatchHeader)>> {
        let meta = self.meta.get();
        if offset < self.base_offset || offset >= meta.next_offset {
            return Ok(None);
        }
        if let Some(hinted) = self.hinted_batch(offset).await? {
            return Ok(Some(hinted));
        }
        let relative = (offset - self.base_offset) as u32;
        // The first batch starts the segment: a consumer from the beginning opens no index.
        let start = match relative {
            0 => 0,
            _ => {
                self.index.load().await?;
                let entry = self.index.last_where(|e| e.relative_offset <= relative);
                entry.map_or(0, |e| e.position as u64)
            }
        };
        self.scan_until(start, |h| h.last_offset() >= offset).await
    }

    /// The batch holding `offset` from the read hint, if the hint is for `offset` and the
    /// batch it names holds it (else the caller looks it up).
    async fn hinted_batch(&self, offset: i64) -> io::Result<Option<(u64, BatchHeader)>> {
        let Some(hint) = self.read_hint.get().filter(|hint| hint.offset == offset) else {
            return Ok(None);
        };
        let header = match hint.header {
            Some(header) => header,
            None => match BatchHeader::parse(&self.log.read_at(hint.position, HEADER_LEN).await?) {
                Ok(header) => header,
                Err(_) => return Ok(None), // the scan from the index reports what is wrong
            },
        };
        if header.last_offset() < offset {
            return Ok(None);
        }
        self.read_hint.set(Some(ReadHint {
            header: Some(header),
            ..hint
        }));
        Ok(Some((hint.position, header)))
    }

    /// Notes that a read of `offset` found its batch at `position`: the read may send nothing
    /// (granted less than the batch), and the consumer then asks for `offset` again. Only
    /// reads note what they found, so that other lookups (of the high watermark's batch, for
    /// one) do not take the hint from them.
    pub fn note_read_found(&self, offset: i64, position: u64, header: BatchHeader) {
        let header = Some(header);
        self.read_hint.set(Some(ReadHint {
            offset,
            position,
            header,
        }));
    }

    /// Notes that a read sent the batches up to `position`, which end before `next_offset`:
    /// the next read of this segment is likely to start there.
    pub fn note_read_end(&self, position: u64, next_offset: i64) {
        let offset = next_offset;
        self.read_hint.set(Some(ReadHint {
            offset,
            position,
            header: None,
        }));
    }

    /// First batch (position, header) with max timestamp >= `ts`, if any.
    pub async fn find_timestamp(&self, ts: i64) -> io::Result<Option<(u64, BatchHeader)>> {
        if self.meta.get().max_timestamp < ts {
            return Ok(None);
        }
        self.time_index.load().await?;
        self.index.load().await?;
        let start = match self.time_index.last_where(|t| t.timestamp < ts) {
            None => 0,
            Some(t) => self
                .index
                .last_where(|e| e.relative_offset <= t.relative_offset)
                .map_or(0, |e| e.position as u64),
        };
        self.scan_until(start, |h| h.max_timestamp >= ts).await
    }

    async fn scan_until(
        &self,
        start: u64,
        found: impl Fn(&BatchHeader) -> bool,
    ) -> io::Result<Option<(u64, BatchHeader)>> {
        let mut scanner = BatchScanner::new(&*self.log, start, self.meta.get().size, Verify::HeadersOnly)
            .with_chunk(LOCATE_CHUNK);
        loop {
            match scanner.next().await? {
                Scanned::Batch { position, header, .. } if found(&header) => {
                    return Ok(Some((position, header)))
                }
                Scanned::Batch { .. } => continue,
                Scanned::End => return Ok(None),
                Scanned::Invalid { position, error } => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("segment {} corrupt at {position}: {error}", self.base_offset),
                    ))
                }
            }
        }
    }

    /// Whole batches from `position`: as many as fit in `max_bytes`, and at least one when
    /// `min_one_batch`.
    pub async fn read_batches(
        &self,
        position: u64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> io::Result<Vec<Bytes>> {
        let size = self.meta.get().size;
        let want = (max_bytes as u64).min(size - position) as usize;
        let data = self.log.read_at(position, want).await?;
        let mut out = Vec::new();
        let mut at = 0;
        while let Ok(header) = BatchHeader::parse(&data[at..]) {
            let total = header.total_len();
            if at + total > data.len() {
                break;
            }
            out.push(data.slice(at..at + total));
            at += total;
        }
        if out.is_empty() && min_one_batch && position < size {
            let head = self.log.read_at(position, HEADER_LEN).await?;
            let header = BatchHeader::parse(&head).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad batch at {position}: {e}"),
                )
            })?;
            let whole = self.log.read_at(position, header.total_len()).await?;
            if whole.len() == header.total_len() {
                out.push(whole);
            }
        }
        Ok(out)
    }

    /// Cuts the segment at `position` (a batch boundary) whose first offset is `next_offset`.
    pub async fn truncate_at(&self, position: u64, next_offset: i64) -> io::Result<()> {
        let relative = (next_offset - self.base_offset) as u32;
        self.index.truncate_from(relative).await?;
        self.time_index.truncate_from(relative).await?;
        self.log.truncate(position).await?;
        self.reserved_to.set(position); // the truncate gave back the blocks past it
        let mut meta = self.meta.get();
        meta.size = position;
        meta.next_offset = next_offset;
        self.set_meta(meta);
        Ok(())
    }

    /// Makes the index entries made so far durable, while the segment goes on taking appends
    /// (the `.log` file is the caller's to sync).
    pub async fn sync_indexes(&self) -> io::Result<()> {
        self.write_indexes().await?;
        self.index.sync().await?;
        self.time_index.sync().await
    }

    /// Makes the segment durable when it stops taking appends (it rolls, the log closes, a
    /// compacted copy is complete), giving back the blocks reserved past its end. The truncate
    /// to the current length also frees what a reservation left past it before a crash.
    pub async fn sync_all(&self) -> io::Result<()> {
        let size = self.meta.get().size;
        self.log.truncate(size).await?;
        self.reserved_to.set(size);
        self.log.fdatasync().await?;
        self.index.sync().await?;
        self.time_index.sync().await
    }

    /// Gives the index files' descriptors back until their next use: an append adds entries
    /// in memory and a lookup finds them there, so a synced index file is read only when its
    /// entries were released, and written at the next checkpoint.
    pub async fn close_indexes_until_used(&self) {
        self.index.close_until_used().await;
        self.time_index.close_until_used().await;
    }

    /// Says the index files, just created empty, need no fdatasync until written (their
    /// creation is covered by the caller's directory fsync).
    pub fn assume_new_indexes_synced(&self) {
        self.index.assume_synced();
        self.time_index.assume_synced();
    }

    /// Whether either index holds entries in memory (see `release_unused_indexes`).
    pub fn holds_index_entries(&self) -> bool {
        self.index.holds_entries() || self.time_index.holds_entries()
    }

    /// Drops from memory the index entries no lookup or append used since the last call
    /// (see `index::EntryFile::release_if_unused`); returns how many of its two indexes did.
    pub fn release_unused_indexes(&self) -> usize {
        usize::from(self.index.release_if_unused()) + usize::from(self.time_index.release_if_unused())
    }

    /// Gives back the blocks reserved ahead of the `.log` file's appends when none came for
    /// `RESERVE_IDLE_MS` before `now_ms`; returns whether it did. An idle partition holds no
    /// disk but its bytes.
    pub async fn release_reservation_if_idle(&self, now_ms: i64) -> io::Result<bool> {
        if self.log.reserved_bytes() == 0 || !self.rate.get().is_idle(now_ms, RESERVE_IDLE_MS) {
            return Ok(false);
        }
        let size = self.meta.get().size;
        self.log.truncate(size).await?;
        self.reserved_to.set(size);
        Ok(true)
    }

    pub async fn close(&self) -> io::Result<()> {
        self.log.close().await?;
        self.index.close().await?;
        self.time_index.close().await
    }

    pub async fn remove_files<S: Storage<File = F>>(&self, storage: &S, dir: &Path) -> io::Result<()> {
        remove_segment_files(storage, dir, self.base_offset).await
    }
}

/// Removes the files of the segment at `base_offset` (those that exist).
pub async fn remove_segment_files<S: Storage>(storage: &S, dir: &Path, base_offset: i64) -> io::Result<()> {
    for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX] {
        let path = segment_path(dir, base_offset, suffix);
        match storage.remove_file(&path).await {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reservation_grows_with_the_segment_and_the_rate_within_bounds() {
        let fast = 100 << 20;
        assert_eq!(
            reserve_ahead_bytes(0, fast),
            0,
            "an empty segment reserves nothing"
        );
        assert_eq!(reserve_ahead_bytes(300 << 10, fast), 0, "nor a tiny one");
        assert_eq!(reserve_ahead_bytes(1 << 20, fast), RESERVE_AHEAD_MIN_BYTES);
        assert_eq!(reserve_ahead_bytes(5 << 20, fast), 5 << 20);
        assert_eq!(reserve_ahead_bytes(1 << 30, fast), RESERVE_AHEAD_MAX_BYTES);
        assert_eq!(
            reserve_ahead_bytes(1 << 30, 3 << 20),
            3 << 20,
            "a second of appends"
        );
        assert_eq!(
            reserve_ahead_bytes(1 << 30, 10),
            RESERVE_AHEAD_MIN_BYTES,
            "a slow one"
        );
    }

    #[test]
    fn the_append_rate_is_counted_per_second() {
        let mut rate = AppendRate::default();
        rate.record(10_000, 100);
        rate.record(10_500, 300);
        assert_eq!(rate.bytes_per_window(), 400, "the current window so far");
        rate.record(12_000, 50);
        assert_eq!(rate.bytes_per_window(), 200, "400 bytes over 2 s");
        assert!(!rate.is_idle(12_000 + RESERVE_IDLE_MS - 1, RESERVE_IDLE_MS));
        assert!(rate.is_idle(12_000 + RESERVE_IDLE_MS, RESERVE_IDLE_MS));
        rate.record(60_000, 7);
        assert_eq!(
            rate.bytes_per_window(),
            7,
            "a burst after a long pause starts over"
        );
    }
}
