//! Client quotas of a cluster live in its metadata log: a quota set with `laminar quota`
//! through one node is listed by every node and enforced by another (a client past its
//! `controller_mutation_rate` is refused with THROTTLING_QUOTA_EXCEEDED by CreateTopics v6 on a
//! node it was never set through), and once removed through a third, no node lists or
//! enforces it. Three real broker processes; the CLI and the wire as the clients.

use std::time::Duration;

use anyhow::{ensure, Result};
use laminar_tests::cli;
use laminar_tests::wire;
use laminar_tests::{wait_for, Cluster};

const NODES: i32 = 3;
const APPLIED_WITHIN: Duration = Duration::from_secs(20);
/// The client id of every request `WireConnection` sends.
const WIRE_CLIENT_ID: &str = "laminar-wire-test";
const THROTTLING_QUOTA_EXCEEDED: i16 = 89;

fn listed(cluster: &mut Cluster, node: i32) -> Result<String> {
    let args = ["quota", "list", "--client-id", WIRE_CLIENT_ID];
    cli::ok_on(&cluster.node(node).bootstrap(), &args, "")
}

/// CreateTopics v6 of one topic of `partitions` on `node`: its error code.
fn create_topic(cluster: &mut Cluster, node: i32, partitions: i32) -> Result<i16> {
    Ok(wire::create_topic_at(&mut cluster.connect(node)?, partitions, 6)?.0)
}

#[test]
fn a_quota_set_through_one_node_is_enforced_by_another_until_removed_through_a_third() -> Result<()> {
    let options = Cluster::node_options().with_override("quota.window.num", "3");
    let mut cluster = Cluster::start(NODES as usize, 3000, options)?;
    let set_through = cluster.node(1).bootstrap();
    cli::set_quota(
        &set_through,
        &["--client-id", WIRE_CLIENT_ID],
        "controller_mutation_rate=1",
    )?;
    for node in 1..=NODES {
        wait_for(APPLIED_WITHIN, "the quota is listed", || {
            Ok(listed(&mut cluster, node)?.contains("controller_mutation_rate"))
        })?;
    }
    // A burst of 3 lets one request of 10 partitions through, 7 below: the next is refused.
    let first = create_topic(&mut cluster, 3, 10)?;
    ensure!(first == 0, "the first CreateTopics on node 3: error {first}");
    let second = create_topic(&mut cluster, 3, 1)?;
    ensure!(
        second == THROTTLING_QUOTA_EXCEEDED,
        "the second CreateTopics on node 3: error {second}"
    );
    let remove = [
        "quota",
        "remove",
        "--client-id",
        WIRE_CLIENT_ID,
        "--key",
        "controller_mutation_rate",
    ];
    cli::ok_on(&cluster.node(2).bootstrap(), &remove, "")?;
    for node in 1..=NODES {
        wait_for(APPLIED_WITHIN, "the quota is gone", || {
            Ok(!listed(&mut cluster, node)?.contains("controller_mutation_rate"))
        })?;
    }
    let after = create_topic(&mut cluster, 3, 1)?;
    ensure!(
        after == 0,
        "CreateTopics on node 3 once the quota is removed: error {after}"
    );
    Ok(())
}
