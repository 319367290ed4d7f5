//! The client's hot functions: building a batch, encoding a produce frame, walking fetched batches
//! and decoding a fetch response.

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{FetchResponse, ProduceRequest, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use laminar_bench::{BatchBuilder, ProducerFields};
use laminar_client::records::{batches, for_each_record};
use laminar_client::{encode_frame, Compression};

const RECORDS: usize = 256;
const RECORD_BYTES: usize = 1024;

fn build_batch(c: &mut Criterion) {
    let mut group = c.benchmark_group("batch_build_256x1KiB");
    group.throughput(Throughput::Bytes((RECORDS * RECORD_BYTES) as u64));
    for compression in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let mut builder = BatchBuilder::new(RECORD_BYTES, RECORDS, 1);
        group.bench_function(format!("{compression:?}"), |b| {
            b.iter(|| {
                builder
                    .build(
                        (0..RECORDS as u64).map(|i| 1_700_000_000_000_000 + i),
                        compression,
                        None,
                    )
                    .expect("build")
            })
        });
    }
    // An idempotent producer's batch: producer fields written in, the CRC taken again.
    let mut builder = BatchBuilder::new(RECORD_BYTES, RECORDS, 1);
    let fields = ProducerFields {
        producer_id: 7,
        producer_epoch: 0,
        base_sequence: 0,
        transactional: true,
    };
    group.bench_function("None_with_producer_fields", |b| {
        b.iter(|| {
            builder
                .build(
                    (0..RECORDS as u64).map(|i| 1_700_000_000_000_000 + i),
                    Compression::None,
                    Some(fields),
                )
                .expect("build")
        })
    });
    group.finish();
}

fn one_batch() -> Bytes {
    BatchBuilder::new(RECORD_BYTES, RECORDS, 1)
        .build(
            (0..RECORDS as u64).map(|i| 1_700_000_000_000_000 + i),
            Compression::None,
            None,
        )
        .expect("build")
}

fn produce_frame(c: &mut Criterion) {
    let batch = one_batch();
    let mut buffer = BytesMut::with_capacity(batch.len() + 256);
    let client_id = StrBytes::from_static_str("bench");
    let mut group = c.benchmark_group("produce_frame_256KiB");
    group.throughput(Throughput::Bytes(batch.len() as u64));
    group.bench_function("encode_v9", |b| {
        b.iter(|| {
            let request = ProduceRequest::default()
                .with_acks(1)
                .with_timeout_ms(30_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_static_str("t")))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch.clone()))])]);
            encode_frame(&mut buffer, 1, &client_id, &request, 9).expect("encode")
        })
    });
    group.finish();
}

fn fetch_decode(c: &mut Criterion) {
    let batch = one_batch();
    let records: Bytes = batch.repeat(16).into();
    let response = FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
        .with_topic(TopicName(StrBytes::from_static_str("t")))
        .with_partitions(vec![PartitionData::default().with_records(Some(records.clone()))])]);
    let mut encoded = BytesMut::new();
    response.encode(&mut encoded, 12).expect("encode");
    let encoded = encoded.freeze();
    let mut group = c.benchmark_group("fetch_4MiB");
    group.throughput(Throughput::Bytes(records.len() as u64));
    group.bench_function("decode_response_v12", |b| {
        b.iter_batched(
            || encoded.clone(),
            |mut bytes| FetchResponse::decode(&mut bytes, 12).expect("decode"),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("count_from_headers", |b| {
        b.iter(|| {
            batches(&records)
                .map(|batch| batch.expect("valid").record_count() as u64)
                .sum::<u64>()
        })
    });
    group.bench_function("walk_keys", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for batch in batches(&records) {
                for_each_record(batch.expect("valid"), |r| sum += r.key.map_or(0, |k| k[7] as u64))
                    .expect("walk");
            }
            sum
        })
    });
    group.finish();
}

criterion_group!(client, build_batch, produce_frame, fetch_decode);
criterion_main!(client);
