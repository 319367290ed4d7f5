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

use std::collections::BTreeMap;
use std::io::Write;
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
}

impl TopicTable {
    pub fn get(&self, name: &str) -> Option<&Arc<TopicMetadata>> {
        self.topics.get(name)
    }
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
    #[error("cannot persist the topic table at {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
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
    writer: Mutex<()>,
}

impl MetadataStore {
    /// Loads the table under `log_dir`, or starts an empty one.
    pub fn open(log_dir: &Path) -> Result<Self, MetadataError> {
        let dir = log_dir.join(METADATA_DIR);
        let io_err = |source| MetadataError::Io {
            path: dir.clone(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(io_err)?;
        let path = dir.join(TOPICS_FILE);
        let table = match std::fs::read(&path) {
            Ok(bytes) => {
                let file: TopicsFile = serde_json::from_slice(&bytes).map_err(|e| MetadataError::Io {
                    path: path.clone(),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                })?;
                if file.format != FORMAT_VERSION {
                    return Err(MetadataError::Io {
                        path,
                        source: std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!("unknown format {}", file.format),
                        ),
                    });
                }
                TopicTable {
                    topics: file
                        .topics
                        .into_iter()
                        .map(|t| (t.name.clone(), Arc::new(t)))
                        .collect(),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => TopicTable::default(),
            Err(source) => return Err(MetadataError::Io { path, source }),
        };
        Ok(Self {
            dir,
            current: ArcSwap::from_pointee(table),
            writer: Mutex::new(()),
        })
    }

    /// The current table; lock-free.
    pub fn current(&self) -> Arc<TopicTable> {
        self.current.load_full()
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
        self.modify_topic(name, |topic| {
            if partition_count <= topic.partition_count {
                return Err(MetadataError::InvalidPartitions {
                    requested: partition_count,
                    reason: "the new count must exceed the current one",
                });
            }
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
        self.modify_topic(name, move |topic| {
            topic.configs = configs;
            Ok(())
        })
    }

    fn modify_topic(
        &self,
        name: &str,
        change: impl FnOnce(&mut TopicMetadata) -> Result<(), MetadataError>,
    ) -> Result<Arc<TopicMetadata>, MetadataError> {
        let mut changed = None;
        self.update(|topics| {
            let old = topics
                .get(name)
                .ok_or_else(|| MetadataError::UnknownTopic(name.to_string()))?;
            let mut topic = TopicMetadata::clone(old);
            change(&mut topic)?;
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
        let _writer = self
            .writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut topics = self.current.load().topics.clone();
        change(&mut topics)?;
        self.persist(&topics)?;
        self.current.store(Arc::new(TopicTable { topics }));
        Ok(())
    }

    fn persist(&self, topics: &BTreeMap<String, Arc<TopicMetadata>>) -> Result<(), MetadataError> {
        let file = TopicsFile {
            format: FORMAT_VERSION,
            topics: topics.values().map(|t| TopicMetadata::clone(t)).collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).expect("the topic table always serialises");
        let tmp = self.dir.join(format!("{TOPICS_FILE}.tmp"));
        let io_err = |source| MetadataError::Io {
            path: self.dir.clone(),
            source,
        };
        let mut out = std::fs::File::create(&tmp).map_err(io_err)?;
        out.write_all(&bytes).map_err(io_err)?;
        out.sync_data().map_err(io_err)?;
        std::fs::rename(&tmp, self.dir.join(TOPICS_FILE)).map_err(io_err)?;
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err)
    }
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

    #[test]
    fn topics_survive_reopen_with_ids_and_configs() {
        let dir = tempfile::tempdir().unwrap();
        let store = MetadataStore::open(dir.path()).unwrap();
        let configs = BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]);
        let created = store.create_topic("orders", 3, 1, configs.clone()).unwrap();
        store.add_partitions("orders", 5).unwrap();
        drop(store);
        let reopened = MetadataStore::open(dir.path()).unwrap();
        let topic = reopened.current().get("orders").cloned().unwrap();
        assert_eq!(topic.id, created.id);
        assert_eq!(topic.partition_count, 5);
        assert_eq!(topic.configs, configs);
    }

    #[test]
    fn duplicate_unknown_and_invalid_requests_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = MetadataStore::open(dir.path()).unwrap();
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
        store.delete_topic("a").unwrap();
        assert!(store.current().get("a").is_none());
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
