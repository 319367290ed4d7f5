//! Seeds: for every (api, version) the broker advertises, valid request frames (header at the
//! right header version, then the body), each with a map of its fields (see [`crate::tokens`])
//! and of the array elements it can duplicate or drop.

pub mod data_requests;
pub mod group_requests;
pub mod transaction_requests;

use std::ops::Range;

use anyhow::{bail, Context, Result};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use laminar_protocol::codec::SUPPORTED_APIS;

use crate::tokens::{self, Kind, Label, Recorder, Token};

use data_requests as data;
use group_requests as group;
use transaction_requests as txn;

/// Values a seed is built with. Every seed is built twice, with [`PLAIN`] and [`MARKED`]: the
/// fields whose values differ between the two are the partition indexes and the waits.
#[derive(Debug, Clone, Copy)]
pub struct Marks {
    pub partitions: [i32; 3],
    pub wait_ms: i32,
}

pub const PLAIN: Marks = Marks {
    partitions: [0, 1, 2],
    wait_ms: 20,
};

const MARKED: Marks = Marks {
    partitions: [0x5a5a_0100, 0x5a5a_0101, 0x5a5a_0102],
    wait_ms: 0x5a5a_0200,
};

/// One valid request frame (no size prefix) and where its fields are.
#[derive(Debug, Clone)]
pub struct Seed {
    pub api: ApiKey,
    pub version: i16,
    pub frame: Bytes,
    /// Where the body starts (the header's length).
    pub body_at: usize,
    /// Header then body fields, by offset in `frame`.
    pub tokens: Vec<Token>,
    /// Array elements: a count token (index into `tokens`) and the bytes of its first element.
    pub elements: Vec<Element>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    pub count: usize,
    pub span: Range<usize>,
}

/// The replica id of a follower's Fetch seed: broker 2 of a three-node cluster (a single node
/// refuses it).
const FOLLOWER_REPLICA_ID: i32 = 2;

/// Variants built per (api, version).
fn variants(api: ApiKey) -> usize {
    match api {
        ApiKey::Produce | ApiKey::JoinGroup | ApiKey::ConsumerGroupHeartbeat => 3,
        // Fetch: a consumer's, and a follower's (`FOLLOWER_REPLICA_ID`).
        ApiKey::Metadata | ApiKey::InitProducerId | ApiKey::Fetch => 2,
        _ => 1,
    }
}

/// Every seed, for every (api, version) a single node advertises, in table order.
pub fn all() -> Result<Vec<Seed>> {
    seeds_of(SUPPORTED_APIS)
}

/// Seeds of the APIs only cluster mode advertises (`CLUSTER_MODE_APIS`). The fuzz targets run
/// a single node, which refuses these as unknown; the seeds are here for a cluster-mode
/// target.
pub fn cluster_mode() -> Result<Vec<Seed>> {
    seeds_of(laminar_protocol::codec::CLUSTER_MODE_APIS)
}

fn seeds_of(apis: &[laminar_protocol::codec::ApiSupport]) -> Result<Vec<Seed>> {
    let mut seeds = Vec::new();
    for support in apis {
        for version in support.min..=support.max {
            for variant in 0..variants(support.key) {
                let seed = build(support.key, version, variant)
                    .with_context(|| format!("seed {:?} v{version} variant {variant}", support.key))?;
                seeds.push(seed);
            }
        }
    }
    Ok(seeds)
}

pub fn build(api: ApiKey, version: i16, variant: usize) -> Result<Seed> {
    let header = encode_header(api, version, 1)?;
    let plain = encode_body(api, version, variant, &PLAIN)?;
    let marked = encode_body(api, version, variant, &MARKED)?;
    let mut tokens = record(api, version, &header, &plain)?;
    let marked_tokens = record(api, version, &header, &marked)?;
    label(&mut tokens, &marked_tokens)?;
    let frame: Bytes = [&header[..], &plain[..]].concat().into();
    let elements = find_elements(api, version, header.len(), &frame, &tokens);
    Ok(Seed {
        api,
        version,
        frame,
        body_at: header.len(),
        tokens,
        elements,
    })
}

