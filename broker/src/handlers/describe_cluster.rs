//! DescribeCluster: the cluster id, the controller and the brokers (one, until clustering).

use std::rc::Rc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::BrokerCtx;
use crate::handlers::metadata::advertised;

const OPERATIONS_OMITTED: i32 = i32::MIN;

pub fn handle(ctx: &Rc<BrokerCtx>, request: DescribeClusterRequest) -> DescribeClusterResponse {
    let shared = &ctx.state.shared;
    let (host, port) = advertised(shared);
    let node_id = BrokerId(shared.node_id());
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
