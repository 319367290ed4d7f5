//! DescribeCluster (v0–2): the cluster id, the controller and the brokers (this one in
//! single-node mode; the quorum's unfenced brokers and its leader in cluster mode, and the
//! fenced ones too, marked, when v2 asks with `IncludeFencedBrokers`, KIP-1073).

use std::rc::Rc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::BrokerCtx;
use crate::handlers::metadata::advertised;
use crate::kafka_listener::{self, ListenerId};
use crate::quorum::view::{alive_brokers, registered_brokers};

const OPERATIONS_OMITTED: i32 = i32::MIN;

/// DescribeCluster, with the brokers' addresses on `listener`, the one the request came in on.
pub fn handle(
    ctx: &Rc<BrokerCtx>,
    request: DescribeClusterRequest,
    listener: ListenerId,
) -> DescribeClusterResponse {
    let shared = &ctx.state.shared;
    if let Some(link) = &shared.cluster {
        let md = &link.image().metadata;
        let name = kafka_listener::name_of(&shared.config, listener);
        let listed = if request.include_fenced_brokers {
            registered_brokers(md, name)
        } else {
            alive_brokers(md, name)
        };
        let brokers = listed
            .into_iter()
            .map(|b| {
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(b.id.get()))
                    .with_host(StrBytes::from_string(b.host))
                    .with_port(b.port)
                    .with_rack(b.rack.map(StrBytes::from_string))
                    .with_is_fenced(b.fenced)
            })
            .collect();
        return DescribeClusterResponse::default()
            .with_endpoint_type(request.endpoint_type)
            .with_cluster_id(StrBytes::from_string(shared.cluster_id.clone()))
            .with_controller_id(BrokerId(link.controller_id()))
            .with_brokers(brokers)
            .with_cluster_authorized_operations(OPERATIONS_OMITTED);
    }
    let (host, port) = advertised(shared, listener);
    let node_id = BrokerId(shared.node_id().get());
    DescribeClusterResponse::default()
        .with_endpoint_type(request.endpoint_type)
        .with_cluster_id(StrBytes::from_string(shared.cluster_id.clone()))
        .with_controller_id(node_id)
        .with_brokers(vec![DescribeClusterBroker::default()
            .with_broker_id(node_id)
            .with_host(StrBytes::from_string(host))
            .with_port(port)])
        .with_cluster_authorized_operations(OPERATIONS_OMITTED)
}
