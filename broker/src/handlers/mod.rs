//! One file per Kafka API. `handle` checks the version, decodes the body, runs the handler and
//! encodes the answer; handlers see typed requests and return typed responses.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use crate::authentication::{Authentication, AuthenticationError, ANONYMOUS};
use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::handlers::append_order::AppendOrder;
use crate::handlers::placement::Placement;
use crate::kafka_listener::ListenerId;
use crate::metrics::ProducedTraffic;
use crate::reply::Reply;
use laminar_protocol::chunk::Chunk;
use laminar_protocol::codec::{self, decode_request_header, HeaderError, RequestFrame};
use laminar_security::QuotaKey;
use quota_checks::QuotaClient;

mod acl_checks;
mod acl_wire;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod add_raft_voter;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod append_order;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
mod partition_answers;
pub mod placement;
pub mod produce;
mod quota_checks;
pub mod remove_raft_voter;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;
pub(crate) mod topic_admin;
pub mod txn_offset_commit;
pub mod unregister_broker;
pub mod write_txn_markers;

/// What the connection does after a request.
pub enum Outcome {
    /// Write this frame.
    Respond(Bytes),
    /// Write this frame, given as chunks in order (a fetch answer: stored batches in memory or
    /// segment file ranges).
    RespondChunks(Vec<laminar_protocol::chunk::Chunk>),
    /// Nothing to write (Produce with acks=0).
    NoResponse,
    /// Write this frame when it is ready (a produce whose appends and, for acks=all, fdatasync
    /// are under way; an OffsetCommit being made durable; a JoinGroup or SyncGroup waiting for
    /// its rebalance), or nothing (acks=0); the connection handles later requests meanwhile
    /// and keeps answers in request order (`crate::reply`). A long-poll fetch's answer comes
    /// as chunks, the others as one frame.
    Deferred(Answer),
}

/// What a handled request comes to: the answer's chunks, none (acks=0), or why the connection
/// closes.
pub type AnswerOutput = Result<Option<Vec<Chunk>>, RequestError>;

/// An answer on its way.
pub type Answer = Pin<Box<dyn Future<Output = AnswerOutput>>>;

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
    /// A discovery request while this broker's session with the quorum has lapsed: the
    /// connection closes, so that the client asks another broker (`SessionLease`).
    #[error("{api:?} refused: this broker's session with the controller quorum lapsed")]
    NoSession { api: ApiKey },
    #[error(transparent)]
    Authentication(crate::authentication::AuthenticationError),
}

/// Handles one request frame of a connection; `order` is that connection's (produce requests
/// take their turn in it, so handle frames in the order they arrived).
/// What the handlers keep of one connection between its requests. Owned by the connection, on
/// its shard.
pub struct ConnectionState {
    /// Its appends' order per partition.
    pub order: AppendOrder,
    /// Where its data requests go.
    pub placement: Placement,
    /// Who its client is, and what it may send before it has proved it.
    pub authentication: Authentication,
    /// Until when the connection reads no request: its client went past a quota (Kafka mutes
    /// the channel as long as the answer's `throttle_time_ms`). Shared with answers that come
    /// later (a long-poll fetch's size counts when it is known).
    pub muted_until: Rc<std::cell::Cell<Option<std::time::Instant>>>,
}

impl ConnectionState {
    /// The state of a connection on shard `here` of `shard_count`, authenticated as far as
    /// `authentication` says (a new connection's, or one carried from another shard).
    pub fn new(
        here: laminar_engine::shard::ShardId,
        shard_count: usize,
        authentication: Authentication,
    ) -> ConnectionState {
        ConnectionState {
            order: AppendOrder::default(),
            placement: Placement::new(here, shard_count),
            authentication,
            muted_until: Rc::default(),
        }
    }

    /// Until when the connection is muted, if it is now.
    pub fn muted_until(&self) -> Option<std::time::Instant> {
        self.muted_until
            .get()
            .filter(|until| *until > std::time::Instant::now())
    }

