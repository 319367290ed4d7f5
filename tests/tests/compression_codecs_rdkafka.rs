//! Every codec librdkafka offers (none, gzip, snappy, lz4, zstd) round-trips through the broker,
//! and the broker keeps the producer's batches compressed as they came (wire format = disk
//! format): a raw Fetch returns batches whose attributes still name the producer's codec.

use anyhow::Result;
use kafka_protocol::records::Compression;
use laminar_tests::rdkafka_client::{
    assert_records_match, assigned_consumer, consume, create_topic, produce_all, producer, sample_records,
    unique_topic, TestRecord,
};
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::Broker;
use rdkafka::Offset;

const CODECS: [(&str, Compression); 5] = [
    ("none", Compression::None),
    ("gzip", Compression::Gzip),
    ("snappy", Compression::Snappy),
    ("lz4", Compression::Lz4),
    ("zstd", Compression::Zstd),
];

/// Compressible records: repeated text makes every codec shrink them, so a codec that silently
/// fell back to none would still round-trip but show up in the batch attributes check.
fn compressible_records(count: usize) -> Vec<TestRecord> {
    let mut records = sample_records(count);
    for (i, record) in records.iter_mut().enumerate() {
        if record.value.is_some() {
            record.value = Some(format!("{i}:{}", "laminar compresses well ".repeat(20)).into_bytes());
        }
    }
    records
}

async fn roundtrip_with_codec(codec: &str, expected: Compression) -> Result<()> {
    let broker = Broker::start_default()?;
    let topic = unique_topic(&format!("codec-{codec}"));
    create_topic(&broker.bootstrap(), &topic, 1, &[]).await?;
    let records = compressible_records(400);
    // A long linger packs many records per batch, so compression really happens per batch.
    let producer = producer(
        &broker.bootstrap(),
        &[("compression.type", codec), ("linger.ms", "50")],
    )?;
    let offsets = produce_all(&producer, &topic, 0, &records).await?;
    assert_eq!(offsets, (0..400).collect::<Vec<i64>>(), "{codec}: acked offsets");

    let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
    let consumed = consume(&consumer, &topic, 0, Offset::Beginning, records.len())?;
    assert_records_match(&records, &consumed, 0);

    let mut conn = WireConnection::connect(broker.addr())?;
    let fetched = wire::fetch(&mut conn, &topic, 0, 0)?;
    assert_eq!(fetched.error_code, 0, "{codec}: fetch error");
    assert_eq!(fetched.high_watermark, 400, "{codec}: high watermark");
    let infos = wire::batch_infos(&fetched)?;
    assert!(!infos.is_empty(), "{codec}: fetch returned no batch");
    // librdkafka sends a batch uncompressed when the codec would not shrink it (a small first
    // batch, say), so `None` is allowed; any other codec would mean the broker re-encoded.
    for info in &infos {
        assert!(
            info.compression == expected || info.compression == Compression::None,
            "{codec}: stored batch at {} was re-encoded as {:?}",
            info.min_offset,
            info.compression
        );
        assert_eq!(info.version, 2, "{codec}: magic");
    }
    assert!(
        infos.iter().any(|info| info.compression == expected),
        "{codec}: no batch kept the producer's codec"
    );
    assert!(
        infos.len() < 400,
        "{codec}: {} batches for 400 records: no batching happened",
        infos.len()
    );
    Ok(())
}

#[tokio::test]
async fn uncompressed_batches_roundtrip() -> Result<()> {
    roundtrip_with_codec(CODECS[0].0, CODECS[0].1).await
}

#[tokio::test]
async fn gzip_batches_roundtrip_and_stay_gzip() -> Result<()> {
    roundtrip_with_codec(CODECS[1].0, CODECS[1].1).await
}

#[tokio::test]
async fn snappy_batches_roundtrip_and_stay_snappy() -> Result<()> {
    roundtrip_with_codec(CODECS[2].0, CODECS[2].1).await
}

#[tokio::test]
async fn lz4_batches_roundtrip_and_stay_lz4() -> Result<()> {
    roundtrip_with_codec(CODECS[3].0, CODECS[3].1).await
}

#[tokio::test]
async fn zstd_batches_roundtrip_and_stay_zstd() -> Result<()> {
    roundtrip_with_codec(CODECS[4].0, CODECS[4].1).await
}

#[tokio::test]
async fn one_partition_with_every_codec_mixed_reads_back_in_order() -> Result<()> {
    let broker = Broker::start_default()?;
    let topic = unique_topic("codec-mix");
    create_topic(&broker.bootstrap(), &topic, 1, &[]).await?;
    let records = compressible_records(50 * CODECS.len());
    for (chunk, (codec, _)) in records.chunks(50).zip(CODECS) {
        let producer = producer(&broker.bootstrap(), &[("compression.type", codec)])?;
        let first = produce_all(&producer, &topic, 0, chunk).await?[0];
        assert_eq!(first % 50, 0, "{codec}: chunk starts at offset {first}");
    }
    let consumer = assigned_consumer(&broker.bootstrap(), &[])?;
    let consumed = consume(&consumer, &topic, 0, Offset::Beginning, records.len())?;
    assert_records_match(&records, &consumed, 0);
    Ok(())
}
