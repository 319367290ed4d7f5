//! One client connection: read a frame, handle it, write the answer, in order.
//!
//! Requests on one connection are handled one after another, as Kafka does, so appends land in
//! request order (the idempotent producer relies on it). A request whose answer waits (an
//! acks=all produce or an OffsetCommit for its fdatasync, a long-poll fetch for data, a
//! JoinGroup or SyncGroup for its rebalance) does its ordered part in turn and is answered later
//! (`crate::reply`) while the next requests are handled, so pipelined requests share one group
//! commit and no answer waits for a later request. Answers always leave in request order
//! (clients rely on it); at most [`ANSWERS_IN_FLIGHT_MAX`] are owed at once. A malformed frame
//! or request closes this connection only, logged once.

use std::cell::Cell;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::{select, Either};
use futures::stream::FuturesOrdered;
use futures::{AsyncWriteExt, FutureExt, StreamExt};
use glommio::net::TcpStream;
use laminar_engine::shard::ShardId;
use laminar_engine::task_wakers::once_per_wake;
use laminar_sys::sockets::{recv_into, Wait};

use crate::authentication::{self, Authentication};
use crate::broker::BrokerCtx;
use crate::connection_slots::ConnectionSlot;
use crate::handlers::{self, Answer, AnswerOutput, ConnectionState, Outcome};
use crate::kafka_listener::ListenerId;
use crate::request_memory::{BudgetTimedOut, Lease};
use crate::tls::{TlsReceive, TlsSession};
use laminar_protocol::chunk::Chunk;
use laminar_protocol::frame::{FrameError, FrameReader, FrameStatus};

/// Answers a connection may owe at once (requests read ahead while acks=all waits for a sync);
/// past it the connection stops reading: back-pressure, not growth.
const ANSWERS_IN_FLIGHT_MAX: usize = 16;

#[derive(Debug, thiserror::Error)]
enum CloseReason {
    #[error("client closed the connection")]
    ClientClosed,
    #[error("client closed the connection mid-frame")]
    Truncated,
    #[error("idle for {0:?}")]
    Idle(Duration),
    #[error("a request frame did not arrive whole within {0:?}")]
    FrameTimedOut(Duration),
    #[error(transparent)]
    RequestMemory(#[from] BudgetTimedOut),
    #[error("shutting down")]
    Shutdown,
    #[error("authentication failed")]
    AuthenticationFailed,
    #[error("bad frame: {0}")]
    BadFrame(#[from] FrameError),
    #[error("bad request: {0}")]
    BadRequest(#[from] handlers::RequestError),
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
}

/// Serves one client connection until it closes; `slot` is its share of descriptors, given
/// back when it ends.
pub async fn serve(ctx: Rc<BrokerCtx>, mut stream: TcpStream, slot: ConnectionSlot, listener: ListenerId) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
    }
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let authentication = Authentication::for_listener(&ctx.state.shared.config, listener, peer);
    let tls = match start_tls(&ctx, &mut stream, &authentication).await {
        Ok(tls) => tls,
        Err(error) => {
            ctx.state.metrics.count_authentication(false);
            tracing::warn!(peer = %authentication.peer, %error, "TLS handshake failed");
            let _ = stream.close().await;
            return;
        }
    };
    let mut carried = Carried::nothing(authentication);
    carried.tls = tls;
    serve_here(ctx, stream, slot, carried).await;
}

/// On a TLS listener: the handshake, and on an SSL listener the principal its client
/// certificate names (a SASL_SSL listener's comes from SASL).
async fn start_tls(
    ctx: &Rc<BrokerCtx>,
    stream: &mut TcpStream,
    authentication: &Authentication,
) -> std::io::Result<Option<TlsSession>> {
    let listener = authentication.listener;
    let Some(server) = ctx.state.shared.listener_tls(listener) else {
        return Ok(None);
    };
    let config = &ctx.state.shared.config;
    let mut tls = Box::new(rustls::ServerConnection::new(server.config()).map_err(std::io::Error::other)?);
    let within = Duration::from_millis(config.laminar_request_receive_timeout_ms.max(1) as u64);
    crate::tls::handshake(stream, &mut tls, within).await?;
    if !authentication::protocol_of(config, listener).uses_sasl() {
        let principal = server
            .principal_of(tls.peer_certificates())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e))?;
        authentication.authenticated_by_certificate(principal);
    }
    Ok(Some(tls))
}

