//! The partitions one shard owns, opened on first use and closed on shutdown.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::io::{FileCacheStats, ShardStorage, Storage, WriteBehindStats};
use crate::log::segment::parse_log_name;
use crate::partition::{LogConfig, LogError, Partition, SyncObserver};

/// Partitions a shard closes at once on shutdown (each waits for its own fdatasyncs; the disk
/// takes them together).
pub const CLOSE_CONCURRENCY: usize = 32;

/// A partition replica's name: topic and index.
pub type PartitionKey = (String, i32);

/// The open partitions of one shard. Owned by one shard; not Send.
pub struct ShardPartitions {
    log_dir: PathBuf,
    storage: Rc<ShardStorage>,
    open: RefCell<HashMap<PartitionKey, Rc<Partition>>>,
    /// Handed to every partition this shard opens (fdatasync timing for metrics).
    sync_observer: RefCell<Option<SyncObserver>>,
    /// Serialises opens and removals, so that two requests never open one partition twice.
    lifecycle: futures::lock::Mutex<()>,
}

/// `<log.dirs>/<topic>-<partition>`, Kafka's directory name for a partition.
pub fn partition_dir(log_dir: &Path, topic: &str, partition: i32) -> PathBuf {
    log_dir.join(format!("{topic}-{partition}"))
}

impl ShardPartitions {
    pub fn new(log_dir: PathBuf, storage: Rc<ShardStorage>) -> Self {
        Self {
            log_dir,
            storage,
            open: RefCell::default(),
            sync_observer: RefCell::new(None),
            lifecycle: futures::lock::Mutex::new(()),
        }
    }

    /// Every partition opened from now on reports its fdatasync durations to `observer`.
    pub fn observe_syncs(&self, observer: SyncObserver) {
        *self.sync_observer.borrow_mut() = Some(observer);
    }

    /// This shard's write-behind counters; `None` when write-behind is off.
    pub fn write_behind_stats(&self) -> Option<WriteBehindStats> {
        self.storage.inner().write_behind_stats()
    }

    /// This shard's open and parked files (see `io::FileCache`).
    pub fn file_cache_stats(&self) -> FileCacheStats {
        self.storage.stats()
    }

    /// Gives back idle descriptors above this shard's fair share each time another shard finds
    /// the budget full; never returns. Run it as one task per shard.
    pub async fn answer_descriptor_pressure(&self) {
        self.storage.answer_pressure().await;
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<Rc<Partition>> {
        self.open.borrow().get(&(topic.to_string(), partition)).cloned()
    }

    /// Returns the open partition, opening (and recovering) it with `config` if needed.
    pub async fn get_or_open(
        &self,
        topic: &str,
        partition: i32,
        config: impl FnOnce() -> LogConfig,
    ) -> Result<Rc<Partition>, LogError> {
        if let Some(open) = self.get(topic, partition) {
            return Ok(open);
        }
        let _lifecycle = self.lifecycle.lock().await;
        if let Some(open) = self.get(topic, partition) {
            return Ok(open);
        }
        let dir = partition_dir(&self.log_dir, topic, partition);
        let opened = Partition::open(self.storage.clone(), dir, config()).await;
        let opened = Rc::new(opened?);
        if let Some(observer) = self.sync_observer.borrow().clone() {
            opened.observe_syncs(observer);
        }
        self.open
            .borrow_mut()
            .insert((topic.to_string(), partition), opened.clone());
        Ok(opened)
    }

    /// How many segments the partition's directory holds, read from the directory without
    /// opening the partition (0 when there is no directory). Retention needs to open only a
    /// partition with more than one: it never deletes the active segment.
    pub async fn segments_on_disk(&self, topic: &str, partition: i32) -> Result<usize, LogError> {
        let dir = partition_dir(&self.log_dir, topic, partition);
        match self.storage.list_dir(&dir).await {
            Ok(names) => Ok(names.iter().filter(|n| parse_log_name(n).is_some()).count()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    /// Closes and deletes a partition's files, whether or not it was open.
    pub async fn remove(&self, topic: &str, partition: i32) -> Result<(), LogError> {
        let _lifecycle = self.lifecycle.lock().await;
        let removed = self.open.borrow_mut().remove(&(topic.to_string(), partition));
        match removed {
            Some(open) => open.delete().await,
            None => {
                let dir = partition_dir(&self.log_dir, topic, partition);
                if self.storage.exists(&dir).await? {
                    self.storage.remove_dir_all(&dir).await?;
                }
                Ok(())
            }
        }
    }

    /// Every open partition, for retention, flushing and metrics.
    pub fn all(&self) -> Vec<(PartitionKey, Rc<Partition>)> {
        self.open
            .borrow()
            .iter()
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect()
    }

    /// Flushes and closes every partition (clean-shutdown marker); returns the failures.
    /// [`CLOSE_CONCURRENCY`] at a time, so that their fdatasyncs overlap.
    pub async fn close_all(&self) -> Vec<(PartitionKey, LogError)> {
        use futures::StreamExt;
        let _lifecycle = self.lifecycle.lock().await;
        let open: Vec<_> = self.open.borrow_mut().drain().collect();
        futures::stream::iter(open)
            .map(|(key, partition)| async move { (key, partition.close().await) })
            .buffer_unordered(CLOSE_CONCURRENCY)
            .filter_map(|(key, closed)| async move { closed.err().map(|e| (key, e)) })
            .collect()
            .await
    }
}
