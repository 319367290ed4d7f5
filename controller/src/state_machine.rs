//! The Raft state machine: applies committed [`RecordBatch`]es to [`ClusterMetadata`],
//! publishes each result as a [`MetadataImage`], and takes and installs snapshots (`snapshot`,
//! format in `disk_format.rs`).
//!
//! [`MetadataStateMachine`] is owned by openraft's state-machine task on the controller
//! runtime (tokio thread). The latest snapshot is shared with the snapshot builder (which
//! openraft runs on the same runtime) behind a mutex.
//!
//! The state machine trusts nothing it did not check, including itself: every record the
//! active controller decided was checked against the state it applies to (`active.rs` decides
//! only on a state that holds every earlier decision), so a committed record that does not
//! apply, or a state that does not encode, is a bug. Either goes to the node's
//! [`FaultHandler`], which stops the process with a clear message: skipping the record would
//! leave this node's metadata quietly different from what was decided, and an empty snapshot
//! would be an empty cluster at the next start. A snapshot file is written to a temporary
//! file, read back and decoded before it replaces the last good one.

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
use crate::fault::FaultHandler;
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
    fault: FaultHandler,
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
    pub fn open(
        dir: &Path,
        images: watch::Sender<Arc<MetadataImage>>,
        fault: FaultHandler,
    ) -> Result<Self, DiskError> {
        let path = dir.join(SNAPSHOT_FILE);
        let mut machine = MetadataStateMachine {
            dir: dir.to_path_buf(),
            metadata: ClusterMetadata::default(),
            last_applied: None,
            membership: StoredMembership::default(),
            snapshot: Arc::new(Mutex::new(None)),
            images,
            fault,
        };
        if let Some(body) = read_envelope_file(&path, SNAPSHOT_MAGIC, SNAPSHOT_LEN_MAX)? {
            let (meta, state): (Meta, Vec<u8>) =
                decode_body(&body).map_err(|e| DiskError::corrupt(&path, e))?;
            machine
                .load(StoredSnapshot { meta, state })
                .map_err(|e| DiskError::corrupt(&path, e))?;
        }
        Ok(machine)
    }

    /// Replaces the state by a snapshot's and publishes it.
    fn load(&mut self, snapshot: StoredSnapshot) -> Result<(), FormatError> {
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

    /// Applies one committed entry. A record that does not apply is a fault (see the module
    /// comment); a fault handler that returns (a test's) leaves the state as the records
    /// before it left it.
    pub fn apply_entry(&mut self, entry: Entry) -> ApplyOutcome {
        let log_index = entry.log_id.index;
        assert!(
            self.last_applied.is_none_or(|last| last.index < log_index),
            "log entries apply once, in order: {log_index} after {:?}",
            self.last_applied
        );
        self.last_applied = Some(entry.log_id);
        match entry.payload {
            EntryPayload::Blank => {}
            EntryPayload::Normal(batch) => {
                for (at, record) in batch.records.iter().enumerate() {
                    if let Err(error) = self.metadata.apply(record, log_index) {
                        (self.fault)(&format!(
                            "committed metadata record {at} of log entry {log_index} does not apply: {error} ({record:?})"
                        ));
                        break;
                    }
                }
            }
            EntryPayload::Membership(membership) => {
                self.membership = StoredMembership::new(Some(entry.log_id), membership);
            }
        }
        ApplyOutcome { log_index }
    }

    /// The applied metadata.
    pub fn metadata(&self) -> &ClusterMetadata {
        &self.metadata
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
        let write = || write_snapshot_file(&self.dir, &self.snapshot);
        retry_while_disk_full("writing a snapshot", write)
            .await
            .map_err(write_error)?;
        *lock(&self.shared) = Some(self.snapshot.clone());
        Ok(Snapshot {
            meta: self.snapshot.meta.clone(),
            snapshot: Box::new(Cursor::new(self.snapshot.state.clone())),
        })
    }
}

/// Writes `snapshot` as the `snapshot` file, replacing the last good one only once the new
/// file has been read back whole and its state decodes.
fn write_snapshot_file(dir: &Path, snapshot: &StoredSnapshot) -> Result<(), DiskError> {
    let body = bincode::serialize(&(&snapshot.meta, &snapshot.state))
        .map_err(|e| DiskError::corrupt(&dir.join(SNAPSHOT_FILE), FormatError::Encode(e)))?;
    let verify = |path: &Path| -> Result<(), DiskError> {
        let vanished = || std::io::Error::new(std::io::ErrorKind::NotFound, "the new snapshot file vanished");
        let read = read_envelope_file(path, SNAPSHOT_MAGIC, SNAPSHOT_LEN_MAX)?;
        let body = read.ok_or_else(|| DiskError::io(path, vanished()))?;
        let (_, state): (Meta, Vec<u8>) = decode_body(&body).map_err(|e| DiskError::corrupt(path, e))?;
        decode_metadata(&state)
            .map(|_| ())
            .map_err(|e| DiskError::corrupt(path, e))
    };
    replace_file_verified(
        dir,
        SNAPSHOT_FILE,
        &encode_envelope(SNAPSHOT_MAGIC, &body),
        verify,
    )
}

