//! Topic and dynamic broker configs through the metadata log (AlterConfigs and
//! IncrementalAlterConfigs), so that every replica of a topic, and every broker, applies the same
//! values. A broker computes a topic's new
//! overrides from those it saw and checks them against Kafka's topic configs (the controller
//! knows no config keys); the controller writes them only if the topic still holds what the
//! broker saw, so two changes made at once through different brokers cannot lose one another.
//! What a broker sends is bounded here again: it is another process's input.

use std::collections::BTreeMap;

use crate::api::{BrokerConfigChange, ControllerResponse, TopicConfigChange, TopicResult};
use crate::metadata::ClusterMetadata;
use crate::records::{ConfigRecord, ConfigResourceType, MetadataRecord};
use crate::refusal::Refusal;

use super::{distinct_names, topic_refused, Decision};

/// Overrides one topic may hold: Kafka has about forty topic configs.
pub const TOPIC_CONFIGS_MAX: usize = 256;
/// Longest config name.
pub const CONFIG_NAME_LEN_MAX: usize = 255;
/// Longest config value: a throttled-replicas list of every partition of a large topic fits.
pub const CONFIG_VALUE_LEN_MAX: usize = 1 << 20;
/// Topics one request may change: bounds one log entry (with the value bound, 4 GiB at worst
/// in theory; the broker's request size bounds it far lower in practice).
pub const TOPICS_PER_REQUEST_MAX: usize = 1000;

pub fn alter_topic_configs(md: &ClusterMetadata, changes: &[TopicConfigChange]) -> Decision {
    if changes.len() > TOPICS_PER_REQUEST_MAX {
        let reason = format!("at most {TOPICS_PER_REQUEST_MAX} topics per request");
        return Decision::answer(ControllerResponse::Refused(Refusal::InvalidConfig { reason }));
    }
    let twice = distinct_names(changes.iter().map(|c| &c.name));
    let mut records = Vec::new();
    let results = changes
        .iter()
        .map(|change| match twice.contains(&change.name) {
            true => topic_refused(&change.name, Refusal::TopicNamedTwice),
            false => alter_one(md, change, &mut records),
        })
        .collect();
    Decision {
        records,
        response: ControllerResponse::Topics(results),
    }
}

fn alter_one(
    md: &ClusterMetadata,
    change: &TopicConfigChange,
    records: &mut Vec<MetadataRecord>,
) -> TopicResult {
    let Some(topic) = md.topic_by_name(&change.name) else {
        return topic_refused(&change.name, Refusal::UnknownTopic);
    };
    let resource = (ConfigResourceType::Topic, change.name.as_str());
    let result = replace_configs(
        resource,
        &topic.configs,
        (&change.expected, &change.configs),
        records,
    );
    TopicResult {
        name: change.name.clone(),
        result: result.map(|()| topic.topic_id),
    }
}

/// Dynamic broker configs, per broker or the default of every broker. The broker id need not be
/// registered (as Kafka: a broker may be configured before it first starts).
pub fn alter_broker_configs(md: &ClusterMetadata, changes: &[BrokerConfigChange]) -> Decision {
    if changes.len() > TOPICS_PER_REQUEST_MAX {
        let reason = format!("at most {TOPICS_PER_REQUEST_MAX} brokers per request");
        return Decision::answer(ControllerResponse::Refused(Refusal::InvalidConfig { reason }));
    }
    let mut records = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let results = changes
        .iter()
        .map(|change| {
            let name = change.resource_name();
            if !seen.insert(name.clone()) {
                let reason = format!("broker '{name}' named twice");
                return Err(Refusal::InvalidConfig { reason });
            }
            let held = md.broker_configs.get(&name).cloned().unwrap_or_default();
            let resource = (ConfigResourceType::Broker, name.as_str());
            replace_configs(resource, &held, (&change.expected, &change.configs), &mut records)
        })
        .collect();
    Decision {
        records,
        response: ControllerResponse::BrokerConfigs(results),
    }
}

