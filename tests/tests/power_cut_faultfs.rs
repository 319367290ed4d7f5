//! Acknowledged means durable, through power cuts: the broker's log dir is a `laminar-faultfs`
//! mount, which keeps what no fsync covered in memory only; a cut loses it (or keeps a seeded
//! random subset of its pages, some torn), as a disk losing power would. With `laminar.fsync`
//! at its default (`always`), every record acknowledged with acks=all survives at its offset,
//! byte for byte, with small appends mapped (the default) or written; records acknowledged with
//! acks=1 after them come back as a prefix, never as a torn or invented record; topics created
//! survive; and the log continues from where recovery ends it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{ensure, Result};
use futures::stream::{FuturesUnordered, StreamExt};
use laminar_faultfs::Cut;
use laminar_tests::http::{get_ok, MetricsPage};
use laminar_tests::power_cut::{BrokerOnFaultFs, ClusterOnFaultFs};
use laminar_tests::rdkafka_client::{
    admin_client, admin_options, assert_records_match, assigned_consumer, commit, consume, create_topic,
    first_offset_seen, group_member, produce_all, producer, read_to_high_watermark, sample_records,
    unique_topic, watermarks, ConsumedRecord, KeysValuesByOffset, TestRecord, BASE_TIMESTAMP_MS, OP_TIMEOUT,
};
use laminar_tests::wire::create_topic_replicated;
use laminar_tests::{wait_for, Broker, BrokerOptions, Cluster};

/// The spare segment file's name (`engine/src/log/recycle.rs`).
const SPARE_NAME: &str = "spare.segment";
use rdkafka::admin::{AlterConfig, ResourceSpecifier};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

/// Consumer settings for reading back after a cut: librdkafka checks each batch's CRC, so a
/// torn batch served as a whole one fails the test.
const CHECK_CRCS: &[(&str, &str)] = &[("check.crcs", "true")];

/// Everything `partition` holds, from offset 0 to its high watermark.
fn read_all(broker: &Broker, topic: &str, partition: i32) -> Result<Vec<ConsumedRecord>> {
    let consumer = assigned_consumer(&broker.bootstrap(), CHECK_CRCS)?;
    let (low, high) = watermarks(&consumer, topic, partition)?;
    ensure!(low == 0, "{topic}/{partition}: log start {low} after a cut");
    consume(&consumer, topic, partition, Offset::Beginning, high as usize)
}

/// Asserts that `held` is exactly `durable` followed by a prefix of `maybe` (records
/// acknowledged without an fsync), at offsets from 0; returns how many of `maybe` it kept.
fn assert_durable_then_prefix(
    held: &[ConsumedRecord],
    durable: &[TestRecord],
    maybe: &[TestRecord],
) -> usize {
    assert!(
        held.len() >= durable.len(),
        "{} records after the cut, {} were acknowledged with acks=all",
        held.len(),
        durable.len()
    );
    let kept = held.len() - durable.len();
    assert!(
        kept <= maybe.len(),
        "{kept} records past the durable ones, {} were produced",
        maybe.len()
    );
    assert_records_match(durable, &held[..durable.len()], 0);
    assert_records_match(&maybe[..kept], &held[durable.len()..], durable.len() as i64);
    kept
}

