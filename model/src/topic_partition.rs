//! A topic partition: the unit of a log, of leadership and of replication.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A topic partition. The name is shared: a request naming thousands of partitions of one
/// topic holds one copy of it, and the copies a partition's work takes to its shard and back
/// are counts, not allocations (docs/decisions/0027, fetches over thousands of partitions).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TopicPartition {
    pub topic: Arc<str>,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<Arc<str>>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

/// Kafka's form, `topic-partition`, as in log directory names and log lines.
impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_kafka_names_partition_directories() {
        assert_eq!(TopicPartition::new("orders", 3).to_string(), "orders-3");
    }

    #[test]
    fn serialises_as_a_name_and_a_number() {
        let tp = TopicPartition::new("orders", 3);
        let text = serde_json::to_string(&tp).unwrap();
        assert_eq!(text, r#"{"topic":"orders","partition":3}"#);
        assert_eq!(serde_json::from_str::<TopicPartition>(&text).unwrap(), tp);
    }
}
