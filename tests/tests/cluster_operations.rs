//! What operators see of a three-broker combined-mode cluster (real processes on loopback):
//! one cluster id everywhere (wire, rdkafka, meta.properties), ElectLeaders with Kafka's error
//! codes, the `cluster` section of `/v1/status`, the quorum families of `/metrics` and
//! DescribeQuorum, the
//! auto leader rebalance after a broker comes back, and a single-node data dir migrating into
//! a fresh quorum as node 1.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, CreateTopicsRequest, DescribeClusterRequest, DescribeQuorumRequest,
    ElectLeadersRequest, ElectLeadersResponse, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::http::{get_ok, MetricsPage};
use laminar_tests::rdkafka_client::{producer, unique_topic};
use laminar_tests::wire::{fetch_records, produce, record_batch, WireConnection};
use laminar_tests::{wait_for, Broker, Cluster};

/// The session timeout the tests run with (Kafka's default is 9 000 ms).
const SESSION_TIMEOUT_MS: u64 = 3000;
/// A dead broker's leaderships move within the session timeout and this.
const MOVE_SLACK: Duration = Duration::from_secs(3);

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_string()))
}

/// Creates `topic` through node 1 (-1/-1 with `assignments` is not used here).
fn create_topic(cluster: &mut Cluster, topic: &str, partitions: i32, replicas: i16) -> Result<()> {
    let mut conn = cluster.connect(1)?;
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(replicas)]);
    let code = conn.request(&request, 5)?.topics[0].error_code;
    anyhow::ensure!(code == 0, "create {topic}: error {code}");
    Ok(())
}

/// Partition → (leader, replicas) as `node_id`'s Metadata v9 tells.
fn partitions(cluster: &mut Cluster, node_id: i32, topic: &str) -> Result<BTreeMap<i32, (i32, Vec<i32>)>> {
    let mut conn = cluster.connect(node_id)?;
    let request = MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(name(topic))),
    ]));
    let response = conn.request(&request, 9)?;
    let topic = response.topics.first().context("no topic in the answer")?;
    Ok(topic
        .partitions
        .iter()
        .map(|p| {
            let replicas = p.replica_nodes.iter().map(|b| b.0).collect();
            (p.partition_index, (p.leader_id.0, replicas))
        })
        .collect())
}

fn leaders(cluster: &mut Cluster, node_id: i32, topic: &str) -> Result<BTreeMap<i32, i32>> {
    let each = partitions(cluster, node_id, topic)?.into_iter();
    Ok(each.map(|(p, (leader, _))| (p, leader)).collect())
}

/// ElectLeaders v`version` of `partitions` of `topic` (`None`: every partition).
fn elect(
    cluster: &mut Cluster,
    node_id: i32,
    election_type: i8,
    topics: Option<Vec<(&str, Vec<i32>)>>,
) -> Result<ElectLeadersResponse> {
    let mut conn = cluster.connect(node_id)?;
    let topics = topics.map(|list| {
        list.into_iter()
            .map(|(topic, partitions)| {
                TopicPartitions::default()
                    .with_topic(name(topic))
                    .with_partitions(partitions)
            })
            .collect()
    });
    let request = ElectLeadersRequest::default()
        .with_election_type(election_type)
        .with_topic_partitions(topics)
        .with_timeout_ms(10_000);
    conn.request(&request, 2)
}

/// The active controller's node id, as node 1's DescribeCluster tells.
fn active_controller(cluster: &mut Cluster) -> Result<i32> {
    let answer = cluster
        .connect(1)?
        .request(&DescribeClusterRequest::default(), 0)?;
    Ok(answer.controller_id.0)
}

/// `(topic, partition) → error code` of an ElectLeaders answer.
fn election_codes(response: &ElectLeadersResponse) -> BTreeMap<(String, i32), i16> {
    let each = response.replica_election_results.iter().flat_map(|t| {
        t.partition_result
            .iter()
            .map(|p| ((t.topic.to_string(), p.partition_id), p.error_code))
    });
    each.collect()
}

