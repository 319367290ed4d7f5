//! A raw Kafka protocol connection for tests that must send what no client would: requests are
//! encoded with the `kafka-protocol` crate, or written as bytes by hand.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
pub use kafka_protocol::messages::fetch_response::PartitionData as FetchPartitionData;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{BrokerId, FetchRequest, ProduceRequest, RequestHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

/// One blocking connection. Owned by one test thread.
pub struct WireConnection {
    stream: TcpStream,
    next_correlation_id: i32,
}

/// What happened when a test waited for the broker to react to bad input.
#[derive(Debug, PartialEq, Eq)]
pub enum Reaction {
    /// The broker closed (EOF) or reset the connection.
    Closed,
    /// The broker sent a frame (its payload, after the size prefix).
    Frame(Bytes),
    /// Nothing within the wait.
    Silent,
}

impl WireConnection {
    pub fn connect(addr: SocketAddr) -> Result<WireConnection> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .with_context(|| format!("connecting to {addr}"))?;
        Self::over(stream)
    }

    /// Connects from `source` (any loopback address reaches a loopback listener), so that a
    /// test can be several clients by address.
    pub fn connect_from(source: std::net::IpAddr, addr: SocketAddr) -> Result<WireConnection> {
        let socket = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
        socket
            .bind(&SocketAddr::new(source, 0).into())
            .with_context(|| format!("binding to {source}"))?;
        socket
            .connect_timeout(&addr.into(), Duration::from_secs(5))
            .with_context(|| format!("connecting to {addr} from {source}"))?;
        Self::over(socket.into())
    }

    fn over(stream: TcpStream) -> Result<WireConnection> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(WireConnection {
            stream,
            next_correlation_id: 1,
        })
    }

    /// Writes bytes as they are: no size prefix is added.
    pub fn write_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes).context("writing raw bytes")
    }

    /// Sends a request and decodes its response; fails on a correlation id mismatch.
    pub fn request<R: Request>(&mut self, request: &R, version: i16) -> Result<R::Response> {
        let correlation_id = self.send(request, version)?;
        self.receive::<R>(correlation_id, version)
    }

    /// Reads and decodes the response to the request of `correlation_id` sent earlier (with
    /// [`Self::send`]; responses come in request order).
    pub fn receive<R: Request>(&mut self, correlation_id: i32, version: i16) -> Result<R::Response> {
        let frame = self
            .read_frame()?
            .context("connection closed before the response")?;
        decode_response::<R>(frame, correlation_id, version)
    }

    /// Encodes and sends a request with a v1/v2 header as its version requires.
    pub fn send<R: Request>(&mut self, request: &R, version: i16) -> Result<i32> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        self.write_raw(&request_frame(request, version, correlation_id)?)?;
        Ok(correlation_id)
    }

    /// Reads one size-prefixed frame; `None` on a clean EOF before its first byte.
    pub fn read_frame(&mut self) -> Result<Option<Bytes>> {
        let mut size = [0u8; 4];
        match self.stream.read_exact(&mut size) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e).context("reading a frame size"),
        }
        let size = i32::from_be_bytes(size);
        if !(0..=64 << 20).contains(&size) {
            bail!("response frame size {size}");
        }
        let mut payload = vec![0u8; size as usize];
        self.stream
            .read_exact(&mut payload)
            .context("reading a frame payload")?;
        Ok(Some(Bytes::from(payload)))
    }

    /// Waits up to `wait` for the broker to close the connection or answer.
    pub fn reaction(&mut self, wait: Duration) -> Result<Reaction> {
        self.stream.set_read_timeout(Some(wait))?;
        let started = Instant::now();
        let result = loop {
            let mut first = [0u8; 1];
            match self.stream.peek(&mut first) {
                Ok(0) => break Reaction::Closed,
                Ok(_) => break Reaction::Frame(self.read_frame()?.context("EOF inside a frame")?),
                Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {
                    break Reaction::Closed
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if started.elapsed() >= wait {
                        break Reaction::Silent;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("waiting for the broker's reaction"),
            }
        };
        self.stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(result)
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }
}

/// A request's whole frame (size prefix, header as its version requires, body).
pub fn request_frame<R: Request>(request: &R, version: i16, correlation_id: i32) -> Result<Vec<u8>> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("laminar-wire-test")));
    let mut body = BytesMut::new();
    header.encode(&mut body, R::header_version(version))?;
    request.encode(&mut body, version)?;
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Decodes a response frame (its payload, after the size prefix) to the request of
/// `correlation_id`; fails on a mismatch or on bytes left over.
pub fn decode_response<R: Request>(
    mut frame: Bytes,
    correlation_id: i32,
    version: i16,
) -> Result<R::Response> {
    let header_version = R::Response::header_version(version);
    let header = kafka_protocol::messages::ResponseHeader::decode(&mut frame, header_version)?;
    if header.correlation_id != correlation_id {
        bail!(
            "response correlation id {} for request {correlation_id}",
            header.correlation_id
        );
    }
    let response = R::Response::decode(&mut frame, version).with_context(|| {
        format!(
            "decoding {} v{version} response",
            std::any::type_name::<R::Response>()
        )
    })?;
    if frame.has_remaining() {
        bail!("{} bytes left after the v{version} response", frame.remaining());
    }
    Ok(response)
}

