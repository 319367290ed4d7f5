//! Per-partition log configuration (Kafka topic configs with Kafka's defaults).

pub use super::batch::TimestampType;

/// Topic-level settings of one partition's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would exceed this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment's first batch is older than this.
    pub segment_ms: i64,
    /// `retention.ms`; -1 keeps forever.
    pub retention_ms: i64,
    /// `retention.bytes`; -1 is unlimited.
    pub retention_bytes: i64,
    /// `index.interval.bytes`: bytes between sparse index entries.
    pub index_interval_bytes: u32,
    /// `max.message.bytes`: largest batch accepted.
    pub max_message_bytes: u32,
    /// `message.timestamp.type`.
    pub timestamp_type: TimestampType,
    /// `cleanup.policy` contains `compact`: closed segments are compacted by key
    /// (`compaction.rs`).
    pub cleanup_policy_compact: bool,
    /// `cleanup.policy` contains `delete`: `retention.ms` / `retention.bytes` delete old
    /// segments. A compact-only log keeps every segment (compaction bounds its size).
    pub cleanup_policy_delete: bool,
    /// `delete.retention.ms`: how long a tombstone (null value) outlives compaction, counted
    /// from its segment's largest timestamp.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: a closed segment is compacted only once its largest timestamp
    /// is at least this old.
    pub min_compaction_lag_ms: i64,
}

impl Default for LogConfig {
    fn default() -> Self {
        const DAY_MS: i64 = 24 * 60 * 60 * 1000;
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * DAY_MS,
            retention_ms: 7 * DAY_MS,
            retention_bytes: -1,
            index_interval_bytes: 4096,
            max_message_bytes: 1_048_588,
            timestamp_type: TimestampType::CreateTime,
            cleanup_policy_compact: false,
            cleanup_policy_delete: true,
            delete_retention_ms: DAY_MS,
            min_compaction_lag_ms: 0,
        }
    }
}