/// Serves a connection on this shard, starting with what it `carried` from another, until it
/// closes or moves on.
async fn serve_here(ctx: Rc<BrokerCtx>, mut stream: TcpStream, slot: ConnectionSlot, carried: Carried) {
    let peer = carried.authentication.peer.clone();
    ctx.state
        .connections_active
        .set(ctx.state.connections_active.get() + 1);
    let ended = serve_requests(&ctx, &mut stream, carried).await;
    ctx.state
        .connections_active
        .set(ctx.state.connections_active.get() - 1);
    let reason = match ended {
        Ended::Moving(shard, carried) => match move_to(&ctx, stream, slot, shard, carried).await {
            Ok(()) => return,
            Err(reason) => reason,
        },
        Ended::Closed(reason) => {
            let _ = stream.close().await;
            reason
        }
    };
    match reason {
        CloseReason::ClientClosed | CloseReason::Shutdown => tracing::debug!(peer, "connection closed"),
        CloseReason::AuthenticationFailed => {
            tracing::debug!(peer, "closing connection: authentication failed")
        }
        reason => tracing::warn!(peer, %reason, "closing connection"),
    }
}

/// What a connection moving to another shard takes there besides its socket and slot: the
/// bytes received and not yet handled, the request memory that covers them, and how long the
/// frame in progress has waited for its bytes.
struct Carried {
    received: Bytes,
    /// `None` for a new connection: it starts with the connection's own allowance.
    lease: Option<Lease>,
    frame_waited: Duration,
    authentication: Authentication,
    tls: Option<TlsSession>,
}

impl Carried {
    /// What a new connection starts with: no bytes, and its listener's authentication.
    fn nothing(authentication: Authentication) -> Carried {
        Carried {
            received: Bytes::new(),
            lease: None,
            frame_waited: Duration::ZERO,
            authentication,
            tls: None,
        }
    }
}

/// How serving a connection on this shard ended.
enum Ended {
    /// The connection closes, for this reason.
    Closed(CloseReason),
    /// Every answer owed is written, and the connection's requests go to `shard`'s partitions:
    /// it moves there.
    Moving(ShardId, Carried),
}

/// Moves the connection to `shard` (`handlers::placement`): a descriptor of its own for the
/// socket, the slot and the bytes not yet handled go there, and the stream here is dropped.
async fn move_to(
    ctx: &Rc<BrokerCtx>,
    stream: TcpStream,
    slot: ConnectionSlot,
    shard: ShardId,
    carried: Carried,
) -> Result<(), CloseReason> {
    let socket = laminar_sys::files::duplicate(stream.as_raw_fd())?;
    drop(stream);
    ctx.state.metrics.count_connection_moved();
    let moved = ctx
        .submit_to(shard, move |there| async move {
            let stream = laminar_sys::glommio::tcp_stream(socket);
            glommio::spawn_local(serve_here(there, stream, slot, carried)).detach();
        })
        .await;
    // A shard that is gone drops the socket and slot with the work: the connection closes.
    moved.map_err(|_| CloseReason::Shutdown)
}

/// What a connection has received and not yet handed to a handler, with the memory it holds.
/// Owned by the connection's task.
struct Inbound {
    reader: FrameReader,
    /// Covers the reader's buffer beyond the connection's allowance (`request_memory`).
    lease: Lease,
    /// How long the frame in progress has waited for the client's bytes: only time spent in
    /// [`read_more`] counts, so a connection that stops reading while it owes answers (or while
    /// a handler runs) never charges that time to the client's frame.
    frame_waited: Cell<Duration>,
    /// Whether the connection owes answers while it reads: then it is not idle, however long
    /// the client stays quiet (it waits for a rebalance, say).
    owes_answers: bool,
    /// On a TLS listener, the session: frames are read from it, answers written through it.
    tls: Option<TlsSession>,
    idle_timeout: Duration,
    receive_timeout: Duration,
}