    /// Mutes the connection for `wait` from now (not shorter than it already is).
    pub fn throttle(&self, wait: std::time::Duration) {
        mute(&self.muted_until, wait);
    }
}

/// Mutes a connection through its `muted_until` for `wait` from now, unless it is for longer.
pub fn mute(muted_until: &std::cell::Cell<Option<std::time::Instant>>, wait: std::time::Duration) {
    if wait.is_zero() {
        return;
    }
    let until = std::time::Instant::now() + wait;
    if muted_until.get().is_none_or(|now| now < until) {
        muted_until.set(Some(until));
    }
}

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    connection: &ConnectionState,
    frame: Bytes,
) -> Result<Outcome, RequestError> {
    if connection.authentication.expects_raw_token() {
        return Ok(raw_sasl_token(ctx, &connection.authentication, &frame));
    }
    let request_len = frame.len();
    let RequestFrame {
        api_key,
        header,
        mut body,
    } = decode_request_header(frame)?;
    let version = header.request_api_version;
    let correlation_id = header.correlation_id;
    connection.authentication.admit(api_key)?;
    if api_key == ApiKey::ApiVersions {
        let response = api_versions::handle(version, served_apis(ctx));
        let answer_version = if response.error_code == 0 { version } else { 0 };
        return respond(
            api_key,
            answer_version,
            correlation_id,
            &ResponseKind::ApiVersions(response),
        );
    }
    check_served(served_apis(ctx), api_key, version)?;
    refuse_discovery_without_session(ctx, api_key)?;
    if api_key == ApiKey::Produce && version < codec::PRODUCE_VERSION_MIN_SERVED {
        return produce::refuse_legacy_version(version, correlation_id, body);
    }
    let malformed = |e: anyhow::Error| RequestError::Malformed {
        api: api_key,
        version,
        reason: e.to_string(),
    };
    let request = RequestKind::decode(api_key, &mut body, version).map_err(malformed)?;
    let quota = QuotaClient {
        principal: connection
            .authentication
            .principal()
            .unwrap_or_else(|| ANONYMOUS.clone()),
        client_id: header.client_id,
    };
    let quotas = &ctx.state.shared.client_quotas;
    // With no quota set (the common case) request time is neither measured nor recorded.
    let counted = !quota_checks::is_exempt(api_key) && quotas.any_set();
    let request_time = QuotaKey::RequestPercentage;
    // Request time counts once the request is handled; a client already past its share is
    // throttled now (Kafka throttles the answer after the time that went past it).
    let throttle = match counted {
        true => quotas.wait(request_time, quota.client()),
        false => std::time::Duration::ZERO,
    };
    connection.throttle(throttle);
    let started = counted.then(std::time::Instant::now);
    let context = RequestContext {
        api_key,
        version,
        correlation_id,
        quota: &quota,
        throttle,
        request_len,
    };
    let outcome = dispatch(ctx, connection, request, context).await;
    if let Some(started) = started {
        let spent = quota_checks::percent_seconds(started.elapsed());
        quotas.record(request_time, quota.client(), spent);
    }
    outcome
}

/// What a handler may need of a request besides its body.
struct RequestContext<'a> {
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    /// Who the request counts against, for quotas; its client id.
    quota: &'a QuotaClient,
    /// How long the client is throttled for already (its request time).
    throttle: std::time::Duration,
    /// The request's frame, in bytes (what `producer_byte_rate` counts).
    request_len: usize,
}

