//! The partitions one shard owns, opened on first use and closed on shutdown.

use crate::local_sync::LocalLock;
use laminar_model::TopicPartition;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use crate::io::{DirectAppendStats, FileCacheStats, PrewriteStats, ShardStorage, Storage, WriteBehindStats};
use crate::log::segment::parse_log_name;
use crate::partition::topic_id_file::{self, RecordedTopic};
use crate::partition::{IdleList, LogConfig, LogError, Partition, SyncObserver};

/// Partitions a shard closes at once on shutdown (each waits for its own fdatasyncs; the disk
/// takes them together).
pub const CLOSE_CONCURRENCY: usize = 128;

/// Partitions a shard opens at once (a request naming many unopened partitions): their
/// file creations and fdatasyncs overlap, so the disk commits them together.
pub const OPEN_CONCURRENCY: usize = 64;

/// Values by topic and then partition index, for the maps a shard looks up per partition of a
/// request. A lookup compares the topic's name once, with a name every partition of the topic
/// shares (so it stays in cache), and then hashes an integer: keyed by topic and index
/// together, each partition had a name of its own on the heap, and comparing it (a cache miss
/// per partition) was 16 % of the broker's CPU in a caught-up consumer's long poll over 10 000
/// partitions (decision 0027, fetches over thousands of partitions).
struct ByTopic<V> {
    by_topic: hashbrown::HashMap<Arc<str>, hashbrown::HashMap<i32, V>>,
    count: usize,
}

impl<V> Default for ByTopic<V> {
    fn default() -> Self {
        ByTopic {
            by_topic: hashbrown::HashMap::new(),
            count: 0,
        }
    }
}

impl<V> ByTopic<V> {
    fn get(&self, topic: &str, partition: i32) -> Option<&V> {
        self.by_topic.get(topic)?.get(&partition)
    }

    /// Returns the value it replaced.
    fn insert(&mut self, topic: &str, partition: i32, value: V) -> Option<V> {
        let partitions = match self.by_topic.get_mut(topic) {
            Some(partitions) => partitions,
            None => self.by_topic.entry(Arc::from(topic)).or_default(),
        };
        let replaced = partitions.insert(partition, value);
        self.count += usize::from(replaced.is_none());
        replaced
    }

    /// Removes a partition's value; a topic's entry goes with its last partition.
    fn remove(&mut self, topic: &str, partition: i32) -> Option<V> {
        let partitions = self.by_topic.get_mut(topic)?;
        let removed = partitions.remove(&partition)?;
        if partitions.is_empty() {
            self.by_topic.remove(topic);
        }
        self.count -= 1;
        Some(removed)
    }

    fn iter(&self) -> impl Iterator<Item = (&Arc<str>, i32, &V)> {
        let topics = self.by_topic.iter();
        topics.flat_map(|(topic, partitions)| {
            partitions
                .iter()
                .map(move |(index, value)| (topic, *index, value))
        })
    }

    fn drain(&mut self) -> Vec<(TopicPartition, V)> {
        self.count = 0;
        let topics = self.by_topic.drain();
        let each = topics.flat_map(|(topic, partitions)| {
            partitions
                .into_iter()
                .map(move |(index, value)| (TopicPartition::new(topic.clone(), index), value))
        });
        each.collect()
    }

    fn clear(&mut self) {
        self.by_topic.clear();
        self.count = 0;
    }
}

