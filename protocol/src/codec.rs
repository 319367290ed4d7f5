//! Request headers in, response frames out, and the table of API versions Laminar serves.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};

/// One API Laminar serves, with the version range it advertises.
#[derive(Debug, Clone, Copy)]
pub struct ApiSupport {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
}

const fn api(key: ApiKey, min: i16, max: i16) -> ApiSupport {
    ApiSupport { key, min, max }
}

/// Versions chosen so that librdkafka, kafka-python and kafkajs all negotiate (docs/ARCHITECTURE.md,
/// Compatibility). Produce starts at 0 because librdkafka < 2.11.1 turns compression off
/// otherwise; versions 0-2 are answered with UNSUPPORTED_VERSION. Fetch reaches 15: from v13 it
/// names topics by id, and v15 carries a follower's broker epoch, which a cluster's leader checks
/// (decision 0038). Metadata stops at 12: later versions describe topics by id only.
pub const SUPPORTED_APIS: &[ApiSupport] = &[
    api(ApiKey::Produce, 0, 11),
    api(ApiKey::Fetch, 4, crate::fetch_response::FETCH_VERSION_MAX),
    api(ApiKey::ListOffsets, 1, 6),
    api(ApiKey::Metadata, 0, 12),
    api(ApiKey::SaslHandshake, 0, 1),
    api(ApiKey::ApiVersions, 0, 3),
    api(ApiKey::CreateTopics, 2, 7),
    api(ApiKey::DeleteTopics, 1, 6),
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::DescribeConfigs, 1, 4),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::DescribeCluster, 0, 2),
    // kafka-protocol encodes 1 to 4, no v0.
    api(ApiKey::DescribeLogDirs, 1, 4),
    // KIP-320: consumers validate their position after a leader change; followers truncate
    // (KIP-101, KIP-279). kafka-protocol encodes 2 to 4.
    api(ApiKey::OffsetForLeaderEpoch, 2, 4),
    // Consumer groups: librdkafka needs FindCoordinator, JoinGroup, SyncGroup, Heartbeat and
    // LeaveGroup from v0, OffsetCommit and OffsetFetch reaching v1. The tops are the newest
    // versions kafka-protocol's message structs encode.
    api(ApiKey::FindCoordinator, 0, 4),
    api(ApiKey::JoinGroup, 0, 9),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    api(ApiKey::OffsetCommit, 2, 9),
    api(ApiKey::OffsetFetch, 1, 9),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::DescribeGroups, 0, 5),
    api(ApiKey::DeleteGroups, 0, 2),
    api(ApiKey::OffsetDelete, 0, 0),
    // Consumer groups of KIP-848's protocol; v1 adds regular-expression subscriptions and
    // member ids the client makes (KIP-1082).
    api(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    api(ApiKey::ConsumerGroupDescribe, 0, 1),
    // Transactional offsets: v3 adds the member check (KIP-447).
    api(ApiKey::TxnOffsetCommit, 0, 3),
    // v5 adds two-phase commit (KIP-939), not served.
    api(ApiKey::InitProducerId, 0, 4),
    // Transactions (KIP-98). AddPartitionsToTxn v4 is brokers' verification of a transactional
    // produce (KIP-890 part 1; clients stay at v3 and below); v5's TRANSACTION_ABORTABLE and
    // EndTxn v5's epoch bump at each end (KIP-890 part 2) are not served.
    api(ApiKey::AddPartitionsToTxn, 0, 4),
    api(ApiKey::AddOffsetsToTxn, 0, 3),
    api(ApiKey::EndTxn, 0, 3),
    api(ApiKey::WriteTxnMarkers, 1, 1),
    // Transactions' admin APIs (KIP-664): DescribeProducers and DescribeTransactions have one
    // version; ListTransactions v1 adds the duration filter (KIP-994), v2 an id pattern, not
    // served.
    api(ApiKey::DescribeProducers, 0, 0),
    api(ApiKey::DescribeTransactions, 0, 0),
    api(ApiKey::ListTransactions, 0, 1),
    // SASL (KIP-152: v0 carries the tokens; v1 adds session_lifetime_ms for KIP-368; v2 is
    // flexible) and the SCRAM users' admin API (KIP-554).
    api(ApiKey::SaslAuthenticate, 0, 2),
    api(ApiKey::DescribeUserScramCredentials, 0, 0),
    api(ApiKey::AlterUserScramCredentials, 0, 0),
    // ACLs: kafka-protocol encodes 1 to 3 (v1 adds pattern types, v2 is flexible).
    api(ApiKey::DescribeAcls, 1, 3),
    api(ApiKey::CreateAcls, 1, 3),
    api(ApiKey::DeleteAcls, 1, 3),
    // Client quotas (KIP-546): v1 is flexible.
    api(ApiKey::DescribeClientQuotas, 0, 1),
    api(ApiKey::AlterClientQuotas, 0, 1),
];

