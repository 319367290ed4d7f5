//! The topic table: which topics exist, their ids, partition counts and config overrides.
//!
//! Writers (topic create / delete / add partitions / alter configs) are rare and serialised by
//! one mutex; readers on the data path load the current table lock-free (`ArcSwap`) and never
//! wait for a writer.
//!
//! On-disk format: `<log.dirs>/__cluster_metadata/topics.json`, a JSON document
//! `{"format": 1, "topics": [{"name", "id" (32 hex digits), "partition_count",
//! "replication_factor", "configs": {key: value}}]}`. It is replaced atomically: written to
//! `topics.json.tmp`, fsynced, renamed over the old file, and the directory fsynced, so a crash
//! leaves either the old or the new table, never a torn one.
//!
//! The table holds at most `partitions_max` partitions, all topics together
//! (`max.broker.partitions`): every partition is a directory the broker opens at start, so a
//! count nothing bounds would have it try to open (and create) millions of them. Changes that
//! would pass the bound are refused before anything is written, and a file that passes it (or
//! names a topic Kafka would refuse) is refused at load, before its counts drive any loop.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};

pub(crate) const METADATA_DIR: &str = "__cluster_metadata";
const TOPICS_FILE: &str = "topics.json";
const FORMAT_VERSION: u32 = 1;
/// Kafka's limit: longer names do not fit in a partition directory name.
const TOPIC_NAME_LEN_MAX: usize = 249;

/// One topic. Shared read-only across shards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMetadata {
    pub name: String,
    #[serde(with = "hex_id")]
    pub id: [u8; 16],
    pub partition_count: i32,
    pub replication_factor: i16,
    /// Topic config overrides (Kafka names, e.g. `retention.ms`); defaults come from the broker.
    pub configs: BTreeMap<String, String>,
}

/// A consistent snapshot of every topic. Shared read-only across shards.
#[derive(Debug, Default)]
pub struct TopicTable {
    pub topics: BTreeMap<String, Arc<TopicMetadata>>,
    /// The same topics by id: Fetch from v13 names topics by id (KIP-516).
    by_id: HashMap<[u8; 16], Arc<TopicMetadata>>,
}

impl TopicTable {
    pub fn new(topics: BTreeMap<String, Arc<TopicMetadata>>) -> TopicTable {
        let by_id = topics.values().map(|t| (t.id, t.clone())).collect();
        TopicTable { topics, by_id }
    }

    pub fn get(&self, name: &str) -> Option<&Arc<TopicMetadata>> {
        self.topics.get(name)
    }

    pub fn get_by_id(&self, id: &[u8; 16]) -> Option<&Arc<TopicMetadata>> {
        self.by_id.get(id)
    }

    /// Partitions of every topic together.
    pub fn partition_total(&self) -> i64 {
        partition_total(&self.topics)
    }
}

fn partition_total(topics: &BTreeMap<String, Arc<TopicMetadata>>) -> i64 {
    topics.values().map(|t| i64::from(t.partition_count)).sum()
}

#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("topic '{0}' already exists")]
    TopicAlreadyExists(String),
    #[error("topic '{0}' does not exist")]
    UnknownTopic(String),
    #[error("invalid topic name '{name}': {reason}")]
    InvalidTopicName { name: String, reason: &'static str },
    #[error("invalid partition count {requested}: {reason}")]
    InvalidPartitions { requested: i32, reason: &'static str },
    #[error(
        "the broker would host {total} partitions, more than its limit of {max} (max.broker.partitions)"
    )]
    PartitionLimit { total: i64, max: i32 },
    #[error("cannot persist the topic table at {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("cannot load the topic table {path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
    /// In cluster mode the table is a view of the controller's metadata: changes go there.
    #[error("the topic table follows the controller quorum; change topics through it")]
    FollowsController,
}

#[derive(Serialize, Deserialize)]
struct TopicsFile {
    format: u32,
    topics: Vec<TopicMetadata>,
}

/// The broker's topic table. Shared across shards (`Arc`); one writer at a time.
pub struct MetadataStore {
    dir: PathBuf,
    current: ArcSwap<TopicTable>,
    /// `true` once [`MetadataStore::publish_view`] was called: the table then mirrors the
    /// controller quorum's metadata (durable in its log) and local writes are refused.
    writer: Mutex<bool>,
    /// Most partitions the table may hold, all topics together.
    partitions_max: i32,
}

