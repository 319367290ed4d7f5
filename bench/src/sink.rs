//! A measurement tool, not a broker: a Kafka-speaking server that acknowledges every produce
//! without storing it and answers every fetch with canned batches. Running the harness against
//! it measures the harness's own ceiling (how fast it can produce and consume when the other side
//! costs almost nothing). Its figures are never broker results.

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable, Encodable, StrBytes};
use laminar_client::records::batches;
use laminar_client::{client_versions, write_all_pieces, Compression};
use laminar_protocol::chunk::Chunk;
use laminar_protocol::fetch_response::RecordBytes;
use laminar_protocol::fetch_response::{encode_fetch_frame, FetchAnswer, PartitionAnswer, TopicAnswer};
use laminar_protocol::frame::FrameReader;

use crate::produce::BatchBuilder;

/// Partitions the sink reports for any topic.
pub const SINK_PARTITIONS: i32 = 4;

/// Log end offsets by (topic, partition): what was "produced". Shared by connection threads.
type Offsets = Arc<Mutex<HashMap<(String, i32), i64>>>;

/// A running sink.
pub struct Sink {
    /// Where it listens.
    pub address: SocketAddr,
    /// Produce requests received (to check how a producer shapes its requests).
    pub produce_requests: Arc<AtomicU64>,
}

/// Starts a sink on `listen` whose fetches return batches of `record_size`-byte records.
pub fn start(listen: &str, record_size: usize) -> anyhow::Result<Sink> {
    let listener = TcpListener::bind(listen).with_context(|| format!("binding {listen}"))?;
    let address = listener.local_addr()?;
    let canned = {
        let mut builder = BatchBuilder::new(record_size, 256, 9);
        builder.build(
            (0..(256 * 1024 / record_size.max(1)).clamp(1, 256) as u64).map(|i| i * 1000),
            Compression::None,
            None,
        )?
    };
    let offsets: Offsets = Arc::default();
    let produce_requests = Arc::new(AtomicU64::new(0));
    let counter = produce_requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (offsets, canned, counter) = (offsets.clone(), canned.clone(), counter.clone());
            std::thread::spawn(move || {
                let _ = stream.set_nodelay(true);
                // A peer that misbehaves just loses its connection: this is a measuring tool.
                let _ = serve(stream, address, &offsets, &canned, &counter);
            });
        }
    });
    Ok(Sink {
        address,
        produce_requests,
    })
}

/// `laminar bench sink`: runs until killed.
pub fn serve_forever(listen: &str, record_size: usize) -> anyhow::Result<()> {
    let sink = start(listen, record_size)?;
    println!(
        "sink (harness ceiling measurement tool, stores nothing) listening on {}",
        sink.address
    );
    loop {
        std::thread::park();
    }
}

fn serve(
    mut stream: TcpStream,
    me: SocketAddr,
    offsets: &Offsets,
    canned: &Bytes,
    produce_requests: &AtomicU64,
) -> anyhow::Result<()> {
    let mut frames = FrameReader::new(512 << 20);
    let mut out = BytesMut::new();
    while let Some(mut frame) = frames.read_frame(&mut stream)? {
        let header = decode_request_header_from_buffer(&mut frame)?;
        let api = ApiKey::try_from(header.request_api_key).map_err(|_| anyhow::anyhow!("unknown api"))?;
        let version = header.request_api_version;
        if api == ApiKey::Fetch {
            let request = FetchRequest::decode(&mut frame, version)?;
            let chunks = encode_fetch_frame(&fetch(request, canned), version, header.correlation_id);
            let pieces: Vec<Bytes> = chunks
                .into_iter()
                .map(|chunk| match chunk {
                    Chunk::Memory(bytes) => bytes,
                    Chunk::File(_) => unreachable!("the sink answers from memory"),
                })
                .collect();
            write_all_pieces(&mut stream, &pieces)?;
            continue;
        }
        out.clear();
        out.extend_from_slice(&[0; 4]);
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut out, api.response_header_version(version))?;
        let answered = match api {
            ApiKey::ApiVersions => api_versions(version).encode(&mut out, version.min(3)),
            ApiKey::Metadata => {
                metadata(MetadataRequest::decode(&mut frame, version)?, me).encode(&mut out, version)
            }
            ApiKey::CreateTopics => {
                create_topics(CreateTopicsRequest::decode(&mut frame, version)?).encode(&mut out, version)
            }
            ApiKey::ListOffsets => list_offsets(ListOffsetsRequest::decode(&mut frame, version)?, offsets)
                .encode(&mut out, version),
            ApiKey::Produce => {
                let request = ProduceRequest::decode(&mut frame, version)?;
                produce_requests.fetch_add(1, Ordering::Relaxed);
                let response = produce(&request, offsets)?;
                if request.acks == 0 {
                    continue;
                }
                response.encode(&mut out, version)
            }
            other => anyhow::bail!("the sink does not answer {other:?}"),
        };
        answered?;
        let size = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&size.to_be_bytes());
        stream.write_all(&out)?;
    }
    Ok(())
}