/// One RecordBatch v2 (magic 2), uncompressed, CreateTime, no producer id, holding `values` as
/// records with keys `k<i>` and timestamps `timestamp_ms + i`.
pub fn record_batch(values: &[&[u8]], timestamp_ms: i64) -> Result<Bytes> {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, value)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // kafka-protocol starts a new batch whenever offset - sequence changes; this keeps
            // one batch whose base sequence is -1 (no producer id).
            sequence: i as i32 - 1,
            timestamp: timestamp_ms + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::copy_from_slice(value)),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )?;
    Ok(buf.freeze())
}

/// Byte offset of the CRC-32C field in a RecordBatch v2 header: base offset (8), batch length
/// (4), partition leader epoch (4), magic (1).
pub const BATCH_CRC_OFFSET: usize = 17;
/// The CRC covers everything from the attributes field (just after the CRC) to the batch end.
pub const BATCH_CRC_COVERED_FROM: usize = 21;

/// Produce v8 (the newest non-flexible version) of one batch to one partition; returns that
/// partition's answer.
pub fn produce(
    conn: &mut WireConnection,
    topic: &str,
    partition: i32,
    batch: Bytes,
    acks: i16,
) -> Result<PartitionProduceResponse> {
    let response = conn.request(&produce_request((topic, partition), batch, acks), 8)?;
    let [topic_response] = &response.responses[..] else {
        bail!("produce response has {} topics", response.responses.len());
    };
    let [partition_response] = &topic_response.partition_responses[..] else {
        bail!(
            "produce response has {} partitions",
            topic_response.partition_responses.len()
        );
    };
    Ok(partition_response.clone())
}

/// A Produce of `batch` to one partition with `acks`.
pub fn produce_request((topic, partition): (&str, i32), batch: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])])
}

/// [`produce`], sent again while the broker answers UNKNOWN_TOPIC_OR_PARTITION, for up to
/// `within`: in a cluster a leader may apply the metadata another node already showed a moment
/// later, and Kafka clients retry that error.
pub fn produce_when_known(
    conn: &mut WireConnection,
    (topic, partition): (&str, i32),
    batch: Bytes,
    acks: i16,
    within: Duration,
) -> Result<PartitionProduceResponse> {
    let mut answer = None;
    crate::wait_for(within, "the broker to know the partition", || {
        let answered = produce(conn, topic, partition, batch.clone(), acks)?;
        // Retriable: what a broker answers until it has applied the metadata that made it.
        let known = answered.error_code != ResponseError::UnknownTopicOrPartition.code();
        answer = Some(answered);
        Ok(known)
    })?;
    answer.context("no answer")
}

/// Fetch v11 (the newest non-flexible version) of one partition from `offset`, without waiting.
pub fn fetch(
    conn: &mut WireConnection,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<FetchPartitionData> {
    let response = conn.request(&fetch_request((topic, partition), offset, 0), 11)?;
    if response.error_code != 0 {
        bail!("fetch answered top-level error {}", response.error_code);
    }
    let [topic_response] = &response.responses[..] else {
        bail!("fetch response has {} topics", response.responses.len());
    };
    let [partition_response] = &topic_response.partitions[..] else {
        bail!(
            "fetch response has {} partitions",
            topic_response.partitions.len()
        );
    };
    Ok(partition_response.clone())
}

/// A consumer's sessionless fetch of one partition from `offset`, for at least one byte,
/// waiting up to `max_wait_ms` for it.
pub fn fetch_request((topic, partition): (&str, i32), offset: i64, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(8 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(8 << 20)])])
}

