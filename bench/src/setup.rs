//! Finding (or creating) the benchmark topic and the leaders of its partitions.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use kafka_protocol_codes::{TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION};
use laminar_client::{ClientConfig, ClusterMetadata, Connection, NewTopic};

use crate::cli::CommonArgs;

/// Kafka error codes the set-up tolerates.
mod kafka_protocol_codes {
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
}

/// The partitions of the topic and the address of each one's leader.
#[derive(Debug, Clone)]
pub struct TopicLayout {
    /// `(partition, leader host:port)`, by partition index.
    pub leaders: Vec<(i32, String)>,
    /// How to connect to them (TLS, SASL), as `--security-protocol` said.
    pub client: ClientConfig,
}

impl TopicLayout {
    /// The leader of every partition, when one broker leads them all.
    pub fn single_leader(&self) -> Option<&str> {
        let (_, first) = self.leaders.first()?;
        self.leaders
            .iter()
            .all(|(_, leader)| leader == first)
            .then_some(first.as_str())
    }

    /// Deals the partitions to `workers` round-robin; each worker's partitions must share a
    /// leader (one connection per worker). With more workers than partitions, workers share.
    pub fn deal(&self, workers: usize) -> anyhow::Result<Vec<(String, Vec<i32>)>> {
        assert!(workers > 0 && !self.leaders.is_empty(), "workers and partitions");
        let mut dealt: Vec<(String, Vec<i32>)> = Vec::new();
        for worker in 0..workers {
            let mine: Vec<&(i32, String)> = if workers >= self.leaders.len() {
                vec![&self.leaders[worker % self.leaders.len()]]
            } else {
                self.leaders.iter().skip(worker).step_by(workers).collect()
            };
            let leader = mine[0].1.clone();
            if let Some((partition, other)) = mine.iter().find(|(_, l)| *l != leader) {
                bail!("worker {worker}'s partitions have different leaders ({leader} and {other} for partition {partition}); use as many workers as partitions");
            }
            dealt.push((leader, mine.iter().map(|(p, _)| *p).collect()));
        }
        Ok(dealt)
    }
}

/// Looks `--topic` up on `--brokers`, creating it with `--partitions` and
/// `--replication-factor` if it does not exist, and waits (up to 15 s) until every partition has
/// a leader.
pub fn prepare_topic(common: &CommonArgs) -> anyhow::Result<TopicLayout> {
    let (bootstrap, topic) = (common.brokers.as_str(), common.topic.as_str());
    let client = common.security.client_config()?;
    let mut connection =
        Connection::connect(bootstrap, &client).with_context(|| format!("connecting to {bootstrap}"))?;
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut created = false;
    loop {
        let metadata = connection.metadata(Some(&[topic]), false)?;
        match layout_of(&metadata, topic, &client) {
            Ok(layout) => return Ok(layout),
            Err(missing_code) if missing_code == UNKNOWN_TOPIC_OR_PARTITION && !created => {
                let outcome = connection.create_topics(
                    &[NewTopic {
                        name: topic.to_owned(),
                        partitions: common.partitions,
                        replication_factor: common.replication_factor,
                        configs: common.topic_configs.clone(),
                    }],
                    30_000,
                )?;
                for (name, result) in outcome {
                    if let Err(error) = result {
                        if error.code != TOPIC_ALREADY_EXISTS {
                            bail!("creating topic {name}: {error}");
                        }
                    }
                }
                created = true;
            }
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Err(code) => {
                bail!("topic {topic} has no leader for every partition after 15 s (last error code {code})")
            }
        }
    }
}

/// The layout, or the error code that prevents it (-1: a partition without a leader).
fn layout_of(metadata: &ClusterMetadata, topic: &str, client: &ClientConfig) -> Result<TopicLayout, i16> {
    let topic_metadata = metadata.topic(topic).ok_or(UNKNOWN_TOPIC_OR_PARTITION)?;
    if let Some(error) = &topic_metadata.error {
        return Err(error.code);
    }
    if topic_metadata.partitions.is_empty() {
        return Err(UNKNOWN_TOPIC_OR_PARTITION);
    }
    let mut leaders = Vec::new();
    for partition in &topic_metadata.partitions {
        if let Some(error) = &partition.error {
            return Err(error.code);
        }
        let address = metadata.broker_address(partition.leader).ok_or(-1i16)?;
        leaders.push((partition.partition, address));
    }
    leaders.sort();
    Ok(TopicLayout {
        leaders,
        client: client.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(leaders: &[(i32, &str)]) -> TopicLayout {
        TopicLayout {
            leaders: leaders.iter().map(|(p, l)| (*p, (*l).to_owned())).collect(),
            client: ClientConfig::default(),
        }
    }

    #[test]
    fn deals_partitions_round_robin() {
        let one_broker = layout(&[(0, "a"), (1, "a"), (2, "a"), (3, "a")]);
        assert_eq!(
            one_broker.deal(2).unwrap(),
            vec![("a".into(), vec![0, 2]), ("a".into(), vec![1, 3])]
        );
        assert_eq!(one_broker.deal(5).unwrap()[4], ("a".into(), vec![0]));
        let two_brokers = layout(&[(0, "a"), (1, "b")]);
        assert!(two_brokers.deal(1).is_err());
        assert_eq!(two_brokers.deal(2).unwrap()[1], ("b".into(), vec![1]));
    }
}