impl Inbound {
    fn new(ctx: &Rc<BrokerCtx>, carried: Carried) -> (Inbound, Authentication) {
        let Carried {
            received,
            lease,
            frame_waited,
            authentication,
            tls,
        } = carried;
        let config = &ctx.state.shared.config;
        let mut reader = FrameReader::new(config.socket_request_max_bytes as usize);
        reader.extend(&received);
        let lease = lease.unwrap_or_else(|| Lease::new(ctx.state.shared.request_memory.clone()));
        let inbound = Inbound {
            reader,
            lease,
            frame_waited: Cell::new(frame_waited),
            owes_answers: false,
            tls,
            idle_timeout: Duration::from_millis(config.connections_max_idle_ms.max(1) as u64),
            receive_timeout: Duration::from_millis(config.laminar_request_receive_timeout_ms.max(1) as u64),
        };
        (inbound, authentication)
    }

    /// Everything this connection holds of its requests, for the shard it moves to.
    fn carry(mut self, authentication: Authentication) -> Carried {
        Carried {
            received: self.reader.take_buffered(),
            lease: Some(self.lease),
            frame_waited: self.frame_waited.get(),
            authentication,
            tls: self.tls,
        }
    }

    /// The next whole frame, with the part of the lease that covers it (held until its answer
    /// is done, so frames waiting in a handler count against the budget too).
    fn next_frame(&mut self) -> Result<Option<(Bytes, Lease)>, FrameError> {
        let FrameStatus::Ready(frame) = self.reader.next_frame()? else {
            return Ok(None);
        };
        let frame_lease = self.lease.split_off(frame.len());
        // Whatever of the next frame is buffered arrived in the reads that completed this one.
        self.frame_waited.set(Duration::ZERO);
        Ok(Some((frame, frame_lease)))
    }
}

async fn serve_requests(ctx: &Rc<BrokerCtx>, stream: &mut TcpStream, carried: Carried) -> Ended {
    let closed = Ended::Closed;
    let (mut inbound, authentication) = Inbound::new(ctx, carried);
    let mut answers: FuturesOrdered<Answer> = FuturesOrdered::new();
    let connection = ConnectionState::new(ctx.id(), ctx.shard_count(), authentication);
    loop {
        let moving = connection.placement.move_to();
        // Every whole request already received is handled before any answer is written, so
        // answers that are ready together leave together (`write_answers`). A connection about
        // to move handles none: they go with it.
        // A failed authentication's answer is the connection's last (KIP-152).
        let failed = || connection.authentication.has_failed();
        let muted = || connection.muted_until().is_some();
        while moving.is_none() && !failed() && !muted() && answers.len() < ANSWERS_IN_FLIGHT_MAX {
            match inbound.next_frame() {
                // Boxed: the handlers' futures are large, and a connection's own future would
                // otherwise carry room for them while it idles.
                Ok(Some((frame, frame_lease))) => {
                    answers.push_back(Box::pin(handle(ctx, &connection, frame, frame_lease)).await)
                }
                Ok(None) => break,
                Err(e) => return closed(e.into()),
            }
        }
        assert!(answers.len() <= ANSWERS_IN_FLIGHT_MAX, "answers owed are bounded");
        if let Err(reason) =
            write_answers(None, &mut answers, (stream, inbound.tls.as_deref_mut()), ctx).await
        {
            return closed(reason);
        }
        if failed() && answers.is_empty() {
            return closed(CloseReason::AuthenticationFailed);
        }
        let waited = match moving {
            Some(shard) if answers.is_empty() => {
                return Ended::Moving(shard, inbound.carry(connection.authentication))
            }
            // A client past its quota: its answers still go out, its requests wait.
            _ if moving.is_none() && muted() => {
                wait_unmuted(&connection, &mut answers, (stream, &mut inbound), ctx).await
            }
            _ if answers.is_empty() && inbound.reader.frame_ready() => Ok(()),
            _ if answers.is_empty() => {
                if ctx.state.shared.shutdown.is_triggered() {
                    return closed(CloseReason::Shutdown);
                }
                inbound.owes_answers = false;
                read_more(ctx, stream, &mut inbound).await
            }
            _ if moving.is_some() || failed() || answers.len() >= ANSWERS_IN_FLIGHT_MAX => {
                let oldest = answers.next().await;
                write_answers(oldest, &mut answers, (stream, inbound.tls.as_deref_mut()), ctx).await
            }
            _ => {
                // A deferred answer is pending: read the next request meanwhile.
                inbound.owes_answers = true;
                let raced = {
                    let next_answer = answers.next();
                    let read = std::pin::pin!(read_more(ctx, stream, &mut inbound));
                    match select(next_answer, read).await {
                        Either::Left((answer, _)) => Err(answer),
                        Either::Right((read, _)) => Ok(read),
                    }
                };
                match raced {
                    Ok(read) => read,
                    // The abandoned read committed nothing to the reader.
                    Err(answer) => {
                        write_answers(answer, &mut answers, (stream, inbound.tls.as_deref_mut()), ctx).await
                    }
                }
            }
        };
        if let Err(reason) = waited {
            return closed(reason);
        }
    }
}