#[test]
fn every_broker_answers_one_cluster_id_and_reports_the_quorum() -> Result<()> {
    let mut cluster = Cluster::start(3, SESSION_TIMEOUT_MS, Cluster::node_options())?;
    let mut ids = Vec::new();
    for node in 1..=3 {
        let mut conn = cluster.connect(node)?;
        let described = conn
            .request(&DescribeClusterRequest::default(), 0)?
            .cluster_id
            .to_string();
        let metadata = conn.request(&MetadataRequest::default().with_topics(Some(vec![])), 9)?;
        assert_eq!(
            metadata.cluster_id.map(|id| id.to_string()),
            Some(described.clone())
        );
        let properties = std::fs::read_to_string(cluster.node(node).data_dir().join("meta.properties"))?;
        assert!(
            properties.contains(&format!("cluster.id={described}\n")),
            "{properties}"
        );
        assert!(properties.contains(&format!("node.id={node}\n")), "{properties}");
        ids.push(described);
    }
    assert_eq!(ids[0].len(), 22, "Kafka's form: {}", ids[0]);
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    let rdkafka = producer(&cluster.bootstrap(), &[])?;
    let seen = rdkafka::producer::Producer::client(&rdkafka).fetch_cluster_id(Duration::from_secs(10));
    assert_eq!(seen.as_deref(), Some(ids[0].as_str()));
    let topic = unique_topic("cluster-status");
    create_topic(&mut cluster, &topic, 6, 3)?;
    // CreateTopics answers once the quorum commits; each broker applies the records a moment
    // later, so the counts are compared once every broker has taken up its leaderships.
    laminar_tests::wait_for(Duration::from_secs(10), "every leadership taken up", || {
        let mut led = 0.0;
        for node in 1..=3 {
            let page = MetricsPage::parse(&get_ok(cluster.node(node).http_addr(), "/metrics")?)?;
            led += page.value("laminar_partitions_led").unwrap_or(0.0);
        }
        Ok(led == 6.0)
    })?;
    check_status_and_metrics(&mut cluster, 6)
}

/// `/v1/status`'s cluster section and the quorum families agree with each other and with the
/// metadata: one leader and term, every broker unfenced, the leaderships summing up.
fn check_status_and_metrics(cluster: &mut Cluster, partitions_total: u64) -> Result<()> {
    let mut led = 0;
    let mut leaders = Vec::new();
    for node in 1..=3 {
        let http = cluster.node(node).http_addr();
        let status: serde_json::Value = serde_json::from_str(&get_ok(http, "/v1/status")?)?;
        let section = &status["cluster"];
        assert_eq!(section["node_id"], node, "{section}");
        assert_eq!(section["fenced"], false, "{section}");
        assert!(section["broker_epoch"].as_i64().unwrap_or(-1) > 0, "{section}");
        let leader = section["quorum"]["leader_id"].as_i64().context("a leader")?;
        leaders.push(leader);
        let page = MetricsPage::parse(&get_ok(http, "/metrics")?)?;
        assert_eq!(
            page.value("laminar_controller_quorum_leader"),
            Some(leader as f64)
        );
        assert_eq!(page.value("laminar_broker_fenced"), Some(0.0));
        let led_here = page.value("laminar_partitions_led").context("partitions led")?;
        assert_eq!(section["partitions_led"].as_f64(), Some(led_here));
        led += led_here as u64;
        if section["role"] == "Leader" {
            assert_eq!(leader, i64::from(node));
            let voters = section["quorum"]["voters"].as_array().context("voters")?;
            assert_eq!(voters.len(), 3, "{section}");
            for voter in 1..=3 {
                let lag = page.value(&format!("laminar_controller_voter_lag{{voter=\"{voter}\"}}"));
                assert!(lag.is_some(), "voter {voter}'s lag on the leader");
            }
        }
    }
    assert!(leaders.iter().all(|l| *l == leaders[0]), "{leaders:?}");
    assert_eq!(led, partitions_total);
    check_describe_quorum(cluster, leaders[0])
}

/// DescribeQuorum v0 and v1 through every broker (two of them forward it to the quorum's
/// leader): the leader `/v1/status` names, three voters whose log ends are known and none past
/// the leader's, a high watermark within them; and UNKNOWN_TOPIC_OR_PARTITION for another
/// partition than `__cluster_metadata-0`.
fn check_describe_quorum(cluster: &mut Cluster, leader: i64) -> Result<()> {
    use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
    let request = |partition| {
        DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(name("__cluster_metadata"))
            .with_partitions(vec![PartitionData::default().with_partition_index(partition)])])
    };
    for (node, version) in [(1, 0), (2, 1), (3, 1)] {
        let mut conn = cluster.connect(node)?;
        let answer = conn.request(&request(0), version)?;
        assert_eq!(answer.error_code, 0, "through node {node}");
        let described = &answer.topics[0].partitions[0];
        assert_eq!(
            (described.error_code, i64::from(described.leader_id.0)),
            (0, leader)
        );
        assert!(described.leader_epoch > 0, "{described:?}");
        let ends: Vec<(i32, i64)> = described
            .current_voters
            .iter()
            .map(|v| (v.replica_id.0, v.log_end_offset))
            .collect();
        assert_eq!(
            ends.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            [1, 2, 3],
            "{ends:?}"
        );
        let leader_end = ends
            .iter()
            .find(|(id, _)| i64::from(*id) == leader)
            .map(|(_, end)| *end);
        let leader_end = leader_end.context("the leader among the voters")?;
        assert!(
            ends.iter().all(|(_, end)| *end > 0 && *end <= leader_end),
            "{ends:?}"
        );
        assert!(
            described.high_watermark > 0 && described.high_watermark <= leader_end,
            "{described:?}"
        );
        assert!(described.observers.is_empty(), "{described:?}");
        let elsewhere = conn.request(&request(1), version)?;
        assert_eq!(elsewhere.topics[0].partitions[0].error_code, 3, "partition 1");
    }
    Ok(())
}