/// APIs served only in cluster mode (`process.roles` set), advertised there only: a single
/// node has no leader to elect and nowhere to move a partition. ElectLeaders 0–2 as Kafka
/// (v1 adds the election type, v2 is flexible); AlterPartitionReassignments 0–1 (v1 adds
/// KIP-860's `allow_replication_factor_change`); ListPartitionReassignments 0.
pub const CLUSTER_MODE_APIS: &[ApiSupport] = &[
    api(ApiKey::ElectLeaders, 0, 2),
    api(ApiKey::AlterPartitionReassignments, 0, 1),
    api(ApiKey::ListPartitionReassignments, 0, 0),
    // DescribeQuorum (KIP-595): v1 adds voters' fetch times, v2 KIP-853's directory ids and
    // listeners.
    api(ApiKey::DescribeQuorum, 0, 2),
    api(ApiKey::UnregisterBroker, 0, 0),
    // KIP-853's dynamic quorum.
    api(ApiKey::AddRaftVoter, 0, 0),
    api(ApiKey::RemoveRaftVoter, 0, 0),
];

/// Which APIs a broker serves: [`SUPPORTED_APIS`], and [`CLUSTER_MODE_APIS`] in cluster mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServedApis {
    SingleNode,
    Cluster,
}

impl ServedApis {
    /// Every API served, in the order ApiVersions lists them.
    pub fn all(self) -> impl Iterator<Item = ApiSupport> {
        let cluster: &[ApiSupport] = match self {
            ServedApis::SingleNode => &[],
            ServedApis::Cluster => CLUSTER_MODE_APIS,
        };
        SUPPORTED_APIS.iter().chain(cluster).copied()
    }

    pub fn supported(self, key: ApiKey) -> Option<ApiSupport> {
        self.all().find(|a| a.key == key)
    }
}

/// Produce versions below this are advertised but refused (see [`SUPPORTED_APIS`]).
pub const PRODUCE_VERSION_MIN_SERVED: i16 = 3;

pub fn supported(key: ApiKey) -> Option<ApiSupport> {
    SUPPORTED_APIS.iter().copied().find(|a| a.key == key)
}

/// A request frame split into its header and undecoded body.
#[derive(Debug)]
pub struct RequestFrame {
    pub api_key: ApiKey,
    pub header: RequestHeader,
    pub body: Bytes,
}

#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error("frame of {0} bytes is too short for a request header")]
    TooShort(usize),
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    #[error("malformed request header: {0}")]
    Malformed(String),
}

/// Decodes the request header. The header's own version depends on the API and its version, so
/// the first four bytes are read before the rest.
pub fn decode_request_header(mut frame: Bytes) -> Result<RequestFrame, HeaderError> {
    if frame.len() < 8 {
        return Err(HeaderError::TooShort(frame.len()));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api_key = ApiKey::try_from(key).map_err(|_| HeaderError::UnknownApiKey(key))?;
    let header_version = request_header_version(api_key, version);
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| HeaderError::Malformed(e.to_string()))?;
    Ok(RequestFrame {
        api_key,
        header,
        body: frame,
    })
}

/// The header version for a request. ApiVersions requests of versions newer than Laminar knows
/// still parse with the flexible header, so they can get an UNSUPPORTED_VERSION answer.
fn request_header_version(api_key: ApiKey, version: i16) -> i16 {
    let known_max = api_key.valid_versions().max;
    api_key.request_header_version(version.clamp(0, known_max))
}

/// Encodes `response` as a complete frame: size, response header, body.
pub fn encode_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    response: &ResponseKind,
) -> Result<Bytes, String> {
    // ApiVersions always answers with a v0 header, so that a client that sent a version the
    // broker does not know can still read the error (KIP-511).
    let header_version = if api_key == ApiKey::ApiVersions {
        0
    } else {
        response.header_version(version)
    };
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let mut frame = BytesMut::with_capacity(64);
    frame.put_i32(0);
    header
        .encode(&mut frame, header_version)
        .map_err(|e| e.to_string())?;
    response
        .encode(&mut frame, version)
        .map_err(|e| format!("{api_key:?} v{version}: {e}"))?;
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    Ok(frame.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn every_advertised_range_is_decodable_by_the_codec() {
        for api in SUPPORTED_APIS {
            let codec = api.key.valid_versions();
            let min_served = if api.key == ApiKey::Produce {
                PRODUCE_VERSION_MIN_SERVED
            } else {
                api.min
            };
            assert!(min_served >= codec.min && api.max <= codec.max, "{:?}", api.key);
            assert!(api.min <= api.max);
        }
    }

    #[test]
    fn header_round_trips_and_rejects_unknown_keys() {
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Metadata as i16)
            .with_request_api_version(9)
            .with_correlation_id(42)
            .with_client_id(Some(StrBytes::from_static_str("t")));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, ApiKey::Metadata.request_header_version(9))
            .unwrap();
        buf.extend_from_slice(b"body");
        let frame = decode_request_header(buf.freeze()).unwrap();
        assert_eq!(frame.api_key, ApiKey::Metadata);
        assert_eq!(frame.header.correlation_id, 42);
        assert_eq!(&frame.body[..], b"body");

        let unknown = Bytes::from_static(&[0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff]);
        assert!(matches!(
            decode_request_header(unknown),
            Err(HeaderError::UnknownApiKey(0x7f00))
        ));
        assert!(matches!(
            decode_request_header(Bytes::from_static(&[0, 3])),
            Err(HeaderError::TooShort(2))
        ));
    }
}