/// Runs a decoded request's handler.
async fn dispatch(
    ctx: &Rc<BrokerCtx>,
    connection: &ConnectionState,
    request: RequestKind,
    context: RequestContext<'_>,
) -> Result<Outcome, RequestError> {
    let (api_key, version, correlation_id) = (context.api_key, context.version, context.correlation_id);
    let listener = connection.authentication.listener;
    let access = access_of(ctx, connection);
    if let Some(mut refused) = acl_checks::refused(&access, &request, version) {
        quota_checks::set_throttle(&mut refused, context.throttle);
        return respond(api_key, version, correlation_id, &refused);
    }
    match request {
        RequestKind::Produce(r) => handle_produce(ctx, (connection, &access), r, &context),
        request @ (RequestKind::SaslHandshake(_) | RequestKind::SaslAuthenticate(_)) => {
            handle_sasl(ctx, &connection.authentication, request, version, correlation_id)
        }
        RequestKind::Fetch(mut r) => {
            fetch::replica_checks::take_replica_id(&mut r, version);
            match fetch::replica_checks::refusal(ctx, &r, version, (listener, &access)) {
                Some(error) => {
                    let answer = laminar_protocol::fetch_response::FetchAnswer::failed(error.code());
                    let frame = laminar_protocol::fetch_response::encode_fetch_frame(
                        &answer,
                        version,
                        correlation_id,
                    );
                    Ok(Outcome::RespondChunks(frame))
                }
                None => Ok(handle_fetch(ctx, (connection, &access), r, &context).await),
            }
        }
        request if is_group_api(api_key) => {
            note_coordinator(ctx, &connection.placement, &request);
            handle_group_api(ctx, (listener, &access), request, &context).await
        }
        request => handle_partition_or_admin_api(ctx, (listener, &access), request, &context).await,
    }
}

/// Fetch: answered now or when data comes (a long poll). A consumer's answer counts against
/// its byte rate once its size is known, and is bounded by it beforehand.
async fn handle_fetch(
    ctx: &Rc<BrokerCtx>,
    (connection, access): (&ConnectionState, &Access),
    mut request: kafka_protocol::messages::FetchRequest,
    context: &RequestContext<'_>,
) -> Outcome {
    let (version, correlation_id) = (context.version, context.correlation_id);
    let quotas = &ctx.state.shared.client_quotas;
    let consumer = request.replica_id.0 < 0;
    if let Some(bytes_max) = quotas
        .fetch_bytes_max(context.quota.client())
        .filter(|_| consumer)
    {
        request.max_bytes = request
            .max_bytes
            .min(i32::try_from(bytes_max).unwrap_or(i32::MAX));
    }
    let answer = fetch::handle(ctx, request, version, (&connection.placement, access)).await;
    let (ctx, muted_until, throttle) = (ctx.clone(), connection.muted_until.clone(), context.throttle);
    let (principal, client_id) = (context.quota.principal.clone(), context.quota.client_id.clone());
    let encoded = answer.map(move |mut answer| {
        ctx.state.metrics.count_fetched(&answer);
        if consumer {
            let quota = QuotaClient { principal, client_id };
            let bytes = answer.records_len() as f64;
            let wait =
                throttle.max(quotas_of(&ctx).record(QuotaKey::ConsumerByteRate, quota.client(), bytes));
            mute(&muted_until, wait);
            answer.throttle_time_ms = crate::client_quotas::throttle_ms(wait);
        }
        laminar_protocol::fetch_response::encode_fetch_frame(&answer, version, correlation_id)
    });
    match encoded {
        Reply::Now(chunks) => Outcome::RespondChunks(chunks),
        Reply::Later(chunks) => Outcome::Deferred(Box::pin(async move { Ok(Some(chunks.await)) })),
    }
}

fn quotas_of(ctx: &BrokerCtx) -> &crate::client_quotas::ClientQuotaManager {
    &ctx.state.shared.client_quotas
}

/// What this request may do: its connection's principal and host against the ACLs now.
fn access_of(ctx: &BrokerCtx, connection: &ConnectionState) -> Access {
    let authentication = &connection.authentication;
    Access::new(
        ctx.state.shared.authorizer.as_ref().map(|a| a.acls()),
        authentication
            .principal()
            .unwrap_or_else(|| crate::authentication::ANONYMOUS.clone()),
        authentication.peer_host.clone(),
    )
}

