//! ListOffsets (earliest, latest, by timestamp), seek, reading from inside a batch, DeleteRecords
//! moving the low watermark, and a long-poll fetch woken by a later append, through librdkafka.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use laminar_tests::rdkafka_client::{
    admin_client, admin_options, assert_records_match, assigned_consumer, consume, create_topic,
    poll_records, produce_all, producer, sample_records, unique_topic, watermarks, TestRecord,
    BASE_TIMESTAMP_MS, OP_TIMEOUT,
};
use laminar_tests::Broker;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

/// Starts a broker with one 1-partition topic holding 100 sample records produced in batches.
async fn broker_with_records() -> Result<(Broker, String, Vec<TestRecord>)> {
    let broker = Broker::start_default()?;
    let topic = unique_topic("seek");
    create_topic(&broker.bootstrap(), &topic, 1, &[]).await?;
    let records = sample_records(100);
    let producer = producer(&broker.bootstrap(), &[("linger.ms", "50")])?;
    let offsets = produce_all(&producer, &topic, 0, &records).await?;
    assert_eq!(offsets, (0..100).collect::<Vec<i64>>());
    Ok((broker, topic, records))
}

fn offset_for_time(consumer: &BaseConsumer, topic: &str, timestamp_ms: i64) -> Result<Offset> {
    let mut query = TopicPartitionList::new();
    query.add_partition_offset(topic, 0, Offset::Offset(timestamp_ms))?;
    let answer = consumer.offsets_for_times(query, OP_TIMEOUT)?;
    let element = answer
        .find_partition(topic, 0)
        .context("partition missing from the answer")?;
    element.error()?;
    Ok(element.offset())
}

#[tokio::test]
async fn watermarks_and_offsets_for_times_follow_the_log() -> Result<()> {
    let (broker, topic, _records) = broker_with_records().await?;
    let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
    assert_eq!(watermarks(&consumer, &topic, 0)?, (0, 100));
    // Record i has timestamp BASE + i s: the answer is the first record at or after the time.
    assert_eq!(
        offset_for_time(&consumer, &topic, BASE_TIMESTAMP_MS - 5_000)?,
        Offset::Offset(0)
    );
    assert_eq!(
        offset_for_time(&consumer, &topic, BASE_TIMESTAMP_MS)?,
        Offset::Offset(0)
    );
    assert_eq!(
        offset_for_time(&consumer, &topic, BASE_TIMESTAMP_MS + 41_000)?,
        Offset::Offset(41)
    );
    assert_eq!(
        offset_for_time(&consumer, &topic, BASE_TIMESTAMP_MS + 41_500)?,
        Offset::Offset(42)
    );
    assert_eq!(
        offset_for_time(&consumer, &topic, BASE_TIMESTAMP_MS + 99_000)?,
        Offset::Offset(99)
    );
    // Past the newest record there is no offset: Kafka answers -1 (librdkafka: End).
    assert_eq!(
        offset_for_time(&consumer, &topic, BASE_TIMESTAMP_MS + 100_000)?,
        Offset::End
    );
    Ok(())
}

#[tokio::test]
async fn seek_moves_the_consumer_to_exact_offsets() -> Result<()> {
    let (broker, topic, records) = broker_with_records().await?;
    let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
    let first = consume(&consumer, &topic, 0, Offset::Beginning, 10)?;
    assert_records_match(&records[..10], &first, 0);

    consumer.seek(&topic, 0, Offset::Offset(70), OP_TIMEOUT)?;
    let after_seek = poll_records(&consumer, 5)?;
    assert_records_match(&records[70..75], &after_seek, 70);

    consumer.seek(&topic, 0, Offset::Offset(3), OP_TIMEOUT)?;
    let backwards = poll_records(&consumer, 2)?;
    assert_records_match(&records[3..5], &backwards, 3);
    Ok(())
}

#[tokio::test]
async fn assigning_inside_a_batch_starts_at_that_offset() -> Result<()> {
    let (broker, topic, records) = broker_with_records().await?;
    for start in [1, 57, 99] {
        let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
        let consumed = consume(&consumer, &topic, 0, Offset::Offset(start), 100 - start as usize)?;
        assert_records_match(&records[start as usize..], &consumed, start);
    }
    let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
    let tail = consume(&consumer, &topic, 0, Offset::OffsetTail(5), 5)?;
    assert_records_match(&records[95..], &tail, 95);
    Ok(())
}

#[tokio::test]
async fn delete_records_moves_the_low_watermark() -> Result<()> {
    let (broker, topic, records) = broker_with_records().await?;
    let admin = admin_client(&broker.bootstrap())?;
    let mut before = TopicPartitionList::new();
    before.add_partition_offset(&topic, 0, Offset::Offset(30))?;
    let answer = admin
        .delete_records(&before, &admin_options())
        .await
        .context("DeleteRecords")?;
    let element = answer
        .find_partition(&topic, 0)
        .context("partition missing from DeleteRecords")?;
    element.error().context("DeleteRecords partition error")?;
    assert_eq!(
        element.offset(),
        Offset::Offset(30),
        "DeleteRecords low watermark"
    );

    let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
    assert_eq!(watermarks(&consumer, &topic, 0)?, (30, 100));
    let consumed = consume(&consumer, &topic, 0, Offset::Beginning, 70)?;
    assert_records_match(&records[30..], &consumed, 30);
    Ok(())
}

#[tokio::test]
async fn a_waiting_consumer_is_woken_by_a_new_record() -> Result<()> {
    let (broker, topic, _records) = broker_with_records().await?;
    // A long broker-side wait: the record must arrive because the append wakes the fetch, well
    // before fetch.wait.max.ms runs out.
    let consumer = assigned_consumer(&broker.bootstrap(), &[("fetch.wait.max.ms", "5000")])?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(&topic, 0, Offset::End)?;
    consumer.assign(&assignment)?;
    // Let the consumer resolve End and park a fetch at offset 100.
    assert!(
        consumer.poll(Duration::from_millis(1500)).is_none(),
        "nothing to read yet"
    );

    let late = sample_records(101).pop().expect("one record");
    let producer = producer(&broker.bootstrap(), &[("linger.ms", "0")])?;
    let sent_at = Instant::now();
    let offsets = produce_all(&producer, &topic, 0, std::slice::from_ref(&late)).await?;
    assert_eq!(offsets, vec![100]);
    let consumed = poll_records(&consumer, 1)?;
    let waited = sent_at.elapsed();
    assert_records_match(std::slice::from_ref(&late), &consumed, 100);
    assert!(
        waited < Duration::from_millis(2500),
        "the parked fetch answered only after {waited:?}"
    );
    Ok(())
}
