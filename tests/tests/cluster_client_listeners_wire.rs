//! A cluster whose clients have a listener of their own (CLIENTS) beside the brokers' one
//! (PLAINTEXT, `inter.broker.listener.name`): Metadata and FindCoordinator asked on CLIENTS name
//! every broker's CLIENTS address, and a Fetch claiming a replica id there is refused with
//! CLUSTER_AUTHORIZATION_FAILED. The brokers' listener takes it as a follower's only when it
//! carries the epoch that follower registered with (Fetch v15's ReplicaState). Three real broker
//! processes, raw Kafka frames.

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::{BrokerId, MetadataRequest};
use laminar_tests::http::broker_epoch;
use laminar_tests::wire::{self, create_topic_replicated, WireConnection};
use laminar_tests::{BrokerOptions, Cluster};

const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const UNSUPPORTED_VERSION: i16 = 35;
const STALE_BROKER_EPOCH: i16 = 77;
const BROKER_ID_NOT_REGISTERED: i16 = 102;

#[test]
fn clients_listener_names_its_own_addresses_and_replica_fetches_need_the_brokers_listener_and_epoch(
) -> Result<()> {
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
    let epoch = broker_epoch(cluster.node(follower).http_addr())?;
    let as_follower = wire::replica_fetch_request((view.topic_id, 0), 0, (follower, epoch));
    let mut leader_clients = WireConnection::connect(clients_addr(&mut cluster, view.leader)?)?;
    let refused = leader_clients.request(&as_follower, 15)?;
    ensure!(
        refused.error_code == CLUSTER_AUTHORIZATION_FAILED,
        "a fetch as replica {follower} on CLIENTS answered {}",
        refused.error_code
    );
    let mut leader_brokers = cluster.connect(view.leader)?;
    let taken = leader_brokers.request(&as_follower, 15)?;
    ensure!(
        taken.error_code == 0,
        "on the brokers' listener: {}",
        taken.error_code
    );
    let answered_id = taken.responses.first().map(|t| *t.topic_id.as_bytes());
    ensure!(answered_id == Some(view.topic_id), "answer names {answered_id:?}");
    refuses_forged_epochs(&mut leader_brokers, (topic, view.topic_id), (follower, epoch))
}

/// A fetch as `follower` with another epoch than its registered `epoch`, as a broker that is not
/// registered, or older than v15 is refused whole.
fn refuses_forged_epochs(
    leader: &mut WireConnection,
    (topic, topic_id): (&str, [u8; 16]),
    (follower, epoch): (i32, i64),
) -> Result<()> {
    let forgeries = [
        (
            wire::replica_fetch_request((topic_id, 0), 0, (follower, epoch - 1)),
            15,
            STALE_BROKER_EPOCH,
        ),
        (
            wire::replica_fetch_request((topic_id, 0), 0, (follower, epoch + 1)),
            15,
            STALE_BROKER_EPOCH,
        ),
        (
            wire::replica_fetch_request((topic_id, 0), 0, (99, epoch)),
            15,
            BROKER_ID_NOT_REGISTERED,
        ),
        // Before v15 a fetch carries no epoch to check.
        (
            wire::fetch_request((topic, 0), 0, 0).with_replica_id(BrokerId(follower)),
            11,
            UNSUPPORTED_VERSION,
        ),
    ];
    for (forged, version, expected) in forgeries {
        let answer = leader.request(&forged, version)?;
        ensure!(
            answer.error_code == expected && answer.responses.is_empty(),
            "forged v{version} fetch {:?}: error {}",
            forged.replica_state,
            answer.error_code
        );
    }
    Ok(())
}