impl MetadataStore {
    /// Loads the table under `log_dir`, or starts an empty one; it may hold at most
    /// `partitions_max` partitions.
    pub fn open(log_dir: &Path, partitions_max: i32) -> Result<Self, MetadataError> {
        let dir = log_dir.join(METADATA_DIR);
        let io_err = |source| MetadataError::Io {
            path: dir.clone(),
            source,
        };
        // Its entry in the log dir must outlast a power cut as the files in it do.
        crate::io::create_dir_all_durably(&dir).map_err(io_err)?;
        let path = dir.join(TOPICS_FILE);
        let table = match std::fs::read(&path) {
            Ok(bytes) => load_table(&bytes, partitions_max)
                .map_err(|reason| MetadataError::Invalid { path, reason })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => TopicTable::default(),
            Err(source) => return Err(MetadataError::Io { path, source }),
        };
        Ok(Self {
            dir,
            current: ArcSwap::from_pointee(table),
            writer: Mutex::new(false),
            partitions_max,
        })
    }

    /// The most partitions the table may hold.
    pub fn partitions_max(&self) -> i32 {
        self.partitions_max
    }

    /// Whether `added` more partitions would fit now (for requests that only validate; a real
    /// change is checked again under the writer lock).
    pub fn check_room(&self, added: i64) -> Result<(), MetadataError> {
        self.check_total(self.current().partition_total().saturating_add(added))
    }

    fn check_total(&self, total: i64) -> Result<(), MetadataError> {
        if total > i64::from(self.partitions_max) {
            return Err(MetadataError::PartitionLimit {
                total,
                max: self.partitions_max,
            });
        }
        Ok(())
    }

    /// The current table; lock-free.
    pub fn current(&self) -> Arc<TopicTable> {
        self.current.load_full()
    }

    /// Runs `look` on the current table without taking a reference count on it: every shard
    /// looks at the table for every partition of every request, and a count shared by all
    /// shards is a cache line they would pass around at each look.
    pub fn with_current<R>(&self, look: impl FnOnce(&TopicTable) -> R) -> R {
        look(&self.current.load())
    }

    pub fn create_topic(
        &self,
        name: &str,
        partition_count: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicMetadata>, MetadataError> {
        validate_topic_name(name)?;
        if partition_count < 1 {
            return Err(MetadataError::InvalidPartitions {
                requested: partition_count,
                reason: "a topic needs at least one partition",
            });
        }
        let topic = Arc::new(TopicMetadata {
            name: name.to_string(),
            id: new_topic_id(),
            partition_count,
            replication_factor,
            configs,
        });
        self.update(|topics| {
            if topics.contains_key(name) {
                return Err(MetadataError::TopicAlreadyExists(name.to_string()));
            }
            self.check_total(partition_total(topics) + i64::from(partition_count))?;
            topics.insert(name.to_string(), topic.clone());
            Ok(())
        })?;
        Ok(topic)
    }

    pub fn delete_topic(&self, name: &str) -> Result<Arc<TopicMetadata>, MetadataError> {
        let mut removed = None;
        self.update(|topics| {
            removed = topics.remove(name);
            removed
                .as_ref()
                .map(|_| ())
                .ok_or_else(|| MetadataError::UnknownTopic(name.to_string()))
        })?;
        Ok(removed.expect("update succeeded only if the topic was removed"))
    }

    /// Grows a topic to `partition_count` partitions (Kafka never shrinks a topic).
    pub fn add_partitions(
        &self,
        name: &str,
        partition_count: i32,
    ) -> Result<Arc<TopicMetadata>, MetadataError> {
        self.modify_topic(name, |topic, total| {
            if partition_count <= topic.partition_count {
                return Err(MetadataError::InvalidPartitions {
                    requested: partition_count,
                    reason: "the new count must exceed the current one",
                });
            }
            let added = i64::from(partition_count) - i64::from(topic.partition_count);
            self.check_total(total + added)?;
            topic.partition_count = partition_count;
            Ok(())
        })
    }

    /// Replaces a topic's config overrides.
    pub fn set_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicMetadata>, MetadataError> {
        self.modify_topic(name, move |topic, _| {
            topic.configs = configs;
            Ok(())
        })
    }

    /// Applies `change` to a copy of topic `name`; `change` is also told how many partitions
    /// all topics hold before it.
    fn modify_topic(
        &self,
        name: &str,
        change: impl FnOnce(&mut TopicMetadata, i64) -> Result<(), MetadataError>,
    ) -> Result<Arc<TopicMetadata>, MetadataError> {
        let mut changed = None;
        self.update(|topics| {
            let total = partition_total(topics);
            let old = topics
                .get(name)
                .ok_or_else(|| MetadataError::UnknownTopic(name.to_string()))?;
            let mut topic = TopicMetadata::clone(old);
            change(&mut topic, total)?;
            let topic = Arc::new(topic);
            topics.insert(name.to_string(), topic.clone());
            changed = Some(topic);
            Ok(())
        })?;
        Ok(changed.expect("update succeeded only if the topic changed"))
    }

    /// Applies `change` to a copy of the table, persists it, then publishes it.
    fn update(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, Arc<TopicMetadata>>) -> Result<(), MetadataError>,
    ) -> Result<(), MetadataError> {
        let follows_controller = self
            .writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if *follows_controller {
            return Err(MetadataError::FollowsController);
        }
        let mut topics = self.current.load().topics.clone();
        change(&mut topics)?;
        self.persist(&topics)?;
        self.current.store(Arc::new(TopicTable::new(topics)));
        Ok(())
    }