/// A follower's Fetch v15 of one partition (named by its topic's id) from `offset`, as broker
/// `replica_id` registered with `broker_epoch` (KIP-903's `ReplicaState`).
pub fn replica_fetch_request(
    (topic_id, partition): ([u8; 16], i32),
    offset: i64,
    (replica_id, broker_epoch): (i32, i64),
) -> FetchRequest {
    use kafka_protocol::messages::fetch_request::ReplicaState;
    let state = ReplicaState::default()
        .with_replica_id(BrokerId(replica_id))
        .with_replica_epoch(broker_epoch);
    let mut request = fetch_request(("", partition), offset, 0).with_replica_state(state);
    request.topics[0].topic_id = uuid::Uuid::from_bytes(topic_id);
    request
}

/// The error code of a consumer's Fetch v11 of `topic`-`partition` from offset 0 naming
/// `current_leader_epoch` (KIP-320; -1: none).
pub fn fetch_code_at_leader_epoch(
    conn: &mut WireConnection,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
) -> Result<i16> {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(current_leader_epoch)
                .with_partition_max_bytes(1 << 20)])]);
    let response = conn.request(&request, 11)?;
    let answer = response.responses.first().and_then(|t| t.partitions.first());
    Ok(answer.context("an empty fetch answer")?.error_code)
}

/// Headers of the batches in a fetch answer (decoded without decompressing).
pub fn batch_infos(data: &FetchPartitionData) -> Result<Vec<kafka_protocol::records::BatchDecodeInfo>> {
    let mut records = data.records.clone().unwrap_or_default();
    kafka_protocol::records::RecordBatchDecoder::decode_batch_info(&mut records)
}

/// All records of a fetch answer, decompressed.
pub fn decode_records(data: &FetchPartitionData) -> Result<Vec<Record>> {
    let mut records = data.records.clone().unwrap_or_default();
    let sets = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut records)?;
    Ok(sets.into_iter().flat_map(|set| set.records).collect())
}

/// ListOffsets v5 (the newest non-flexible version) for one partition: `timestamp` is a time in
/// ms, or -1 (latest) / -2 (earliest). Returns (error code, offset, timestamp).
pub fn list_offset(
    conn: &mut WireConnection,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> Result<(i16, i64, i64)> {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let request = kafka_protocol::messages::ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(timestamp)])]);
    let response = conn.request(&request, 5)?;
    let answer = response
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .context("empty ListOffsets answer")?;
    Ok((answer.error_code, answer.offset, answer.timestamp))
}

/// Fetches from `offset` until `count` records arrived (a broker may answer with fewer batches
/// than fit), dropping records before `offset` from the first batch.
pub fn fetch_records(
    conn: &mut WireConnection,
    topic: &str,
    partition: i32,
    offset: i64,
    count: usize,
) -> Result<Vec<Record>> {
    let mut out: Vec<Record> = Vec::with_capacity(count);
    let deadline = Instant::now() + Duration::from_secs(15);
    while out.len() < count {
        if Instant::now() >= deadline {
            bail!(
                "only {} of {count} records from {topic}/{partition} at {offset}",
                out.len()
            );
        }
        let next = out.last().map_or(offset, |r| r.offset + 1);
        let data = fetch(conn, topic, partition, next)?;
        if data.error_code != 0 {
            bail!("fetch at {next} answered error {}", data.error_code);
        }
        out.extend(decode_records(&data)?.into_iter().filter(|r| r.offset >= next));
    }
    out.truncate(count);
    Ok(out)
}

/// Creates `name` with `partitions` partitions through CreateTopics v4.
pub fn create_topic(conn: &mut WireConnection, name: &str, partitions: i32) -> Result<()> {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let request = kafka_protocol::messages::CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
    let response = conn.request(&request, 4)?;
    if response.topics[0].error_code != 0 {
        bail!("create {name}: {response:?}");
    }
    Ok(())
}

/// Creates a new topic of `partitions` through CreateTopics at `version`: its error code and
/// the answer's `throttle_time_ms`.
pub fn create_topic_at(conn: &mut WireConnection, partitions: i32, version: i16) -> Result<(i16, i32)> {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(
            crate::rdkafka_client::unique_topic("created"),
        )))
        .with_num_partitions(partitions)
        .with_replication_factor(1);
    let request = kafka_protocol::messages::CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![topic]);
    let response = conn.request(&request, version)?;
    let code = response.topics.first().context("a topic result")?.error_code;
    Ok((code, response.throttle_time_ms))
}