/// The open partitions of one shard. Owned by one shard; not Send.
pub struct ShardPartitions {
    log_dir: PathBuf,
    storage: Rc<ShardStorage>,
    open: RefCell<ByTopic<Rc<Partition>>>,
    /// Handed to every partition this shard opens (fdatasync timing for metrics).
    sync_observer: RefCell<Option<SyncObserver>>,
    /// Opens and removals hold it shared, `close_all` exclusively: nothing opens once the
    /// shard closes its partitions.
    lifecycle: async_lock::RwLock<()>,
    /// One lock per partition being opened or removed, so that two requests never open one
    /// partition twice while different partitions open concurrently. An entry lives while some
    /// task holds or waits for it: at most one per partition a request names.
    partition_locks: RefCell<HashMap<TopicPartition, Rc<LocalLock>>>,
    /// Bounds the opens in flight to [`OPEN_CONCURRENCY`].
    opens_in_flight: async_lock::Semaphore,
    /// Notified each time a partition opens (for waiters on partitions never written).
    opened: event_listener::Event,
    /// Partitions found without a directory since this shard last opened one, so that reads of
    /// a partition never written do not look for its directory each time (a consumer of a
    /// topic with empty partitions long-polls them all). Only this shard's opens create a
    /// partition's directory (it owns the partition), and each open empties the set, as each
    /// removal does. Bounded by the partitions of the topics that exist: reads are checked
    /// against the metadata before they get here.
    never_written: RefCell<ByTopic<()>>,
    /// Opens so far: a lookup that found no directory records it only if none came meanwhile.
    opens: Cell<u64>,
    /// The open partitions that hold work for the shard's idle pass (`partition/idle_work.rs`).
    idle: Rc<IdleList<ShardStorage>>,
}

/// A task's hold on one partition's entry in `partition_locks` (waiting for the mutex or
/// holding it); the last hold to go removes the entry, whether its task finished or was
/// dropped.
struct PartitionLock<'a> {
    partitions: &'a ShardPartitions,
    key: TopicPartition,
    mutex: Rc<LocalLock>,
}

impl<'a> PartitionLock<'a> {
    fn new(partitions: &'a ShardPartitions, key: TopicPartition) -> Self {
        let mutex = partitions
            .partition_locks
            .borrow_mut()
            .entry(key.clone())
            .or_insert_with(|| Rc::new(LocalLock::new()))
            .clone();
        PartitionLock {
            partitions,
            key,
            mutex,
        }
    }

    fn mutex(&self) -> &LocalLock {
        &self.mutex
    }
}

impl Drop for PartitionLock<'_> {
    fn drop(&mut self) {
        // The map's reference and ours: nobody else holds or waits for it.
        if Rc::strong_count(&self.mutex) == 2 {
            self.partitions.partition_locks.borrow_mut().remove(&self.key);
        }
    }
}

/// What a partition opens with: its log settings and, when the caller knows it, its topic's
/// id, which the partition's `partition.metadata` must name (`partition::topic_id_file`).
#[derive(Debug, Clone)]
pub struct PartitionSpec {
    pub config: LogConfig,
    pub topic_id: Option<[u8; 16]>,
}

impl From<LogConfig> for PartitionSpec {
    fn from(config: LogConfig) -> Self {
        PartitionSpec {
            config,
            topic_id: None,
        }
    }
}

/// `<log.dirs>/<topic>-<partition>`, Kafka's directory name for a partition.
pub fn partition_dir(log_dir: &Path, topic: &str, partition: i32) -> PathBuf {
    log_dir.join(format!("{topic}-{partition}"))
}

/// The topic and index a directory name of [`partition_dir`]'s form names; `None` for any other
/// name (retired or set-aside directories, files such as checkpoints, an index written with a
/// sign or leading zeros, which [`partition_dir`] never writes).
pub fn parse_partition_dir_name(name: &str) -> Option<(&str, i32)> {
    let (topic, digits) = name.rsplit_once('-')?;
    let canonical = digits.bytes().all(|b| b.is_ascii_digit()) && (digits == "0" || !digits.starts_with('0'));
    let index: i32 = digits.parse().ok().filter(|_| canonical)?;
    (!topic.is_empty()).then_some((topic, index))
}

