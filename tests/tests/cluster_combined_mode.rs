//! Three real brokers in combined mode (`process.roles=broker,controller`) on loopback: the
//! quorum forms, topics are placed over the brokers, every broker answers the same metadata,
//! clients route to leaders, and leaderships move after kill -9 and SIGTERM.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{
    CreateTopicsRequest, DescribeClusterRequest, InitProducerIdRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::rdkafka_client::{producer, unique_topic};
use laminar_tests::wire::{produce, record_batch};
use laminar_tests::{wait_for, Cluster};
use rdkafka::producer::FutureRecord;

/// The session timeout the tests run with (Kafka's default is 9 000 ms).
const SESSION_TIMEOUT_MS: u64 = 3000;
/// What the tests allow beyond the session timeout for a dead broker's leaderships to move: the
/// controller's session check, the commit, and the metadata reaching the other brokers.
const MOVE_SLACK: Duration = Duration::from_secs(3);
/// A new controller after the leader dies: about twice the 1–2 s election timeout (decision
/// 0012), plus the lease.
const ELECTION_BOUND: Duration = Duration::from_secs(8);

/// Partition index → leader id.
type Leaders = BTreeMap<i32, i32>;

/// Each partition's leader as `node_id`'s Metadata (v9) tells, and the brokers it lists.
fn leaders(cluster: &mut Cluster, node_id: i32, topic: &str) -> Result<(Leaders, Vec<(i32, i32)>)> {
    let mut conn = cluster.connect(node_id)?;
    let request = MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.to_string())))),
    ]));
    let response = conn.request(&request, 9)?;
    let topic = response.topics.first().context("no topic in the answer")?;
    let leaders = topic
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect();
    let brokers = response.brokers.iter().map(|b| (b.node_id.0, b.port)).collect();
    Ok((leaders, brokers))
}

fn create_topic(
    cluster: &mut Cluster,
    node_id: i32,
    name: &str,
    partitions: i32,
    replicas: i16,
) -> Result<i16> {
    let mut conn = cluster.connect(node_id)?;
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(replicas)]);
    Ok(conn.request(&request, 5)?.topics[0].error_code)
}

fn controller_id(cluster: &mut Cluster, node_id: i32) -> Result<i32> {
    let mut conn = cluster.connect(node_id)?;
    Ok(conn
        .request(&DescribeClusterRequest::default(), 0)?
        .controller_id
        .0)
}

#[test]
fn cluster_forms_spreads_leaders_and_every_broker_routes_clients_to_them() -> Result<()> {
    let mut cluster = Cluster::start(3, SESSION_TIMEOUT_MS, Cluster::node_options())?;
    let topic = unique_topic("cluster-spread");
    // Too many replicas for three brokers: Kafka's INVALID_REPLICATION_FACTOR.
    assert_eq!(create_topic(&mut cluster, 2, &topic, 6, 4)?, 38);
    assert_eq!(create_topic(&mut cluster, 2, &topic, 6, 3)?, 0);
    let (expected, brokers) = leaders(&mut cluster, 2, &topic)?;
    assert_eq!(expected.len(), 6);
    let leader_set: std::collections::BTreeSet<i32> = expected.values().copied().collect();
    assert_eq!(leader_set.len(), 3, "leaders on every broker: {expected:?}");
    let ports: Vec<(i32, i32)> = (1..=3)
        .map(|id| (id, i32::from(cluster.node(id).addr().port())))
        .collect();
    assert_eq!(brokers, ports, "every broker with its real endpoint");
    for node in [1, 3] {
        let propagated = wait_for(Duration::from_secs(5), "same leaders everywhere", || {
            Ok(leaders(&mut cluster, node, &topic)?.0 == expected)
        })?;
        println!("node {node} showed the leaders {propagated:?} after node 2 answered the create");
    }
    let controller = controller_id(&mut cluster, 1)?;
    assert!((1..=3).contains(&controller));
    for node in [2, 3] {
        assert_eq!(controller_id(&mut cluster, node)?, controller);
    }
    // A broker that does not lead a partition refuses it: NOT_LEADER_OR_FOLLOWER.
    let (&partition, &leader) = expected.iter().next().context("a partition")?;
    let other = (1..=3).find(|id| *id != leader).context("another broker")?;
    let mut conn = cluster.connect(other)?;
    let batch = record_batch(&[b"x"], 0)?;
    assert_eq!(produce(&mut conn, &topic, partition, batch, 1)?.error_code, 6);
    // Producer ids come from quorum blocks: distinct across brokers.
    let mut ids = std::collections::BTreeSet::new();
    for node in 1..=3 {
        let mut conn = cluster.connect(node)?;
        let id = conn.request(
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000),
            0,
        )?;
        assert_eq!(id.error_code, 0);
        assert!(
            ids.insert(id.producer_id.0),
            "producer id {} handed out twice",
            id.producer_id.0
        );
    }
    produce_everywhere_with_rdkafka(&cluster, &topic, &expected)
}

