//! The controller's TCP transport: Raft's RPCs (AppendEntries, Vote, InstallSnapshot in
//! chunks) and forwarded controller requests, as request/answer frames on one connection.
//!
//! Frame: `len: u32 little-endian | bincode body`. `len` is checked against
//! [`FRAME_LEN_MAX`] before the body's buffer is allocated; bodies decode with the same bound
//! (`disk_format::decode_body`). One request is in flight per connection at a time: openraft
//! drives each peer's client sequentially, and the server answers before reading the next
//! frame, so a connection buffers at most one frame each way.
//!
//! Every connection is secured by the node's `TransportSecurity` (`transport.rs`: TLS, SASL,
//! or nothing, as the controller listener says) before its first frame; the frame functions are
//! generic over `AsyncRead`/`AsyncWrite`, so the protocol above does not know which.
//!
//! Everything here runs on the controller runtime (tokio thread).

use std::io;
use std::time::Duration;

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use std::sync::Arc;

use crate::transport::{SecuredStream, TransportSecurity};

use crate::api::{ControllerRequest, ControllerResponse};
use crate::disk_format::decode_body;
use crate::TypeConfig;

/// The largest frame either side accepts: an AppendEntries of `MAX_PAYLOAD_ENTRIES` entries
/// of at most `disk_format::ENTRY_PAYLOAD_LEN_MAX` each (32 MiB), or a snapshot chunk, with
/// room to spare. The body's buffer grows with the bytes that arrive, so a peer that
/// announces a large frame and sends little costs little.
pub const FRAME_LEN_MAX: usize = 40 << 20;
/// Entries per AppendEntries (openraft's `max_payload_entries`).
pub const MAX_PAYLOAD_ENTRIES: u64 = 16;
/// What openraft puts in one InstallSnapshot chunk; well under [`FRAME_LEN_MAX`].
pub const SNAPSHOT_CHUNK_LEN: u64 = 1 << 20;
/// How long a connect may take before the peer counts as unreachable for this RPC.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

#[derive(Debug, Serialize, Deserialize)]
pub enum RpcRequest {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<u64>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    Controller(ControllerRequest),
}

#[derive(Debug, Serialize, Deserialize)]
pub enum RpcResponse {
    AppendEntries(Result<AppendEntriesResponse<u64>, RaftError<u64>>),
    Vote(Result<VoteResponse<u64>, RaftError<u64>>),
    InstallSnapshot(Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>>),
    Controller(ControllerResponse),
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub async fn read_frame<S, T>(stream: &mut S) -> io::Result<Option<T>>
where
    S: AsyncRead + Unpin,
    T: serde::de::DeserializeOwned,
{
    read_frame_within(stream, FRAME_LEN_MAX).await
}

/// As [`read_frame`], for frames of at most `len_max` bytes (at most [`FRAME_LEN_MAX`]): a
/// handshake's frames are small, and a peer not yet authenticated must not make this node
/// buffer more.
pub async fn read_frame_within<S, T>(stream: &mut S, len_max: usize) -> io::Result<Option<T>>
where
    S: AsyncRead + Unpin,
    T: serde::de::DeserializeOwned,
{
    let mut len = [0u8; 4];
    match stream.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > len_max.min(FRAME_LEN_MAX) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes over the bound"),
        ));
    }
    let mut body = Vec::with_capacity(len.min(64 << 10));
    let read = (&mut *stream).take(len as u64).read_to_end(&mut body).await?;
    if read != len {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "frame cut short"));
    }
    decode_body(&body)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

pub async fn write_frame<S, T>(stream: &mut S, message: &T) -> io::Result<()>
where
    S: AsyncWrite + Unpin,
    T: Serialize,
{
    stream.write_all(&encode_frame(message)?).await?;
    stream.flush().await
}

/// One frame of the controllers' transport: the bincode body's length (u32, little-endian),
/// then the body.
pub fn encode_frame<T: Serialize>(message: &T) -> io::Result<Vec<u8>> {
    let body = bincode::serialize(message).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    if body.len() > FRAME_LEN_MAX {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "frame over the bound"));
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// A client connection to one peer, opened on first use and again after any error.
pub struct PeerClient {
    addr: String,
    security: Arc<dyn TransportSecurity>,
    stream: Option<SecuredStream>,
    /// Whether the last call failed because no connection could be made.
    connect_failed: bool,
}

impl PeerClient {
    pub fn new(addr: String, security: Arc<dyn TransportSecurity>) -> Self {
        PeerClient {
            addr,
            security,
            stream: None,
            connect_failed: false,
        }
    }

