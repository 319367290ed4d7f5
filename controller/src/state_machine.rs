//! The Raft state machine: applies committed [`RecordBatch`]es to [`ClusterMetadata`],
//! publishes each result as a [`MetadataImage`], and takes and installs snapshots (`snapshot`,
//! format in `disk_format.rs`).
//!
//! [`MetadataStateMachine`] is owned by openraft's state-machine task on the controller
//! runtime (tokio thread). The latest snapshot is shared with the snapshot builder (which
//! openraft runs on the same runtime) behind a mutex.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, EntryPayload, RaftSnapshotBuilder, SnapshotMeta, StorageError, StorageIOError,
    StoredMembership,
};
use tokio::sync::watch;

use crate::disk_format::*;
use crate::metadata::{ClusterMetadata, MetadataImage};
use crate::records::ApplyOutcome;
use crate::snapshot_format::{decode_metadata, encode_metadata};
use crate::TypeConfig;

type Meta = SnapshotMeta<u64, BasicNode>;

/// The last snapshot taken or installed: its meta and the encoded `ClusterMetadata`.
#[derive(Clone)]
struct StoredSnapshot {
    meta: Meta,
    state: Vec<u8>,
}

pub struct MetadataStateMachine {
    dir: PathBuf,
    metadata: ClusterMetadata,
    last_applied: Option<LogId>,
    membership: StoredMembership<u64, BasicNode>,
    snapshot: Arc<Mutex<Option<StoredSnapshot>>>,
    /// Bounded by construction: a watch holds only the latest image.
    images: watch::Sender<Arc<MetadataImage>>,
}

fn lock(snapshot: &Mutex<Option<StoredSnapshot>>) -> MutexGuard<'_, Option<StoredSnapshot>> {
    snapshot.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn read_error(e: impl ToString) -> StorageError<u64> {
    StorageIOError::read_snapshot(None, &std::io::Error::other(e.to_string())).into()
}

fn write_error(e: impl ToString) -> StorageError<u64> {
    StorageIOError::write_snapshot(None, &std::io::Error::other(e.to_string())).into()
}

impl MetadataStateMachine {
    /// Opens the state machine under `dir`: the state of the last snapshot, if any. Entries
    /// after it are applied again by openraft from the log.
    pub fn open(dir: &Path, images: watch::Sender<Arc<MetadataImage>>) -> Result<Self, DiskError> {
        let path = dir.join(SNAPSHOT_FILE);
        let mut machine = MetadataStateMachine {
            dir: dir.to_path_buf(),
            metadata: ClusterMetadata::default(),
            last_applied: None,
            membership: StoredMembership::default(),
            snapshot: Arc::new(Mutex::new(None)),
            images,
        };
        if let Some(body) = read_envelope_file(&path, SNAPSHOT_MAGIC, SNAPSHOT_LEN_MAX)? {
            let (meta, state): (Meta, Vec<u8>) =
                decode_body(&body).map_err(|r| DiskError::corrupt(&path, r))?;
            machine
                .load(StoredSnapshot { meta, state })
                .map_err(|r| DiskError::corrupt(&path, r))?;
        }
        Ok(machine)
    }

    /// Replaces the state by a snapshot's and publishes it.
    fn load(&mut self, snapshot: StoredSnapshot) -> Result<(), String> {
        self.metadata = decode_metadata(&snapshot.state)?;
        self.last_applied = snapshot.meta.last_log_id;
        self.membership = snapshot.meta.last_membership.clone();
        *lock(&self.snapshot) = Some(snapshot);
        self.publish();
        Ok(())
    }

    fn publish(&self) {
        let image = MetadataImage {
            metadata: self.metadata.clone(),
            version: self.last_applied.map_or(0, |id| id.index),
        };
        self.images.send_replace(Arc::new(image));
    }

    fn apply_entry(&mut self, entry: Entry) -> ApplyOutcome {
        let log_index = entry.log_id.index;
        self.last_applied = Some(entry.log_id);
        let mut outcome = ApplyOutcome {
            log_index,
            records_skipped: 0,
        };
        match entry.payload {
            EntryPayload::Blank => {}
            EntryPayload::Normal(batch) => {
                for record in &batch.records {
                    if let Err(e) = self.metadata.apply(record, log_index) {
                        tracing::debug!(log_index, error = %e, "controller: record skipped");
                        outcome.records_skipped += 1;
                    }
                }
            }
            EntryPayload::Membership(membership) => {
                self.membership = StoredMembership::new(Some(entry.log_id), membership);
            }
        }
        outcome
    }
}

/// Builds a snapshot from a copy of the state taken when openraft asked for the builder.
pub struct SnapshotBuilder {
    dir: PathBuf,
    snapshot: StoredSnapshot,
    shared: Arc<Mutex<Option<StoredSnapshot>>>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        write_snapshot_file(&self.dir, &self.snapshot).map_err(write_error)?;
        *lock(&self.shared) = Some(self.snapshot.clone());
        Ok(Snapshot {
            meta: self.snapshot.meta.clone(),
            snapshot: Box::new(Cursor::new(self.snapshot.state.clone())),
        })
    }
}

fn write_snapshot_file(dir: &Path, snapshot: &StoredSnapshot) -> Result<(), String> {
    let body = bincode::serialize(&(&snapshot.meta, &snapshot.state)).map_err(|e| e.to_string())?;
    replace_file(dir, SNAPSHOT_FILE, &encode_envelope(SNAPSHOT_MAGIC, &body)).map_err(|e| e.to_string())
}

impl RaftStateMachine<TypeConfig> for MetadataStateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<ApplyOutcome>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let outcomes: Vec<ApplyOutcome> = entries.into_iter().map(|e| self.apply_entry(e)).collect();
        self.publish();
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        let last_log_id = self.last_applied;
        let snapshot_id = last_log_id.map_or_else(
            || "empty".to_string(),
            |id| format!("{}-{}", id.leader_id, id.index),
        );
        // An encoding failure of our own in-memory state would be a bug; an empty state makes
        // the snapshot fail to decode at install instead of panicking here.
        let state = encode_metadata(&self.metadata).unwrap_or_default();
        SnapshotBuilder {
            dir: self.dir.clone(),
            snapshot: StoredSnapshot {
                meta: SnapshotMeta {
                    last_log_id,
                    last_membership: self.membership.clone(),
                    snapshot_id,
                },
                state,
            },
            shared: self.snapshot.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let snapshot = StoredSnapshot {
            meta: meta.clone(),
            state: snapshot.into_inner(),
        };
        if snapshot.state.len() as u64 > SNAPSHOT_LEN_MAX {
            return Err(read_error("snapshot over the size bound"));
        }
        // Decode before writing: a snapshot that does not decode must not replace a good one.
        decode_metadata(&snapshot.state).map_err(read_error)?;
        write_snapshot_file(&self.dir, &snapshot).map_err(write_error)?;
        self.load(snapshot).map_err(read_error)
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        Ok(lock(&self.snapshot).clone().map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.state)),
        }))
    }
}