/// Writes the records that turn a resource's `held` configs into `new`, if `new` may be its
/// configs and it still holds `expected`.
fn replace_configs(
    resource: (ConfigResourceType, &str),
    held: &BTreeMap<String, String>,
    (expected, new): (&BTreeMap<String, String>, &BTreeMap<String, String>),
    records: &mut Vec<MetadataRecord>,
) -> Result<(), Refusal> {
    configs_error(new).map_err(|reason| Refusal::InvalidConfig { reason })?;
    if held != expected {
        return Err(Refusal::InvalidUpdateVersion);
    }
    records.extend(config_records(resource, held, new));
    Ok(())
}

/// Why `configs` may not be a topic's overrides, if they may not: too many, a name empty or too
/// long, a value too long.
pub fn configs_error(configs: &BTreeMap<String, String>) -> Result<(), String> {
    if configs.len() > TOPIC_CONFIGS_MAX {
        return Err(format!("at most {TOPIC_CONFIGS_MAX} config overrides per topic"));
    }
    for (name, value) in configs {
        if name.is_empty() || name.len() > CONFIG_NAME_LEN_MAX {
            return Err(format!("config names are 1 to {CONFIG_NAME_LEN_MAX} bytes"));
        }
        if value.len() > CONFIG_VALUE_LEN_MAX {
            return Err(format!("{name}: values are at most {CONFIG_VALUE_LEN_MAX} bytes"));
        }
    }
    Ok(())
}