    /// Cluster mode: replaces the table with `topics` as the controller's metadata says, without
    /// writing `topics.json` (the quorum's log is the durable copy; the file keeps the
    /// single-node table it was migrated from). From the first call on, local changes are
    /// refused with [`MetadataError::FollowsController`].
    pub fn publish_view(&self, topics: BTreeMap<String, Arc<TopicMetadata>>) {
        let mut follows_controller = self
            .writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *follows_controller = true;
        self.current.store(Arc::new(TopicTable::new(topics)));
    }

    fn persist(&self, topics: &BTreeMap<String, Arc<TopicMetadata>>) -> Result<(), MetadataError> {
        let file = TopicsFile {
            format: FORMAT_VERSION,
            topics: topics.values().map(|t| TopicMetadata::clone(t)).collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).expect("the topic table always serialises");
        let io_err = |source| MetadataError::Io {
            path: self.dir.clone(),
            source,
        };
        crate::io::replace_file_durably(&self.dir.join(TOPICS_FILE), &bytes).map_err(io_err)
    }
}

/// Parses and checks `topics.json`: a known format, names Kafka accepts (they become directory
/// names), each once, at least one partition per topic and at most `partitions_max` in all.
fn load_table(bytes: &[u8], partitions_max: i32) -> Result<TopicTable, String> {
    let file: TopicsFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if file.format != FORMAT_VERSION {
        return Err(format!("unknown format {}", file.format));
    }
    let mut topics = BTreeMap::new();
    for topic in file.topics {
        validate_topic_name(&topic.name).map_err(|e| e.to_string())?;
        if topic.partition_count < 1 || topic.replication_factor < 1 {
            return Err(format!(
                "topic '{}' has {} partitions and replication factor {} (each must be at least 1)",
                topic.name, topic.partition_count, topic.replication_factor
            ));
        }
        let name = topic.name.clone();
        if topics.insert(name.clone(), Arc::new(topic)).is_some() {
            return Err(format!("topic '{name}' is listed twice"));
        }
    }
    let total = partition_total(&topics);
    if total > i64::from(partitions_max) {
        return Err(format!(
            "its topics have {total} partitions, more than the broker's limit of {partitions_max} \
             (max.broker.partitions): raise the limit if this many were meant, else repair the file"
        ));
    }
    Ok(TopicTable::new(topics))
}