fn api_versions(version: i16) -> ApiVersionsResponse {
    let keys = [
        ApiKey::ApiVersions,
        ApiKey::Metadata,
        ApiKey::CreateTopics,
        ApiKey::ListOffsets,
        ApiKey::Produce,
        ApiKey::Fetch,
    ];
    let response = ApiVersionsResponse::default().with_api_keys(
        keys.iter()
            .map(|api| {
                let range = client_versions(*api);
                let max = if *api == ApiKey::ApiVersions { 3 } else { range.max };
                ApiVersion::default()
                    .with_api_key(*api as i16)
                    .with_min_version(range.min)
                    .with_max_version(max)
            })
            .collect(),
    );
    if version > 3 {
        response.with_error_code(35)
    } else {
        response
    }
}

fn metadata(request: MetadataRequest, me: SocketAddr) -> MetadataResponse {
    let topics = request.topics.unwrap_or_default();
    MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(0))
            .with_host(StrBytes::from_string(me.ip().to_string()))
            .with_port(i32::from(me.port()))])
        .with_topics(
            topics
                .into_iter()
                .map(|topic| {
                    MetadataResponseTopic::default()
                        .with_name(topic.name)
                        .with_partitions(
                            (0..SINK_PARTITIONS)
                                .map(|p| {
                                    MetadataResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_leader_id(BrokerId(0))
                                        .with_replica_nodes(vec![BrokerId(0)])
                                        .with_isr_nodes(vec![BrokerId(0)])
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

fn create_topics(request: CreateTopicsRequest) -> CreateTopicsResponse {
    CreateTopicsResponse::default().with_topics(
        request
            .topics
            .into_iter()
            .map(|t| CreatableTopicResult::default().with_name(t.name))
            .collect(),
    )
}

fn list_offsets(request: ListOffsetsRequest, offsets: &Offsets) -> ListOffsetsResponse {
    let offsets = offsets.lock().expect("offsets lock");
    ListOffsetsResponse::default().with_topics(
        request
            .topics
            .into_iter()
            .map(|topic| {
                let partitions = topic
                    .partitions
                    .iter()
                    .map(|p| {
                        let end = offsets
                            .get(&(topic.name.0.to_string(), p.partition_index))
                            .copied()
                            .unwrap_or(0);
                        let offset = if p.timestamp == -1 { end } else { 0 };
                        ListOffsetsPartitionResponse::default()
                            .with_partition_index(p.partition_index)
                            .with_offset(offset)
                            .with_timestamp(-1)
                    })
                    .collect();
                ListOffsetsTopicResponse::default()
                    .with_name(topic.name)
                    .with_partitions(partitions)
            })
            .collect(),
    )
}

fn produce(request: &ProduceRequest, offsets: &Offsets) -> anyhow::Result<ProduceResponse> {
    let mut responses = Vec::new();
    for topic in &request.topic_data {
        let mut partitions = Vec::new();
        for partition in &topic.partition_data {
            let records = partition.records.as_deref().unwrap_or_default();
            let mut count = 0i64;
            for batch in batches(records) {
                count += i64::from(batch?.record_count());
            }
            let mut offsets = offsets.lock().expect("offsets lock");
            let end = offsets
                .entry((topic.name.0.to_string(), partition.index))
                .or_insert(0);
            partitions.push(
                PartitionProduceResponse::default()
                    .with_index(partition.index)
                    .with_base_offset(*end)
                    .with_log_append_time_ms(-1),
            );
            *end += count;
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name.clone())
                .with_partition_responses(partitions),
        );
    }
    Ok(ProduceResponse::default().with_responses(responses))
}

/// Fills each partition up to its max bytes with the canned batch again and again, each copy's
/// base offset following on from the offset asked (the CRC does not cover the base offset).
/// Only the 8 offset bytes are new per copy; the rest of every copy is the canned batch itself,
/// so the sink's answers cost it almost nothing and the harness's consume ceiling shows.
fn fetch(request: FetchRequest, canned: &Bytes) -> FetchAnswer {
    let per_batch = i64::from(
        batches(canned)
            .next()
            .and_then(Result::ok)
            .map_or(1, |b| b.record_count()),
    );
    let after_offset = canned.slice(8..);
    let mut budget = request.max_bytes.max(canned.len() as i32) as usize;
    let mut offsets = BytesMut::new();
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let room = (p.partition_max_bytes as usize).min(budget).max(canned.len());
                    let copies = room / canned.len();
                    budget = budget.saturating_sub(copies * canned.len());
                    let mut records = Vec::with_capacity(2 * copies);
                    for copy in 0..copies as i64 {
                        offsets.put_i64(p.fetch_offset + copy * per_batch);
                        records.push(offsets.split().freeze());
                        records.push(after_offset.clone());
                    }
                    PartitionAnswer {
                        partition: p.partition,
                        high_watermark: i64::MAX,
                        last_stable_offset: i64::MAX,
                        records: RecordBytes::Memory(records),
                        ..PartitionAnswer::default()
                    }
                })
                .collect();
            TopicAnswer {
                name: topic.topic.0.to_string(),
                id: *topic.topic_id.as_bytes(),
                partitions,
            }
        })
        .collect();
    FetchAnswer {
        topics,
        ..FetchAnswer::default()
    }
}

#[cfg(test)]
#[path = "sink_tests.rs"]
mod tests;