/// Valid frames that give the seeds something to act on: the topics they name (three
/// partitions each) and records in every partition.
pub fn preparation() -> Result<Vec<Vec<u8>>> {
    let topics = data::TOPICS
        .iter()
        .map(|name| {
            create_topics_request::CreatableTopic::default()
                .with_name(data::topic(name))
                .with_num_partitions(3)
                .with_replication_factor(1)
        })
        .collect();
    let create = RequestKind::CreateTopics(
        CreateTopicsRequest::default()
            .with_topics(topics)
            .with_timeout_ms(5_000),
    );
    let mut frame = encode_header(ApiKey::CreateTopics, 5, 1)?.to_vec();
    let mut body = BytesMut::new();
    create.encode(&mut body, 5)?;
    frame.extend_from_slice(&body);
    let produce = build(ApiKey::Produce, 9, 0)?;
    Ok(vec![frame, produce.frame.to_vec()])
}

/// The request header for (api, version), with a client id.
pub fn encode_header(api: ApiKey, version: i16, correlation_id: i32) -> Result<Bytes> {
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("laminar-fuzz")));
    let mut out = BytesMut::new();
    header.encode(&mut out, header_version(api, version))?;
    Ok(out.freeze())
}

/// The header version the broker expects (Produce v0-2 share v3's).
pub fn header_version(api: ApiKey, version: i16) -> i16 {
    let known = api.valid_versions();
    api.request_header_version(version.clamp(known.min, known.max))
}

fn encode_body(api: ApiKey, version: i16, variant: usize, marks: &Marks) -> Result<Bytes> {
    // kafka-protocol encodes Produce from v3; v0-2 bodies are v3's without the transactional id.
    let (request, encode_version) = match api {
        ApiKey::Produce => (
            RequestKind::Produce(data::produce(variant, marks)),
            version.max(3),
        ),
        _ => (request(api, version, variant, marks)?, version),
    };
    let mut out = BytesMut::new();
    request.encode(&mut out, encode_version)?;
    if api == ApiKey::Produce && version < 3 {
        let _ = out.split_to(2);
    }
    Ok(out.freeze())
}

fn request(api: ApiKey, v: i16, variant: usize, marks: &Marks) -> Result<RequestKind> {
    if let Some(request) = quorum_admin(api).or_else(|| txn::seed(api, v, marks)) {
        return Ok(request);
    }
    Ok(match api {
        ApiKey::Fetch => {
            let replica_id = if variant == 1 { FOLLOWER_REPLICA_ID } else { -1 };
            let request = data::fetch(v, marks);
            RequestKind::Fetch(match v {
                // From v15 the follower names itself and its broker epoch in ReplicaState.
                15.. => request.with_replica_state(
                    fetch_request::ReplicaState::default()
                        .with_replica_id(BrokerId(replica_id))
                        .with_replica_epoch(if variant == 1 { 1 } else { -1 }),
                ),
                _ => request.with_replica_id(BrokerId(replica_id)),
            })
        }
        ApiKey::ListOffsets => RequestKind::ListOffsets(data::list_offsets(v, marks)),
        ApiKey::Metadata => RequestKind::Metadata(data::metadata(v, variant)),
        ApiKey::SaslHandshake => {
            RequestKind::SaslHandshake(SaslHandshakeRequest::default().with_mechanism(data::s("PLAIN")))
        }
        ApiKey::ApiVersions => RequestKind::ApiVersions(data::api_versions(v)),
        ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(data::sasl_authenticate()),
        ApiKey::DescribeUserScramCredentials => {
            RequestKind::DescribeUserScramCredentials(data::describe_user_scram_credentials())
        }
        ApiKey::AlterUserScramCredentials => {
            RequestKind::AlterUserScramCredentials(data::alter_user_scram_credentials())
        }
        ApiKey::CreateAcls => RequestKind::CreateAcls(data::create_acls()),
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(data::describe_acls()),
        ApiKey::DeleteAcls => RequestKind::DeleteAcls(data::delete_acls()),
        ApiKey::DescribeClientQuotas => RequestKind::DescribeClientQuotas(data::describe_client_quotas()),
        ApiKey::AlterClientQuotas => RequestKind::AlterClientQuotas(data::alter_client_quotas()),
        ApiKey::CreateTopics => RequestKind::CreateTopics(data::create_topics(v, marks)),
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(data::delete_topics(v, marks)),
        ApiKey::DeleteRecords => RequestKind::DeleteRecords(data::delete_records(marks)),
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(data::describe_configs(v)),
        ApiKey::AlterConfigs => RequestKind::AlterConfigs(data::alter_configs()),
        ApiKey::CreatePartitions => RequestKind::CreatePartitions(data::create_partitions(marks)),
        ApiKey::IncrementalAlterConfigs => {
            RequestKind::IncrementalAlterConfigs(data::incremental_alter_configs())
        }
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(data::describe_cluster(v)),
        ApiKey::DescribeLogDirs => RequestKind::DescribeLogDirs(data::describe_log_dirs(marks)),
        ApiKey::AlterPartitionReassignments => {
            RequestKind::AlterPartitionReassignments(data::alter_partition_reassignments(v, marks))
        }
        ApiKey::ListPartitionReassignments => {
            RequestKind::ListPartitionReassignments(data::list_partition_reassignments(marks))
        }
        ApiKey::OffsetForLeaderEpoch => {
            RequestKind::OffsetForLeaderEpoch(data::offset_for_leader_epoch(marks))
        }
        ApiKey::InitProducerId => RequestKind::InitProducerId(data::init_producer_id(v, variant)),
        ApiKey::ElectLeaders => RequestKind::ElectLeaders(data::elect_leaders(v, marks)),
        other => {
            return group::request(other, v, variant, marks)
                .ok_or_else(|| anyhow::anyhow!("no seed for {other:?}"))
        }
    })
}