/// SaslHandshake, and SaslAuthenticate: answered now, or after the failure delay (the
/// connection then closes).
fn handle_sasl(
    ctx: &Rc<BrokerCtx>,
    authentication: &Authentication,
    request: RequestKind,
    version: i16,
    correlation_id: i32,
) -> Result<Outcome, RequestError> {
    let request = match request {
        RequestKind::SaslHandshake(r) => {
            let response = sasl_handshake::handle(&ctx.state.shared.config, authentication, r, version);
            let response = ResponseKind::SaslHandshake(response);
            return respond(ApiKey::SaslHandshake, version, correlation_id, &response);
        }
        RequestKind::SaslAuthenticate(r) => r,
        _ => unreachable!("handle_sasl is given SASL requests only"),
    };
    let api_key = ApiKey::SaslAuthenticate;
    match sasl_authenticate::handle(ctx, authentication, request) {
        sasl_authenticate::Step::Answer(response) => respond(
            api_key,
            version,
            correlation_id,
            &ResponseKind::SaslAuthenticate(response),
        ),
        sasl_authenticate::Step::Failed(response, delay) => Ok(Outcome::Deferred(Box::pin(async move {
            glommio::timer::sleep(delay).await;
            let kind = ResponseKind::SaslAuthenticate(response);
            encode(api_key, version, correlation_id, &kind).map(|f| Some(vec![Chunk::Memory(f)]))
        }))),
    }
}

/// A bare SASL token (after a v0 handshake): a bare answer, or a close after the failure delay.
fn raw_sasl_token(ctx: &Rc<BrokerCtx>, authentication: &Authentication, token: &[u8]) -> Outcome {
    match sasl_authenticate::handle_raw(ctx, authentication, token) {
        Ok(frame) => Outcome::Respond(frame),
        Err(delay) => Outcome::Deferred(Box::pin(async move {
            glommio::timer::sleep(delay).await;
            Err(RequestError::Authentication(AuthenticationError::Failed))
        })),
    }
}

/// A broker whose session lapsed may have been replaced as leader and coordinator: its answers
/// to Metadata and FindCoordinator would send clients back to it, the one broker they are
/// connected to. Closing instead makes them ask another (docs/ARCHITECTURE.md, "Faults between
/// nodes"; decision 0032).
fn refuse_discovery_without_session(ctx: &BrokerCtx, api_key: ApiKey) -> Result<(), RequestError> {
    let discovery = matches!(
        api_key,
        ApiKey::Metadata | ApiKey::FindCoordinator | ApiKey::DescribeCluster
    );
    match &ctx.state.shared.cluster {
        Some(link) if discovery && !link.session.is_held() => Err(RequestError::NoSession { api: api_key }),
        _ => Ok(()),
    }
}

/// The APIs this broker serves: cluster mode adds ElectLeaders and the reassignment APIs.
fn served_apis(ctx: &BrokerCtx) -> codec::ServedApis {
    match ctx.state.shared.cluster {
        Some(_) => codec::ServedApis::Cluster,
        None => codec::ServedApis::SingleNode,
    }
}

/// Refuses an API the broker does not serve, or a version outside the served range.
fn check_served(served: codec::ServedApis, api_key: ApiKey, version: i16) -> Result<(), RequestError> {
    let support = served
        .supported(api_key)
        .ok_or(RequestError::UnsupportedApi { api: api_key })?;
    if version < support.min || version > support.max {
        return Err(RequestError::UnsupportedVersion {
            api: api_key,
            version,
            min: support.min,
            max: support.max,
        });
    }
    Ok(())
}