/// Creates `topic` through a Metadata request with auto-creation allowed (Kafka's default).
pub fn auto_create(conn: &mut WireConnection, topic: &str) -> Result<()> {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let request = kafka_protocol::messages::MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.to_string()))))]))
        .with_allow_auto_topic_creation(true);
    let response = conn.request(&request, 8)?;
    let code = response
        .topics
        .first()
        .map(|t| t.error_code)
        .context("empty Metadata answer")?;
    // LEADER_NOT_AVAILABLE (5) is Kafka's normal answer while an auto-created topic comes up.
    if code != 0 && code != 5 {
        bail!("Metadata for {topic} answered error {code}");
    }
    Ok(())
}

/// One partition as a broker's Metadata v9 tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    pub topic_id: [u8; 16],
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    /// In the broker's order.
    pub isr: Vec<i32>,
}

/// `topic`-`partition` as `conn`'s broker answers Metadata v10.
pub fn partition_view(conn: &mut WireConnection, topic: &str, partition: i32) -> Result<PartitionView> {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let name = TopicName(StrBytes::from_string(topic.to_string()));
    let request = kafka_protocol::messages::MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(name))]));
    let response = conn.request(&request, 10)?;
    let described = response.topics.first();
    let found = described
        .and_then(|t| t.partitions.iter().find(|p| p.partition_index == partition))
        .with_context(|| format!("{topic}-{partition} is not in the Metadata answer"))?;
    Ok(PartitionView {
        topic_id: described.map_or([0; 16], |t| *t.topic_id.as_bytes()),
        leader: found.leader_id.0,
        leader_epoch: found.leader_epoch,
        replicas: found.replica_nodes.iter().map(|b| b.0).collect(),
        isr: found.isr_nodes.iter().map(|b| b.0).collect(),
    })
}

/// CreateTopics v5 of `name` with `partitions` and `replication_factor` and the given config
/// overrides; returns the topic's error code.
pub fn create_topic_replicated(
    conn: &mut WireConnection,
    name: &str,
    (partitions, replication_factor): (i32, i16),
    configs: &[(&str, &str)],
) -> Result<i16> {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    let configs = configs
        .iter()
        .map(|(key, value)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(key.to_string()))
                .with_value(Some(StrBytes::from_string(value.to_string())))
        })
        .collect();
    let request = kafka_protocol::messages::CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(replication_factor)
            .with_configs(configs)]);
    let response = conn.request(&request, 5)?;
    Ok(response
        .topics
        .first()
        .context("an empty CreateTopics answer")?
        .error_code)
}

/// The offset `group` has committed for one partition (OffsetFetch v5; -1: none).
pub fn committed_offset(
    conn: &mut WireConnection,
    group: &str,
    (topic, partition): (&str, i32),
) -> Result<i64> {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{GroupId, OffsetFetchRequest};
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_indexes(vec![partition])]));
    let response = conn.request(&request, 5)?;
    if response.error_code != 0 {
        bail!("OffsetFetch answered error {}", response.error_code);
    }
    let found = response.topics.first().and_then(|t| t.partitions.first());
    found
        .map(|p| p.committed_offset)
        .context("OffsetFetch named no partition")
}

/// The coordinator of `group` (FindCoordinator v3): its node id, or the error code answered.
pub fn find_coordinator(conn: &mut WireConnection, group: &str) -> Result<std::result::Result<i32, i16>> {
    use kafka_protocol::messages::FindCoordinatorRequest;
    let request = FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.to_string()));
    let response = conn.request(&request, 3)?;
    Ok(match response.error_code {
        0 => Ok(response.node_id.0),
        code => Err(code),
    })
}

/// Commits `offset` for `(topic, partition)` as a client outside any generation does (the
/// admin tools' way, generation -1): the error code answered.
pub fn commit_offset(
    conn: &mut WireConnection,
    group: &str,
    (topic, partition): (&str, i32),
    offset: i64,
) -> Result<i16> {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, OffsetCommitRequest};
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(offset)])]);
    let response = conn.request(&request, 8)?;
    let found = response.topics.first().and_then(|t| t.partitions.first());
    found
        .map(|p| p.error_code)
        .context("OffsetCommit named no partition")
}