/// Kafka's topic name rules: 1..=249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), MetadataError> {
    let invalid = |reason| {
        Err(MetadataError::InvalidTopicName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("it is empty");
    }
    if name.len() > TOPIC_NAME_LEN_MAX {
        return invalid("it is longer than 249 characters");
    }
    if name == "." || name == ".." {
        return invalid("'.' and '..' are reserved");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return invalid("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

fn new_topic_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).expect("the OS random source is available");
    id[6] = (id[6] & 0x0f) | 0x40; // UUID version 4
    id[8] = (id[8] & 0x3f) | 0x80; // RFC 4122 variant
    id
}

mod hex_id {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(id: &[u8; 16], s: S) -> Result<S::Ok, S::Error> {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        s.serialize_str(&hex)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 16], D::Error> {
        let hex = String::deserialize(d)?;
        let mut id = [0u8; 16];
        if hex.len() != 32 {
            return Err(serde::de::Error::custom("a topic id has 32 hex digits"));
        }
        for (i, byte) in id.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(serde::de::Error::custom)?;
        }
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARTITIONS_MAX: i32 = 100;

    #[test]
    fn topics_survive_reopen_with_ids_and_configs() {
        let dir = tempfile::tempdir().unwrap();
        let store = MetadataStore::open(dir.path(), PARTITIONS_MAX).unwrap();
        let configs = BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]);
        let created = store.create_topic("orders", 3, 1, configs.clone()).unwrap();
        store.add_partitions("orders", 5).unwrap();
        drop(store);
        let reopened = MetadataStore::open(dir.path(), PARTITIONS_MAX).unwrap();
        let topic = reopened.current().get("orders").cloned().unwrap();
        assert_eq!(topic.id, created.id);
        assert_eq!(topic.partition_count, 5);
        assert_eq!(topic.configs, configs);
        let by_id = reopened.current().get_by_id(&created.id).cloned();
        assert_eq!(by_id.map(|t| t.name.clone()).as_deref(), Some("orders"));
    }

    #[test]
    fn duplicate_unknown_and_invalid_requests_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = MetadataStore::open(dir.path(), PARTITIONS_MAX).unwrap();
        store.create_topic("a", 1, 1, BTreeMap::new()).unwrap();
        assert!(matches!(
            store.create_topic("a", 1, 1, BTreeMap::new()),
            Err(MetadataError::TopicAlreadyExists(_))
        ));
        assert!(matches!(
            store.delete_topic("b"),
            Err(MetadataError::UnknownTopic(_))
        ));
        assert!(matches!(
            store.add_partitions("a", 1),
            Err(MetadataError::InvalidPartitions { .. })
        ));
        assert!(matches!(
            store.create_topic("bad/name", 1, 1, BTreeMap::new()),
            Err(MetadataError::InvalidTopicName { .. })
        ));
        assert!(matches!(
            store.create_topic("z", 0, 1, BTreeMap::new()),
            Err(MetadataError::InvalidPartitions { .. })
        ));
        let a_id = store.current().get("a").unwrap().id;
        store.delete_topic("a").unwrap();
        assert!(store.current().get("a").is_none());
        assert!(store.current().get_by_id(&a_id).is_none());
    }

    #[test]
    fn changes_past_the_partition_limit_are_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = MetadataStore::open(dir.path(), PARTITIONS_MAX).unwrap();
        store.create_topic("a", 60, 1, BTreeMap::new()).unwrap();
        for count in [41, i32::MAX] {
            assert!(matches!(
                store.create_topic("b", count, 1, BTreeMap::new()),
                Err(MetadataError::PartitionLimit {
                    max: PARTITIONS_MAX,
                    ..
                })
            ));
        }
        assert!(matches!(
            store.add_partitions("a", i32::MAX),
            Err(MetadataError::PartitionLimit { total, .. }) if total == i64::from(i32::MAX)
        ));
        assert!(store.check_room(40).is_ok());
        assert!(store.check_room(41).is_err());
        store.create_topic("b", 40, 1, BTreeMap::new()).unwrap();
        drop(store);
        let reopened = MetadataStore::open(dir.path(), PARTITIONS_MAX).unwrap();
        let table = reopened.current();
        assert_eq!(table.partition_total(), 100);
        assert_eq!(table.get("a").unwrap().partition_count, 60);
    }

    #[test]
    fn a_topic_file_past_the_limits_is_refused_at_load() {
        let topic = |name: &str, partitions: i64| {
            format!(
                r#"{{"name": "{name}", "id": "{}", "partition_count": {partitions},
                    "replication_factor": 1, "configs": {{}}}}"#,
                "ab".repeat(16)
            )
        };
        let cases = [
            ("a bomb", vec![topic("t", i64::from(i32::MAX))]),
            ("too many in all", vec![topic("t", 60), topic("u", 41)]),
            ("no partitions", vec![topic("t", 0)]),
            ("a negative count", vec![topic("t", -5)]),
            ("a path for a name", vec![topic("../../etc", 1)]),
            ("a name twice", vec![topic("t", 1), topic("t", 2)]),
        ];
        for (what, topics) in cases {
            let dir = tempfile::tempdir().unwrap();
            let metadata = dir.path().join(METADATA_DIR);
            std::fs::create_dir_all(&metadata).unwrap();
            let text = format!(r#"{{"format": 1, "topics": [{}]}}"#, topics.join(","));
            std::fs::write(metadata.join(TOPICS_FILE), text).unwrap();
            match MetadataStore::open(dir.path(), PARTITIONS_MAX) {
                Err(MetadataError::Invalid { path, .. }) => {
                    assert_eq!(path, metadata.join(TOPICS_FILE), "{what}")
                }
                Err(other) => panic!("{what}: {other}"),
                Ok(_) => panic!("{what}: loaded"),
            }
        }
    }

    #[test]
    fn topic_name_rules_follow_kafka() {
        assert!(validate_topic_name("my_topic-1.v2").is_ok());
        assert!(validate_topic_name(&"x".repeat(249)).is_ok());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("a b").is_err());
    }
}