/// Seeds of the quorum's admin APIs. Ids no node has: the fuzzer must not remove a broker or
/// change the quorum of the cluster it tests.
fn quorum_admin(api: ApiKey) -> Option<RequestKind> {
    Some(match api {
        ApiKey::DescribeQuorum => RequestKind::DescribeQuorum(data::describe_quorum()),
        ApiKey::UnregisterBroker => {
            RequestKind::UnregisterBroker(UnregisterBrokerRequest::default().with_broker_id(BrokerId(9_999)))
        }
        ApiKey::AddRaftVoter => {
            RequestKind::AddRaftVoter(AddRaftVoterRequest::default().with_voter_id(9_999))
        }
        ApiKey::RemoveRaftVoter => {
            RequestKind::RemoveRaftVoter(RemoveRaftVoterRequest::default().with_voter_id(9_999))
        }
        _ => return None,
    })
}

/// The body as kafka-protocol decodes it (Produce v0-2 through v3, as the broker does).
pub fn decodable_body(api: ApiKey, version: i16, body: &[u8]) -> (Bytes, i16) {
    if api == ApiKey::Produce && version < 3 {
        let mut as_v3 = BytesMut::with_capacity(body.len() + 2);
        as_v3.put_i16(-1);
        as_v3.put_slice(body);
        return (as_v3.freeze(), 3);
    }
    (Bytes::copy_from_slice(body), version)
}

/// The fields of header + body, offsets in the whole frame.
fn record(api: ApiKey, version: i16, header: &Bytes, body: &Bytes) -> Result<Vec<Token>> {
    let mut recorder = Recorder::new(header.clone());
    RequestHeader::decode(&mut recorder, header_version(api, version))?;
    let mut tokens = recorder.into_tokens();
    let (decodable, decode_version) = decodable_body(api, version, body);
    let shift = header.len() as isize - (decodable.len() - body.len()) as isize;
    let mut recorder = Recorder::new(decodable);
    decode_recorded(api, &mut recorder, decode_version)?;
    if recorder.left() != 0 {
        bail!("{} body bytes not decoded", recorder.left());
    }
    let body_tokens = recorder.into_tokens().into_iter().filter_map(|mut t| {
        let start = t.at.start as isize + shift;
        (start >= header.len() as isize).then(|| {
            t.at = start as usize..(t.at.end as isize + shift) as usize;
            t
        })
    });
    tokens.extend(body_tokens);
    if api.request_header_version(version.max(api.valid_versions().min)) >= 2 {
        tokens::mark_tagged_sections(&mut tokens);
    }
    Ok(tokens)
}

macro_rules! decode_as {
    ($api:expr, $buf:expr, $version:expr, $($key:ident => $ty:ident),* $(,)?) => {
        match $api {
            $(ApiKey::$key => RequestKind::$key($ty::decode($buf, $version)?),)*
            other => bail!("no decoder for {other:?}"),
        }
    };
}

