//! The first start of a data dir in a quorum (`meta.properties` names no node yet) when it
//! served in single-node mode: the topics of its `topics.json` enter the quorum with the same
//! partition counts, config overrides and ids, each partition's only replica on this broker
//! (CreateTopics with a manual assignment, as Kafka's), so this broker leads — and serves —
//! the data it holds, whichever brokers are up meanwhile.
//!
//! A topic the quorum already has (another broker created or migrated it first) is left out
//! with an error naming it; `topics.json` is never changed.

use std::time::{Duration, Instant};

use futures::executor::block_on;
use laminar_controller::api::CreatableTopic;
use laminar_controller::Refusal;
use laminar_engine::metadata::TopicTable;

use super::ClusterLink;

/// How long the migration retries while the quorum has no leader.
const MIGRATION_WAIT: Duration = Duration::from_secs(30);

/// Migrates `single_node` (the table loaded from `topics.json`) as described above.
pub fn single_node_topics(link: &ClusterLink, single_node: &TopicTable) {
    if single_node.topics.is_empty() {
        return;
    }
    let topics: Vec<CreatableTopic> = single_node
        .topics
        .values()
        .map(|t| CreatableTopic {
            name: t.name.clone(),
            num_partitions: -1,
            replication_factor: -1,
            configs: t.configs.clone(),
            // topics.json's counts are bounded when it is loaded (max.broker.partitions).
            assignments: (0..t.partition_count).map(|_| vec![link.node_id]).collect(),
            // The partitions' `partition.metadata` names this id (decision 0020).
            topic_id: Some(t.id),
        })
        .collect();
    let names: Vec<&String> = single_node.topics.keys().collect();
    let deadline = Instant::now() + MIGRATION_WAIT;
    loop {
        match block_on(link.handle.create_topics(topics.clone())) {
            Ok(results) => {
                for r in &results {
                    if let Err(refusal) = &r.result {
                        tracing::error!(
                            topic = r.name,
                            error_code = refusal.response_error().code(),
                            %refusal,
                            "single-node topic not migrated: its local data is not served in cluster mode"
                        );
                    }
                }
                tracing::info!(topics = ?names, node_id = link.node_id.get(), "migrated single-node topics into the quorum, replicas on this broker");
                return;
            }
            Err(Refusal::NotController { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(error) => {
                tracing::error!(%error, topics = ?names, "single-node topics not migrated");
                return;
            }
        }
    }
}