/// Rounds of acks=all records into four partitions and acks=1 records into a fifth, a power
/// cut that loses every unsynced write after each: the acks=all records are all there each
/// time, the acks=1 ones a prefix, and the log continues at the recovered end.
async fn acks_all_survive_cuts_losing_every_unsynced_write(mapped_appends: &str) -> Result<()> {
    let options = BrokerOptions::default().with_override("laminar.storage.mapped_appends", mapped_appends);
    let Some(mut node) = BrokerOnFaultFs::start(options)? else {
        return Ok(());
    };
    let bootstrap = node.broker().bootstrap();
    let (synced, unsynced) = (unique_topic("cut-acks-all"), unique_topic("cut-acks-1"));
    create_topic(&bootstrap, &synced, 4, &[]).await?;
    create_topic(&bootstrap, &unsynced, 1, &[]).await?;
    let records = sample_records(240);
    let mut durable: Vec<TestRecord> = Vec::new();
    let mut unsynced_kept: Vec<TestRecord> = Vec::new();
    for (round, chunk) in records.chunks(80).enumerate() {
        let bootstrap = node.broker().bootstrap();
        let acks_all = producer(&bootstrap, &[("batch.num.messages", "4")])?;
        for partition in 0..4 {
            let offsets = produce_all(&acks_all, &synced, partition, chunk).await?;
            let first = durable.len() as i64;
            assert_eq!(
                offsets,
                (first..first + chunk.len() as i64).collect::<Vec<_>>(),
                "round {round}"
            );
        }
        durable.extend_from_slice(chunk);
        let first_unsynced = unsynced_kept.len() as i64;
        let acks_1 = producer(&bootstrap, &[("acks", "1")])?;
        let offsets = produce_all(&acks_1, &unsynced, 0, chunk).await?;
        assert_eq!(
            offsets[0], first_unsynced,
            "round {round}: acks=1 records follow the recovered end"
        );
        assert!(
            node.unsynced_bytes() > 0,
            "round {round}: acks=1 records wait for no fsync"
        );

        let report = node.cut_power_and_restart(Cut::LoseUnsynced)?;
        assert!(
            report.pages_lost > 0,
            "round {round}: the cut lost something: {report:?}"
        );
        for partition in 0..4 {
            let held = read_all(node.broker(), &synced, partition)?;
            assert_durable_then_prefix(&held, &durable, &[]);
        }
        let held = read_all(node.broker(), &unsynced, 0)?;
        let mut maybe = unsynced_kept.clone();
        maybe.extend_from_slice(chunk);
        let kept = assert_durable_then_prefix(&held, &[], &maybe);
        unsynced_kept.truncate(0);
        unsynced_kept.extend_from_slice(&maybe[..kept]);
    }
    Ok(())
}

#[tokio::test]
async fn acks_all_records_survive_power_cuts_with_small_appends_mapped() -> Result<()> {
    acks_all_survive_cuts_losing_every_unsynced_write("true").await
}

#[tokio::test]
async fn acks_all_records_survive_power_cuts_with_every_append_written() -> Result<()> {
    acks_all_survive_cuts_losing_every_unsynced_write("false").await
}

/// Seeds of the random-pages cuts; `LAMINAR_POWER_CUT_SEEDS` (comma-separated) runs others, for
/// longer soaks.
fn seeds() -> Vec<u64> {
    std::env::var("LAMINAR_POWER_CUT_SEEDS")
        .ok()
        .map(|list| list.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 3])
}

/// acks=all records, then acks=1 records into the same partitions (32 KiB segments: the acks=1
/// records span a roll, whose segment syncs in the background, and leave an unsynced tail of
/// several pages, with its index entries), then a cut
/// that keeps a random subset of the unsynced pages, some torn, holes between them: recovery
/// keeps every acks=all record, a prefix of the rest, no torn record, and appends continue.
#[tokio::test]
async fn a_power_cut_keeping_random_unsynced_pages_recovers_a_valid_prefix() -> Result<()> {
    for seed in seeds() {
        let Some(mut node) = BrokerOnFaultFs::start(BrokerOptions::default())? else {
            return Ok(());
        };
        let bootstrap = node.broker().bootstrap();
        let topic = unique_topic("cut-random-pages");
        create_topic(&bootstrap, &topic, 2, &[("segment.bytes", "32768")]).await?;
        let records = sample_records(400);
        let (durable, maybe) = records.split_at(200);
        let acks_all = producer(&bootstrap, &[("batch.num.messages", "5")])?;
        let acks_1 = producer(&bootstrap, &[("acks", "1"), ("batch.num.messages", "5")])?;
        for partition in 0..2 {
            produce_all(&acks_all, &topic, partition, durable).await?;
            produce_all(&acks_1, &topic, partition, maybe).await?;
        }
        let report = node.cut_power_and_restart(Cut::KeepRandomPages { seed })?;
        eprintln!("seed {seed}: {report:?}");
        for partition in 0..2 {
            let held = read_all(node.broker(), &topic, partition)?;
            let kept = assert_durable_then_prefix(&held, durable, maybe);
            let more = sample_records(20);
            let producer = producer(&node.broker().bootstrap(), &[])?;
            let offsets = produce_all(&producer, &topic, partition, &more).await?;
            let end = held.len() as i64;
            assert_eq!(
                offsets,
                (end..end + 20).collect::<Vec<_>>(),
                "seed {seed}: appends continue"
            );
            eprintln!(
                "seed {seed}, partition {partition}: kept {kept} of {} acks=1 records",
                maybe.len()
            );
        }
    }
    Ok(())
}

/// The value of the `index`th record the load sends: its index, then padding of a varying
/// length (records of 20 to 1 000 bytes, so appends are small enough to be mapped).
fn load_value(index: usize) -> Vec<u8> {
    format!("load-{index:08}-{}", "p".repeat(index * 37 % 980)).into_bytes()
}

