//! The controller quorum changes while the cluster serves (KIP-853): a fourth combined node
//! started outside `controller.quorum.voters` follows the quorum as an observer,
//! `laminar cluster quorum add-controller` makes it a voter and `remove-controller` makes an
//! original voter an observer again. The new voter's vote then counts: with two of the original
//! three nodes killed, the new voter and the remaining one still form a majority and the
//! cluster still creates topics. Refusals carry Kafka's codes. Four real broker processes.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use kafka_protocol::messages::{AddRaftVoterRequest, DescribeQuorumRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::cli::{ok_on, run};
use laminar_tests::wire::create_topic_replicated;
use laminar_tests::{wait_for, Cluster};

const SESSION_TIMEOUT_MS: u64 = 3000;

/// `(voters, observers)` as `laminar cluster quorum describe` lists them.
fn members(bootstrap: &str) -> Result<(Vec<i32>, Vec<i32>)> {
    let shown = ok_on(bootstrap, &["cluster", "quorum", "describe"], "")?;
    let (mut voters, mut observers) = (Vec::new(), Vec::new());
    for line in shown.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields[..] {
            [id, "voter", ..] => voters.push(id.parse()?),
            [id, "observer", ..] => observers.push(id.parse()?),
            _ => {}
        }
    }
    Ok((voters, observers))
}

/// The error code of an AddRaftVoter of node 4 naming `cluster_id`, sent to node 1.
fn add_voter_code(cluster: &mut Cluster, cluster_id: &str) -> Result<i16> {
    let request = AddRaftVoterRequest::default()
        .with_cluster_id(Some(StrBytes::from_string(cluster_id.to_string())))
        .with_voter_id(4);
    Ok(cluster.connect(1)?.request(&request, 0)?.error_code)
}

/// DescribeQuorum v2's nodes (KIP-853) through node 1: id → controller listener port, each
/// listener named CONTROLLER.
fn quorum_nodes(cluster: &mut Cluster) -> Result<Vec<(i32, u16)>> {
    use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let answer = cluster.connect(1)?.request(&request, 2)?;
    ensure!(answer.error_code == 0, "DescribeQuorum v2: {}", answer.error_code);
    let mut nodes = Vec::new();
    for node in &answer.nodes {
        let [listener] = &node.listeners[..] else {
            anyhow::bail!("node {:?}: one listener expected", node.node_id);
        };
        ensure!(listener.name.as_str() == "CONTROLLER" && listener.host.as_str() == "127.0.0.1");
        nodes.push((node.node_id.0, listener.port));
    }
    nodes.sort_unstable();
    Ok(nodes)
}

/// The stderr of `laminar cluster quorum ARGS`, which must fail.
fn refused(bootstrap: &str, args: &[&str]) -> Result<String> {
    let mut all = vec!["cluster", "quorum"];
    all.extend(args);
    all.extend(["--brokers", bootstrap]);
    let outcome = run(&all, "")?;
    ensure!(!outcome.success, "{args:?} succeeded: {}", outcome.stdout);
    Ok(outcome.stderr)
}

#[test]
fn a_controller_added_while_the_cluster_serves_votes_and_a_removed_one_no_longer_does() -> Result<()> {
    let mut cluster = Cluster::start(3, SESSION_TIMEOUT_MS, Cluster::node_options())?;
    let started = Instant::now();
    assert_eq!(cluster.add_node("broker,controller")?, 4);
    let serving = started.elapsed();
    let bootstrap = cluster.bootstrap();
    assert_eq!(
        members(&bootstrap)?,
        (vec![1, 2, 3], vec![4]),
        "it joins as an observer"
    );
    let ports: Vec<(i32, u16)> = (1..=4).zip(cluster.controller_ports.clone()).collect();
    assert_eq!(
        quorum_nodes(&mut cluster)?,
        ports,
        "v2 names every member's listener"
    );

    let asked = Instant::now();
    ok_on(&bootstrap, &["cluster", "quorum", "add-controller", "4"], "")?;
    let voting = asked.elapsed();
    assert_eq!(members(&bootstrap)?, (vec![1, 2, 3, 4], vec![]));
    eprintln!(
        "a new controller served {:.2} s after its start; add-controller took {:.2} s",
        serving.as_secs_f64(),
        voting.as_secs_f64()
    );
    assert_eq!(
        add_voter_code(&mut cluster, "another-cluster")?,
        104,
        "INCONSISTENT_CLUSTER_ID"
    );
    ok_on(&bootstrap, &["cluster", "quorum", "remove-controller", "3"], "")?;
    assert_eq!(
        members(&bootstrap)?,
        (vec![1, 2, 4], vec![3]),
        "removed, it still observes"
    );

    let again = refused(&bootstrap, &["add-controller", "4"])?;
    assert!(
        again.contains("DUPLICATE_VOTER") || again.contains("DuplicateVoter"),
        "{again}"
    );
    let not_voting = refused(&bootstrap, &["remove-controller", "3"])?;
    assert!(
        not_voting.contains("VOTER_NOT_FOUND") || not_voting.contains("VoterNotFound"),
        "{not_voting}"
    );
    let unknown = refused(&bootstrap, &["add-controller", "9"])?;
    assert!(unknown.contains("not an observer"), "{unknown}");

    // Nodes 1 and 3 down: of the voters {1, 2, 4}, two remain, a majority only with node 4.
    cluster.node(1).kill9()?;
    cluster.node(3).kill9()?;
    let mut second = cluster.connect(2)?;
    let mut code = -1;
    wait_for(
        Duration::from_secs(30),
        "a topic created by the new majority",
        || {
            code = create_topic_replicated(&mut second, "after-the-change", (1, 2), &[])?;
            Ok(code == 0)
        },
    )?;
    let survivors = [cluster.node(2).bootstrap(), cluster.node(4).bootstrap()].join(",");
    let (voters, _) = members(&survivors)?;
    assert_eq!(voters, [1, 2, 4]);
    Ok(())
}
