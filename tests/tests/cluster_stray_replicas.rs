//! Stray replicas (docs/decisions/0020): a broker that was down while its topic was deleted
//! finds that topic's directories in its log dir at its next start, where the quorum's metadata
//! no longer gives it those partitions. Three combined-mode brokers, real processes on
//! loopback.

use std::path::Path;
use std::time::Duration;

use anyhow::{ensure, Result};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{CreateTopicsRequest, DeleteTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::wire::WireConnection;
use laminar_tests::{wait_for, Cluster};
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;

const PARTITIONS: i32 = 2;

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_string()))
}

/// Creates `topic` with [`PARTITIONS`] partitions, a replica on each of the three brokers.
fn create_on_all_three(conn: &mut WireConnection, topic: &str) -> Result<()> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(PARTITIONS)
            .with_replication_factor(3)]);
    let code = conn.request(&request, 5)?.topics[0].error_code;
    ensure!(code == 0, "create {topic}: error {code}");
    Ok(())
}

/// One record to each partition of each topic, acknowledged by every in-sync replica.
fn write_to_every_partition(bootstrap: &str, topics: &[&str]) -> Result<()> {
    let producer = laminar_tests::rdkafka_client::producer(bootstrap, &[])?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for topic in topics {
        for partition in 0..PARTITIONS {
            let record = FutureRecord::<(), _>::to(topic)
                .partition(partition)
                .payload("a record");
            let sent = runtime.block_on(producer.send(record, Timeout::After(Duration::from_secs(20))));
            ensure!(sent.is_ok(), "produce to {topic}/{partition}: {sent:?}");
        }
    }
    Ok(())
}

/// The names in `dir` that start with `prefix`, sorted.
fn entries_starting(dir: &Path, prefix: &str) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.starts_with(prefix) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

#[test]
fn a_broker_down_while_its_topic_was_deleted_sets_that_topics_replicas_aside_at_its_next_start() -> Result<()>
{
    let mut cluster = Cluster::start(3, 3000, Cluster::node_options())?;
    let mut conn = cluster.connect(1)?;
    create_on_all_three(&mut conn, "kept")?;
    create_on_all_three(&mut conn, "gone")?;
    write_to_every_partition(&cluster.bootstrap(), &["kept", "gone"])?;
    let victim = 3;
    let victim_dir = cluster.node(victim).data_dir();
    let all_replicas = ["gone-0", "gone-1", "kept-0", "kept-1"];
    wait_for(Duration::from_secs(20), "broker 3 holding every replica", || {
        Ok(all_replicas.iter().all(|r| victim_dir.join(r).is_dir()))
    })?;

    cluster.node(victim).terminate()?;
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topic_names(vec![name("gone")]);
    let code = conn.request(&request, 4)?.responses[0].error_code;
    ensure!(code == 0, "delete gone: error {code}");
    let witness_dir = cluster.node(1).data_dir();
    wait_for(Duration::from_secs(10), "broker 1 deleting its replicas", || {
        Ok(entries_starting(&witness_dir, "gone-")?.is_empty())
    })?;
    ensure!(
        entries_starting(&victim_dir, "gone-")? == ["gone-0", "gone-1"],
        "broker 3 was down: its replicas of the deleted topic are still there"
    );

    cluster.restart(victim)?;
    let left = entries_starting(&victim_dir, "gone-")?;
    ensure!(left.len() == 2, "two directories, set aside: {left:?}");
    for (dir, partition) in left.iter().zip(["gone-0.", "gone-1."]) {
        ensure!(
            dir.starts_with(partition) && dir.ends_with("-stray"),
            "{dir} is not set aside"
        );
    }
    ensure!(
        entries_starting(&victim_dir, "kept-")? == ["kept-0", "kept-1"],
        "the replicas the metadata still gives broker 3 stay where they are"
    );
    let mut victim_conn = cluster.connect(victim)?;
    create_on_all_three(&mut victim_conn, "gone")?;
    write_to_every_partition(&cluster.bootstrap(), &["gone"])?;
    wait_for(
        Duration::from_secs(20),
        "broker 3 holding the new topic's replicas",
        || Ok(["gone-0", "gone-1"].iter().all(|r| victim_dir.join(r).is_dir())),
    )?;
    Ok(())
}