/// Records noted as acknowledged: (partition, offset, index of the record sent).
type Acked = Arc<Mutex<Vec<(i32, i64, usize)>>>;

/// Sends `count` records (`usize::MAX`: until aborted) round-robin to `partitions` partitions,
/// up to 64 in flight, noting each acknowledgement in `acked`; returns how many failed.
async fn produce_load(
    producer: FutureProducer,
    topic: String,
    partitions: i32,
    count: usize,
    acked: Acked,
) -> usize {
    let mut in_flight = FuturesUnordered::new();
    let (mut next, mut failed) = (0, 0);
    loop {
        while next < count && in_flight.len() < 64 {
            let (producer, topic, index) = (producer.clone(), topic.clone(), next);
            in_flight.push(async move {
                let value = load_value(index);
                let partition = index as i32 % partitions;
                let record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&topic)
                    .partition(partition)
                    .payload(value.as_slice());
                (index, producer.send(record, Duration::from_secs(120)).await)
            });
            next += 1;
        }
        match in_flight.next().await {
            None => return failed,
            Some((index, Ok(delivery))) => {
                acked
                    .lock()
                    .expect("not poisoned")
                    .push((delivery.partition, delivery.offset, index));
            }
            Some((_, Err(_))) => failed += 1,
        }
    }
}