/// ElectLeaders' advertised versions, if it is advertised.
fn elect_leaders_versions(conn: &mut WireConnection) -> Result<Option<(i16, i16)>> {
    let versions = conn.request(&ApiVersionsRequest::default(), 3)?;
    let elect = versions
        .api_keys
        .iter()
        .find(|a| a.api_key == ApiKey::ElectLeaders as i16);
    Ok(elect.map(|a| (a.min_version, a.max_version)))
}

#[test]
fn elect_leaders_answers_with_kafkas_error_codes() -> Result<()> {
    let base = Cluster::node_options().with_override("auto.leader.rebalance.enable", "false");
    let mut cluster = Cluster::start(3, SESSION_TIMEOUT_MS, base)?;
    let mut conn = cluster.connect(2)?;
    assert_eq!(elect_leaders_versions(&mut conn)?, Some((0, 2)));
    let (spread, single) = (unique_topic("elect-rf3"), unique_topic("elect-rf1"));
    create_topic(&mut cluster, &spread, 3, 3)?;
    create_topic(&mut cluster, &single, 3, 1)?;
    // Every leader is its preferred replica: nothing to elect; a null list answers nothing.
    let codes = election_codes(&elect(
        &mut cluster,
        1,
        0,
        Some(vec![(&spread, vec![0]), ("nope", vec![0])]),
    )?);
    assert_eq!(codes[&(spread.clone(), 0)], 84);
    assert_eq!(codes[&("nope".to_string(), 0)], 3);
    let all = elect(&mut cluster, 1, 0, None)?;
    assert_eq!((all.error_code, all.replica_election_results.len()), (0, 0));
    assert_eq!(
        election_codes(&elect(&mut cluster, 1, 1, Some(vec![(&spread, vec![1])]))?)[&(spread.clone(), 1)],
        84
    );
    // kill -9 of a broker that is not the controller (no election to wait for): its
    // leaderships move (RF 3) or vanish (RF 1).
    let controller = conn
        .request(&DescribeClusterRequest::default(), 0)?
        .controller_id
        .0;
    let victim = (1..=3).find(|id| *id != controller).context("a non-controller")?;
    let asked = controller;
    cluster.node(victim).kill9()?;
    wait_for(
        Duration::from_millis(SESSION_TIMEOUT_MS) + MOVE_SLACK,
        "the victim's leaderships move",
        || {
            Ok(leaders(&mut cluster, asked, &spread)?
                .values()
                .all(|l| *l != victim && *l >= 0))
        },
    )?;
    let spread_on_victim = partitions(&mut cluster, asked, &spread)?
        .into_iter()
        .find(|(_, (_, replicas))| replicas.first() == Some(&victim))
        .map(|(p, _)| p)
        .context("a partition preferring the victim")?;
    let single_on_victim = partitions(&mut cluster, asked, &single)?
        .into_iter()
        .find(|(_, (_, replicas))| replicas == &vec![victim])
        .map(|(p, _)| p)
        .context("a partition only on the victim")?;
    let preferred = elect(
        &mut cluster,
        asked,
        0,
        Some(vec![(&spread, vec![spread_on_victim])]),
    )?;
    assert_eq!(
        election_codes(&preferred)[&(spread.clone(), spread_on_victim)],
        80
    );
    let unclean = elect(
        &mut cluster,
        asked,
        1,
        Some(vec![(&single, vec![single_on_victim])]),
    )?;
    assert_eq!(election_codes(&unclean)[&(single.clone(), single_on_victim)], 83);
    Ok(())
}

