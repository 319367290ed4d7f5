use std::net::TcpListener;

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::decode_request_header_from_buffer;

use super::*;
use crate::Acks;

#[test]
fn produce_v3_frame_matches_golden_bytes() {
    let mut buffer = BytesMut::new();
    let request = ProduceRequestFixture::build();
    encode_frame(&mut buffer, 7, &StrBytes::from_static_str("c"), &request, 3).expect("encode");
    #[rustfmt::skip]
    let expected: &[u8] = &[
        0, 0, 0, 41,          // frame size: bytes after this field
        0, 0,                 // api key 0 (Produce)
        0, 3,                 // api version 3
        0, 0, 0, 7,           // correlation id 7
        0, 1, b'c',           // client id "c" (header v1: i16 length)
        255, 255,             // transactional id: null
        0, 1,                 // acks 1
        0, 0, 3, 232,         // timeout 1000 ms
        0, 0, 0, 1,           // one topic
        0, 1, b't',           // topic name "t"
        0, 0, 0, 1,           // one partition
        0, 0, 0, 2,           // partition index 2
        0, 0, 0, 3, 1, 2, 3,  // records: 3 bytes
    ];
    assert_eq!(&buffer[..], expected);
}

struct ProduceRequestFixture;

impl ProduceRequestFixture {
    fn build() -> kafka_protocol::messages::ProduceRequest {
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        use kafka_protocol::messages::{ProduceRequest, TopicName};
        ProduceRequest::default()
            .with_acks(Acks::Leader.wire())
            .with_timeout_ms(1000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(2)
                    .with_records(Some(Bytes::from_static(&[1, 2, 3])))])])
    }
}

/// A peer that speaks just enough Kafka for the connection: ApiVersions (refusing v3+ the way
/// Kafka does, with a v0 body) and Metadata, answering requests in the order received.
fn serve_one_connection(listener: TcpListener, swap_correlation_ids: bool) {
    let (mut stream, _) = listener.accept().expect("accept");
    let mut frames = FrameReader::new(1 << 20);
    let mut held: Option<(i32, Bytes)> = None;
    while let Ok(Some(mut frame)) = frames.read_frame(&mut stream) {
        let header = decode_request_header_from_buffer(&mut frame).expect("header");
        let version = header.request_api_version;
        let api = ApiKey::try_from(header.request_api_key).expect("known api");
        let (body, header_version) = match api {
            ApiKey::ApiVersions if version >= 3 => {
                let refusal = ApiVersionsResponse::default()
                    .with_error_code(35)
                    .with_api_keys(vec![ApiVersion::default()
                        .with_api_key(ApiKey::ApiVersions as i16)
                        .with_max_version(2)]);
                (encode_body(&refusal, 0), 0)
            }
            ApiKey::ApiVersions => {
                let keys = [ApiKey::ApiVersions, ApiKey::Metadata]
                    .iter()
                    .map(|api| {
                        ApiVersion::default()
                            .with_api_key(*api as i16)
                            .with_max_version(api.valid_versions().max.min(9))
                    })
                    .collect();
                let response = ApiVersionsResponse::default().with_api_keys(keys);
                (encode_body(&response, version), 0)
            }
            ApiKey::Metadata => {
                let request = MetadataRequest::decode(&mut frame, version).expect("body");
                let node_id = request.topics.map_or(0, |topics| topics.len() as i32);
                let response =
                    MetadataResponse::default().with_brokers(vec![MetadataResponseBroker::default()
                        .with_node_id(BrokerId(node_id))
                        .with_host(StrBytes::from_static_str("h"))
                        .with_port(1)]);
                (
                    encode_body(&response, version),
                    api.response_header_version(version),
                )
            }
            other => panic!("unexpected {other:?}"),
        };
        let mut head = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut head, header_version)
            .expect("encode header");
        let response = Bytes::from([&head[..], &body[..]].concat());
        // With `swap_correlation_ids`, the first Metadata response is held back and sent after
        // the second, as a broken broker would.
        if swap_correlation_ids && api == ApiKey::Metadata && held.is_none() {
            held = Some((header.correlation_id, response));
            continue;
        }
        write_frame(&mut stream, &response);
        if let Some((_, first)) = held.take() {
            write_frame(&mut stream, &first);
        }
    }
}

fn encode_body<M: Encodable>(message: &M, version: i16) -> Bytes {
    let mut body = BytesMut::new();
    message.encode(&mut body, version).expect("encode body");
    body.freeze()
}

fn write_frame(stream: &mut TcpStream, body: &[u8]) {
    stream
        .write_all(&(body.len() as i32).to_be_bytes())
        .and_then(|()| stream.write_all(body))
        .expect("write");
}

fn start_peer(swap: bool) -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    (
        address,
        std::thread::spawn(move || serve_one_connection(listener, swap)),
    )
}

fn metadata_for(topics: usize) -> MetadataRequest {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default(); topics]))
}

#[test]
fn negotiates_down_and_pipelines_in_order() {
    let (address, peer) = start_peer(false);
    let mut connection = Connection::connect(&address, &ClientConfig::default()).expect("connect");
    assert_eq!(connection.versions().version(ApiKey::Metadata).unwrap(), 9);
    assert_eq!(
        connection
            .versions()
            .broker_range(ApiKey::ApiVersions)
            .map(|r| r.max),
        Some(9.min(ApiKey::ApiVersions.valid_versions().max))
    );
    let first = connection.send(&metadata_for(1)).expect("send");
    let second = connection.send(&metadata_for(2)).expect("send");
    assert_eq!(connection.in_flight(), 2);
    assert_eq!(connection.receive(first).expect("first").brokers[0].node_id.0, 1);
    assert_eq!(
        connection.receive(second).expect("second").brokers[0].node_id.0,
        2
    );
    assert!(matches!(
        connection.versions().version(ApiKey::Produce),
        Err(ClientError::UnsupportedApi { .. })
    ));
    drop(connection);
    peer.join().expect("peer");
}

#[test]
fn out_of_order_response_is_a_correlation_error() {
    let (address, peer) = start_peer(true);
    let mut connection = Connection::connect(&address, &ClientConfig::default()).expect("connect");
    let first = connection.send(&metadata_for(1)).expect("send");
    let _second = connection.send(&metadata_for(2)).expect("send");
    let error = connection.receive(first).unwrap_err();
    assert!(
        matches!(error, ClientError::CorrelationMismatch { expected, actual } if actual == expected + 1),
        "{error}"
    );
    drop(connection);
    peer.join().expect("peer");
}