/// The state's snapshot bytes. Our own state always encodes unless there is a bug: a failure
/// is a fault, never an empty snapshot written over a good one.
fn encode_state(metadata: &ClusterMetadata, fault: &FaultHandler) -> Vec<u8> {
    encoded_or_fault(encode_metadata(metadata), fault)
}

/// The bytes of an encoding; a failure goes to `fault` and leaves no bytes, which no snapshot
/// file accepts (`write_snapshot_file` decodes what it wrote before it keeps it).
fn encoded_or_fault(encoded: Result<Vec<u8>, FormatError>, fault: &FaultHandler) -> Vec<u8> {
    encoded.unwrap_or_else(|error| {
        fault(&format!(
            "the metadata state does not encode for a snapshot: {error}"
        ));
        Vec::new()
    })
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
        let state = encode_state(&self.metadata, &self.fault);
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
        let write = || write_snapshot_file(&self.dir, &snapshot);
        retry_while_disk_full("installing a snapshot", write)
            .await
            .map_err(write_error)?;
        self.load(snapshot).map_err(read_error)
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        Ok(lock(&self.snapshot).clone().map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.state)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{MetadataRecord, PartitionChangeRecord, RecordBatch, RegisterBrokerRecord};
    use laminar_model::NodeId;

    /// A fault handler that records what it was told, and returns.
    fn recording() -> (FaultHandler, Arc<Mutex<Vec<String>>>) {
        let faults = Arc::new(Mutex::new(Vec::new()));
        let kept = faults.clone();
        let handler: FaultHandler = Arc::new(move |fault: &str| kept.lock().unwrap().push(fault.to_string()));
        (handler, faults)
    }

    fn machine(dir: &Path, fault: FaultHandler) -> MetadataStateMachine {
        let (images, _) = watch::channel(Arc::new(MetadataImage::default()));
        MetadataStateMachine::open(dir, images, fault).expect("open")
    }

    fn entry(index: u64, records: Vec<MetadataRecord>) -> Entry {
        Entry {
            log_id: openraft::LogId::new(openraft::CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(RecordBatch { records }),
        }
    }

    fn register(broker_id: NodeId) -> MetadataRecord {
        MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id,
            incarnation_id: [0; 16],
            endpoints: vec![],
            rack: None,
        })
    }

    #[test]
    fn a_committed_record_that_does_not_apply_is_a_fault_not_a_skip() {
        let dir = tempfile::tempdir().unwrap();
        let (fault, faults) = recording();
        let mut machine = machine(dir.path(), fault);
        machine.apply_entry(entry(1, vec![register(NodeId::new(1))]));
        assert!(faults.lock().unwrap().is_empty());
        let unknown_topic = MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: [9; 16],
            partition_id: 0,
            replicas: None,
            isr: Some(vec![NodeId::new(1)]),
            leader: None,
        });
        machine.apply_entry(entry(2, vec![register(NodeId::new(2)), unknown_topic]));
        let faults = faults.lock().unwrap();
        assert_eq!(faults.len(), 1, "{faults:?}");
        assert!(
            faults[0].contains("record 1 of log entry 2 does not apply"),
            "{}",
            faults[0]
        );
        assert!(
            machine.metadata().brokers.contains_key(&NodeId::new(2)),
            "the records before it applied"
        );
    }

    #[test]
    fn a_state_that_does_not_encode_is_a_fault_and_the_last_good_snapshot_stays() {
        let dir = tempfile::tempdir().unwrap();
        let (fault, faults) = recording();
        let mut machine = machine(dir.path(), fault.clone());
        machine.apply_entry(entry(1, vec![register(NodeId::new(1))]));
        let good = StoredSnapshot {
            meta: Meta::default(),
            state: encode_state(machine.metadata(), &fault),
        };
        write_snapshot_file(dir.path(), &good).expect("a good snapshot is written");
        let bug = bincode::ErrorKind::Custom("a bug".into());
        let failed = encoded_or_fault(Err(FormatError::Encode(Box::new(bug))), &fault);
        assert_eq!(faults.lock().unwrap().len(), 1, "the failed encode is a fault");
        let bad = StoredSnapshot {
            meta: Meta::default(),
            state: failed,
        };
        assert!(
            write_snapshot_file(dir.path(), &bad).is_err(),
            "an empty state is never kept"
        );
        let reopened = self::machine(dir.path(), recording().0);
        assert!(
            reopened.metadata().brokers.contains_key(&NodeId::new(1)),
            "the good snapshot is still there"
        );
        assert!(!dir.path().join(format!("{SNAPSHOT_FILE}.tmp")).exists());
    }
}