/// Produce: answered now (refused), later (once durable as `acks` asks), or never (acks=0).
/// The request's size counts against the client's byte rate as it arrives.
fn handle_produce(
    ctx: &Rc<BrokerCtx>,
    (connection, access): (&ConnectionState, &Access),
    request: kafka_protocol::messages::ProduceRequest,
    context: &RequestContext<'_>,
) -> Result<Outcome, RequestError> {
    let (version, correlation_id) = (context.version, context.correlation_id);
    let produced = ProducedTraffic::of(&request);
    let bytes = context.request_len as f64;
    let byte_rate_wait = quotas_of(ctx).record(QuotaKey::ProducerByteRate, context.quota.client(), bytes);
    let wait = context.throttle.max(byte_rate_wait);
    connection.throttle(wait);
    match produce::handle(ctx, (connection, access), request) {
        produce::Produced::Answer(response) => {
            ctx.state.metrics.count_produced(produced, Some(&response));
            let mut kind = ResponseKind::Produce(response);
            quota_checks::set_throttle(&mut kind, wait);
            respond(ApiKey::Produce, version, correlation_id, &kind)
        }
        produce::Produced::Pending(pending) => {
            let ctx = ctx.clone();
            Ok(Outcome::Deferred(Box::pin(async move {
                let response = pending.await;
                ctx.state.metrics.count_produced(produced, response.as_ref());
                let Some(response) = response else { return Ok(None) };
                let mut kind = ResponseKind::Produce(response);
                quota_checks::set_throttle(&mut kind, wait);
                encode(ApiKey::Produce, version, correlation_id, &kind).map(|f| Some(vec![Chunk::Memory(f)]))
            })))
        }
    }
}

/// KIP-599: a topic-admin request counts the partitions it creates or deletes against the
/// client's `controller_mutation_rate`. A strict request is refused while the client is past
/// it (the refusal is the `Err`); an older one is made, and throttled.
fn mutation_throttle(
    ctx: &BrokerCtx,
    request: &RequestKind,
    context: &RequestContext<'_>,
) -> Result<std::time::Duration, Box<ResponseKind>> {
    let Some(partitions) = quota_checks::mutated_partitions(&ctx.state.shared, request) else {
        return Ok(context.throttle);
    };
    let (client, quotas) = (context.quota.client(), quotas_of(ctx));
    let wait = quotas.mutation_wait(client);
    if quota_checks::is_strict(context.api_key, context.version) && !wait.is_zero() {
        if let Some(refused) = quota_checks::mutation_refused(request, wait) {
            return Err(Box::new(refused));
        }
    }
    quotas.take_mutations(client, partitions);
    Ok(context.throttle.max(quotas.mutation_wait(client)))
}

/// Per-partition data APIs other than Produce and Fetch, and the topic and config admin APIs.
async fn handle_partition_or_admin_api(
    ctx: &Rc<BrokerCtx>,
    (listener, access): (ListenerId, &Access),
    request: RequestKind,
    context: &RequestContext<'_>,
) -> Result<Outcome, RequestError> {
    let (api_key, version, correlation_id) = (context.api_key, context.version, context.correlation_id);
    let throttle = match mutation_throttle(ctx, &request, context) {
        Ok(throttle) => throttle,
        Err(refused) => return respond(api_key, version, correlation_id, &refused),
    };
    let mut response = match request {
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(list_offsets::handle(ctx, access, r, version).await)
        }
        RequestKind::Metadata(r) => {
            ResponseKind::Metadata(metadata::handle(ctx, (access, listener), r, version).await)
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            ResponseKind::OffsetForLeaderEpoch(offset_for_leader_epoch::handle(ctx, access, r).await)
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(create_topics::handle(ctx, access, r, version).await)
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(delete_topics::handle(ctx, access, r, version).await)
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(delete_records::handle(ctx, access, r).await)
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(describe_configs::handle(ctx, access, r, version))
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(alter_configs::handle_alter(ctx, access, r).await)
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(alter_configs::handle_incremental(ctx, access, r).await)
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(create_partitions::handle(ctx, access, r).await)
        }
        RequestKind::DescribeCluster(r) => {
            ResponseKind::DescribeCluster(describe_cluster::handle(ctx, r, listener))
        }
        RequestKind::DescribeLogDirs(r) => {
            ResponseKind::DescribeLogDirs(describe_log_dirs::handle(ctx, r).await)
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(init_producer_id::handle(ctx, r).await)
        }
        request => match cluster_api(ctx, request, version).await {
            Ok(response) => response,
            Err(request) => match transaction_api(ctx, access, request, version).await {
                Ok(response) => response,
                Err(request) => security_api(ctx, access, request)
                    .await
                    .ok_or(RequestError::UnsupportedApi { api: api_key })?,
            },
        },
    };
    quota_checks::set_throttle(&mut response, throttle);
    crate::transactions::fencing::answer_fencing_as_version_knows(&mut response, version);
    respond(api_key, version, correlation_id, &response)
}

