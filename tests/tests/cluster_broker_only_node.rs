//! A broker-only node (`process.roles=broker`) joins a running three-node cluster: it follows
//! the metadata log as an observer of the quorum (DescribeQuorum lists it, not among the
//! voters), registers and is unfenced, sees every topic, takes a partition moved onto it with
//! the records written before it existed, leads it and serves clients; after kill -9 it
//! rejoins and serves them again. Four real broker processes.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{
    DescribeClusterRequest, DescribeQuorumRequest, ElectLeadersRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::cli::ok_on;
use laminar_tests::wire::{
    create_topic_replicated, fetch_records, partition_view, produce_when_known, record_batch, WireConnection,
};
use laminar_tests::{wait_for, Cluster};

const SESSION_TIMEOUT_MS: u64 = 3000;
const TOPIC: &str = "grown";
const RECORDS_BEFORE: usize = 20;
const PREFERRED: i8 = 0;

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_string()))
}

/// `(voters, observers)` of the metadata quorum, as node `via` answers DescribeQuorum.
fn quorum_members(conn: &mut WireConnection) -> Result<(Vec<i32>, Vec<i32>)> {
    use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(name("__cluster_metadata"))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let answer = conn.request(&request, 1)?;
    let partition = &answer.topics.first().context("no topic")?.partitions[0];
    let ids = |list: &[kafka_protocol::messages::describe_quorum_response::ReplicaState]| {
        list.iter().map(|r| r.replica_id.0).collect::<Vec<_>>()
    };
    Ok((ids(&partition.current_voters), ids(&partition.observers)))
}

/// The unfenced brokers node `conn` knows (DescribeCluster).
fn brokers_known(conn: &mut WireConnection) -> Result<Vec<i32>> {
    let answer = conn.request(&DescribeClusterRequest::default(), 0)?;
    let mut ids: Vec<i32> = answer.brokers.iter().map(|b| b.broker_id.0).collect();
    ids.sort_unstable();
    Ok(ids)
}

/// Makes `leader` lead partition 0 (it is the preferred replica and in sync).
fn elect_preferred(conn: &mut WireConnection, leader: i32) -> Result<()> {
    wait_for(Duration::from_secs(20), "the preferred replica leading", || {
        let request = ElectLeadersRequest::default()
            .with_election_type(PREFERRED)
            .with_topic_partitions(Some(vec![TopicPartitions::default()
                .with_topic(name(TOPIC))
                .with_partitions(vec![0])]))
            .with_timeout_ms(10_000);
        conn.request(&request, 2)?;
        Ok(partition_view(conn, TOPIC, 0)?.leader == leader)
    })?;
    Ok(())
}

/// Creates the topic (one partition, three replicas on nodes 1–3) with `RECORDS_BEFORE`
/// records; their values.
fn topic_with_records(cluster: &mut Cluster) -> Result<Vec<Vec<u8>>> {
    let mut first = cluster.connect(1)?;
    wait_for(Duration::from_secs(10), "the topic created", || {
        Ok(create_topic_replicated(&mut first, TOPIC, (1, 3), &[])? != 38)
    })?;
    let mut leader = 0;
    wait_for(Duration::from_secs(10), "a leader", || {
        leader = partition_view(&mut first, TOPIC, 0)?.leader;
        Ok(leader > 0)
    })?;
    let values: Vec<Vec<u8>> = (0..RECORDS_BEFORE)
        .map(|i| format!("before-{i}").into_bytes())
        .collect();
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    let mut at_leader = cluster.connect(leader)?;
    let batch = record_batch(&refs, 1)?;
    let answered = produce_when_known(&mut at_leader, (TOPIC, 0), batch, -1, Duration::from_secs(10))?;
    ensure!(answered.error_code == 0, "produce: {}", answered.error_code);
    Ok(values)
}

#[test]
fn a_broker_only_node_joins_a_running_cluster_takes_a_partition_with_its_data_and_survives_kill9(
) -> Result<()> {
    let mut cluster = Cluster::start(3, SESSION_TIMEOUT_MS, Cluster::node_options())?;
    let values = topic_with_records(&mut cluster)?;
    let mut first = cluster.connect(1)?;

    assert_eq!(cluster.add_broker_only()?, 4);
    let (voters, observers) = quorum_members(&mut first)?;
    assert_eq!(
        (voters, observers),
        (vec![1, 2, 3], vec![4]),
        "the new node observes, never votes"
    );
    wait_for(Duration::from_secs(10), "every node to know broker 4", || {
        Ok(brokers_known(&mut first)? == [1, 2, 3, 4])
    })?;
    let mut fourth = cluster.connect(4)?;
    assert_eq!(brokers_known(&mut fourth)?, [1, 2, 3, 4]);
    assert_eq!(
        partition_view(&mut fourth, TOPIC, 0)?.replicas.len(),
        3,
        "it sees the topic"
    );

    let bootstrap = cluster.bootstrap();
    ok_on(
        &bootstrap,
        &["topic", "move", TOPIC, "--partition", "0", "--replicas", "4,1,2"],
        "",
    )?;
    wait_for(
        Duration::from_secs(30),
        "the move onto broker 4 to complete",
        || {
            let view = partition_view(&mut first, TOPIC, 0)?;
            Ok(view.replicas == [4, 1, 2] && view.isr.contains(&4))
        },
    )?;
    elect_preferred(&mut first, 4)?;
    let read = fetch_records(&mut fourth, TOPIC, 0, 0, RECORDS_BEFORE)?;
    let read: Vec<Vec<u8>> = read
        .iter()
        .map(|r| r.value.clone().unwrap_or_default().to_vec())
        .collect();
    assert_eq!(read, values, "broker 4 serves what was written before it joined");

    cluster.node(4).kill9()?;
    cluster.restart(4)?;
    let (_, observers) = quorum_members(&mut first)?;
    assert_eq!(observers, [4], "still the one observer after asking again");
    let mut fourth = cluster.connect(4)?;
    elect_preferred(&mut fourth, 4)?;
    let batch = record_batch(&[b"after"], 2)?;
    let after = produce_when_known(&mut fourth, (TOPIC, 0), batch, -1, Duration::from_secs(10))?;
    ensure!(
        after.error_code == 0,
        "produce after the restart: {}",
        after.error_code
    );
    let all = fetch_records(&mut fourth, TOPIC, 0, 0, RECORDS_BEFORE + 1)?;
    assert_eq!(all.len(), RECORDS_BEFORE + 1);
    Ok(())
}