impl ShardPartitions {
    pub fn new(log_dir: PathBuf, storage: Rc<ShardStorage>) -> Self {
        Self {
            log_dir,
            storage,
            open: RefCell::default(),
            sync_observer: RefCell::new(None),
            lifecycle: async_lock::RwLock::new(()),
            partition_locks: RefCell::default(),
            opens_in_flight: async_lock::Semaphore::new(OPEN_CONCURRENCY),
            opened: event_listener::Event::new(),
            never_written: RefCell::default(),
            opens: Cell::new(0),
            idle: Rc::default(),
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

    /// This shard's pre-write counters; `None` when pre-writing is off.
    pub fn prewrite_stats(&self) -> Option<PrewriteStats> {
        self.storage.inner().prewrite_stats()
    }

    /// This shard's O_DIRECT append counters; `None` before it opens a segment in that mode.
    pub fn direct_append_stats(&self) -> Option<DirectAppendStats> {
        self.storage.inner().direct_append_stats()
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

    /// The shard's storage, for the files kept beside the partitions (checkpoints).
    pub fn storage(&self) -> &Rc<ShardStorage> {
        &self.storage
    }

    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// Asks the CPU to load what work on these open partitions touches first, one level at a
    /// time over all of them (`Partition::prefetch`), so that the cache misses of many cold
    /// partitions overlap instead of each append waiting for its own: a keyed produce into
    /// 10 000 partitions pays them at every batch of a record or two (decision 0026,
    /// per-batch cost across many partitions). Names not open are skipped; nothing changes.
    pub fn prefetch<'a>(&self, names: impl Iterator<Item = (&'a str, i32)>) {
        let open = self.open.borrow();
        let found: Vec<&Rc<Partition>> = names
            .filter_map(|(topic, partition)| open.get(topic, partition))
            .collect();
        for level in 0..<Partition>::PREFETCH_LEVELS {
            for partition in &found {
                partition.prefetch(level);
            }
        }
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<Rc<Partition>> {
        self.open.borrow().get(topic, partition).cloned()
    }

    /// Returns the open partition, opening (and recovering) it with `config` if needed (a
    /// [`LogConfig`] alone, or with the topic's id: [`PartitionSpec`]).
    pub async fn get_or_open<C: Into<PartitionSpec>>(
        &self,
        topic: &str,
        partition: i32,
        config: impl FnOnce() -> C,
    ) -> Result<Rc<Partition>, LogError> {
        if let Some(open) = self.get(topic, partition) {
            return Ok(open);
        }
        // Boxed, so that the future of a lookup that finds the partition open stays small: the
        // opening path (recovery included) holds kilobytes of state, and a fetch creates one
        // such future per partition it names (thousands in a long poll at scale).
        Box::pin(self.open_once(topic, partition, config)).await
    }

    /// Opens the partition unless another task did meanwhile (one open per partition at once).
    async fn open_once<C: Into<PartitionSpec>>(
        &self,
        topic: &str,
        partition: i32,
        config: impl FnOnce() -> C,
    ) -> Result<Rc<Partition>, LogError> {
        let _lifecycle = self.lifecycle.read().await;
        let key = TopicPartition::new(topic, partition);
        let lock = PartitionLock::new(self, key.clone());
        let _this_partition = lock.mutex().lock().await;
        if let Some(open) = self.get(topic, partition) {
            return Ok(open);
        }
        let _slot = self.opens_in_flight.acquire().await;
        self.open_now(key, config().into()).await
    }

    /// The partition, opened if need be, unless it was never written: a partition with no
    /// directory is `None` and stays without files (reads answer it as empty; the first write
    /// creates them). Reads of the many partitions of a new topic then create nothing.
    pub async fn get_or_open_written<C: Into<PartitionSpec>>(
        &self,
        topic: &str,
        partition: i32,
        config: impl FnOnce() -> C,
    ) -> Result<Option<Rc<Partition>>, LogError> {
        if let Some(open) = self.get(topic, partition) {
            return Ok(Some(open));
        }
        Box::pin(self.open_if_written(topic, partition, config)).await
    }

    async fn open_if_written<C: Into<PartitionSpec>>(
        &self,
        topic: &str,
        partition: i32,
        config: impl FnOnce() -> C,
    ) -> Result<Option<Rc<Partition>>, LogError> {
        if self.never_written.borrow().get(topic, partition).is_some() {
            return Ok(None);
        }
        let opens = self.opens.get();
        let dir = partition_dir(&self.log_dir, topic, partition);
        if !self.storage.exists(&dir).await? {
            if self.opens.get() == opens {
                self.never_written.borrow_mut().insert(topic, partition, ());
            }
            return Ok(None);
        }
        self.get_or_open(topic, partition, config).await.map(Some)
    }

    /// Resolves the next time this shard opens a partition. Listen, then look: no open is missed.
    pub fn partition_opened(&self) -> event_listener::EventListener {
        self.opened.listen()
    }

    async fn open_now(&self, key: TopicPartition, spec: PartitionSpec) -> Result<Rc<Partition>, LogError> {
        let dir = partition_dir(&self.log_dir, &key.topic, key.partition);
        let recorded = match spec.topic_id {
            Some(topic_id) => Some((topic_id, self.set_aside_other_topics_dir(&dir, topic_id).await?)),
            None => None,
        };
        let opened = Partition::open(self.storage.clone(), dir, spec.config).await;
        // Whatever came of it, the partition's directory may exist now.
        self.opens.set(self.opens.get() + 1);
        self.never_written.borrow_mut().clear();
        let opened = Rc::new(opened?);
        if let Some((topic_id, recorded)) = recorded {
            if recorded != RecordedTopic::Id(topic_id) {
                opened.record_topic_id(topic_id);
            }
        }
        if let Some(observer) = self.sync_observer.borrow().clone() {
            opened.observe_syncs(observer);
        }
        opened.attach_idle_list(self.idle.clone());
        let replaced = self
            .open
            .borrow_mut()
            .insert(&key.topic, key.partition, opened.clone());
        assert!(
            replaced.is_none(),
            "a partition opens once: its open holds its lock"
        );
        self.opened.notify(usize::MAX);
        Ok(opened)
    }

    /// Sets `dir` aside (renamed durably to `<name>.<id>-stray`, not removed) when its
    /// `partition.metadata` names a topic other than `topic_id`: a deleted topic's directory,
    /// which a new topic of its name must not open. Returns what the directory recorded,
    /// `Absent` once set aside.
    async fn set_aside_other_topics_dir(
        &self,
        dir: &Path,
        topic_id: [u8; 16],
    ) -> Result<RecordedTopic, LogError> {
        let recorded = topic_id_file::read(&*self.storage, dir).await?;
        match recorded {
            RecordedTopic::Id(other) if other != topic_id => {
                let aside = crate::io::set_aside_durably(&*self.storage, dir).await?;
                tracing::warn!(dir = %dir.display(), set_aside_as = %aside.display(),
                    "a partition directory names another topic's id (a deleted topic's, left by a crash): set aside, not opened; remove it once not needed");
                Ok(RecordedTopic::Absent)
            }
            _ => Ok(recorded),
        }
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

    /// The partitions with a directory in this log dir (`<topic>-<index>`), whichever shard
    /// owns them and whether or not they are open. Other entries (files, the controller's
    /// `__cluster_metadata-0` among them, names without an index) are the caller's to filter
    /// against its topic table.
    pub async fn replica_dirs(&self) -> Result<Vec<TopicPartition>, LogError> {
        let names = self.storage.list_dir(&self.log_dir).await?;
        let each = names.iter().filter_map(|name| {
            let (topic, index) = parse_partition_dir_name(name)?;
            Some(TopicPartition::new(topic, index))
        });
        Ok(each.collect())
    }

    /// A local replica's size in bytes (its segments) and its high watermark minus its log
    /// end offset; `None` when the partition has no directory. Read from the open partition,
    /// else from the directory's segment files without opening it (its high watermark is not
    /// known then: a closed log is no further than it, so the lag is 0).
    pub async fn replica_size(&self, topic: &str, partition: i32) -> Result<Option<(u64, i64)>, LogError> {
        if let Some(open) = self.get(topic, partition) {
            let (hw, end) = (open.high_watermark().get(), open.log_end_offset().get());
            let lag = hw.saturating_sub(end).max(0);
            return Ok(Some((open.size_bytes(), lag)));
        }
        let dir = partition_dir(&self.log_dir, topic, partition);
        let names = match self.storage.list_dir(&dir).await {
            Ok(names) => names,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut size: u64 = 0;
        for name in names.iter().filter(|n| parse_log_name(n).is_some()) {
            match self.storage.file_len(&dir.join(name)).await {
                Ok(len) => size = size.saturating_add(len),
                // Retention may delete a segment between the listing and the stat.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Some((size, 0)))
    }

    /// Closes and deletes a partition's files, whether or not it was open.
    pub async fn remove(&self, topic: &str, partition: i32) -> Result<(), LogError> {
        let _lifecycle = self.lifecycle.read().await;
        let lock = PartitionLock::new(self, TopicPartition::new(topic, partition));
        let _this_partition = lock.mutex().lock().await;
        self.remove_now(topic, partition).await
    }

    async fn remove_now(&self, topic: &str, partition: i32) -> Result<(), LogError> {
        // A deleted topic's partitions leave the set with it (it forgets everything at once).
        self.never_written.borrow_mut().clear();
        let removed = self.open.borrow_mut().remove(topic, partition);
        match removed {
            Some(open) => open.delete().await,
            None => {
                let dir = partition_dir(&self.log_dir, topic, partition);
                if self.storage.exists(&dir).await? {
                    crate::io::remove_dir_durably(&*self.storage, &dir).await?;
                }
                Ok(())
            }
        }
    }

    /// Partitions some task is opening or removing now, or waiting to (each holds an entry).
    pub fn partitions_locked(&self) -> usize {
        self.partition_locks.borrow().len()
    }

    /// The open partitions that hold work for the shard's idle pass.
    pub fn idle_list(&self) -> &IdleList<ShardStorage> {
        &self.idle
    }

    /// How many partitions are open.
    pub fn open_count(&self) -> usize {
        self.open.borrow().count
    }

    /// Every open partition into `out` (cleared first; its capacity is kept, so a pass that
    /// runs every few seconds over tens of thousands of partitions does not allocate a new
    /// vector of them each time). The caller clears it after use: it holds the partitions.
    pub fn all_into(&self, out: &mut Vec<(TopicPartition, Rc<Partition>)>) {
        out.clear();
        let open = self.open.borrow();
        out.extend(
            open.iter()
                .map(|(topic, index, p)| (TopicPartition::new(topic.clone(), index), p.clone())),
        );
    }

    /// Visits every open partition without copying the map; `visit` must not open or close
    /// partitions of this shard (the map is borrowed meanwhile).
    pub fn for_each(&self, mut visit: impl FnMut(&str, i32, &Rc<Partition>)) {
        for (topic, index, partition) in self.open.borrow().iter() {
            visit(topic, index, partition);
        }
    }

    /// Flushes and closes every partition (their logs' state files then say clean); returns
    /// the failures.
    /// [`CLOSE_CONCURRENCY`] at a time, so that their fdatasyncs overlap.
    pub async fn close_all(&self) -> Vec<(TopicPartition, LogError)> {
        use futures::StreamExt;
        let _lifecycle = self.lifecycle.write().await;
        let open = self.open.borrow_mut().drain();
        futures::stream::iter(open)
            .map(|(key, partition)| async move { (key, partition.close().await) })
            .buffer_unordered(CLOSE_CONCURRENCY)
            .filter_map(|(key, closed)| async move { closed.err().map(|e| (key, e)) })
            .collect()
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FileCache, GlommioStorage, WriteMode};
    use crate::test_tasks::on_executor;
    use laminar_model::Offset;

    #[test]
    fn partition_directory_names_parse_back_and_other_names_do_not() {
        let dir = partition_dir(Path::new("/data"), "orders-eu", 12);
        let name = dir.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse_partition_dir_name(name), Some(("orders-eu", 12)));
        assert_eq!(parse_partition_dir_name("t-0"), Some(("t", 0)));
        assert_eq!(
            parse_partition_dir_name("ends-with-dash--1"),
            Some(("ends-with-dash-", 1))
        );
        for other in [
            "orders-0.17a2b-delete",
            "orders-0.17a2b-stray",
            "orders-+1",
            "orders-01",
            "orders-",
            "-3",
            "replication-offset-checkpoint",
            "meta.properties",
        ] {
            assert_eq!(parse_partition_dir_name(other), None, "{other}");
        }
    }

    #[test]
    fn a_prefetch_over_open_and_unknown_partitions_opens_nothing_and_appends_go_on() {
        use crate::log::batch::testing::BatchBuilder;
        on_executor(|| async {
            let dir = tempfile::tempdir().unwrap();
            let storage = Rc::new(FileCache::new(GlommioStorage::new(WriteMode::Buffered), None));
            let shard = ShardPartitions::new(dir.path().to_path_buf(), storage);
            let batch = bytes::Bytes::from(BatchBuilder::new(0).records_of(1, 100).build());
            let mut partitions = Vec::new();
            for index in 0..3 {
                let partition = shard.get_or_open("t", index, LogConfig::default).await.unwrap();
                // Past a file's first small appends, which are not mapped: the prefetch then
                // reaches a mapped window's next write, where the file system can map.
                for _ in 0..8 {
                    partition.append(batch.clone(), 0).await.unwrap();
                }
                partitions.push(partition);
            }
            let names = [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("u", 0)];
            shard.prefetch(names.into_iter());
            assert_eq!(shard.open.borrow().count, 3, "names not open stay closed");
            for partition in &partitions {
                let appended = partition.append(batch.clone(), 0).await.unwrap();
                assert_eq!(appended.base_offset, Offset::new(8));
                assert_eq!(partition.log_end_offset(), Offset::new(9));
            }
        });
    }

    #[test]
    fn partitions_are_found_by_topic_and_index_and_the_last_one_out_takes_its_topic() {
        on_executor(|| async {
            let dir = tempfile::tempdir().unwrap();
            let storage = Rc::new(FileCache::new(GlommioStorage::new(WriteMode::Buffered), None));
            let mut open = ByTopic::default();
            for (topic, index) in [("orders", 0), ("orders", 1), ("orders-1", 0), ("", 7)] {
                let path = partition_dir(dir.path(), topic, index);
                let partition = Partition::open(storage.clone(), path, LogConfig::default())
                    .await
                    .unwrap();
                assert!(open.insert(topic, index, Rc::new(partition)).is_none());
            }
            assert_eq!(open.count, 4);
            assert!(open.get("orders", 1).is_some() && open.get("", 7).is_some());
            assert!(open.get("orders", 2).is_none() && open.get("orders-", 10).is_none());
            assert!(open.get("orders", -1).is_none());
            let mut seen: Vec<_> = open
                .iter()
                .map(|(topic, index, _)| (topic.to_string(), index))
                .collect();
            seen.sort();
            let expected = [("", 7), ("orders", 0), ("orders", 1), ("orders-1", 0)];
            assert_eq!(seen, expected.map(|(t, i)| (t.to_string(), i)));
            assert!(open.remove("orders", 0).is_some() && open.remove("orders", 0).is_none());
            assert!(
                open.by_topic.contains_key("orders"),
                "one of its partitions is still open"
            );
            assert!(open.remove("orders", 1).is_some());
            assert!(
                !open.by_topic.contains_key("orders"),
                "no topic entry outlives its partitions"
            );
            assert_eq!(open.count, 2);
            let drained = open.drain();
            assert_eq!((drained.len(), open.count, open.by_topic.len()), (2, 0, 0));
            for (_, partition) in drained {
                partition.close().await.unwrap();
            }
        });
    }
}