/// rdkafka sees the same leaders and its acks=1 produce to every partition succeeds.
fn produce_everywhere_with_rdkafka(
    cluster: &Cluster,
    topic: &str,
    expected: &BTreeMap<i32, i32>,
) -> Result<()> {
    let producer = producer(&cluster.bootstrap(), &[("acks", "1")])?;
    let metadata = rdkafka::producer::Producer::client(&producer)
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .context("rdkafka metadata")?;
    let seen: BTreeMap<i32, i32> = metadata.topics()[0]
        .partitions()
        .iter()
        .map(|p| (p.id(), p.leader()))
        .collect();
    assert_eq!(&seen, expected);
    assert_eq!(metadata.brokers().len(), 3);
    let runtime = tokio::runtime::Runtime::new()?;
    for partition in expected.keys() {
        let record = FutureRecord::to(topic)
            .partition(*partition)
            .payload("v")
            .key("k");
        let delivered = runtime.block_on(producer.send(record, Duration::from_secs(10)));
        let delivery = delivered.map_err(|(e, _)| anyhow::anyhow!("partition {partition}: {e}"))?;
        assert_eq!((delivery.partition, delivery.offset), (*partition, 0));
    }
    Ok(())
}

/// Partition `index` of `topic` as `node_id`'s Metadata tells: (leader, leader epoch).
fn leader_and_epoch(cluster: &mut Cluster, node_id: i32, topic: &str, index: i32) -> Result<(i32, i32)> {
    let mut conn = cluster.connect(node_id)?;
    let request = MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.to_string())))),
    ]));
    let response = conn.request(&request, 9)?;
    let partition = response
        .topics
        .first()
        .and_then(|t| t.partitions.iter().find(|p| p.partition_index == index))
        .context("no such partition in the answer")?;
    Ok((partition.leader_id.0, partition.leader_epoch))
}

/// A record produced to partition `moved` (whose leader changed) on its new leader carries the
/// leader epoch Metadata gives for it (KIP-101: batches are stamped with their leader's epoch).
fn assert_new_leaders_stamp_their_epoch(
    cluster: &mut Cluster,
    witness: i32,
    topic: &str,
    moved: i32,
) -> Result<()> {
    let (leader, epoch) = leader_and_epoch(cluster, witness, topic, moved)?;
    assert!(epoch > 0, "partition {moved} changed leader: its epoch moved on");
    let mut conn = cluster.connect(leader)?;
    let answer = produce(
        &mut conn,
        topic,
        moved,
        record_batch(&[b"after"], 1_700_000_000_000)?,
        // acks=all: answered once committed, so a consumer's fetch sees it at once.
        -1,
    )?;
    assert_eq!(answer.error_code, 0);
    let fetched = laminar_tests::wire::fetch(&mut conn, topic, moved, answer.base_offset)?;
    let records = fetched.records.context("the record comes back")?;
    // RecordBatch v2: base offset (8), batch length (4), then the partition leader epoch.
    let stamped = records.get(12..16).context("a whole batch header")?;
    let stamped = i32::from_be_bytes(stamped.try_into()?);
    assert_eq!(
        stamped, epoch,
        "partition {moved} led by {leader}: the batch's epoch is Metadata's"
    );
    Ok(())
}

