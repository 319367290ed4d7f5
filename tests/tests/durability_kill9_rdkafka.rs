//! Durability is what acks says: every record acknowledged with acks=all survives SIGKILL of the
//! broker and a restart on the same data directory, at the same offsets, byte for byte; the log
//! keeps growing from where it stopped; topic metadata (partitions, configs, deletions) survives
//! too; SIGTERM is a clean shutdown (exit status 0). The first and the many-rolls cases run
//! with O_DIRECT appends too.

use anyhow::{Context, Result};
use laminar_tests::rdkafka_client::{
    admin_client, admin_options, assert_records_match, assigned_consumer, consume, create_topic, produce_all,
    producer, sample_records, unique_topic, watermarks, TestRecord, OP_TIMEOUT,
};
use laminar_tests::{Broker, BrokerOptions};
use rdkafka::admin::ResourceSpecifier;
use rdkafka::Offset;

fn read_back(broker: &Broker, topic: &str, partition: i32, expected: &[TestRecord]) -> Result<()> {
    let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
    assert_eq!(
        watermarks(&consumer, topic, partition)?,
        (0, expected.len() as i64),
        "{topic}/{partition} watermarks after restart"
    );
    let consumed = consume(&consumer, topic, partition, Offset::Beginning, expected.len())?;
    assert_records_match(expected, &consumed, 0);
    Ok(())
}

/// O_DIRECT appends on the shards' rings (`laminar.storage.write_mode=direct`).
fn direct() -> BrokerOptions {
    BrokerOptions::default().with_override("laminar.storage.write_mode", "direct")
}

#[tokio::test]
async fn acks_all_records_survive_kill9_and_the_log_continues() -> Result<()> {
    survive_kill9_and_continue(BrokerOptions::default()).await
}

#[tokio::test]
async fn acks_all_records_written_o_direct_survive_kill9_and_the_log_continues() -> Result<()> {
    survive_kill9_and_continue(direct()).await
}

/// acks=1 answers once the batches are in the kernel's hands, as written to the page cache
/// would be: with O_DIRECT appends (staged in the shard's memory first) a kill of the broker
/// loses none of them either.
#[tokio::test]
async fn acks_1_records_written_o_direct_survive_kill9() -> Result<()> {
    let mut broker = Broker::start(direct())?;
    let topic = unique_topic("kill9-acks1");
    create_topic(&broker.bootstrap(), &topic, 1, &[]).await?;
    let records = sample_records(2000);
    let leader_only = producer(&broker.bootstrap(), &[("acks", "1"), ("linger.ms", "2")])?;
    for chunk in records.chunks(500) {
        produce_all(&leader_only, &topic, 0, chunk).await?;
    }
    broker.kill9()?;
    broker.restart()?;
    read_back(&broker, &topic, 0, &records)
}

async fn survive_kill9_and_continue(options: BrokerOptions) -> Result<()> {
    let mut broker = Broker::start(options)?;
    let topic = unique_topic("kill9");
    create_topic(&broker.bootstrap(), &topic, 2, &[]).await?;
    let records = sample_records(1500);
    {
        let plain = producer(&broker.bootstrap(), &[])?;
        let zstd = producer(
            &broker.bootstrap(),
            &[("compression.type", "zstd"), ("linger.ms", "20")],
        )?;
        // Several rounds, so the log holds many batches and the last acks come just before the kill.
        for chunk in records.chunks(300) {
            produce_all(&plain, &topic, 0, chunk).await?;
            produce_all(&zstd, &topic, 1, chunk).await?;
        }
    }
    broker.kill9()?;
    broker.restart()?;
    read_back(&broker, &topic, 0, &records)?;
    read_back(&broker, &topic, 1, &records)?;

    let more = sample_records(10);
    let offsets = produce_all(&producer(&broker.bootstrap(), &[])?, &topic, 0, &more).await?;
    assert_eq!(
        offsets,
        (1500..1510).collect::<Vec<i64>>(),
        "appends continue after the recovered end"
    );
    Ok(())
}

#[tokio::test]
async fn repeated_kill9_cycles_lose_nothing() -> Result<()> {
    let mut broker = Broker::start_default()?;
    let topic = unique_topic("kill9-cycles");
    create_topic(&broker.bootstrap(), &topic, 1, &[]).await?;
    let records = sample_records(300);
    for (round, chunk) in records.chunks(100).enumerate() {
        let offsets = produce_all(&producer(&broker.bootstrap(), &[])?, &topic, 0, chunk).await?;
        let first = (round * 100) as i64;
        assert_eq!(offsets, (first..first + 100).collect::<Vec<_>>(), "round {round}");
        broker.kill9()?;
        broker.restart()?;
    }
    read_back(&broker, &topic, 0, &records)
}

/// With 1 KiB segments every few records roll the log, and the segment that rolled is synced
/// in the background while appends go on (engine `log/rolled.rs`): after each SIGKILL recovery
/// verifies the segments the state file does not vouch for, and must keep every acknowledged
/// record of all of them (a segment wrongly judged short would take the later ones with it).
#[tokio::test]
async fn records_across_many_rolls_survive_kill9_while_rolled_segments_sync_behind() -> Result<()> {
    many_rolls_survive_kill9(BrokerOptions::default()).await
}

#[tokio::test]
async fn records_written_o_direct_across_many_rolls_survive_kill9() -> Result<()> {
    many_rolls_survive_kill9(direct()).await
}

