//! librdkafka (rdkafka crate) produces records with keys, headers and timestamps, and an
//! assign()-based consumer reads every one back, byte for byte, at the offsets the broker acked.

use anyhow::Result;
use laminar_tests::http::{get_ok, MetricsPage};
use laminar_tests::rdkafka_client::{
    assert_records_match, assigned_consumer, consume, create_topic, produce_all, producer, sample_records,
    unique_topic, watermarks,
};
use laminar_tests::Broker;
use rdkafka::consumer::Consumer;
use rdkafka::producer::FutureRecord;
use rdkafka::Offset;

#[tokio::test]
async fn single_partition_roundtrip_keeps_order_keys_headers_and_timestamps() -> Result<()> {
    let broker = Broker::start_default()?;
    let topic = unique_topic("roundtrip");
    create_topic(&broker.bootstrap(), &topic, 1, &[]).await?;
    let records = sample_records(300);
    let offsets = produce_all(&producer(&broker.bootstrap(), &[])?, &topic, 0, &records).await?;
    assert_eq!(
        offsets,
        (0..300).collect::<Vec<i64>>(),
        "acked offsets must be 0..300 in send order"
    );

    let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
    let consumed = consume(&consumer, &topic, 0, Offset::Beginning, records.len())?;
    assert_records_match(&records, &consumed, 0);
    assert_eq!(watermarks(&consumer, &topic, 0)?, (0, 300));
    Ok(())
}

#[tokio::test]
async fn each_partition_keeps_its_own_offsets_and_order() -> Result<()> {
    let broker = Broker::start_default()?;
    let topic = unique_topic("partitions");
    create_topic(&broker.bootstrap(), &topic, 3, &[]).await?;
    let producer = producer(&broker.bootstrap(), &[])?;
    let mut per_partition = Vec::new();
    for partition in 0..3 {
        // Different counts per partition so a mix-up of partitions cannot go unnoticed.
        let records = sample_records(20 + 15 * partition as usize);
        let offsets = produce_all(&producer, &topic, partition, &records).await?;
        assert_eq!(
            offsets,
            (0..records.len() as i64).collect::<Vec<_>>(),
            "partition {partition}"
        );
        per_partition.push(records);
    }
    for (partition, records) in per_partition.iter().enumerate() {
        let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
        let consumed = consume(
            &consumer,
            &topic,
            partition as i32,
            Offset::Beginning,
            records.len(),
        )?;
        assert!(consumed.iter().all(|c| c.partition == partition as i32));
        assert_records_match(records, &consumed, 0);
        assert_eq!(
            watermarks(&consumer, &topic, partition as i32)?,
            (0, records.len() as i64)
        );
    }
    Ok(())
}

#[tokio::test]
async fn producing_to_an_unknown_topic_auto_creates_it() -> Result<()> {
    // Kafka's default auto.create.topics.enable=true with num.partitions=1.
    let broker = Broker::start_default()?;
    let topic = unique_topic("autocreate");
    let producer = producer(&broker.bootstrap(), &[])?;
    let delivery = producer
        .send(
            FutureRecord::to(&topic).key("k").payload("auto"),
            laminar_tests::rdkafka_client::OP_TIMEOUT,
        )
        .await
        .map_err(|(e, _)| anyhow::anyhow!("produce to an auto-created topic: {e}"))?;
    assert_eq!((delivery.partition, delivery.offset), (0, 0));
    let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
    let metadata = consumer.fetch_metadata(Some(&topic), laminar_tests::rdkafka_client::OP_TIMEOUT)?;
    let described = &metadata.topics()[0];
    assert_eq!(described.name(), topic);
    assert!(described.error().is_none(), "{:?}", described.error());
    assert_eq!(described.partitions().len(), 1, "num.partitions default is 1");
    let consumed = consume(&consumer, &topic, 0, Offset::Beginning, 1)?;
    assert_eq!(consumed[0].record.value.as_deref(), Some(&b"auto"[..]));
    assert_eq!(consumed[0].record.key.as_deref(), Some(&b"k"[..]));
    Ok(())
}

#[tokio::test]
async fn auto_create_disabled_refuses_unknown_topics() -> Result<()> {
    let broker = Broker::start(
        laminar_tests::BrokerOptions::default().with_override("auto.create.topics.enable", "false"),
    )?;
    let topic = unique_topic("no-autocreate");
    let consumer = assigned_consumer(&broker.bootstrap(), &[("allow.auto.create.topics", "true")])?;
    let metadata = consumer.fetch_metadata(Some(&topic), laminar_tests::rdkafka_client::OP_TIMEOUT)?;
    let described = &metadata.topics()[0];
    assert_eq!(
        described.error(),
        Some(rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART),
        "metadata for {topic} must say UNKNOWN_TOPIC_OR_PARTITION"
    );
    Ok(())
}

/// With O_DIRECT appends (`laminar.storage.write_mode=direct`), a consumer reading at the tail
/// while a producer appends gets every record byte for byte at its offset: its fetches meet
/// appends still staged or being written (they wait for the write, or are served from the
/// shard's recent writes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_at_the_tail_of_o_direct_appends_reads_every_record() -> Result<()> {
    let options =
        laminar_tests::BrokerOptions::default().with_override("laminar.storage.write_mode", "direct");
    let broker = Broker::start(options)?;
    let topic = unique_topic("direct-tail");
    create_topic(&broker.bootstrap(), &topic, 1, &[]).await?;
    let records = sample_records(3000);
    let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
    let (bootstrap, sent, produced_topic) = (broker.bootstrap(), records.clone(), topic.clone());
    let produce = tokio::spawn(async move {
        let producer = producer(&bootstrap, &[("linger.ms", "0")])?;
        for chunk in sent.chunks(100) {
            produce_all(&producer, &produced_topic, 0, chunk).await?;
        }
        anyhow::Ok(())
    });
    let consumed =
        tokio::task::spawn_blocking(move || consume(&consumer, &topic, 0, Offset::Beginning, 3000)).await??;
    produce.await??;
    assert_records_match(&records, &consumed, 0);
    let metrics = MetricsPage::parse(&get_ok(broker.http_addr(), "/metrics")?)?;
    assert!(
        metrics.sum("laminar_storage_direct_writes_total") > 0.0,
        "written O_DIRECT"
    );
    assert!(
        metrics.sum("laminar_cache_hits_total") > 0.0,
        "fetches served from recent writes"
    );
    Ok(())
}
