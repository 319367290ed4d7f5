//! Fetching from the closest replica (KIP-392) on a three-node cluster in three racks with
//! `replica.selector.class` set to Kafka's RackAwareReplicaSelector: the leader points a
//! consumer in a follower's rack to that follower (`preferred_read_replica`, no records), and
//! serves one in its own rack itself; the follower serves consumers' fetches from v11 on (older
//! ones are NOT_LEADER_OR_FOLLOWER, as Kafka's); librdkafka with `client.rack` reads every
//! record through the follower, and goes on without a gap or a duplicate when that follower is
//! killed while records keep coming. Three real broker processes.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::protocol::StrBytes;
use laminar_tests::http::{get_ok, MetricsPage};
use laminar_tests::rdkafka_client::assigned_consumer;
use laminar_tests::wire::{
    create_topic_replicated, decode_records, fetch_request, partition_view, produce_when_known, record_batch,
    WireConnection,
};
use laminar_tests::{wait_for, Cluster};
use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

const TOPIC: &str = "near";
const RECORDS: usize = 10;
const RACK_AWARE: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";
const NOT_LEADER_OR_FOLLOWER: i16 = 6;

fn rack(node: i32) -> String {
    format!("rack-{node}")
}

/// A consumer's Fetch of partition 0 from offset 0 at `version`, naming `client_rack`.
fn fetch_from(conn: &mut WireConnection, version: i16, client_rack: &str) -> Result<PartitionData> {
    let request =
        fetch_request((TOPIC, 0), 0, 0).with_rack_id(StrBytes::from_string(client_rack.to_string()));
    let response = conn.request(&request, version)?;
    ensure!(response.error_code == 0, "fetch: {}", response.error_code);
    let topic = response.responses.first().context("no topic")?;
    topic.partitions.first().cloned().context("no partition")
}

/// The topic (one partition on all three, all in sync) with `RECORDS` records: its leader, a
/// follower and the values.
fn topic_with_records(cluster: &mut Cluster) -> Result<(i32, i32, Vec<Vec<u8>>)> {
    let mut first = cluster.connect(1)?;
    wait_for(Duration::from_secs(10), "the topic created", || {
        Ok(create_topic_replicated(&mut first, TOPIC, (1, 3), &[])? != 38)
    })?;
    let mut view = partition_view(&mut first, TOPIC, 0)?;
    wait_for(Duration::from_secs(10), "a leader and three in sync", || {
        view = partition_view(&mut first, TOPIC, 0)?;
        Ok(view.leader > 0 && view.isr.len() == 3)
    })?;
    let follower = *view
        .isr
        .iter()
        .find(|id| **id != view.leader)
        .context("a follower")?;
    let values: Vec<Vec<u8>> = (0..RECORDS).map(|i| format!("v{i}").into_bytes()).collect();
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    let mut at_leader = cluster.connect(view.leader)?;
    let batch = record_batch(&refs, 1)?;
    let answer = produce_when_known(&mut at_leader, (TOPIC, 0), batch, -1, Duration::from_secs(10))?;
    ensure!(answer.error_code == 0, "produce: {}", answer.error_code);
    Ok((view.leader, follower, values))
}

#[test]
fn consumers_read_from_an_in_sync_follower_in_their_rack() -> Result<()> {
    let options = Cluster::node_options().with_override("replica.selector.class", RACK_AWARE);
    let mut cluster = Cluster::start_in_racks(3000, options, &["rack-1", "rack-2", "rack-3"])?;
    let (leader, follower, values) = topic_with_records(&mut cluster)?;
    let mut at_leader = cluster.connect(leader)?;

    let redirected = fetch_from(&mut at_leader, 11, &rack(follower))?;
    assert_eq!(redirected.preferred_read_replica.0, follower, "{redirected:?}");
    assert!(
        decode_records(&redirected)?.is_empty(),
        "a redirect carries no records"
    );
    let own_rack = fetch_from(&mut at_leader, 11, &rack(leader))?;
    assert_eq!(
        (
            own_rack.preferred_read_replica.0,
            decode_records(&own_rack)?.len()
        ),
        (-1, RECORDS)
    );

    let mut at_follower = cluster.connect(follower)?;
    wait_for(
        Duration::from_secs(10),
        "the follower serving every record",
        || Ok(decode_records(&fetch_from(&mut at_follower, 11, &rack(follower))?)?.len() == RECORDS),
    )?;
    let old = fetch_from(&mut at_follower, 10, "")?;
    assert_eq!(
        old.error_code, NOT_LEADER_OR_FOLLOWER,
        "before v11 only the leader serves"
    );

    let fetched_before = [
        records_fetched(&mut cluster, leader)?,
        records_fetched(&mut cluster, follower)?,
    ];
    let started = Instant::now();
    let consumed = consume_in_rack(&cluster.bootstrap(), &rack(follower))?;
    assert_eq!(consumed, values);
    eprintln!(
        "librdkafka in {} read {RECORDS} records in {:.2} s",
        rack(follower),
        started.elapsed().as_secs_f64()
    );
    let fetched = [
        records_fetched(&mut cluster, leader)? - fetched_before[0],
        records_fetched(&mut cluster, follower)? - fetched_before[1],
    ];
    assert_eq!(
        fetched,
        [0.0, RECORDS as f64],
        "(leader, follower): the follower served them"
    );
    Ok(())
}