/// The cluster's own admin APIs (leaders, reassignments, brokers, the quorum); the request
/// back for another.
async fn cluster_api(
    ctx: &Rc<BrokerCtx>,
    request: RequestKind,
    version: i16,
) -> Result<ResponseKind, RequestKind> {
    Ok(match request {
        RequestKind::ElectLeaders(r) => {
            ResponseKind::ElectLeaders(elect_leaders::handle(ctx, r, version).await)
        }
        RequestKind::DescribeQuorum(r) => {
            ResponseKind::DescribeQuorum(describe_quorum::handle(ctx, r, version).await)
        }
        RequestKind::UnregisterBroker(r) => {
            ResponseKind::UnregisterBroker(unregister_broker::handle(ctx, r).await)
        }
        RequestKind::AddRaftVoter(r) => ResponseKind::AddRaftVoter(add_raft_voter::handle(ctx, r).await),
        RequestKind::RemoveRaftVoter(r) => {
            ResponseKind::RemoveRaftVoter(remove_raft_voter::handle(ctx, r).await)
        }
        RequestKind::AlterPartitionReassignments(r) => {
            ResponseKind::AlterPartitionReassignments(alter_partition_reassignments::handle(ctx, r).await)
        }
        RequestKind::ListPartitionReassignments(r) => {
            ResponseKind::ListPartitionReassignments(list_partition_reassignments::handle(ctx, r))
        }
        other => return Err(other),
    })
}

/// The transactional producer's APIs, the markers brokers send each other, and the admin APIs
/// that look at transactions; the request back for another.
async fn transaction_api(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: RequestKind,
    version: i16,
) -> Result<ResponseKind, RequestKind> {
    Ok(match request {
        RequestKind::AddPartitionsToTxn(r) => {
            ResponseKind::AddPartitionsToTxn(add_partitions_to_txn::handle(ctx, access, r, version).await)
        }
        RequestKind::AddOffsetsToTxn(r) => {
            ResponseKind::AddOffsetsToTxn(add_offsets_to_txn::handle(ctx, access, r).await)
        }
        RequestKind::EndTxn(r) => ResponseKind::EndTxn(end_txn::handle(ctx, r).await),
        RequestKind::WriteTxnMarkers(r) => {
            ResponseKind::WriteTxnMarkers(write_txn_markers::handle(ctx, r).await)
        }
        RequestKind::DescribeProducers(r) => {
            ResponseKind::DescribeProducers(describe_producers::handle(ctx, access, r).await)
        }
        RequestKind::DescribeTransactions(r) => {
            ResponseKind::DescribeTransactions(describe_transactions::handle(ctx, access, r).await)
        }
        RequestKind::ListTransactions(r) => {
            ResponseKind::ListTransactions(list_transactions::handle(ctx, access, r).await)
        }
        other => return Err(other),
    })
}

/// The users, ACL and quota APIs; `None` for another request.
async fn security_api(ctx: &Rc<BrokerCtx>, access: &Access, request: RequestKind) -> Option<ResponseKind> {
    Some(match request {
        RequestKind::AlterUserScramCredentials(r) => ResponseKind::AlterUserScramCredentials(
            alter_user_scram_credentials::handle(&ctx.state.shared, r).await,
        ),
        RequestKind::DescribeUserScramCredentials(r) => ResponseKind::DescribeUserScramCredentials(
            describe_user_scram_credentials::handle(&ctx.state.shared, r),
        ),
        RequestKind::CreateAcls(r) => {
            ResponseKind::CreateAcls(create_acls::handle(&ctx.state.shared, access, r).await)
        }
        RequestKind::DescribeAcls(r) => {
            ResponseKind::DescribeAcls(describe_acls::handle(&ctx.state.shared, access, r))
        }
        RequestKind::DeleteAcls(r) => {
            ResponseKind::DeleteAcls(delete_acls::handle(&ctx.state.shared, access, r).await)
        }
        RequestKind::DescribeClientQuotas(r) => {
            ResponseKind::DescribeClientQuotas(describe_client_quotas::handle(&ctx.state.shared, access, r))
        }
        RequestKind::AlterClientQuotas(r) => {
            ResponseKind::AlterClientQuotas(alter_client_quotas::handle(&ctx.state.shared, access, r).await)
        }
        _ => return None,
    })
}