    /// Sends `request` and waits for its answer, all within `timeout`.
    pub async fn call(&mut self, request: &RpcRequest, timeout: Duration) -> io::Result<RpcResponse> {
        let result = tokio::time::timeout(timeout, self.exchange(request)).await;
        let result = result.unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "rpc timed out")));
        if result.is_err() {
            // The stream may hold half a frame: never reuse it.
            self.stream = None;
        }
        result
    }

    /// Whether a connection is open (a call then uses it rather than connecting).
    pub fn is_connected(&self) -> bool {
        self.stream.is_some()
    }

    /// Whether the last call failed because no connection could be made to the peer.
    pub fn connect_failed(&self) -> bool {
        self.connect_failed
    }

    async fn exchange(&mut self, request: &RpcRequest) -> io::Result<RpcResponse> {
        self.connect_failed = false;
        if self.stream.is_none() {
            self.connect_failed = true;
            let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&self.addr))
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
            stream.set_nodelay(true)?;
            self.connect_failed = false;
            // The handshakes count against the call's timeout (the caller's).
            self.stream = Some(self.security.connect(stream, &self.addr).await?);
        }
        let stream = self
            .stream
            .as_mut()
            .ok_or_else(|| io::Error::other("no stream"))?;
        write_frame(stream, request).await?;
        read_frame(stream)
            .await?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed"))
    }
}

/// Creates one [`RaftPeer`] per target for openraft, each securing its connections alike.
pub struct NetworkFactory {
    pub security: Arc<dyn TransportSecurity>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = RaftPeer;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> RaftPeer {
        RaftPeer {
            target,
            client: PeerClient::new(node.addr.clone(), self.security.clone()),
        }
    }
}

pub struct RaftPeer {
    target: u64,
    client: PeerClient,
}

type RpcResult<T, E> = Result<T, RPCError<u64, BasicNode, RaftError<u64, E>>>;

fn unexpected(e: impl std::error::Error + 'static) -> NetworkError {
    NetworkError::new(&e)
}

/// Why an RPC got no answer, as openraft acts on it.
enum SendError {
    /// No connection could be made: openraft's replication backs off (its default, 500 ms a
    /// try) instead of retrying at once, which against a stopped voter was thousands of
    /// refused connects, and of error lines, a second.
    Unreachable(io::Error),
    /// The connection failed during the exchange: retried at once, on a new connection.
    Network(io::Error),
}

impl<E: std::error::Error> From<SendError> for RPCError<u64, BasicNode, RaftError<u64, E>> {
    fn from(error: SendError) -> Self {
        match error {
            SendError::Unreachable(e) => RPCError::Unreachable(Unreachable::new(&e)),
            SendError::Network(e) => RPCError::Network(unexpected(e)),
        }
    }
}

impl RaftPeer {
    /// Sends `request` on the open connection, or on a new one. A failure on an open
    /// connection (the peer restarted since, say) is tried once more on a new one first, so
    /// that only a peer that cannot be connected to is taken for unreachable.
    async fn send(&mut self, request: RpcRequest, option: &RPCOption) -> Result<RpcResponse, SendError> {
        if self.client.is_connected() {
            match self.client.call(&request, option.hard_ttl()).await {
                Ok(answer) => return Ok(answer),
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(SendError::Network(e)),
                Err(_) => {} // the connection is dropped: connect again below
            }
        }
        match self.client.call(&request, option.hard_ttl()).await {
            Ok(answer) => Ok(answer),
            Err(e) if self.client.connect_failed() => Err(SendError::Unreachable(e)),
            Err(e) => Err(SendError::Network(e)),
        }
    }

    // openraft's own error type, as its trait requires.
    #[allow(clippy::result_large_err)]
    fn remote<T, E: std::error::Error>(&self, answer: Result<T, RaftError<u64, E>>) -> RpcResult<T, E> {
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

fn wrong_answer() -> NetworkError {
    unexpected(io::Error::new(
        io::ErrorKind::InvalidData,
        "answer of the wrong kind",
    ))
}

impl RaftNetwork<TypeConfig> for RaftPeer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<u64>, openraft::error::Infallible> {
        match self.send(RpcRequest::AppendEntries(rpc), &option).await? {
            RpcResponse::AppendEntries(answer) => self.remote(answer),
            _ => Err(wrong_answer().into()),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<u64>, InstallSnapshotError> {
        match self.send(RpcRequest::InstallSnapshot(rpc), &option).await? {
            RpcResponse::InstallSnapshot(answer) => self.remote(answer),
            _ => Err(wrong_answer().into()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<u64>, openraft::error::Infallible> {
        match self.send(RpcRequest::Vote(rpc), &option).await? {
            RpcResponse::Vote(answer) => self.remote(answer),
            _ => Err(wrong_answer().into()),
        }
    }
}
