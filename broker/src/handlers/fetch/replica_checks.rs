//! Whether a fetch that claims a replica id is taken as that follower's. A follower's fetch
//! moves the ISR and the high watermark, so a client passing for one could make acks=all
//! acknowledge records held on one disk only. Run before the fetch reads anything.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::FetchRequest;
use laminar_model::NodeId;
use laminar_security::Operation;

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::kafka_listener::{self, ListenerId};

/// From v15 the follower's id and broker epoch travel in `ReplicaState` (KIP-903).
pub const FIRST_REPLICA_STATE_VERSION: i16 = 15;

/// Moves a v15+ request's `ReplicaState` id into `replica_id`, where older versions carry it,
/// so that the rest of the broker reads one field.
pub fn take_replica_id(request: &mut FetchRequest, version: i16) {
    if version >= FIRST_REPLICA_STATE_VERSION {
        request.replica_id = request.replica_state.replica_id;
    }
}

/// Why a fetch claiming a replica id is refused, if it is:
/// - it lacks ClusterAction on the cluster (Kafka's check);
/// - in a cluster, it came in on another listener than `inter.broker.listener.name`;
/// - in a cluster, it does not carry the broker epoch the claimed broker registered with: it is
///   older than v15 (no epoch), names a broker the metadata does not hold
///   (BROKER_ID_NOT_REGISTERED), or an epoch not the registered one (STALE_BROKER_EPOCH: a
///   broker that restarted and registered again, or a forgery).
pub fn refusal(
    ctx: &BrokerCtx,
    request: &FetchRequest,
    version: i16,
    (listener, access): (ListenerId, &Access),
) -> Option<ResponseError> {
    let replica_id = request.replica_id.0;
    if replica_id < 0 {
        return None;
    }
    let config = &ctx.state.shared.config;
    let elsewhere = config.cluster.is_some()
        && kafka_listener::name_of(config, listener) != kafka_listener::inter_broker_name(config);
    if elsewhere || !access.allows_cluster(Operation::ClusterAction) {
        return Some(ResponseError::ClusterAuthorizationFailed);
    }
    let link = ctx.state.shared.cluster.as_ref()?;
    if version < FIRST_REPLICA_STATE_VERSION {
        return Some(ResponseError::UnsupportedVersion);
    }
    let claimed_epoch = request.replica_state.replica_epoch;
    link.peek_image(
        |image| match image.metadata.brokers.get(&NodeId::new(replica_id)) {
            None => Some(ResponseError::BrokerIdNotRegistered),
            Some(broker) if broker.broker_epoch.get() != claimed_epoch => {
                Some(ResponseError::StaleBrokerEpoch)
            }
            Some(_) => None,
        },
    )
}