/// Counts a request bound for one group's coordinator toward the connection's placement, as a
/// request naming that group's `__consumer_offsets` partition: a client's coordinator
/// connection (librdkafka keeps one apart) then moves to the coordinator's shard, and its
/// commits, pipelined or not, no longer wait for a round trip between shards each.
fn note_coordinator(ctx: &Rc<BrokerCtx>, placement: &Placement, request: &RequestKind) {
    let group_id = match request {
        RequestKind::OffsetCommit(r) => &r.group_id,
        RequestKind::TxnOffsetCommit(r) => &r.group_id,
        RequestKind::OffsetFetch(r) => &r.group_id,
        RequestKind::Heartbeat(r) => &r.group_id,
        RequestKind::ConsumerGroupHeartbeat(r) => &r.group_id,
        RequestKind::JoinGroup(r) => &r.group_id,
        RequestKind::SyncGroup(r) => &r.group_id,
        RequestKind::LeaveGroup(r) => &r.group_id,
        _ => return,
    };
    if group_id.is_empty() {
        return; // OffsetFetch v8+ names its groups in a list; one may name several
    }
    let (_, partition) = crate::group::coordinator_of(ctx, group_id);
    let offsets_partition = crate::broker::TopicPartition {
        topic: crate::group::OFFSETS_TOPIC.into(),
        partition,
    };
    placement.note([&offsets_partition]);
}

fn is_group_api(api_key: ApiKey) -> bool {
    matches!(
        api_key,
        ApiKey::FindCoordinator
            | ApiKey::JoinGroup
            | ApiKey::SyncGroup
            | ApiKey::Heartbeat
            | ApiKey::LeaveGroup
            | ApiKey::OffsetCommit
            | ApiKey::TxnOffsetCommit
            | ApiKey::OffsetFetch
            | ApiKey::ListGroups
            | ApiKey::DescribeGroups
            | ApiKey::DeleteGroups
            | ApiKey::OffsetDelete
            | ApiKey::ConsumerGroupHeartbeat
            | ApiKey::ConsumerGroupDescribe
    )
}

