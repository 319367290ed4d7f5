//! Dynamic broker configs (Kafka's `kafka-configs --alter --entity-type brokers`): the keys that
//! may change while a broker runs, set for one broker or as every broker's default
//! (`--entity-default`), layered over the static config.
//!
//! Precedence is Kafka's: per key, this broker's dynamic value, else the dynamic default, else
//! the static value (file or `--override`), else the built-in default. Synonyms resolve as at
//! start, so a static `log.retention.ms` still beats a dynamic `log.retention.hours`.
//!
//! Dynamic here: the broker-wide defaults of topic configs (`log.retention.ms`,
//! `log.segment.bytes`, `log.cleanup.policy`, `min.insync.replicas`, `message.max.bytes`, ...)
//! and the replication throttle rates. The rest is read once at start and stays read-only.

use std::collections::BTreeMap;

use super::broker_keys::find_broker_key;
pub use super::dynamic_layers::DynamicLayers;
use super::topic_keys::TOPIC_KEYS;
use super::ConfigError;

/// The replication throttle rates: per broker in Kafka, applied by every shard when they change.
pub const THROTTLE_RATE_KEYS: [&str; 2] = [
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
];

/// Keeps only the entries of `layers` a broker may apply: dynamic keys with values their kind
/// accepts. What is dropped is returned, for a warning (another broker wrote it: it is input).
pub fn retain_valid(layers: &mut DynamicLayers) -> Vec<ConfigError> {
    let mut dropped = Vec::new();
    for layer in [&mut layers.default, &mut layers.broker] {
        layer.retain(|name, value| match validate_one(name, value) {
            Ok(()) => true,
            Err(e) => {
                dropped.push(e);
                false
            }
        });
    }
    dropped
}

/// Whether broker key `name` may change at run time.
pub fn is_dynamic(name: &str) -> bool {
    THROTTLE_RATE_KEYS.contains(&name) || TOPIC_KEYS.iter().any(|key| key.broker_keys.contains(&name))
}

/// Checks dynamic configs as an AlterConfigs of a broker gives them: every key dynamic, every
/// value of its key's kind.
pub fn validate(configs: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    configs
        .iter()
        .try_for_each(|(name, value)| validate_one(name, value))
}

fn validate_one(name: &str, value: &str) -> Result<(), ConfigError> {
    let Some(key) = find_broker_key(name) else {
        return Err(ConfigError::UnknownKey {
            scope: "broker",
            key: name.to_string(),
            value: value.to_string(),
        });
    };
    if !is_dynamic(name) {
        return Err(ConfigError::Rejected {
            key: name.to_string(),
            value: value.to_string(),
            reason: "not a dynamic broker config: set it in server.properties and restart".into(),
        });
    }
    key.kind.validate(name, value)
}

/// Configs from `(key, value)` pairs, for tests.
#[cfg(test)]
pub(crate) fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use configs as map;

    #[test]
    fn topic_defaults_and_throttle_rates_are_dynamic_the_rest_is_not() {
        for name in [
            "log.retention.ms",
            "log.retention.hours",
            "log.segment.bytes",
            "log.cleanup.policy",
            "min.insync.replicas",
            "message.max.bytes",
            "leader.replication.throttled.rate",
        ] {
            assert!(is_dynamic(name), "{name}");
        }
        for name in ["node.id", "listeners", "log.dirs", "num.partitions"] {
            assert!(!is_dynamic(name), "{name}");
        }
    }

    #[test]
    fn validation_names_the_key_and_refuses_static_unknown_and_malformed() {
        assert!(validate(&map(&[("log.retention.ms", "1000")])).is_ok());
        for bad in [
            ("listeners", "PLAINTEXT://:1"),
            ("no.such.key", "1"),
            ("log.retention.ms", "soon"),
        ] {
            let error = validate(&map(&[bad])).unwrap_err();
            assert_eq!(error.key(), Some(bad.0));
        }
    }

    #[test]
    fn this_brokers_value_wins_over_the_default_and_invalid_entries_are_dropped() {
        let mut layers = DynamicLayers {
            default: map(&[
                ("log.retention.ms", "1"),
                ("log.segment.bytes", "2048"),
                ("listeners", "x"),
            ]),
            broker: map(&[("log.retention.ms", "5"), ("min.insync.replicas", "zero")]),
        };
        assert_eq!(retain_valid(&mut layers).len(), 2);
        let merged: BTreeMap<&String, &String> = layers.merged().collect();
        let expected = map(&[("log.retention.ms", "5"), ("log.segment.bytes", "2048")]);
        assert_eq!(merged, expected.iter().collect());
    }
}