/// Decodes a request body through a recorder (kafka-protocol's own `RequestKind::decode` takes
/// `Bytes` only).
pub fn decode_recorded(api: ApiKey, buf: &mut Recorder, version: i16) -> Result<RequestKind> {
    Ok(decode_as!(api, buf, version,
        Produce => ProduceRequest, Fetch => FetchRequest, ListOffsets => ListOffsetsRequest,
        Metadata => MetadataRequest, SaslHandshake => SaslHandshakeRequest,
        ApiVersions => ApiVersionsRequest, CreateTopics => CreateTopicsRequest,
        DeleteTopics => DeleteTopicsRequest, DeleteRecords => DeleteRecordsRequest,
        DescribeConfigs => DescribeConfigsRequest, AlterConfigs => AlterConfigsRequest,
        CreatePartitions => CreatePartitionsRequest,
        IncrementalAlterConfigs => IncrementalAlterConfigsRequest,
        DescribeCluster => DescribeClusterRequest, DescribeLogDirs => DescribeLogDirsRequest,
        AlterPartitionReassignments => AlterPartitionReassignmentsRequest,
        ListPartitionReassignments => ListPartitionReassignmentsRequest,
        OffsetForLeaderEpoch => OffsetForLeaderEpochRequest, FindCoordinator => FindCoordinatorRequest,
        JoinGroup => JoinGroupRequest, SyncGroup => SyncGroupRequest,
        Heartbeat => HeartbeatRequest, LeaveGroup => LeaveGroupRequest,
        OffsetCommit => OffsetCommitRequest, OffsetFetch => OffsetFetchRequest,
        TxnOffsetCommit => TxnOffsetCommitRequest,
        AddPartitionsToTxn => AddPartitionsToTxnRequest, AddOffsetsToTxn => AddOffsetsToTxnRequest,
        EndTxn => EndTxnRequest, WriteTxnMarkers => WriteTxnMarkersRequest,
        DescribeProducers => DescribeProducersRequest,
        DescribeTransactions => DescribeTransactionsRequest,
        ListTransactions => ListTransactionsRequest,
        ListGroups => ListGroupsRequest, DescribeGroups => DescribeGroupsRequest,
        DeleteGroups => DeleteGroupsRequest, OffsetDelete => OffsetDeleteRequest,
        ConsumerGroupHeartbeat => ConsumerGroupHeartbeatRequest,
        ConsumerGroupDescribe => ConsumerGroupDescribeRequest,
        InitProducerId => InitProducerIdRequest, ElectLeaders => ElectLeadersRequest,
        SaslAuthenticate => SaslAuthenticateRequest,
        DescribeUserScramCredentials => DescribeUserScramCredentialsRequest,
        AlterUserScramCredentials => AlterUserScramCredentialsRequest,
        CreateAcls => CreateAclsRequest, DescribeAcls => DescribeAclsRequest,
        DeleteAcls => DeleteAclsRequest,
        DescribeClientQuotas => DescribeClientQuotasRequest, AlterClientQuotas => AlterClientQuotasRequest,
        DescribeQuorum => DescribeQuorumRequest, UnregisterBroker => UnregisterBrokerRequest,
        AddRaftVoter => AddRaftVoterRequest, RemoveRaftVoter => RemoveRaftVoterRequest,
    ))
}

/// Labels the fields whose values differ between the plain and the marked build.
fn label(tokens: &mut [Token], marked: &[Token]) -> Result<()> {
    if tokens.len() != marked.len() {
        bail!("plain and marked builds differ in shape");
    }
    for (token, other) in tokens.iter_mut().zip(marked) {
        if token.at != other.at || token.value == other.value {
            continue;
        }
        if MARKED.partitions.iter().any(|&p| i64::from(p) == other.value) {
            token.label = Label::Partition;
        } else if other.value == i64::from(MARKED.wait_ms) {
            token.label = Label::WaitMs;
        }
    }
    Ok(())
}

/// Array counts and their first elements, found by trial: a count token holding n (n+1 when
/// compact) is taken as an array count with element bytes `[after, end)` when the frame with
/// that span repeated and the count raised by one decodes exactly and re-encodes to the same
/// bytes. The smallest such `end` wins.
fn find_elements(api: ApiKey, version: i16, body_at: usize, frame: &Bytes, tokens: &[Token]) -> Vec<Element> {
    let mut elements = Vec::new();
    for (index, token) in tokens.iter().enumerate() {
        let Some(count) = element_count(token) else {
            continue;
        };
        if token.at.start < body_at {
            continue;
        }
        let after = token.at.end;
        let ends = tokens[index + 1..].iter().map(|t| t.at.end).take(96);
        for end in ends {
            let grown = with_duplicate(frame, token, count + 1, after..end);
            if round_trips(api, version, &grown[body_at..]) {
                elements.push(Element {
                    count: index,
                    span: after..end,
                });
                break;
            }
        }
    }
    elements
}