/// The records that turn a resource's configs from `old` into `new`: one per key set or
/// changed, one without a value per key removed.
fn config_records<'a>(
    (resource_type, resource_name): (ConfigResourceType, &'a str),
    old: &'a BTreeMap<String, String>,
    new: &'a BTreeMap<String, String>,
) -> impl Iterator<Item = MetadataRecord> + 'a {
    let set = new
        .iter()
        .filter(|(name, value)| old.get(*name) != Some(*value))
        .map(|(name, value)| (name, Some(value.clone())));
    let removed = old
        .keys()
        .filter(|name| !new.contains_key(*name))
        .map(|name| (name, None));
    set.chain(removed).map(move |(name, value)| {
        MetadataRecord::Config(ConfigRecord {
            resource_type,
            resource_name: resource_name.to_string(),
            name: name.clone(),
            value,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::TopicRecord;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Metadata holding topic `t` (no partitions) with `configs`.
    fn with_topic(configs: &[(&str, &str)]) -> ClusterMetadata {
        let mut md = ClusterMetadata::default();
        let topic = MetadataRecord::Topic(TopicRecord {
            name: "t".into(),
            topic_id: [9; 16],
        });
        md.apply(&topic, 1).unwrap();
        apply(
            &mut md,
            &config_records((ConfigResourceType::Topic, "t"), &BTreeMap::new(), &map(configs))
                .collect::<Vec<_>>(),
        );
        md
    }

    fn apply(md: &mut ClusterMetadata, records: &[MetadataRecord]) {
        for record in records {
            md.apply(record, 2).expect("a decided record applies");
        }
    }

    fn change(expected: &[(&str, &str)], configs: &[(&str, &str)]) -> TopicConfigChange {
        TopicConfigChange {
            name: "t".into(),
            expected: map(expected),
            configs: map(configs),
        }
    }

    fn results(decision: &Decision) -> Vec<Result<(), Refusal>> {
        match &decision.response {
            ControllerResponse::Topics(results) => {
                results.iter().map(|r| r.result.clone().map(|_| ())).collect()
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_change_from_what_the_topic_holds_writes_the_difference() {
        let mut md = with_topic(&[("retention.ms", "1000"), ("cleanup.policy", "delete")]);
        let altered = change(
            &[("retention.ms", "1000"), ("cleanup.policy", "delete")],
            &[("retention.ms", "5000"), ("segment.bytes", "4096")],
        );
        let decision = alter_topic_configs(&md, &[altered]);
        assert_eq!(results(&decision), [Ok(())]);
        let written: Vec<(String, Option<String>)> = decision
            .records
            .iter()
            .map(|r| match r {
                MetadataRecord::Config(c) => (c.name.clone(), c.value.clone()),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            written,
            [
                ("retention.ms".to_string(), Some("5000".to_string())),
                ("segment.bytes".to_string(), Some("4096".to_string())),
                ("cleanup.policy".to_string(), None),
            ]
        );
        apply(&mut md, &decision.records);
        let held = &md.topic_by_name("t").unwrap().configs;
        assert_eq!(*held, map(&[("retention.ms", "5000"), ("segment.bytes", "4096")]));
    }

    #[test]
    fn a_change_from_overrides_the_topic_no_longer_holds_writes_nothing() {
        let md = with_topic(&[("retention.ms", "1000")]);
        let stale = change(&[], &[("segment.bytes", "4096")]);
        let decision = alter_topic_configs(&md, &[stale]);
        assert_eq!(results(&decision), [Err(Refusal::InvalidUpdateVersion)]);
        assert!(decision.records.is_empty());
    }

    #[test]
    fn unknown_topics_names_twice_and_oversized_configs_are_refused() {
        let md = with_topic(&[]);
        let mut unknown = change(&[], &[("retention.ms", "1")]);
        unknown.name = "nope".into();
        let decision = alter_topic_configs(&md, &[unknown]);
        assert_eq!(results(&decision), [Err(Refusal::UnknownTopic)]);
        let twice = [change(&[], &[]), change(&[], &[])];
        let decision = alter_topic_configs(&md, &twice);
        assert_eq!(
            results(&decision),
            [Err(Refusal::TopicNamedTwice), Err(Refusal::TopicNamedTwice)]
        );
        let long_value = "x".repeat(CONFIG_VALUE_LEN_MAX + 1);
        let too_long = change(&[], &[("retention.ms", long_value.as_str())]);
        let too_many: Vec<(String, String)> = (0..=TOPIC_CONFIGS_MAX)
            .map(|i| (format!("k{i}"), "v".to_string()))
            .collect();
        let too_many = TopicConfigChange {
            name: "t".into(),
            expected: BTreeMap::new(),
            configs: too_many.into_iter().collect(),
        };
        for refused in [too_long, too_many, change(&[], &[("", "v")])] {
            let decision = alter_topic_configs(&md, &[refused]);
            assert!(
                matches!(results(&decision)[..], [Err(Refusal::InvalidConfig { .. })]),
                "{:?}",
                decision.response
            );
            assert!(decision.records.is_empty());
        }
    }
    fn broker_change(
        broker: Option<i32>,
        expected: &[(&str, &str)],
        configs: &[(&str, &str)],
    ) -> BrokerConfigChange {
        BrokerConfigChange {
            broker: broker.map(laminar_model::NodeId::new),
            expected: map(expected),
            configs: map(configs),
        }
    }

    #[test]
    fn broker_configs_are_kept_per_broker_and_as_the_default_and_checked_like_topics() {
        let mut md = ClusterMetadata::default();
        let default = broker_change(None, &[], &[("log.retention.ms", "1000")]);
        let own = broker_change(Some(2), &[], &[("leader.replication.throttled.rate", "10")]);
        let decision = alter_broker_configs(&md, &[default, own]);
        assert_eq!(
            decision.response,
            ControllerResponse::BrokerConfigs(vec![Ok(()), Ok(())])
        );
        apply(&mut md, &decision.records);
        assert_eq!(md.broker_configs[""], map(&[("log.retention.ms", "1000")]));
        assert_eq!(
            md.broker_configs["2"],
            map(&[("leader.replication.throttled.rate", "10")])
        );

        let stale = broker_change(None, &[], &[("log.retention.ms", "5")]);
        let twice = [broker_change(Some(2), &[], &[]), broker_change(Some(2), &[], &[])];
        let decision = alter_broker_configs(&md, &[stale]);
        assert_eq!(
            decision.response,
            ControllerResponse::BrokerConfigs(vec![Err(Refusal::InvalidUpdateVersion)])
        );
        let decision = alter_broker_configs(&md, &twice);
        assert!(matches!(
            &decision.response,
            ControllerResponse::BrokerConfigs(r) if matches!(r[1], Err(Refusal::InvalidConfig { .. }))
        ));
        let removed = broker_change(None, &[("log.retention.ms", "1000")], &[]);
        let decision = alter_broker_configs(&md, &[removed]);
        apply(&mut md, &decision.records);
        assert!(md.broker_configs[""].is_empty());
    }
}
