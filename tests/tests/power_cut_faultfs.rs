//! Acknowledged means durable, through power cuts: the broker's log dir is a `laminar-faultfs`
//! mount, which keeps what no fsync covered in memory only; a cut loses it (or keeps a seeded
//! random subset of its pages, some torn), as a disk losing power would. With `laminar.fsync`
//! at its default (`always`), every record acknowledged with acks=all survives at its offset,
//! byte for byte, with small appends mapped (the default) or written; records acknowledged with
//! acks=1 after them come back as a prefix, never as a torn or invented record; topics created
//! survive; and the log continues from where recovery ends it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{ensure, Result};
use futures::stream::{FuturesUnordered, StreamExt};
use laminar_faultfs::Cut;
use laminar_tests::power_cut::{BrokerOnFaultFs, ClusterOnFaultFs};
use laminar_tests::rdkafka_client::{
    assert_records_match, assigned_consumer, consume, create_topic, produce_all, producer, sample_records,
    unique_topic, watermarks, ConsumedRecord, TestRecord,
};
use laminar_tests::wire::create_topic_replicated;
use laminar_tests::{wait_for, Broker, BrokerOptions, Cluster};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::Offset;

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

/// Sends records round-robin to `partitions` partitions with up to 64 in flight until
/// aborted, noting each acknowledgement as (partition, offset, index).
async fn produce_until_aborted(
    producer: FutureProducer,
    topic: String,
    partitions: i32,
    acked: Arc<Mutex<Vec<(i32, i64, usize)>>>,
) {
    let mut in_flight = FuturesUnordered::new();
    for index in 0.. {
        let partition = index as i32 % partitions;
        let (producer, topic) = (producer.clone(), topic.clone());
        in_flight.push(async move {
            let value = load_value(index);
            let record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&topic)
                .partition(partition)
                .payload(value.as_slice());
            (index, producer.send(record, Duration::from_secs(5)).await)
        });
        if in_flight.len() < 64 {
            continue;
        }
        if let Some((index, Ok(delivery))) = in_flight.next().await {
            acked
                .lock()
                .expect("not poisoned")
                .push((delivery.partition, delivery.offset, index));
        }
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
    for (round, cut) in [Cut::LoseUnsynced, Cut::KeepRandomPages { seed: 7 }]
        .into_iter()
        .enumerate()
    {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let producer = producer(
            &node.broker().bootstrap(),
            &[("linger.ms", "1"), ("message.timeout.ms", "5000")],
        )?;
        let load = tokio::spawn(produce_until_aborted(
            producer,
            topic.clone(),
            2,
            Arc::clone(&acked),
        ));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let report = node.cut_power(cut)?;
        load.abort();
        let _ = load.await;
        let acked = std::mem::take(&mut *acked.lock().expect("not poisoned"));
        assert!(
            acked.len() > 100,
            "round {round}: only {} records acknowledged before the cut",
            acked.len()
        );
        node.restart()?;
        let mut checked = 0;
        for partition in 0..2 {
            let held = read_all(node.broker(), &topic, partition)?;
            for record in &held {
                let value = record.record.value.as_deref().unwrap_or_default();
                let sent = std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.strip_prefix("load-"))
                    .and_then(|v| v.get(..8))
                    .and_then(|i| i.parse::<usize>().ok());
                let sent = sent.map(load_value);
                assert_eq!(
                    sent.as_deref(),
                    Some(value),
                    "round {round}: {topic}/{partition} at {} holds a record the load never sent",
                    record.offset
                );
            }
            // Offsets of records from earlier rounds are checked in their round.
            for &(_, offset, index) in acked.iter().filter(|(p, _, _)| *p == partition) {
                let at = held.get(offset as usize).map(|r| r.record.value.as_deref());
                assert_eq!(
                    at,
                    Some(Some(load_value(index).as_slice())),
                    "round {round}: acknowledged record {index} at {topic}/{partition} offset {offset}"
                );
                checked += 1;
            }
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
        let acked = Arc::new(Mutex::new(Vec::new()));
        let producer = producer(&bootstrap, &[("linger.ms", "1"), ("message.timeout.ms", "10000")])?;
        let load = tokio::spawn(produce_until_aborted(
            producer,
            topic.clone(),
            2,
            Arc::clone(&acked),
        ));
        tokio::time::sleep(Duration::from_millis(3000)).await;
        let reports = nodes.cut_power_everywhere(cut)?;
        load.abort();
        let _ = load.await;
        let acked = std::mem::take(&mut *acked.lock().expect("not poisoned"));
        assert!(
            acked.len() > 100,
            "round {round}: only {} records acknowledged before the cut",
            acked.len()
        );
        nodes.restart()?;
        let mut checked = 0;
        for partition in 0..2 {
            let mine: Vec<_> = acked.iter().filter(|(p, _, _)| *p == partition).collect();
            let end = mine.iter().map(|(_, offset, _)| offset + 1).max().unwrap_or(0);
            let consumer = assigned_consumer(&bootstrap, CHECK_CRCS)?;
            wait_for(
                Duration::from_secs(60),
                "the high watermark past every acknowledged record",
                || Ok(watermarks(&consumer, &topic, partition).is_ok_and(|(_, high)| high >= end)),
            )?;
            let held = consume(&consumer, &topic, partition, Offset::Beginning, end as usize)?;
            for &&(_, offset, index) in &mine {
                let at = held.get(offset as usize).map(|r| r.record.value.as_deref());
                assert_eq!(
                    at,
                    Some(Some(load_value(index).as_slice())),
                    "round {round}: acknowledged record {index} at {topic}/{partition} offset {offset}"
                );
                checked += 1;
            }
        }
        eprintln!("round {round}: {checked} acknowledged records checked; cuts {reports:?}");
    }
    Ok(())
}