/// The element count a token would hold if it were an array count.
fn element_count(token: &Token) -> Option<i64> {
    match token.kind {
        Kind::Int { width: 4 } if (1..=16).contains(&token.value) => Some(token.value),
        Kind::Uvarint | Kind::CompactLen if (2..=17).contains(&token.value) => Some(token.value - 1),
        _ => None,
    }
}

/// `frame` with `span` repeated once and the count token rewritten to `count`.
pub fn with_duplicate(frame: &[u8], token: &Token, count: i64, span: Range<usize>) -> Vec<u8> {
    let mut out = Vec::with_capacity(frame.len() + span.len());
    out.extend_from_slice(&frame[..token.at.start]);
    put_count(&mut out, token.kind, count);
    out.extend_from_slice(&frame[token.at.end..span.end]);
    out.extend_from_slice(&frame[span.clone()]);
    out.extend_from_slice(&frame[span.end..]);
    out
}

/// Writes an element count in the token's encoding (int32, or compact: count + 1).
pub fn put_count(out: &mut Vec<u8>, kind: Kind, count: i64) {
    match kind {
        Kind::Int { .. } => out.extend_from_slice(&(count as i32).to_be_bytes()),
        _ => put_uvarint(out, (count + 1) as u64),
    }
}

pub fn put_uvarint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Whether `body` decodes completely and encodes back to the same bytes.
fn round_trips(api: ApiKey, version: i16, body: &[u8]) -> bool {
    let (decodable, decode_version) = decodable_body(api, version, body);
    let mut guarded = Recorder::guarded(decodable.clone());
    let Ok(request) = decode_recorded(api, &mut guarded, decode_version) else {
        return false;
    };
    if guarded.left() != 0 {
        return false;
    }
    let mut again = BytesMut::new();
    request.encode(&mut again, decode_version).is_ok() && again[..] == decodable[..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_advertised_version_has_a_seed_that_decodes_whole() {
        let mut seeds = all().expect("every seed builds");
        seeds.extend(cluster_mode().expect("every cluster-mode seed builds"));
        let cluster = laminar_protocol::codec::CLUSTER_MODE_APIS;
        for support in SUPPORTED_APIS.iter().chain(cluster) {
            for version in support.min..=support.max {
                let seed = seeds
                    .iter()
                    .find(|s| s.api == support.key && s.version == version)
                    .unwrap_or_else(|| panic!("no seed for {:?} v{version}", support.key));
                let in_order = seed.tokens.windows(2).all(|w| w[0].at.end <= w[1].at.start);
                assert!(in_order, "{:?} v{version}", seed.api);
                assert_eq!(
                    seed.tokens.last().unwrap().at.end,
                    seed.frame.len(),
                    "{:?} v{version}",
                    seed.api
                );
                assert!(seed.body_at >= 10 && seed.body_at <= seed.frame.len());
            }
        }
    }

    #[test]
    fn partitions_waits_and_elements_are_found() {
        let seed = build(ApiKey::Produce, 9, 0).unwrap();
        let partitions = seed.tokens.iter().filter(|t| t.label == Label::Partition).count();
        assert_eq!(partitions, 6, "two topics of three partitions");
        assert_eq!(seed.tokens.iter().filter(|t| t.label == Label::WaitMs).count(), 1);
        // topics (2), partitions of each topic (3 each)
        assert!(seed.elements.len() >= 3, "{:?}", seed.elements);
        let fetch = build(ApiKey::Fetch, 4, 0).unwrap();
        assert!(fetch.tokens.iter().any(|t| t.label == Label::WaitMs));
        assert!(
            fetch.tokens.iter().all(|t| t.kind != Kind::TaggedCount),
            "v4 is not flexible"
        );
        let flexible = build(ApiKey::Fetch, 12, 0).unwrap();
        assert!(flexible.tokens.iter().any(|t| t.kind == Kind::TaggedCount));
    }

    #[test]
    fn legacy_produce_seeds_are_v3_bodies_without_the_transactional_id() {
        let v2 = build(ApiKey::Produce, 2, 0).unwrap();
        let v3 = build(ApiKey::Produce, 3, 0).unwrap();
        assert_eq!(v2.frame.len() + 2, v3.frame.len());
        assert_eq!(v2.tokens.len() + 1, v3.tokens.len());
    }
}