/// Waits until the connection's mute ends, writing the answers that become ready meanwhile.
async fn wait_unmuted(
    connection: &ConnectionState,
    answers: &mut FuturesOrdered<Answer>,
    (stream, inbound): (&mut TcpStream, &mut Inbound),
    ctx: &Rc<BrokerCtx>,
) -> Result<(), CloseReason> {
    let until = connection.muted_until().unwrap_or_else(Instant::now);
    let unmuted = glommio::timer::sleep(until.saturating_duration_since(Instant::now()));
    let answered = match answers.is_empty() {
        true => {
            unmuted.await;
            None
        }
        false => match select(answers.next(), std::pin::pin!(unmuted)).await {
            Either::Left((answer, _)) => Some(answer),
            Either::Right(_) => None,
        },
    };
    match answered {
        Some(answer) => write_answers(answer, answers, (stream, inbound.tls.as_deref_mut()), ctx).await,
        None => Ok(()),
    }
}

/// Handles one request; its answer is ready now or later (acks=all), and is timed when ready.
/// `frame_lease` is given back when the answer is.
async fn handle(
    ctx: &Rc<BrokerCtx>,
    connection: &ConnectionState,
    frame: Bytes,
    frame_lease: Lease,
) -> Answer {
    let (api_key, started) = (crate::metrics::api_key_of(&frame), std::time::Instant::now());
    let outcome = handlers::handle(ctx, connection, frame).await;
    let ctx = ctx.clone();
    let timed = move |answer: AnswerOutput| {
        drop(frame_lease);
        ctx.state
            .metrics
            .observe_request(api_key, started.elapsed(), answer.is_ok());
        answer
    };
    match outcome {
        Ok(Outcome::Respond(frame)) => {
            Box::pin(futures::future::ready(timed(Ok(Some(vec![Chunk::Memory(
                frame,
            )])))))
        }
        Ok(Outcome::RespondChunks(chunks)) => Box::pin(futures::future::ready(timed(Ok(Some(chunks))))),
        Ok(Outcome::NoResponse) => Box::pin(futures::future::ready(timed(Ok(None)))),
        Ok(Outcome::Deferred(pending)) => Box::pin(async move { timed(pending.await) }),
        Err(e) => Box::pin(futures::future::ready(timed(Err(e)))),
    }
}

/// Writes `first` (an answer already taken from `answers`, if any) and every answer ready behind
/// it, oldest first, in one send as far as the socket takes them, stopping at the first that is
/// not ready. A client that pipelines requests is woken once for the answers that are ready
/// together: on loopback the sender pays for the receiver's TCP processing and wake-up inside its
/// own send, which was the largest cost of a stream of small produce requests (docs/decisions/0025, small
/// requests and connections that move).
async fn write_answers(
    first: Option<AnswerOutput>,
    answers: &mut FuturesOrdered<Answer>,
    (stream, tls): (&mut TcpStream, Option<&mut rustls::ServerConnection>),
    ctx: &Rc<BrokerCtx>,
) -> Result<(), CloseReason> {
    let mut chunks = Vec::new();
    let mut closing = None;
    let ready = std::iter::from_fn(|| answers.next().now_or_never().flatten());
    for answer in first.into_iter().chain(ready) {
        match answer {
            Ok(Some(answer_chunks)) => chunks.extend(answer_chunks),
            Ok(None) => {}
            Err(e) => {
                closing = Some(e);
                break;
            }
        }
    }
    if !chunks.is_empty() {
        let paths = match tls {
            Some(tls) => crate::tls::write_frame(stream, tls, &chunks).await?,
            None => crate::send::write_frame(stream, &chunks).await?,
        };
        ctx.state.metrics.count_fetch_paths(paths);
    }
    closing.map_or(Ok(()), |e| Err(e.into()))
}

