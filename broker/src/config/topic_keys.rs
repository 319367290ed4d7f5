//! The registry of Kafka's topic-level configs: one row per key, with the broker keys its
//! default comes from (in precedence order) or, for the few without a broker counterpart, a
//! constant default.

use super::value::{CleanupPolicy, CompressionType, Kind, TimestampType};

/// One topic-level config.
pub struct TopicKey {
    pub name: &'static str,
    /// Broker keys whose effective value is this config's default, highest precedence first.
    /// The first one's effective value is used (the broker resolves its own fallbacks); all are
    /// reported as synonyms.
    pub broker_keys: &'static [&'static str],
    /// The default when `broker_keys` is empty.
    pub default: &'static str,
    pub kind: Kind,
    pub doc: &'static str,
}

const I32_MAX: i64 = i32::MAX as i64;
const NON_NEGATIVE: Kind = Kind::Int {
    min: 0,
    max: i64::MAX,
};
const POSITIVE: Kind = Kind::Int {
    min: 1,
    max: i64::MAX,
};

const fn key(
    name: &'static str,
    broker_keys: &'static [&'static str],
    default: &'static str,
    kind: Kind,
    doc: &'static str,
) -> TopicKey {
    TopicKey {
        name,
        broker_keys,
        default,
        kind,
        doc,
    }
}

#[rustfmt::skip]
pub static TOPIC_KEYS: &[TopicKey] = &[
    key("cleanup.policy", &["log.cleanup.policy"], "", Kind::ChoiceList(CleanupPolicy::NAMES),
        "delete (by retention), compact (keep the last record per key), or both."),
    key("compression.type", &["compression.type"], "", Kind::Choice(CompressionType::NAMES),
        "Compression of stored batches; producer keeps what the producer sent."),
    key("delete.retention.ms", &["log.cleaner.delete.retention.ms"], "", NON_NEGATIVE,
        "How long tombstones stay in a compacted topic."),
    key("file.delete.delay.ms", &["log.segment.delete.delay.ms"], "", NON_NEGATIVE,
        "Delay between unlinking a segment and deleting its files."),
    key("flush.messages", &["log.flush.interval.messages"], "", POSITIVE,
        "Records appended before the partition is flushed."),
    key("flush.ms", &["log.flush.interval.ms"], "", NON_NEGATIVE,
        "Milliseconds a record may stay unflushed."),
    key("follower.replication.throttled.replicas", &[], "", Kind::ThrottledReplicas,
        "Replicas (partition:broker, or *) whose follower fetches are throttled."),
    key("index.interval.bytes", &["log.index.interval.bytes"], "",
        Kind::Int { min: 0, max: I32_MAX },
        "Bytes of log between two entries of the sparse offset index."),
    key("leader.replication.throttled.replicas", &[], "", Kind::ThrottledReplicas,
        "Replicas (partition:broker, or *) whose leader-side replication is throttled."),
    key("local.retention.bytes", &["log.local.retention.bytes"], "",
        Kind::Int { min: -2, max: i64::MAX },
        "Tiered storage: local retention in bytes (-2: same as retention.bytes)."),
    key("local.retention.ms", &["log.local.retention.ms"], "",
        Kind::Int { min: -2, max: i64::MAX },
        "Tiered storage: local retention time (-2: same as retention.ms)."),
    key("max.compaction.lag.ms", &["log.cleaner.max.compaction.lag.ms"], "", POSITIVE,
        "Maximum age of an uncompacted record."),
    key("max.message.bytes", &["message.max.bytes"], "", Kind::Int { min: 0, max: I32_MAX },
        "Largest record batch accepted, after compression."),
    key("message.downconversion.enable", &["log.message.downconversion.enable"], "", Kind::Bool,
        "Whether old fetch versions get down-converted batches."),
    key("message.timestamp.after.max.ms", &["log.message.timestamp.after.max.ms"], "",
        NON_NEGATIVE, "How far in the future a CreateTime timestamp may be."),
    key("message.timestamp.before.max.ms", &["log.message.timestamp.before.max.ms"], "",
        NON_NEGATIVE, "How far in the past a CreateTime timestamp may be."),
    key("message.timestamp.difference.max.ms", &["log.message.timestamp.difference.max.ms"], "",
        NON_NEGATIVE, "Deprecated by Kafka: largest gap between a CreateTime timestamp and now."),
    key("message.timestamp.type", &["log.message.timestamp.type"], "",
        Kind::Choice(TimestampType::NAMES),
        "CreateTime keeps the producer's timestamps; LogAppendTime stamps the append time."),
    key("min.cleanable.dirty.ratio", &["log.cleaner.min.cleanable.ratio"], "", Kind::Ratio,
        "Dirty fraction of the log that makes it eligible for compaction."),
    key("min.compaction.lag.ms", &["log.cleaner.min.compaction.lag.ms"], "", NON_NEGATIVE,
        "Minimum age of a record before compaction may remove it."),
    key("min.insync.replicas", &["min.insync.replicas"], "", Kind::Int { min: 1, max: I32_MAX },
        "In-sync replicas that must hold a batch before acks=all succeeds."),
    key("preallocate", &["log.preallocate"], "", Kind::Bool,
        "Preallocate segment files at creation."),
    key("remote.storage.enable", &[], "false", Kind::FalseOnly,
        "Tiered storage; Laminar has none, so only false is accepted."),
    key("retention.bytes", &["log.retention.bytes"], "",
        Kind::IntOrUnlimited { min: 0, max: i64::MAX },
        "Size per partition beyond which whole old segments are deleted (-1: no limit)."),
    key("retention.ms", &["log.retention.ms", "log.retention.minutes", "log.retention.hours"], "",
        Kind::IntOrUnlimited { min: 1, max: i64::MAX },
        "How long segments are kept (-1: forever)."),
    key("segment.bytes", &["log.segment.bytes"], "", Kind::Int { min: 14, max: I32_MAX },
        "Size at which a segment file rolls."),
    key("segment.index.bytes", &["log.index.size.max.bytes"], "",
        Kind::Int { min: 4, max: I32_MAX },
        "Largest offset index file; a segment rolls when its index is full."),
    key("segment.jitter.ms", &["log.roll.jitter.ms"], "", NON_NEGATIVE,
        "Random jitter subtracted from segment.ms."),
    key("segment.ms", &["log.roll.ms", "log.roll.hours"], "", POSITIVE,
        "Age at which a segment rolls even if not full."),
    key("unclean.leader.election.enable", &["unclean.leader.election.enable"], "", Kind::Bool,
        "Allow an out-of-sync replica to become leader, losing data."),
];

pub fn find_topic_key(name: &str) -> Option<&'static TopicKey> {
    TOPIC_KEYS.iter().find(|k| k.name == name)
}