#[test]
fn leaderships_return_to_the_preferred_replicas_after_a_restart() -> Result<()> {
    let base = Cluster::node_options().with_override("leader.imbalance.check.interval.seconds", "2");
    let mut cluster = Cluster::start(3, SESSION_TIMEOUT_MS, base)?;
    let topic = unique_topic("rebalance");
    create_topic(&mut cluster, &topic, 6, 3)?;
    let preferred: BTreeMap<i32, i32> = partitions(&mut cluster, 1, &topic)?
        .into_iter()
        .map(|(p, (_, replicas))| (p, replicas[0]))
        .collect();
    assert_eq!(leaders(&mut cluster, 1, &topic)?, preferred);
    let controller = active_controller(&mut cluster)?;
    let victim = (1..=3).find(|id| *id != controller).context("a non-controller")?;
    let witness = (1..=3).find(|id| *id != victim).context("a witness")?;
    cluster.node(victim).kill9()?;
    let moved = wait_for(
        Duration::from_millis(SESSION_TIMEOUT_MS) + MOVE_SLACK,
        "leaderships move",
        || {
            Ok(leaders(&mut cluster, witness, &topic)?
                .values()
                .all(|l| *l != victim && *l >= 0))
        },
    )?;
    println!("kill -9 of broker {victim}: its leaderships moved within {moved:?}");
    let restarted = Instant::now();
    cluster.restart(victim)?;
    let serving = restarted.elapsed();
    // The check runs every 2 s: back within two checks of the broker's return, and slack.
    let back = wait_for(Duration::from_secs(10), "preferred leaders back", || {
        Ok(leaders(&mut cluster, witness, &topic)? == preferred)
    })?;
    println!(
        "broker {victim} restarted: serving after {serving:?}, its preferred leaderships back \
         {back:?} later ({:?} after the restart began)",
        restarted.elapsed()
    );
    Ok(())
}

#[test]
fn a_single_node_data_dir_joins_a_fresh_quorum_as_node_1_with_its_topics_and_records() -> Result<()> {
    let mut single = Broker::start(Cluster::node_options())?;
    let topic = unique_topic("migrated");
    let mut conn = WireConnection::connect(single.addr())?;
    laminar_tests::wire::create_topic(&mut conn, &topic, 3)?;
    for partition in 0..3 {
        let value = format!("before-{partition}");
        let batch = record_batch(&[value.as_bytes(), b"second"], 0)?;
        assert_eq!(produce(&mut conn, &topic, partition, batch, -1)?.error_code, 0);
    }
    drop(conn);
    assert!(single.terminate()?.success());
    let single_id = std::fs::read_to_string(single.data_dir().join("meta.properties"))?;
    let mut cluster = Cluster::start_seeded(
        3,
        SESSION_TIMEOUT_MS,
        Cluster::node_options(),
        Some(&single.data_dir()),
    )?;
    for node in [2, 3] {
        wait_for(Duration::from_secs(10), "the migrated topic everywhere", || {
            let seen = partitions(&mut cluster, node, &topic)?;
            Ok(seen.len() == 3
                && seen
                    .values()
                    .all(|(leader, replicas)| *leader == 1 && replicas == &vec![1]))
        })?;
    }
    let mut conn = cluster.connect(1)?;
    for partition in 0..3 {
        let records = fetch_records(&mut conn, &topic, partition, 0, 2)?;
        let value = records[0].value.clone().context("a value")?;
        assert_eq!(&value[..], format!("before-{partition}").as_bytes());
    }
    // It now belongs to the quorum's cluster; restarting it keeps its topic (migrated once).
    let properties = std::fs::read_to_string(cluster.node(1).data_dir().join("meta.properties"))?;
    assert!(
        properties.contains("node.id=1\n"),
        "{properties} (single-node: {single_id})"
    );
    cluster.node(1).kill9()?;
    cluster.restart(1)?;
    let records = fetch_records(&mut cluster.connect(1)?, &topic, 0, 0, 2)?;
    assert_eq!(records.len(), 2);
    Ok(())
}

/// A voter that is down is retried with openraft's backoff, not at once. Before, the active
/// controller's replication to it failed to connect and tried again at once for every change
/// to replicate, each try logged: ten topics created with one of three voters down wrote about
/// 25 MB to its stderr within seconds.
#[test]
fn a_stopped_voter_costs_the_active_controller_a_few_log_lines_not_megabytes() -> Result<()> {
    let mut cluster = Cluster::start(3, SESSION_TIMEOUT_MS, Cluster::node_options())?;
    let controller = active_controller(&mut cluster)?;
    // Topics are created through node 1, so it stays up.
    let stopped = (2..=3).find(|id| *id != controller).context("a voter to stop")?;
    cluster.node(stopped).terminate()?;
    std::thread::sleep(Duration::from_millis(SESSION_TIMEOUT_MS) + MOVE_SLACK);
    let before = cluster.node(controller).stderr_bytes()?;
    for i in 0..10 {
        create_topic(&mut cluster, &format!("while-{stopped}-is-down-{i}"), 2, 2)?;
    }
    std::thread::sleep(Duration::from_secs(3));
    let logged = cluster.node(controller).stderr_bytes()? - before;
    println!("voter {stopped} down: the active controller ({controller}) logged {logged} bytes");
    assert!(
        logged < 1 << 20,
        "{logged} bytes of stderr:\n{}",
        cluster.node(controller).stderr_tail()
    );
    Ok(())
}