/// The leaders `node_id` reports for `topic`, once none of them is `gone`.
fn wait_until_none_led_by(
    cluster: &mut Cluster,
    node_id: i32,
    topic: &str,
    gone: i32,
    within: Duration,
) -> Result<Duration> {
    wait_for(within, "leaderships moved", || {
        let (leaders, _) = leaders(cluster, node_id, topic)?;
        Ok(!leaders.is_empty() && leaders.values().all(|l| *l != gone && *l >= 0))
    })
}

#[test]
fn leaderships_move_after_kill_9_and_sigterm_and_a_new_controller_takes_over() -> Result<()> {
    let mut cluster = Cluster::start(3, SESSION_TIMEOUT_MS, Cluster::node_options())?;
    let topic = unique_topic("cluster-failover");
    assert_eq!(create_topic(&mut cluster, 1, &topic, 6, 3)?, 0);
    let controller = controller_id(&mut cluster, 1)?;
    // kill -9 of a broker that is not the controller: fenced after the session timeout.
    let victim = (1..=3).find(|id| *id != controller).context("a non-controller")?;
    let witness = (1..=3).find(|id| *id != victim).context("a witness")?;
    let (before, _) = leaders(&mut cluster, witness, &topic)?;
    let moving = *before
        .iter()
        .find(|(_, l)| **l == victim)
        .context("the victim leads a partition")?
        .0;
    cluster.node(victim).kill9()?;
    let bound = Duration::from_millis(SESSION_TIMEOUT_MS) + MOVE_SLACK;
    let moved = wait_until_none_led_by(&mut cluster, witness, &topic, victim, bound)?;
    println!("kill -9 of broker {victim}: its leaderships moved within {moved:?}");
    assert_new_leaders_stamp_their_epoch(&mut cluster, witness, &topic, moving)?;
    // A restarted node rejoins and catches up.
    cluster.restart(victim)?;
    // kill -9 of the controller leader: another voter takes over, CreateTopics still works.
    let survivor = (1..=3).find(|id| *id != controller).context("a survivor")?;
    cluster.node(controller).kill9()?;
    let elected = wait_for(ELECTION_BOUND, "a new controller", || {
        let id = controller_id(&mut cluster, survivor)?;
        Ok(id >= 1 && id != controller)
    })?;
    println!("kill -9 of controller {controller}: new controller within {elected:?}");
    let later = unique_topic("cluster-after-election");
    assert_eq!(create_topic(&mut cluster, survivor, &later, 3, 2)?, 0);
    cluster.restart(controller)?;
    let caught_up = wait_for(Duration::from_secs(10), "the restarted node catches up", || {
        Ok(leaders(&mut cluster, controller, &later)?.0.len() == 3)
    })?;
    println!("restarted node {controller} showed the later topic within {caught_up:?}");
    // SIGTERM: controlled shutdown moves the leaderships before the process exits.
    let stopping = (1..=3).find(|id| *id != survivor).context("a broker to stop")?;
    wait_until_none_led_by(&mut cluster, survivor, &topic, -2, Duration::from_secs(10))?;
    let started = Instant::now();
    let status = cluster.node(stopping).terminate()?;
    assert!(status.success(), "{status}");
    println!(
        "SIGTERM of broker {stopping}: exited after {:?}",
        started.elapsed()
    );
    let (after, _) = leaders(&mut cluster, survivor, &topic)?;
    assert!(after.values().all(|l| *l != stopping), "{after:?}");
    Ok(())
}
