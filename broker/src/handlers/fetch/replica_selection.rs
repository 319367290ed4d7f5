//! KIP-392, fetching from the closest replica: a leader whose `replica.selector.class` is
//! Kafka's RackAwareReplicaSelector points a consumer that names its rack (`client.rack`,
//! Fetch v11+) to an in-sync follower in that rack, unless the leader is in it itself; the
//! partition then answers with no records and `preferred_read_replica`, at once. A follower
//! serves consumers' fetches up to its own high watermark (`partition_read`).
//!
//! Every in-sync replica has the consumer's offset: a consumer reads below the high watermark,
//! which is the smallest log end over the ISR. Among several in the rack the lowest id is
//! chosen, so one client keeps fetching from one replica.

use laminar_model::NodeId;

use crate::broker::{BrokerShared, TopicPartition};

/// The first Fetch version with `rack_id` and `preferred_read_replica`.
pub(super) const FIRST_RACK_VERSION: i16 = 11;

/// The replica the consumer in `client_rack` should read `tp` from instead of this leader, if
/// there is one.
pub(super) fn preferred_read_replica(
    shared: &BrokerShared,
    tp: &TopicPartition,
    client_rack: &str,
) -> Option<NodeId> {
    let link = shared.cluster.as_ref()?;
    let selects = (shared.config.cluster.as_ref()).is_some_and(|c| c.replication.rack_aware_replica_selector);
    if !selects || client_rack.is_empty() {
        return None;
    }
    let image = link.image();
    let md = &image.metadata;
    let state = md.partition_by_name(&tp.topic, tp.partition)?;
    let in_rack = |id: &NodeId| {
        md.brokers
            .get(id)
            .is_some_and(|b| !b.fenced && b.rack.as_deref() == Some(client_rack))
    };
    if state.leader != link.node_id || in_rack(&state.leader) {
        return None;
    }
    state
        .isr
        .iter()
        .filter(|id| **id != state.leader && in_rack(id))
        .min()
        .copied()
}
