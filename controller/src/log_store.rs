//! The Raft log on disk (`raft-log`) with the vote and committed id (`raft-state`); the
//! formats are in `disk_format.rs`.
//!
//! [`LogStore`] is owned by openraft's core task on the controller runtime (tokio thread); its
//! readers (replication tasks on the same runtime) share the state behind a mutex held only
//! for in-memory work or one file write. The entries not yet purged are also kept in memory:
//! they are bounded by the snapshot policy (a snapshot every `entries_since_snapshot_max`
//! entries, then a purge of the log before it).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{RaftLogReader, StorageError, StorageIOError, Vote};

use crate::disk_format::*;
use crate::TypeConfig;

struct LogFile {
    dir: PathBuf,
    file: File,
    /// The byte position where each entry's frame starts, for truncation.
    positions: BTreeMap<u64, u64>,
    entries: BTreeMap<u64, Entry>,
    end_position: u64,
    purged: Option<LogId>,
    state: RaftStateFile,
}

/// The log storage openraft drives. Clones share one file.
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<LogFile>>,
}

fn io_error(e: impl Into<std::io::Error>) -> StorageError<u64> {
    StorageIOError::write_logs(&e.into()).into()
}

impl LogStore {
    /// Opens (or creates) the log under `dir`, truncating a torn tail.
    pub fn open(dir: &Path) -> Result<Self, DiskError> {
        std::fs::create_dir_all(dir).map_err(|e| DiskError::io(dir, e))?;
        let state = match read_envelope_file(&dir.join(STATE_FILE), STATE_MAGIC, SMALL_BODY_LEN_MAX)? {
            Some(body) => decode_body(&body).map_err(|e| DiskError::corrupt(&dir.join(STATE_FILE), e))?,
            None => RaftStateFile::default(),
        };
        let path = dir.join(LOG_FILE);
        if !path.exists() {
            write_log_file(dir, None, std::iter::empty())?;
        }
        let bytes = std::fs::read(&path).map_err(|e| DiskError::io(&path, e))?;
        let (header_body, header_len) = decode_envelope(&bytes, LOG_MAGIC, SMALL_BODY_LEN_MAX)
            .map_err(|e| DiskError::corrupt(&path, e))?;
        let purged: Option<LogId> = decode_body(header_body).map_err(|e| DiskError::corrupt(&path, e))?;
        let mut log = LogFile {
            dir: dir.to_path_buf(),
            file: OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| DiskError::io(&path, e))?,
            positions: BTreeMap::new(),
            entries: BTreeMap::new(),
            end_position: header_len as u64,
            purged,
            state,
        };
        log.read_entries(&bytes, header_len)?;
        Ok(LogStore {
            inner: Arc::new(Mutex::new(log)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, LogFile> {
        // A poisoned lock means a panic while holding it, a bug: carry on with the data.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl LogFile {
    /// Loads the frames after the header; truncates the file at the first invalid one.
    fn read_entries(&mut self, bytes: &[u8], header_len: usize) -> Result<(), DiskError> {
        let mut position = header_len;
        let mut expected_index = self.purged.map(|id| id.index + 1);
        while position < bytes.len() {
            let rest = bytes.get(position..).unwrap_or_default();
            let (entry, frame_len) = match decode_entry(rest) {
                Ok(decoded) => decoded,
                Err(reason) => {
                    tracing::warn!(position, %reason, "controller log: truncating an invalid tail");
                    break;
                }
            };
            let index = entry.log_id.index;
            if expected_index.is_some_and(|expected| index != expected) {
                tracing::warn!(
                    position,
                    index,
                    "controller log: entry out of sequence, truncating"
                );
                break;
            }
            expected_index = Some(index + 1);
            self.positions.insert(index, position as u64);
            self.entries.insert(index, entry);
            position += frame_len;
        }
        self.end_position = position as u64;
        if position < bytes.len() {
            self.truncate_file_at(position as u64)?;
        }
        Ok(())
    }

    fn truncate_file_at(&mut self, position: u64) -> Result<(), DiskError> {
        let path = self.dir.join(LOG_FILE);
        self.file.set_len(position).map_err(|e| DiskError::io(&path, e))?;
        self.file.sync_all().map_err(|e| DiskError::io(&path, e))?;
        self.end_position = position;
        Ok(())
    }

    fn append(&mut self, entries: Vec<Entry>) -> Result<(), DiskError> {
        let path = self.dir.join(LOG_FILE);
        let mut bytes = Vec::new();
        let mut positions = Vec::with_capacity(entries.len());
        for entry in &entries {
            positions.push((entry.log_id.index, self.end_position + bytes.len() as u64));
            bytes.extend(encode_entry(entry).map_err(|e| DiskError::corrupt(&path, e))?);
        }
        self.file
            .seek(SeekFrom::Start(self.end_position))
            .map_err(|e| DiskError::io(&path, e))?;
        self.file.write_all(&bytes).map_err(|e| DiskError::io(&path, e))?;
        self.file.sync_data().map_err(|e| DiskError::io(&path, e))?;
        self.end_position += bytes.len() as u64;
        self.positions.extend(positions);
        self.entries
            .extend(entries.into_iter().map(|e| (e.log_id.index, e)));
        Ok(())
    }

    fn truncate_from(&mut self, index: u64) -> Result<(), DiskError> {
        let Some(&position) = self.positions.get(&index) else {
            return Ok(());
        };
        self.truncate_file_at(position)?;
        self.positions.split_off(&index);
        self.entries.split_off(&index);
        Ok(())
    }

    fn purge_upto(&mut self, log_id: LogId) -> Result<(), DiskError> {
        let kept_entries = self.entries.split_off(&(log_id.index + 1));
        self.entries = kept_entries;
        self.positions = write_log_file(&self.dir, Some(log_id), self.entries.values())?;
        self.end_position = std::fs::metadata(self.dir.join(LOG_FILE))
            .map(|m| m.len())
            .unwrap_or(0);
        let path = self.dir.join(LOG_FILE);
        self.file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| DiskError::io(&path, e))?;
        self.purged = Some(log_id);
        Ok(())
    }

    fn save_state(&mut self, state: RaftStateFile) -> Result<(), DiskError> {
        let body =
            bincode::serialize(&state).map_err(|e| DiskError::corrupt(&self.dir, FormatError::Encode(e)))?;
        replace_file(&self.dir, STATE_FILE, &encode_envelope(STATE_MAGIC, &body))?;
        self.state = state;
        Ok(())
    }
}

/// Writes a whole log file (header with `purged`, then `entries`) atomically; returns where
/// each entry's frame starts.
fn write_log_file<'a>(
    dir: &Path,
    purged: Option<LogId>,
    entries: impl Iterator<Item = &'a Entry>,
) -> Result<BTreeMap<u64, u64>, DiskError> {
    let path = dir.join(LOG_FILE);
    let header =
        bincode::serialize(&purged).map_err(|e| DiskError::corrupt(&path, FormatError::Encode(e)))?;
    let mut bytes = encode_envelope(LOG_MAGIC, &header);
    let mut positions = BTreeMap::new();
    for entry in entries {
        positions.insert(entry.log_id.index, bytes.len() as u64);
        bytes.extend(encode_entry(entry).map_err(|e| DiskError::corrupt(&path, e))?);
    }
    replace_file(dir, LOG_FILE, &bytes)?;
    Ok(positions)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<u64>> {
        let log = self.lock();
        let start = range.start_bound().cloned();
        let end = range.end_bound().cloned();
        if matches!((start, end), (Bound::Included(s), Bound::Excluded(e)) if s >= e) {
            return Ok(Vec::new());
        }
        Ok(log.entries.range((start, end)).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<u64>> {
        let log = self.lock();
        let last = log.entries.values().next_back().map(|e| e.log_id).or(log.purged);
        Ok(LogState {
            last_purged_log_id: log.purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError<u64>> {
        let save = || {
            let mut log = self.lock();
            let state = RaftStateFile {
                vote: Some(*vote),
                ..log.state.clone()
            };
            log.save_state(state)
        };
        retry_while_disk_full("saving the vote", save)
            .await
            .map_err(|e| StorageIOError::write_vote(&std::io::Error::from(e)).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError<u64>> {
        Ok(self.lock().state.vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError<u64>> {
        let save = || {
            let mut log = self.lock();
            let state = RaftStateFile {
                committed,
                ..log.state.clone()
            };
            log.save_state(state)
        };
        retry_while_disk_full("saving the commit index", save)
            .await
            .map_err(io_error)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError<u64>> {
        Ok(self.lock().state.committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let result = retry_while_disk_full("appending entries", || self.lock().append(entries.clone())).await;
        match result {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let e = std::io::Error::from(e);
                let storage_error = StorageIOError::write_logs(&e).into();
                callback.log_io_completed(Err(e));
                Err(storage_error)
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError<u64>> {
        retry_while_disk_full("truncating", || self.lock().truncate_from(log_id.index))
            .await
            .map_err(io_error)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError<u64>> {
        retry_while_disk_full("purging", || self.lock().purge_upto(log_id))
            .await
            .map_err(io_error)
    }
}
