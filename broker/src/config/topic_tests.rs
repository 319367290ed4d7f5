use super::*;
use crate::config::broker_keys::find_broker_key;

fn overrides(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn broker(text: &str) -> BrokerConfig {
    BrokerConfig::from_properties(text, &[]).unwrap().config
}

#[test]
fn defaults_come_from_the_broker() {
    let c = TopicConfig::resolve(&BTreeMap::new(), &BrokerConfig::default()).unwrap();
    assert_eq!(c.segment_bytes, 1_073_741_824);
    assert_eq!(c.segment_ms, 168 * 3_600_000);
    assert_eq!(c.retention_ms, 168 * 3_600_000);
    assert_eq!(c.retention_bytes, -1);
    assert_eq!(c.index_interval_bytes, 4096);
    assert_eq!(c.segment_index_bytes, 10_485_760);
    assert_eq!(c.max_message_bytes, 1_048_588);
    assert_eq!(c.compression_type, CompressionType::Producer);
    assert_eq!(c.delete_retention_ms, 86_400_000);
    assert_eq!(c.file_delete_delay_ms, 60_000);
    assert_eq!(c.flush_messages, i64::MAX);
    assert_eq!(c.min_cleanable_dirty_ratio, 0.5);
    assert_eq!(c.local_retention_ms, -2);
    assert!(!c.unclean_leader_election_enable);
    assert!(c.message_downconversion_enable);

    let b = broker(
        "log.segment.bytes=1048576\nlog.retention.minutes=10\nlog.roll.hours=1\n\
                    message.max.bytes=2000\nlog.message.timestamp.type=LogAppendTime\n\
                    log.cleanup.policy=compact",
    );
    let settings = TopicConfig::resolve(&BTreeMap::new(), &b).unwrap().log_config();
    assert_eq!(
        settings,
        LogConfig {
            segment_bytes: 1_048_576,
            segment_ms: 3_600_000,
            retention_ms: 600_000,
            retention_bytes: -1,
            index_interval_bytes: 4096,
            max_message_bytes: 2000,
            timestamp_type: laminar_engine::partition::TimestampType::LogAppendTime,
            cleanup_policy_compact: true,
            cleanup_policy_delete: false,
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
        }
    );
}

#[test]
fn overrides_beat_broker_defaults() {
    let b = broker("log.segment.bytes=1048576");
    let o = overrides(&[
        ("segment.bytes", "4096"),
        ("retention.ms", "-1"),
        ("cleanup.policy", "compact,delete"),
        ("message.timestamp.type", "LogAppendTime"),
        ("compression.type", "zstd"),
    ]);
    let c = TopicConfig::resolve(&o, &b).unwrap();
    assert_eq!(c.segment_bytes, 4096);
    assert_eq!(c.retention_ms, -1);
    assert!(c.cleanup_policy.compact && c.cleanup_policy.delete);
    assert_eq!(c.compression_type, CompressionType::Zstd);
    assert!(c.log_config().cleanup_policy_compact);
}

#[test]
fn override_errors_name_the_key() {
    let b = BrokerConfig::default();
    let cases = [
        ("segment.bytes", "abc"),
        ("segment.bytes", "13"),
        ("retention.ms", "0"),
        ("cleanup.policy", "shred"),
        ("compression.type", "brotli"),
        ("max.message.bytes", "-1"),
        ("min.cleanable.dirty.ratio", "2"),
        ("remote.storage.enable", "true"),
        ("leader.replication.throttled.replicas", "x"),
        ("no.such.config", "1"),
        ("log.segment.bytes", "1048576"),
    ];
    for (name, value) in cases {
        let err = TopicConfig::resolve(&overrides(&[(name, value)]), &b).unwrap_err();
        assert_eq!(err.key(), Some(name), "{err}");
        assert!(err.to_string().contains(value), "{err}");
        assert!(validate_topic_override(name, value).is_err());
    }
    let err = validate_topic_override("log.segment.bytes", "1").unwrap_err();
    assert!(err.to_string().contains("unknown topic config"), "{err}");
    let o = overrides(&[("min.compaction.lag.ms", "10"), ("max.compaction.lag.ms", "5")]);
    let err = TopicConfig::resolve(&o, &b).unwrap_err();
    assert_eq!(err.key(), Some("min.compaction.lag.ms"));
    assert!(validate_topic_override("retention.ms", "86400000").is_ok());
}

#[test]
fn describe_lists_every_topic_config_with_sources() {
    let b = broker("log.retention.hours=1\nlog.segment.bytes=1048576");
    let o = overrides(&[("segment.bytes", "4096"), ("compression.type", "lz4")]);
    let entries = TopicConfig::describe(&o, &b);
    assert_eq!(entries.len(), TOPIC_KEYS.len());
    let get = |name: &str| entries.iter().find(|e| e.name == name).unwrap();

    let segment = get("segment.bytes");
    assert_eq!(segment.value.as_deref(), Some("4096"));
    assert_eq!(segment.source, ConfigSource::DynamicTopic);
    let synonym_sources: Vec<(&str, ConfigSource)> = segment
        .synonyms
        .iter()
        .map(|s| (s.name.as_str(), s.source))
        .collect();
    assert_eq!(
        synonym_sources,
        vec![
            ("segment.bytes", ConfigSource::DynamicTopic),
            ("log.segment.bytes", ConfigSource::StaticBroker),
            ("log.segment.bytes", ConfigSource::Default),
        ]
    );
    assert_eq!(segment.synonyms[2].value.as_deref(), Some("1073741824"));

    let retention = get("retention.ms");
    assert_eq!(retention.value.as_deref(), Some("3600000"));
    assert_eq!(retention.source, ConfigSource::StaticBroker);

    let index = get("index.interval.bytes");
    assert_eq!(index.value.as_deref(), Some("4096"));
    assert_eq!(index.source, ConfigSource::Default);

    let remote = get("remote.storage.enable");
    assert_eq!(remote.value.as_deref(), Some("false"));
    assert_eq!(remote.source, ConfigSource::Default);
    assert!(remote.synonyms.is_empty());

    assert!(entries
        .iter()
        .all(|e| !e.read_only && !e.sensitive && !e.doc.is_empty()));
    assert_eq!(get("compression.type").source.kafka_code(), 1);
    assert_eq!(get("retention.ms").source.kafka_code(), 4);
    assert_eq!(get("preallocate").source.kafka_code(), 5);
}

#[test]
fn registry_is_consistent_with_the_broker_registry() {
    for key in TOPIC_KEYS {
        for broker_key in key.broker_keys {
            assert!(find_broker_key(broker_key).is_some(), "{broker_key}");
        }
        if key.broker_keys.is_empty() {
            key.kind.validate(key.name, key.default).unwrap();
        }
    }
    let names: std::collections::BTreeSet<&str> = TOPIC_KEYS.iter().map(|k| k.name).collect();
    assert_eq!(names.len(), TOPIC_KEYS.len());
    // Every topic default, taken from the broker's defaults, is valid for the topic key.
    for entry in TopicConfig::describe(&BTreeMap::new(), &BrokerConfig::default()) {
        validate_topic_override(&entry.name, entry.value.as_deref().unwrap()).unwrap();
    }
}
