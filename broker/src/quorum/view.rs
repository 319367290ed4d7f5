//! The topic table as a view of the quorum's metadata: a thread waits on the controller's
//! watch channel and, on every applied change, publishes the image to the [`ClusterLink`] and
//! the table derived from it to the shards' `MetadataStore` (one writer, as in single-node
//! mode). Topics that disappear, or whose configs change, are queued for shard 0, which deletes
//! or reconfigures their local partitions. A config change committed in the metadata log thus
//! holds on every replica once that replica's broker has applied the entry and shard 0 has
//! passed the change to the partitions' shards: no timer is involved.

use laminar_model::NodeId;
use std::collections::BTreeMap;
use std::sync::Arc;

use laminar_controller::{ClusterMetadata, MetadataImage};
use laminar_engine::metadata::TopicMetadata;

use super::{ClusterLink, MetadataChange};
use crate::broker::BrokerShared;

/// The shards' topic table for `md`: every topic, its partition count, replication factor
/// (of its first partition's target replicas: a reassignment lists those it removes too) and
/// config overrides.
pub fn topic_table(md: &ClusterMetadata) -> BTreeMap<String, Arc<TopicMetadata>> {
    md.topics
        .values()
        .map(|t| {
            let topic = TopicMetadata {
                name: t.name.clone(),
                id: t.topic_id,
                partition_count: i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
                replication_factor: t.partitions.values().next().map_or(0, |p| {
                    i16::try_from(p.target_replicas().len()).unwrap_or(i16::MAX)
                }),
                configs: t.configs.clone(),
            };
            (t.name.clone(), Arc::new(topic))
        })
        .collect()
}

/// Publishes the current image once, then keeps publishing from a thread of its own until the
/// controller stops.
pub fn start_sync(shared: Arc<BrokerShared>, link: Arc<ClusterLink>) -> anyhow::Result<()> {
    let mut changes = link.handle.subscribe();
    let first = changes.borrow_and_update().clone();
    let mut previous = publish(&shared, &link, first, &BTreeMap::new());
    std::thread::Builder::new()
        .name("laminar-metadata".into())
        .spawn(move || {
            while futures::executor::block_on(changes.changed()).is_ok() {
                let image = changes.borrow_and_update().clone();
                previous = publish(&shared, &link, image, &previous);
            }
        })?;
    Ok(())
}

fn publish(
    shared: &BrokerShared,
    link: &ClusterLink,
    image: Arc<MetadataImage>,
    previous: &BTreeMap<String, Arc<TopicMetadata>>,
) -> BTreeMap<String, Arc<TopicMetadata>> {
    let table = topic_table(&image.metadata);
    let layers = crate::dynamic_configs::layers_in(&image.metadata, shared.config.node_id);
    link.image.store(image);
    shared.metadata.publish_view(table.clone());
    link.published.notify(usize::MAX);
    let mut changes: Vec<MetadataChange> = previous
        .iter()
        .filter_map(|(name, old)| match table.get(name) {
            Some(new) if new.id == old.id && new.configs == old.configs => None,
            Some(new) if new.id == old.id => Some(MetadataChange::Reconfigured(new.clone())),
            _ => Some(MetadataChange::Removed(old.clone())),
        })
        .collect();
    match shared.effective_config.update(&shared.config, |_| Ok(layers)) {
        Ok(true) => changes.push(MetadataChange::BrokerReconfigured),
        Ok(false) => {}
        Err(error) => tracing::warn!(error = %format!("{error:#}"), "dynamic broker configs not applied"),
    }
    for change in changes {
        if link.topic_changes.0.send_blocking(change).is_err() {
            break;
        }
    }
    table
}

/// Shard 0's task: deletes the local partitions of every topic removed from the metadata, and
/// applies new configs to the open partitions of every topic whose configs changed.
pub async fn apply_topic_changes(ctx: std::rc::Rc<crate::broker::BrokerCtx>, link: Arc<ClusterLink>) {
    use crate::handlers::topic_admin::{delete_partitions, push_configs};
    while let Some(change) = link.next_metadata_change().await {
        match change {
            MetadataChange::Removed(topic) => {
                delete_partitions(&ctx, &topic).await;
                tracing::info!(
                    topic = topic.name,
                    "deleted the local partitions of a removed topic"
                );
            }
            MetadataChange::Reconfigured(topic) => {
                push_configs(&ctx, &topic).await;
                tracing::info!(topic = topic.name, configs = ?topic.configs, "applied new topic configs");
            }
            MetadataChange::BrokerReconfigured => {
                crate::handlers::alter_configs::apply_dynamic_configs(&ctx).await;
            }
        }
    }
}

/// One registered broker as clients reach it: its PLAINTEXT endpoint (else its first).
pub struct AliveBroker {
    pub id: NodeId,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    pub fenced: bool,
}

/// The unfenced brokers of `md` that have `listener`, by id, reached there.
pub fn alive_brokers(md: &ClusterMetadata, listener: &str) -> Vec<AliveBroker> {
    let mut brokers = registered_brokers(md, listener);
    brokers.retain(|b| !b.fenced);
    brokers
}

/// Every registered broker of `md` that has `listener`, fenced ones included, by id, reached
/// there. As Kafka, a client is only told of endpoints of the listener it came in on: one on a
/// SASL listener is never sent to another's PLAINTEXT port.
pub fn registered_brokers(md: &ClusterMetadata, listener: &str) -> Vec<AliveBroker> {
    md.brokers
        .values()
        .filter_map(|b| {
            let endpoint = b.endpoints.iter().find(|e| e.listener_name == listener)?;
            Some(AliveBroker {
                id: b.broker_id,
                host: endpoint.host.clone(),
                port: i32::from(endpoint.port),
                rack: b.rack.clone(),
                fenced: b.fenced,
            })
        })
        .collect()
}

/// Where a broker is reached, if it is alive.
pub fn alive_broker(md: &ClusterMetadata, id: NodeId, listener: &str) -> Option<AliveBroker> {
    alive_brokers(md, listener).into_iter().find(|b| b.id == id)
}
