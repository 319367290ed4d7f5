//! A cluster whose clients have a listener of their own (CLIENTS) beside the brokers' one
//! (PLAINTEXT, `inter.broker.listener.name`): Metadata and FindCoordinator asked on CLIENTS name
//! every broker's CLIENTS address, and a Fetch claiming a replica id there is refused with
//! CLUSTER_AUTHORIZATION_FAILED, where the brokers' listener takes it as a follower's. Three
//! real broker processes, raw Kafka frames.

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::{BrokerId, MetadataRequest};
use laminar_tests::wire::{self, create_topic_replicated, WireConnection};
use laminar_tests::{BrokerOptions, Cluster};

const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

#[test]
fn clients_listener_names_its_own_addresses_and_refuses_fetches_as_a_replica() -> Result<()> {
    let options = BrokerOptions {
        extra_listeners: vec!["CLIENTS".to_string()],
        ..Cluster::node_options()
    }
    .with_override(
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,CLIENTS:PLAINTEXT",
    );
    let mut cluster = Cluster::start(3, 6000, options)?;
    let clients_addr =
        |cluster: &mut Cluster, id: i32| cluster.node(id).listener_addr("CLIENTS").context("CLIENTS");
    let mut on_clients = WireConnection::connect(clients_addr(&mut cluster, 1)?)?;
    let topic = "listeners";
    ensure!(create_topic_replicated(&mut on_clients, topic, (1, 3), &[])? == 0);
    let metadata = on_clients.request(&MetadataRequest::default().with_topics(None), 9)?;
    ensure!(metadata.brokers.len() == 3, "{:?}", metadata.brokers);
    for broker in &metadata.brokers {
        let expected = clients_addr(&mut cluster, broker.node_id.0)?;
        ensure!(
            broker.port == i32::from(expected.port()),
            "broker {} named at {} on CLIENTS, not {expected}",
            broker.node_id.0,
            broker.port
        );
    }
    let view = wire::partition_view(&mut on_clients, topic, 0)?;
    let follower = *view
        .replicas
        .iter()
        .find(|id| **id != view.leader)
        .context("a follower")?;
    let forged = wire::fetch_request((topic, 0), 0, 0).with_replica_id(BrokerId(follower));
    let mut leader_clients = WireConnection::connect(clients_addr(&mut cluster, view.leader)?)?;
    let refused = leader_clients.request(&forged, 11)?;
    ensure!(
        refused.error_code == CLUSTER_AUTHORIZATION_FAILED,
        "a fetch as replica {follower} on CLIENTS answered {}",
        refused.error_code
    );
    let taken = cluster.connect(view.leader)?.request(&forged, 11)?;
    ensure!(
        taken.error_code == 0,
        "on the brokers' listener: {}",
        taken.error_code
    );
    Ok(())
}
