//! One file per Kafka API. `handle` checks the version, decodes the body, runs the handler and
//! encodes the answer; handlers see typed requests and return typed responses.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use crate::broker::BrokerCtx;
use crate::codec::{self, decode_request_header, HeaderError, RequestFrame};

pub mod alter_configs;
pub mod api_versions;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod fetch;
pub mod init_producer_id;
pub mod list_offsets;
pub mod metadata;
pub mod produce;
pub mod sasl_handshake;
mod topic_admin;

/// What the connection does after a request.
#[derive(Debug)]
pub enum Outcome {
    /// Write this frame.
    Respond(Bytes),
    /// Nothing to write (Produce with acks=0).
    NoResponse,
}

/// A request that cannot be answered: the connection is closed, as Kafka does.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Header(#[from] HeaderError),
    #[error("{api:?} is not supported")]
    UnsupportedApi { api: ApiKey },
    #[error("{api:?} v{version} is not supported (supported: v{min}-v{max})")]
    UnsupportedVersion {
        api: ApiKey,
        version: i16,
        min: i16,
        max: i16,
    },
    #[error("malformed {api:?} v{version} request: {reason}")]
    Malformed {
        api: ApiKey,
        version: i16,
        reason: String,
    },
    #[error("cannot encode the {0}")]
    Encode(String),
}

pub async fn handle(ctx: &Rc<BrokerCtx>, frame: Bytes) -> Result<Outcome, RequestError> {
    let RequestFrame {
        api_key,
        header,
        mut body,
    } = decode_request_header(frame)?;
    let version = header.request_api_version;
    let correlation_id = header.correlation_id;
    if api_key == ApiKey::ApiVersions {
        let response = api_versions::handle(version);
        let answer_version = if response.error_code == 0 { version } else { 0 };
        return respond(
            api_key,
            answer_version,
            correlation_id,
            &ResponseKind::ApiVersions(response),
        );
    }
    let support = codec::supported(api_key).ok_or(RequestError::UnsupportedApi { api: api_key })?;
    if version < support.min || version > support.max {
        return Err(RequestError::UnsupportedVersion {
            api: api_key,
            version,
            min: support.min,
            max: support.max,
        });
    }
    if api_key == ApiKey::Produce && version < codec::PRODUCE_VERSION_MIN_SERVED {
        return Ok(produce::refuse_legacy_version(version, correlation_id, body));
    }
    let malformed = |e: anyhow::Error| RequestError::Malformed {
        api: api_key,
        version,
        reason: e.to_string(),
    };
    let request = RequestKind::decode(api_key, &mut body, version).map_err(malformed)?;
    let response = match request {
        RequestKind::Produce(r) => match produce::handle(ctx, r, version).await {
            Some(response) => ResponseKind::Produce(response),
            None => return Ok(Outcome::NoResponse),
        },
        RequestKind::Fetch(r) => ResponseKind::Fetch(fetch::handle(ctx, r, version).await),
        RequestKind::ListOffsets(r) => ResponseKind::ListOffsets(list_offsets::handle(ctx, r, version).await),
        RequestKind::Metadata(r) => ResponseKind::Metadata(metadata::handle(ctx, r, version).await),
        RequestKind::SaslHandshake(r) => ResponseKind::SaslHandshake(sasl_handshake::handle(r)),
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(create_topics::handle(ctx, r, version).await)
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(delete_topics::handle(ctx, r, version).await)
        }
        RequestKind::DeleteRecords(r) => ResponseKind::DeleteRecords(delete_records::handle(ctx, r).await),
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(describe_configs::handle(ctx, r, version))
        }
        RequestKind::AlterConfigs(r) => ResponseKind::AlterConfigs(alter_configs::handle_alter(ctx, r).await),
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(alter_configs::handle_incremental(ctx, r).await)
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(create_partitions::handle(ctx, r).await)
        }
        RequestKind::DescribeCluster(r) => ResponseKind::DescribeCluster(describe_cluster::handle(ctx, r)),
        RequestKind::InitProducerId(r) => ResponseKind::InitProducerId(init_producer_id::handle(ctx, r)),
        _ => return Err(RequestError::UnsupportedApi { api: api_key }),
    };
    respond(api_key, version, correlation_id, &response)
}

fn respond(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    response: &ResponseKind,
) -> Result<Outcome, RequestError> {
    codec::encode_response(api_key, version, correlation_id, response)
        .map(Outcome::Respond)
        .map_err(RequestError::Encode)
}