async fn many_rolls_survive_kill9(options: BrokerOptions) -> Result<()> {
    let mut broker = Broker::start(options)?;
    let topic = unique_topic("kill9-rolls");
    create_topic(&broker.bootstrap(), &topic, 1, &[("segment.bytes", "1024")]).await?;
    let records = sample_records(600);
    for (round, chunk) in records.chunks(150).enumerate() {
        // Batches of at most 5 records: many batches, so many rolls in every round.
        let small_batches = producer(&broker.bootstrap(), &[("batch.num.messages", "5")])?;
        let offsets = produce_all(&small_batches, &topic, 0, chunk).await?;
        let first = (round * 150) as i64;
        assert_eq!(offsets, (first..first + 150).collect::<Vec<_>>(), "round {round}");
        broker.kill9()?;
        broker.restart()?;
    }
    let segments = std::fs::read_dir(broker.data_dir().join(format!("{topic}-0")))?
        .filter(|entry| {
            entry
                .as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".log"))
        })
        .count();
    assert!(segments >= 20, "the log rolled many times: {segments} segments");
    read_back(&broker, &topic, 0, &records)
}

#[tokio::test]
async fn sigterm_is_a_clean_shutdown_that_keeps_everything() -> Result<()> {
    let mut broker = Broker::start_default()?;
    let topic = unique_topic("sigterm");
    create_topic(&broker.bootstrap(), &topic, 1, &[]).await?;
    let records = sample_records(200);
    produce_all(
        &producer(&broker.bootstrap(), &[("acks", "1")])?,
        &topic,
        0,
        &records,
    )
    .await?;
    let status = broker.terminate()?;
    assert!(
        status.success(),
        "SIGTERM must exit 0, got {status}; stderr:\n{}",
        broker.stderr_tail()
    );
    broker.restart()?;
    read_back(&broker, &topic, 0, &records)
}

#[tokio::test]
async fn topic_metadata_survives_kill9() -> Result<()> {
    let mut broker = Broker::start_default()?;
    let (kept, deleted) = (unique_topic("meta-kept"), unique_topic("meta-deleted"));
    create_topic(&broker.bootstrap(), &kept, 3, &[("retention.ms", "123456789")]).await?;
    create_topic(&broker.bootstrap(), &deleted, 1, &[]).await?;
    let admin = admin_client(&broker.bootstrap())?;
    let results = admin.delete_topics(&[&deleted], &admin_options()).await?;
    assert_eq!(results, vec![Ok(deleted.clone())]);
    drop(admin);

    broker.kill9()?;
    broker.restart()?;
    let admin = admin_client(&broker.bootstrap())?;
    let metadata = admin.inner().fetch_metadata(None, OP_TIMEOUT)?;
    let names: Vec<&str> = metadata.topics().iter().map(|t| t.name()).collect();
    assert!(
        !names.contains(&deleted.as_str()),
        "deleted topic came back: {names:?}"
    );
    let topic = metadata
        .topics()
        .iter()
        .find(|t| t.name() == kept)
        .context("created topic lost")?;
    assert_eq!(topic.partitions().len(), 3);
    let mut described = admin
        .describe_configs([&ResourceSpecifier::Topic(&kept)], &admin_options())
        .await?;
    let config = described
        .remove(0)
        .map_err(|code| anyhow::anyhow!("DescribeConfigs: {code:?}"))?;
    assert_eq!(
        config.get("retention.ms").and_then(|e| e.value.as_deref()),
        Some("123456789")
    );
    Ok(())
}

/// A crash between writing the topic table and removing a deleted topic's directories leaves
/// them on disk (as does a cluster node that was down when its topic was deleted). Put back
/// after the deletion here, such a directory must not be opened by a new topic of the same
/// name: its `partition.metadata` names the old topic's id, so it is set aside
/// (`<name>.<id>-stray`, as Kafka does with stray logs) and the new topic starts empty.
#[tokio::test]
async fn a_deleted_topics_directory_left_on_disk_is_not_opened_by_a_new_topic_of_its_name() -> Result<()> {
    let mut broker = Broker::start_default()?;
    let topic = unique_topic("left-behind");
    create_topic(&broker.bootstrap(), &topic, 1, &[]).await?;
    produce_all(
        &producer(&broker.bootstrap(), &[])?,
        &topic,
        0,
        &sample_records(50),
    )
    .await?;
    broker.terminate()?;
    let dir = broker.data_dir().join(format!("{topic}-0"));
    let kept = broker.data_dir().join("kept-by-the-test");
    copy_dir(&dir, &kept)?;
    broker.restart()?;
    let admin = admin_client(&broker.bootstrap())?;
    assert_eq!(
        admin.delete_topics(&[&topic], &admin_options()).await?,
        vec![Ok(topic.clone())]
    );
    drop(admin);
    broker.terminate()?;
    anyhow::ensure!(!dir.exists(), "the deletion removed {}", dir.display());
    std::fs::rename(&kept, &dir)?;

    broker.restart()?;
    create_topic(&broker.bootstrap(), &topic, 1, &[]).await?;
    let new_records = sample_records(3);
    let offsets = produce_all(&producer(&broker.bootstrap(), &[])?, &topic, 0, &new_records).await?;
    assert_eq!(offsets, vec![0, 1, 2], "the new topic starts at offset 0");
    read_back(&broker, &topic, 0, &new_records)?;
    let set_aside: Vec<String> = std::fs::read_dir(broker.data_dir())?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .filter(|name| name.starts_with(&format!("{topic}-0.")) && name.ends_with("-stray"))
        .collect();
    assert_eq!(
        set_aside.len(),
        1,
        "the old directory is kept aside for the operator"
    );
    Ok(())
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> Result<()> {
    std::fs::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        std::fs::copy(entry.path(), to.join(entry.file_name()))?;
    }
    Ok(())
}