/// The consumer-group APIs (FindCoordinator, JoinGroup, ..., OffsetDelete).
async fn handle_group_api(
    ctx: &Rc<BrokerCtx>,
    (listener, access): (ListenerId, &Access),
    request: RequestKind,
    context: &RequestContext<'_>,
) -> Result<Outcome, RequestError> {
    let (api_key, version, correlation_id) = (context.api_key, context.version, context.correlation_id);
    let throttle = context.throttle;
    let mut response = match request {
        RequestKind::FindCoordinator(mut r) => {
            let denied = acl_checks::take_denied_coordinator_keys(access, &mut r);
            let mut response = find_coordinator::handle(ctx, r, version, listener).await;
            response.coordinators.extend(denied);
            ResponseKind::FindCoordinator(response)
        }
        RequestKind::JoinGroup(r) => {
            let client_id = context.quota.client_id.as_deref().unwrap_or_default().to_string();
            let answer = join_group::handle(ctx, r, version, client_id).await;
            return respond_in_turn(
                (api_key, version, correlation_id),
                throttle,
                answer.map(ResponseKind::JoinGroup),
            );
        }
        RequestKind::SyncGroup(r) => {
            let answer = sync_group::handle(ctx, r, version)
                .await
                .map(ResponseKind::SyncGroup);
            return respond_in_turn((api_key, version, correlation_id), throttle, answer);
        }
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(heartbeat::handle(ctx, r).await),
        RequestKind::LeaveGroup(r) => ResponseKind::LeaveGroup(leave_group::handle(ctx, r, version).await),
        RequestKind::OffsetCommit(r) => {
            let answer = offset_commit::handle(ctx, access, r)
                .await
                .map(ResponseKind::OffsetCommit);
            return respond_in_turn((api_key, version, correlation_id), throttle, answer);
        }
        RequestKind::TxnOffsetCommit(r) => {
            let answer = txn_offset_commit::handle(ctx, access, r)
                .await
                .map(ResponseKind::TxnOffsetCommit);
            return respond_in_turn((api_key, version, correlation_id), throttle, answer);
        }
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(offset_fetch::handle(ctx, access, r, version).await)
        }
        RequestKind::ListGroups(r) => {
            ResponseKind::ListGroups(list_groups::handle(ctx, access, r, version).await)
        }
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(describe_groups::handle(ctx, access, r, version).await)
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(delete_groups::handle(ctx, access, r).await)
        }
        RequestKind::OffsetDelete(r) => {
            ResponseKind::OffsetDelete(offset_delete::handle(ctx, access, r).await)
        }
        request @ (RequestKind::ConsumerGroupHeartbeat(_) | RequestKind::ConsumerGroupDescribe(_)) => {
            return consumer_group_api(ctx, access, request, context).await;
        }
        _ => return Err(RequestError::UnsupportedApi { api: api_key }),
    };
    quota_checks::set_throttle(&mut response, throttle);
    respond(api_key, version, correlation_id, &response)
}

/// The consumer group APIs of KIP-848's protocol.
async fn consumer_group_api(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: RequestKind,
    context: &RequestContext<'_>,
) -> Result<Outcome, RequestError> {
    let (api_key, version, correlation_id) = (context.api_key, context.version, context.correlation_id);
    let answer = match request {
        RequestKind::ConsumerGroupHeartbeat(r) => {
            let client_id = context.quota.client_id.as_deref().unwrap_or_default().to_string();
            let client = (client_id, format!("/{}", access.host()));
            let answer = consumer_group_heartbeat::handle(ctx, r, version, client).await;
            answer.map(ResponseKind::ConsumerGroupHeartbeat)
        }
        RequestKind::ConsumerGroupDescribe(r) => Reply::Now(ResponseKind::ConsumerGroupDescribe(
            consumer_group_describe::handle(ctx, access, r).await,
        )),
        _ => return Err(RequestError::UnsupportedApi { api: api_key }),
    };
    respond_in_turn((api_key, version, correlation_id), context.throttle, answer)
}

/// The answer of a request that may be answered late (`crate::reply`): written when ready,
/// in request order.
fn respond_in_turn(
    (api_key, version, correlation_id): (ApiKey, i16, i32),
    throttle: std::time::Duration,
    answer: Reply<ResponseKind>,
) -> Result<Outcome, RequestError> {
    match answer {
        Reply::Now(mut response) => {
            quota_checks::set_throttle(&mut response, throttle);
            respond(api_key, version, correlation_id, &response)
        }
        Reply::Later(response) => Ok(Outcome::Deferred(Box::pin(async move {
            let mut response = response.await;
            quota_checks::set_throttle(&mut response, throttle);
            encode(api_key, version, correlation_id, &response).map(|f| Some(vec![Chunk::Memory(f)]))
        }))),
    }
}

fn respond(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    response: &ResponseKind,
) -> Result<Outcome, RequestError> {
    encode(api_key, version, correlation_id, response).map(Outcome::Respond)
}

fn encode(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    response: &ResponseKind,
) -> Result<Bytes, RequestError> {
    codec::encode_response(api_key, version, correlation_id, response).map_err(RequestError::Encode)
}

/// Node ids as Kafka's responses carry them (replica and ISR lists).
pub(crate) fn broker_ids(nodes: &[laminar_model::NodeId]) -> Vec<kafka_protocol::messages::BrokerId> {
    nodes
        .iter()
        .map(|node| kafka_protocol::messages::BrokerId(node.get()))
        .collect()
}