/// Waits until `acked` holds at least `count` records.
async fn acknowledged(acked: &Acked, count: usize) {
    while acked.lock().expect("not poisoned").len() < count {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs an acks=all load over two partitions of `topic` (64 records in flight) for `load_for`,
/// then `cut` (which kills the brokers), then stops the load. Returns the records acknowledged
/// before the cut (more than 100) and what `cut` returned.
async fn acknowledged_until_cut<R>(
    bootstrap: &str,
    topic: &str,
    load_for: Duration,
    cut: impl FnOnce() -> Result<R>,
) -> Result<(Vec<(i32, i64, usize)>, R)> {
    let acked = Acked::default();
    let producer = producer(bootstrap, &[("linger.ms", "1"), ("message.timeout.ms", "10000")])?;
    let load = tokio::spawn(produce_load(
        producer,
        topic.to_string(),
        2,
        usize::MAX,
        Arc::clone(&acked),
    ));
    tokio::time::sleep(load_for).await;
    let cut = cut()?;
    load.abort();
    let _ = load.await;
    let acked = std::mem::take(&mut *acked.lock().expect("not poisoned"));
    ensure!(
        acked.len() > 100,
        "only {} records acknowledged before the cut",
        acked.len()
    );
    Ok((acked, cut))
}

/// Asserts that each of `acked`'s records of `partition` is in `held` at its offset; returns
/// how many it checked.
fn assert_acknowledged_held(acked: &[(i32, i64, usize)], partition: i32, held: &[ConsumedRecord]) -> usize {
    let mine: Vec<_> = acked.iter().filter(|(p, _, _)| *p == partition).collect();
    for &&(_, offset, index) in &mine {
        let at = held.get(offset as usize).map(|r| r.record.value.as_deref());
        let want = load_value(index);
        assert_eq!(
            at,
            Some(Some(want.as_slice())),
            "acknowledged record {index} at partition {partition}, offset {offset}"
        );
    }
    mine.len()
}

/// Asserts that every record in `held` is one the load sent.
fn assert_only_load_records(held: &[ConsumedRecord]) {
    for record in held {
        let value = record.record.value.as_deref().unwrap_or_default();
        let index = std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.strip_prefix("load-"))
            .and_then(|v| v.get(..8))
            .and_then(|i| i.parse::<usize>().ok());
        let sent = index.map(load_value);
        assert_eq!(
            sent.as_deref(),
            Some(value),
            "partition {} at {} holds a record the load never sent",
            record.partition,
            record.offset
        );
    }
}

/// Producers keep acks=all records in flight while the power goes (mid-append, mid-group
/// commit), twice: every record acknowledged before the cut is at its offset afterwards, and
/// every record the partitions hold is one the load sent.
#[tokio::test]
async fn acks_all_records_acknowledged_while_the_power_goes_survive() -> Result<()> {
    let Some(mut node) = BrokerOnFaultFs::start(BrokerOptions::default())? else {
        return Ok(());
    };
    let topic = unique_topic("cut-under-load");
    create_topic(&node.broker().bootstrap(), &topic, 2, &[]).await?;
    cut_twice_under_load(&mut node, &topic, &[]).await
}

/// With pre-written segments (`laminar.storage.prewrite`), whose files lie past their data with
/// zeros: a first load takes each partition past 1 MiB until blocks are pre-written ahead of
/// its appends (seen on /metrics), then the power goes twice under load. Every acknowledged
/// record, the first load's too, is at its offset afterwards, and nothing else comes back: the
/// zeros past the data are cut as a torn tail.
#[tokio::test]
async fn acks_all_records_survive_power_cuts_over_prewritten_segments() -> Result<()> {
    let options = BrokerOptions::default().with_override("laminar.storage.prewrite", "true");
    let Some(mut node) = BrokerOnFaultFs::start(options)? else {
        return Ok(());
    };
    let topic = unique_topic("cut-prewritten");
    create_topic(&node.broker().bootstrap(), &topic, 2, &[]).await?;
    let acked = Acked::default();
    let producer = producer(&node.broker().bootstrap(), &[("linger.ms", "5")])?;
    let failed = produce_load(producer, topic.clone(), 2, 12_000, Arc::clone(&acked)).await;
    ensure!(failed == 0, "{failed} records of the first load failed");
    let http = node.broker().http_addr();
    wait_for(
        Duration::from_secs(20),
        "blocks pre-written ahead of appends",
        || {
            let page = MetricsPage::parse(&get_ok(http, "/metrics")?)?;
            Ok(page.sum("laminar_storage_prewrite_bytes_total") > 0.0)
        },
    )?;
    let first_load = std::mem::take(&mut *acked.lock().expect("not poisoned"));
    cut_twice_under_load(&mut node, &topic, &first_load).await
}

/// With O_DIRECT appends (`laminar.storage.write_mode=direct`), retention keeps a removed
/// segment's file as the partition's spare and the next roll overwrites it in place, its old
/// batches (valid CRCs, lower offsets) lying past the new data. Twice: a load rolls both
/// partitions through small segments until retention has left a spare in each, then the
/// power goes under a load that rolls into the spare. Afterwards every acknowledged record
/// retention kept is at its offset, the offsets run without a gap or a step back, and nothing
/// but the load's records comes back. (Here the old bytes come back where unsynced blocks were
/// lost, past the zero padding of the last synced block; `engine/src/partition/
/// write_path_tests.rs` puts an old batch right after the data and checks that it is cut.)
#[tokio::test]
async fn acks_all_records_survive_power_cuts_over_recycled_segments() -> Result<()> {
    let options = BrokerOptions::default()
        .with_override("laminar.storage.write_mode", "direct")
        .with_override("log.retention.check.interval.ms", "100");
    let Some(mut node) = BrokerOnFaultFs::start(options)? else {
        return Ok(());
    };
    let topic = unique_topic("cut-recycled");
    create_topic(&node.broker().bootstrap(), &topic, 2, &[]).await?;
    set_segment_retention(&node.broker().bootstrap(), &topic, RECYCLED_RETENTION_BYTES).await?;
    let mut earlier = Vec::new();
    for (round, cut) in [Cut::LoseUnsynced, Cut::KeepRandomPages { seed: 11 }]
        .into_iter()
        .enumerate()
    {
        // Enough for retention to remove a segment of each partition, keeping its file.
        let acked = Acked::default();
        let producer = producer(&node.broker().bootstrap(), &[("linger.ms", "5")])?;
        let failed = produce_load(producer, topic.clone(), 2, 3_000, Arc::clone(&acked)).await;
        ensure!(
            failed == 0,
            "{failed} records of the load before round {round} failed"
        );
        earlier.append(&mut acked.lock().expect("not poisoned"));
        let dirs: Vec<_> = (0..2)
            .map(|p| node.broker().data_dir().join(format!("{topic}-{p}")))
            .collect();
        wait_for(
            Duration::from_secs(20),
            "a spare segment file in each partition",
            || Ok(dirs.iter().all(|dir| dir.join(SPARE_NAME).exists())),
        )?;
        let bootstrap = node.broker().bootstrap();
        let (acked, report) = acknowledged_until_cut(&bootstrap, &topic, Duration::from_millis(2500), || {
            node.cut_power(cut)
        })
        .await?;
        assert_each_partition_rolled(&acked, round)?;
        node.restart()?;
        // Retention off while the partitions are read: their log start then stays put.
        set_segment_retention(&node.broker().bootstrap(), &topic, -1).await?;
        let mut checked = 0;
        for partition in 0..2 {
            let (start, held) = read_from_log_start(node.broker(), &topic, partition)?;
            assert_only_load_records(&held);
            for (at, record) in held.iter().enumerate() {
                assert_eq!(
                    record.offset,
                    start + at as i64,
                    "partition {partition}: offsets run on"
                );
            }
            let kept = acked.iter().chain(&earlier).filter(|r| r.1 >= start);
            let from_start: Vec<_> = kept
                .map(|&(p, offset, index)| (p, offset - start, index))
                .collect();
            checked += assert_acknowledged_held(&from_start, partition, &held);
        }
        eprintln!("round {round}: {checked} acknowledged records checked; cut {report:?}");
        set_segment_retention(&node.broker().bootstrap(), &topic, RECYCLED_RETENTION_BYTES).await?;
        earlier.extend(acked);
    }
    Ok(())
}

/// Segments small enough that a load rolls several times a second; retention keeps two.
const RECYCLED_SEGMENT_BYTES: usize = 131_072;
const RECYCLED_RETENTION_BYTES: i64 = 2 * RECYCLED_SEGMENT_BYTES as i64;

/// Sets `topic`'s overrides to small segments and `retention_bytes` (-1: no limit).
async fn set_segment_retention(bootstrap: &str, topic: &str, retention_bytes: i64) -> Result<()> {
    let (segment, retention) = (RECYCLED_SEGMENT_BYTES.to_string(), retention_bytes.to_string());
    let alter = AlterConfig::new(ResourceSpecifier::Topic(topic))
        .set("segment.bytes", &segment)
        .set("retention.bytes", &retention);
    let admin = admin_client(bootstrap)?;
    for result in admin.alter_configs([&alter], &admin_options()).await? {
        result.map_err(|(resource, code)| anyhow::anyhow!("AlterConfigs {resource:?}: {code:?}"))?;
    }
    Ok(())
}

/// Each partition took more than a segment's bytes in the round: it rolled into its spare.
fn assert_each_partition_rolled(acked: &[(i32, i64, usize)], round: usize) -> Result<()> {
    for partition in 0..2 {
        let mine = acked.iter().filter(|(p, _, _)| *p == partition);
        let bytes: usize = mine.map(|&(_, _, index)| load_value(index).len()).sum();
        ensure!(
            bytes > RECYCLED_SEGMENT_BYTES,
            "round {round}: partition {partition} took {bytes} bytes, less than a segment"
        );
    }
    Ok(())
}

/// The records `partition` holds from its log start to its high watermark, and that start.
fn read_from_log_start(broker: &Broker, topic: &str, partition: i32) -> Result<(i64, Vec<ConsumedRecord>)> {
    let consumer = assigned_consumer(&broker.bootstrap(), CHECK_CRCS)?;
    let (low, high) = watermarks(&consumer, topic, partition)?;
    let held = consume(
        &consumer,
        topic,
        partition,
        Offset::Offset(low),
        (high - low) as usize,
    )?;
    Ok((low, held))
}

/// Two rounds of an acks=all load on `topic`'s two partitions cut by a power cut (every unsynced
/// write lost, then random pages kept); after each, the records acknowledged in the round and
/// `earlier` ones are at their offsets, and nothing but the load's records is held.
async fn cut_twice_under_load(
    node: &mut BrokerOnFaultFs,
    topic: &str,
    earlier: &[(i32, i64, usize)],
) -> Result<()> {
    for (round, cut) in [Cut::LoseUnsynced, Cut::KeepRandomPages { seed: 7 }]
        .into_iter()
        .enumerate()
    {
        let bootstrap = node.broker().bootstrap();
        let (acked, report) = acknowledged_until_cut(&bootstrap, topic, Duration::from_millis(1500), || {
            node.cut_power(cut)
        })
        .await?;
        node.restart()?;
        let mut checked = 0;
        for partition in 0..2 {
            let held = read_all(node.broker(), topic, partition)?;
            assert_only_load_records(&held);
            // Records of earlier rounds were checked in their round.
            checked += assert_acknowledged_held(&acked, partition, &held);
            checked += assert_acknowledged_held(earlier, partition, &held);
        }
        eprintln!("round {round}: {checked} acknowledged records checked; cut {report:?}");
    }
    Ok(())
}

/// Three nodes, replication factor 3, `min.insync.replicas=2`: a producer keeps acks=all
/// records in flight while the power goes on every node at once, twice (everything unsynced
/// lost everywhere, then random pages kept, a different seed per node). Every record
/// acknowledged before a cut is at its offset once the nodes are back: acks=all waited for
/// every in-sync replica's fsync, so whichever replica leads afterwards holds it.
#[tokio::test]
async fn replicated_acks_all_records_survive_a_power_cut_of_every_node() -> Result<()> {
    let options = Cluster::node_options().with_override("min.insync.replicas", "2");
    let Some(mut nodes) = ClusterOnFaultFs::start(3, 3000, options)? else {
        return Ok(());
    };
    let topic = unique_topic("cut-replicated");
    let mut conn = nodes.cluster().connect(1)?;
    let mut code = -1;
    // Until the quorum has seen every node register, a factor of 3 is INVALID_REPLICATION_FACTOR.
    wait_for(Duration::from_secs(20), "the topic created", || {
        code = create_topic_replicated(&mut conn, &topic, (2, 3), &[])?;
        Ok(code != 38)
    })?;
    ensure!(code == 0, "create {topic}: error {code}");
    let cuts = [
        |_| Cut::LoseUnsynced,
        |node: i32| Cut::KeepRandomPages {
            seed: 100 + node as u64,
        },
    ];
    for (round, cut) in cuts.into_iter().enumerate() {
        let bootstrap = nodes.cluster().bootstrap();
        let (acked, reports) = acknowledged_until_cut(&bootstrap, &topic, Duration::from_secs(3), || {
            nodes.cut_power_everywhere(cut)
        })
        .await?;
        nodes.restart()?;
        let mut checked = 0;
        for partition in 0..2 {
            let mine = acked.iter().filter(|(p, _, _)| *p == partition);
            let end = mine.map(|(_, offset, _)| offset + 1).max().unwrap_or(0);
            let consumer = assigned_consumer(&bootstrap, CHECK_CRCS)?;
            wait_for(
                Duration::from_secs(60),
                "the high watermark past every acknowledged record",
                || Ok(watermarks(&consumer, &topic, partition).is_ok_and(|(_, high)| high >= end)),
            )?;
            let held = consume(&consumer, &topic, partition, Offset::Beginning, end as usize)?;
            checked += assert_acknowledged_held(&acked, partition, &held);
        }
        eprintln!("round {round}: {checked} acknowledged records checked; cuts {reports:?}");
    }
    Ok(())
}

/// The offset `consumer`'s group committed for `topic`/`partition`, as OffsetFetch tells.
fn committed_offset(consumer: &BaseConsumer, topic: &str, partition: i32) -> Result<Option<Offset>> {
    let mut asked = TopicPartitionList::new();
    asked.add_partition(topic, partition);
    let committed = consumer.committed_offsets(asked, OP_TIMEOUT)?;
    Ok(committed.find_partition(topic, partition).map(|e| e.offset()))
}

/// A consumer group's committed offsets are acknowledged only once durable: after a power cut
/// that loses every unsynced write, the group resumes at the last offset it committed.
#[tokio::test]
async fn committed_offsets_survive_a_power_cut() -> Result<()> {
    let Some(mut node) = BrokerOnFaultFs::start(BrokerOptions::default())? else {
        return Ok(());
    };
    let bootstrap = node.broker().bootstrap();
    let (topic, group) = (unique_topic("cut-offsets"), unique_topic("cut-group"));
    create_topic(&bootstrap, &topic, 1, &[]).await?;
    produce_all(&producer(&bootstrap, &[])?, &topic, 0, &sample_records(100)).await?;
    {
        let member = group_member(&bootstrap, &group)?;
        member.subscribe(&[&topic])?;
        assert_eq!(first_offset_seen(&member)?, 0);
        for next_offset in [20, 40, 61] {
            commit(&member, &topic, 0, next_offset)?;
        }
    }
    node.cut_power_and_restart(Cut::LoseUnsynced)?;
    let member = group_member(&node.broker().bootstrap(), &group)?;
    assert_eq!(
        committed_offset(&member, &topic, 0)?,
        Some(Offset::Offset(61)),
        "the last commit after the cut"
    );
    member.subscribe(&[&topic])?;
    assert_eq!(
        first_offset_seen(&member)?,
        61,
        "the group resumes at its committed offset"
    );
    Ok(())
}

/// An idempotent producer sends through two power cuts (the broker back on the same port each
/// time, its producer state rebuilt from what the disk kept): every record is delivered, and
/// each partition holds every record sent to it exactly once, in send order — whatever a cut
/// lost is sent again, whatever it kept is not written twice.
#[tokio::test]
async fn an_idempotent_producer_writes_each_record_once_across_power_cuts() -> Result<()> {
    const RECORDS: usize = 30_000;
    let Some(mut node) = BrokerOnFaultFs::start(BrokerOptions::default())? else {
        return Ok(());
    };
    let topic = unique_topic("cut-idempotent");
    create_topic(&node.broker().bootstrap(), &topic, 2, &[]).await?;
    let idempotent = producer(
        &node.broker().bootstrap(),
        &[
            ("enable.idempotence", "true"),
            ("linger.ms", "1"),
            ("message.timeout.ms", "120000"),
        ],
    )?;
    let acked = Acked::default();
    let load = tokio::spawn(produce_load(
        idempotent,
        topic.clone(),
        2,
        RECORDS,
        Arc::clone(&acked),
    ));
    for (quarter, cut) in [(1, Cut::LoseUnsynced), (2, Cut::KeepRandomPages { seed: 11 })] {
        acknowledged(&acked, RECORDS * quarter / 4).await;
        let report = node.cut_power_and_restart(cut)?;
        eprintln!(
            "cut after {} of {RECORDS} acknowledged: {report:?}",
            acked.lock().expect("not poisoned").len()
        );
    }
    assert_eq!(load.await?, 0, "deliveries failed");
    for partition in 0..2 {
        let held = read_all(node.broker(), &topic, partition)?;
        let expected: Vec<Vec<u8>> = (0..RECORDS)
            .filter(|i| *i as i32 % 2 == partition)
            .map(load_value)
            .collect();
        let values: Vec<Vec<u8>> = held
            .iter()
            .map(|r| r.record.value.clone().unwrap_or_default())
            .collect();
        assert_eq!(values.len(), expected.len(), "{topic}/{partition}: records held");
        let first_difference = values.iter().zip(&expected).position(|(got, want)| got != want);
        assert_eq!(
            first_difference, None,
            "{topic}/{partition}: every record once, in send order"
        );
    }
    Ok(())
}

/// A compacted topic (1 KiB segments, the cleaner every 300 ms) takes keyed acks=all records in
/// rounds, each ended by a power cut at another moment of the cleaner's work (two lose every
/// unsynced write, two keep random pages): after each cut the log still ends after the last
/// acknowledged record, every record held is the one produced at its offset, and each key's
/// latest record is there.
#[tokio::test]
async fn compaction_cut_by_power_failures_keeps_each_keys_latest_record() -> Result<()> {
    const KEYS: usize = 8;
    const PER_ROUND: usize = 120;
    let options = BrokerOptions::default().with_override("log.retention.check.interval.ms", "300");
    let Some(mut node) = BrokerOnFaultFs::start(options)? else {
        return Ok(());
    };
    let topic = unique_topic("cut-compacted");
    let configs = [("cleanup.policy", "compact"), ("segment.bytes", "1024")];
    create_topic(&node.broker().bootstrap(), &topic, 1, &configs).await?;
    let (mut produced, mut latest) = (KeysValuesByOffset::new(), BTreeMap::new());
    let cuts = [
        (0, Cut::LoseUnsynced),
        (150, Cut::KeepRandomPages { seed: 21 }),
        (320, Cut::LoseUnsynced),
        (470, Cut::KeepRandomPages { seed: 22 }),
    ];
    for (round, (delay_ms, cut)) in cuts.into_iter().enumerate() {
        let producer = producer(&node.broker().bootstrap(), &[("linger.ms", "0")])?;
        let records: Vec<TestRecord> = (round * PER_ROUND..(round + 1) * PER_ROUND)
            .map(|n| TestRecord {
                key: Some(format!("key-{}", n % KEYS).into_bytes()),
                value: Some(format!("value-{n}").into_bytes()),
                headers: Vec::new(),
                timestamp_ms: BASE_TIMESTAMP_MS + n as i64,
            })
            .collect();
        for chunk in records.chunks(8) {
            let offsets = produce_all(&producer, &topic, 0, chunk).await?;
            for (offset, record) in offsets.into_iter().zip(chunk) {
                let (key, value) = (
                    record.key.clone().unwrap_or_default(),
                    record.value.clone().unwrap_or_default(),
                );
                latest.insert(key.clone(), offset);
                produced.insert(offset, (key, value));
            }
        }
        drop(producer);
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        let report = node.cut_power_and_restart(cut)?;
        let consumer = assigned_consumer(&node.broker().bootstrap(), CHECK_CRCS)?;
        let end = produced.keys().next_back().map_or(0, |last| last + 1);
        assert_eq!(
            watermarks(&consumer, &topic, 0)?,
            (0, end),
            "round {round}: the log ends after every acknowledged record"
        );
        let held = read_to_high_watermark(&consumer, &topic, 0)?;
        for (offset, key_value) in &held {
            assert_eq!(
                produced.get(offset),
                Some(key_value),
                "round {round}: offset {offset} holds what was produced there"
            );
        }
        for (key, offset) in &latest {
            assert!(
                held.contains_key(offset),
                "round {round}: the latest record of {key:?}, at {offset}, is held"
            );
        }
        eprintln!(
            "round {round}: {} of {} records held; {report:?}",
            held.len(),
            produced.len()
        );
    }
    Ok(())
}

/// A topic deleted just before a power cut stays deleted, and a new topic of the same name
/// starts empty: none of the old partitions' records come back in it.
#[tokio::test]
async fn a_topic_deleted_before_a_power_cut_stays_deleted_and_its_name_starts_empty() -> Result<()> {
    let Some(mut node) = BrokerOnFaultFs::start(BrokerOptions::default())? else {
        return Ok(());
    };
    let bootstrap = node.broker().bootstrap();
    let topic = unique_topic("cut-deleted");
    create_topic(&bootstrap, &topic, 2, &[]).await?;
    for partition in 0..2 {
        produce_all(
            &producer(&bootstrap, &[])?,
            &topic,
            partition,
            &sample_records(50),
        )
        .await?;
    }
    let deleted = admin_client(&bootstrap)?
        .delete_topics(&[&topic], &admin_options())
        .await?;
    assert_eq!(deleted, vec![Ok(topic.clone())]);
    node.cut_power_and_restart(Cut::LoseUnsynced)?;

    let bootstrap = node.broker().bootstrap();
    let metadata = admin_client(&bootstrap)?
        .inner()
        .fetch_metadata(None, OP_TIMEOUT)?;
    let names: Vec<&str> = metadata.topics().iter().map(|t| t.name()).collect();
    assert!(
        !names.contains(&topic.as_str()),
        "the deleted topic came back: {names:?}"
    );
    create_topic(&bootstrap, &topic, 2, &[]).await?;
    let fresh = sample_records(1);
    for partition in 0..2 {
        let offsets = produce_all(&producer(&bootstrap, &[])?, &topic, partition, &fresh).await?;
        assert_eq!(offsets, vec![0], "{topic}/{partition} starts empty");
        let held = read_all(node.broker(), &topic, partition)?;
        assert_records_match(&fresh, &held, 0);
    }
    Ok(())
}

/// Records deleted with DeleteRecords stay deleted through power cuts: once DeleteRecords has
/// answered, the low watermark it set (a whole segment removed, then a point inside one) is
/// where the log starts after a cut, and every record from there on is held.
#[tokio::test]
async fn records_deleted_before_a_power_cut_stay_deleted() -> Result<()> {
    let Some(mut node) = BrokerOnFaultFs::start(BrokerOptions::default())? else {
        return Ok(());
    };
    let topic = unique_topic("cut-delete-records");
    // Small segments: the first DeleteRecords removes whole segment files.
    create_topic(
        &node.broker().bootstrap(),
        &topic,
        1,
        &[("segment.bytes", "2048")],
    )
    .await?;
    let records = sample_records(100);
    produce_all(&producer(&node.broker().bootstrap(), &[])?, &topic, 0, &records).await?;
    for (delete_before, cut) in [(30, Cut::LoseUnsynced), (61, Cut::KeepRandomPages { seed: 7 })] {
        let admin = admin_client(&node.broker().bootstrap())?;
        let mut before = TopicPartitionList::new();
        before.add_partition_offset(&topic, 0, Offset::Offset(delete_before))?;
        let answer = admin.delete_records(&before, &admin_options()).await?;
        let element = answer.find_partition(&topic, 0).expect("answered");
        ensure!(element.error().is_ok(), "DeleteRecords: {:?}", element.error());
        drop(admin);
        let report = node.cut_power_and_restart(cut)?;
        let consumer = assigned_consumer(&node.broker().bootstrap(), CHECK_CRCS)?;
        assert_eq!(
            watermarks(&consumer, &topic, 0)?,
            (delete_before, 100),
            "after DeleteRecords to {delete_before} and a cut ({report:?})"
        );
        let held = consume(
            &consumer,
            &topic,
            0,
            Offset::Beginning,
            100 - delete_before as usize,
        )?;
        assert_records_match(&records[delete_before as usize..], &held, delete_before);
    }
    Ok(())
}