/// Reads at least one byte more, or tells why the connection ends. The buffer grows only as
/// far as the request memory budget allows; inside a frame, the wait for the rest (and for
/// budget) ends once the frame has waited its receive timeout in all (`Inbound::frame_waited`).
async fn read_more(
    ctx: &Rc<BrokerCtx>,
    stream: &mut TcpStream,
    inbound: &mut Inbound,
) -> Result<(), CloseReason> {
    let between_requests = inbound.reader.buffered_len() == 0;
    let deadline = if between_requests {
        Instant::now() + inbound.idle_timeout
    } else {
        Instant::now() + inbound.receive_timeout.saturating_sub(inbound.frame_waited.get())
    };
    // Counts this wait against the frame in progress however it ends, abandoned included.
    let _waiting = (!between_requests).then(|| FrameWait::start(&inbound.frame_waited));
    let needed = inbound.reader.buffered_len() + inbound.reader.receive_bytes_next();
    inbound.lease.shrink_to(needed);
    inbound.lease.cover(needed, deadline).await?;
    let socket = stream.as_raw_fd();
    let read = loop {
        let received = match inbound.tls.as_deref_mut() {
            Some(tls) => inbound.reader.receive_from(&mut TlsReceive { socket, tls }),
            None => inbound.reader.receive_from(&mut SocketNow(socket)),
        };
        match received {
            Ok(read) => break read,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => return Err(e.into()),
            Err(_) => {}
        }
        // Nothing waiting: sleep until bytes (or the end of the stream) arrive. Peeking one byte
        // takes nothing, so a wait abandoned for an answer or a timeout loses no input. An idle
        // connection waits without a receive buffer (thousands of them cost little).
        inbound.reader.release_if_empty();
        let mut probe = [0u8; 1];
        // Gated: glommio keeps a waker clone for every poll of a pending peek, and answers
        // completing meanwhile re-poll it (`laminar_engine::task_wakers`).
        let readable = std::pin::pin!(once_per_wake(stream.peek(&mut probe)));
        let stop = std::pin::pin!(deadline_or_shutdown(ctx, inbound, between_requests, deadline));
        match select(readable, stop).await {
            Either::Left((readable, _)) => readable.map_err(std::io::Error::from)?,
            Either::Right((reason, _)) => return Err(reason),
        };
    };
    if read == 0 {
        return Err(if between_requests {
            CloseReason::ClientClosed
        } else {
            CloseReason::Truncated
        });
    }
    if between_requests {
        inbound.frame_waited.set(Duration::ZERO);
    }
    Ok(())
}

/// Adds the time from its start to its drop to a frame's wait for its bytes.
struct FrameWait<'a> {
    waited: &'a Cell<Duration>,
    since: Instant,
}

impl<'a> FrameWait<'a> {
    fn start(waited: &'a Cell<Duration>) -> FrameWait<'a> {
        FrameWait {
            waited,
            since: Instant::now(),
        }
    }
}

impl Drop for FrameWait<'_> {
    fn drop(&mut self) {
        self.waited.set(self.waited.get() + self.since.elapsed());
    }
}

/// glommio's socket, received from without waiting; [`read_more`] awaits readiness itself.
struct SocketNow(std::os::fd::RawFd);

impl laminar_protocol::frame::Receive for SocketNow {
    fn receive(&mut self, buffer: &mut bytes::BytesMut, max: usize) -> std::io::Result<usize> {
        recv_into(self.0, buffer, max, Wait::No)
    }
}

/// Between requests a connection waits for the client, the idle timeout (unless it owes
/// answers) or shutdown; inside a partially received frame it waits for the rest until the
/// frame's receive deadline.
async fn deadline_or_shutdown(
    ctx: &Rc<BrokerCtx>,
    inbound: &Inbound,
    between_requests: bool,
    deadline: Instant,
) -> CloseReason {
    let timeout = std::pin::pin!(glommio::timer::sleep(
        deadline.saturating_duration_since(Instant::now())
    ));
    if !between_requests {
        timeout.await;
        return CloseReason::FrameTimedOut(inbound.receive_timeout);
    }
    let stop = std::pin::pin!(ctx.state.shared.shutdown.wait());
    if inbound.owes_answers {
        stop.await;
        return CloseReason::Shutdown;
    }
    match select(timeout, stop).await {
        Either::Left(_) => CloseReason::Idle(inbound.idle_timeout),
        Either::Right(_) => CloseReason::Shutdown,
    }
}