/// Records node `node` has served of the topic (`/metrics`).
fn records_fetched(cluster: &mut Cluster, node: i32) -> Result<f64> {
    let page = MetricsPage::parse(&get_ok(cluster.node(node).http_addr(), "/metrics")?)?;
    Ok(page
        .value(&format!(
            "laminar_kafka_records_fetched_total{{topic=\"{TOPIC}\"}}"
        ))
        .unwrap_or(0.0))
}

/// Records produced while a consumer reads through a follower that is killed halfway.
const MORE_RECORDS: usize = 200;

#[test]
fn a_consumer_reading_from_a_follower_loses_nothing_and_reads_nothing_twice_when_it_dies() -> Result<()> {
    let options = Cluster::node_options()
        .with_override("replica.selector.class", RACK_AWARE)
        .with_override("replica.lag.time.max.ms", "3000");
    let mut cluster = Cluster::start_in_racks(3000, options, &["rack-1", "rack-2", "rack-3"])?;
    let (leader, follower, mut expected) = topic_with_records(&mut cluster)?;
    let (bootstrap, client_rack) = (cluster.bootstrap(), rack(follower));
    let total = RECORDS + MORE_RECORDS;
    let reading = std::thread::spawn(move || consume_until(&bootstrap, &client_rack, total));
    let mut at_leader = cluster.connect(leader)?;
    for batch in 0..MORE_RECORDS / 10 {
        if batch == MORE_RECORDS / 20 {
            cluster.node(follower).kill9()?;
        }
        let values: Vec<Vec<u8>> = (0..10)
            .map(|i| format!("more-{batch}-{i}").into_bytes())
            .collect();
        let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let within = Duration::from_secs(20);
        let answer = produce_when_known(&mut at_leader, (TOPIC, 0), record_batch(&refs, 2)?, -1, within)?;
        ensure!(
            answer.error_code == 0,
            "produce batch {batch}: {}",
            answer.error_code
        );
        expected.extend(values);
        std::thread::sleep(Duration::from_millis(50));
    }
    let consumed = reading
        .join()
        .map_err(|_| anyhow::anyhow!("the consumer panicked"))??;
    assert_eq!(consumed.len(), total, "every record, none twice");
    assert!(consumed == expected, "in order");
    Ok(())
}

/// Every record of the partition, read by librdkafka with `client.rack`.
fn consume_in_rack(bootstrap: &str, client_rack: &str) -> Result<Vec<Vec<u8>>> {
    consume_until(bootstrap, client_rack, RECORDS)
}

/// The partition's first `count` records (fewer if they do not come within 60 s), read by
/// librdkafka with `client.rack`.
fn consume_until(bootstrap: &str, client_rack: &str, count: usize) -> Result<Vec<Vec<u8>>> {
    let consumer = assigned_consumer(bootstrap, &[("client.rack", client_rack)])?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(TOPIC, 0, Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let mut values = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut last, mut longest) = (Instant::now(), Duration::ZERO);
    while values.len() < count && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) => {
                values.push(message.payload().unwrap_or_default().to_vec());
                longest = longest.max(last.elapsed());
                last = Instant::now();
            }
            // librdkafka reports a lost broker connection and goes on by itself.
            Some(Err(error)) => eprintln!("consumer: {error}"),
            None => {}
        }
    }
    eprintln!(
        "{} records in {client_rack}, at most {longest:.2?} between two",
        values.len()
    );
    Ok(values)
}
