//! The first start of a cluster on a data dir that served in single-node mode: the topics of
//! its `topics.json` enter the quorum with replication factor 1, the same partition counts and
//! config overrides, so this broker keeps leading (and serving) the data it holds.
//!
//! Only where that placement is certain: the quorum has no topics yet and this broker is its
//! only unfenced broker (the controller places replicas on unfenced brokers). Otherwise the
//! topics are listed in a warning and left out; `topics.json` is never changed.

use std::time::{Duration, Instant};

use futures::executor::block_on;
use laminar_controller::api::error_code::{NONE, NOT_CONTROLLER, TOPIC_ALREADY_EXISTS};
use laminar_controller::api::CreatableTopic;
use laminar_engine::cluster::TopicTable;

use super::ClusterLink;

/// How long the migration retries while the quorum has no leader.
const MIGRATION_WAIT: Duration = Duration::from_secs(30);

/// Migrates `single_node` (the table loaded from `topics.json`) as described above.
pub fn single_node_topics(link: &ClusterLink, single_node: &TopicTable) {
    if single_node.topics.is_empty() {
        return;
    }
    let md = link.handle.metadata().metadata.clone();
    let only_broker = md.brokers.values().filter(|b| !b.fenced).count() == 1 && md.is_unfenced(link.node_id);
    let names: Vec<&String> = single_node.topics.keys().collect();
    if !md.topics.is_empty() || !only_broker {
        tracing::warn!(
            topics = ?names,
            "topics.json holds single-node topics that were not migrated into the quorum (it \
             already has topics, or other brokers are up); they are not served in cluster mode"
        );
        return;
    }
    let topics: Vec<CreatableTopic> = single_node
        .topics
        .values()
        .map(|t| CreatableTopic {
            name: t.name.clone(),
            num_partitions: t.partition_count,
            replication_factor: 1,
            configs: t.configs.clone(),
        })
        .collect();
    let deadline = Instant::now() + MIGRATION_WAIT;
    loop {
        match block_on(link.handle.create_topics(topics.clone())) {
            Ok(results) => {
                for r in results
                    .iter()
                    .filter(|r| r.error_code != NONE && r.error_code != TOPIC_ALREADY_EXISTS)
                {
                    tracing::error!(topic = r.name, error_code = r.error_code, "topic not migrated");
                }
                tracing::info!(topics = ?names, "migrated single-node topics into the quorum (replication factor 1)");
                return;
            }
            Err(e) if e.error_code == NOT_CONTROLLER && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(error) => {
                tracing::error!(%error, topics = ?names, "single-node topics not migrated");
                return;
            }
        }
    }
}
