//! One client connection: read a frame, handle it, write the answer, in order.
//!
//! Kafka serves one request per connection at a time (its socket server mutes a channel until
//! the response is out), and clients rely on responses arriving in request order, so requests
//! on one connection are handled one after another; concurrency comes from many connections and
//! many partitions. A malformed frame or request closes this connection only, logged once.

use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;
use futures::future::{select, Either};
use futures::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;

use crate::broker::BrokerCtx;
use crate::frame::{split_frame, FrameError};
use crate::handlers::{self, Outcome};

/// Kafka's `connections.max.idle.ms` default: idle or half-open connections are closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
const READ_CHUNK: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
enum CloseReason {
    #[error("client closed the connection")]
    ClientClosed,
    #[error("client closed the connection mid-frame")]
    Truncated,
    #[error("idle for {0:?}")]
    Idle(Duration),
    #[error("shutting down")]
    Shutdown,
    #[error("bad frame: {0}")]
    BadFrame(#[from] FrameError),
    #[error("bad request: {0}")]
    BadRequest(#[from] handlers::RequestError),
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
}

pub async fn serve(ctx: Rc<BrokerCtx>, mut stream: TcpStream) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(peer, error = %e, "cannot set TCP_NODELAY");
    }
    ctx.state
        .connections_active
        .set(ctx.state.connections_active.get() + 1);
    let reason = serve_requests(&ctx, &mut stream).await;
    ctx.state
        .connections_active
        .set(ctx.state.connections_active.get() - 1);
    match reason {
        CloseReason::ClientClosed | CloseReason::Shutdown => tracing::debug!(peer, "connection closed"),
        reason => tracing::warn!(peer, %reason, "closing connection"),
    }
    let _ = stream.close().await;
}

async fn serve_requests(ctx: &Rc<BrokerCtx>, stream: &mut TcpStream) -> CloseReason {
    let size_max = ctx.state.shared.config.socket_request_max_bytes as usize;
    let mut read_buf = BytesMut::with_capacity(READ_CHUNK);
    loop {
        let frame = match split_frame(&mut read_buf, size_max) {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                if ctx.state.shared.shutdown.is_triggered() {
                    return CloseReason::Shutdown;
                }
                if let Err(reason) = read_more(ctx, stream, &mut read_buf).await {
                    return reason;
                }
                continue;
            }
            Err(e) => return e.into(),
        };
        let (api_key, started) = (crate::metrics::api_key_of(&frame), std::time::Instant::now());
        let handled = handlers::handle(ctx, frame).await;
        let metrics = &ctx.state.metrics;
        metrics.observe_request(api_key, started.elapsed(), handled.is_ok());
        match handled {
            Ok(Outcome::Respond(response)) => {
                if let Err(e) = stream.write_all(&response).await {
                    return e.into();
                }
            }
            Ok(Outcome::NoResponse) => {}
            Err(e) => return e.into(),
        }
    }
}

/// Reads at least one byte more, or tells why the connection ends.
async fn read_more(
    ctx: &Rc<BrokerCtx>,
    stream: &mut TcpStream,
    buf: &mut BytesMut,
) -> Result<(), CloseReason> {
    let start = buf.len();
    buf.resize(start + READ_CHUNK.max(buf.capacity() - start), 0);
    let read = {
        let read = std::pin::pin!(stream.read(&mut buf[start..]));
        let stop = std::pin::pin!(idle_or_shutdown(ctx, start == 0));
        match select(read, stop).await {
            Either::Left((read, _)) => Ok(read),
            Either::Right((reason, _)) => Err(reason),
        }
    };
    let read = read.inspect_err(|_| buf.truncate(start))?;
    match read {
        Ok(0) => {
            buf.truncate(start);
            Err(if start == 0 {
                CloseReason::ClientClosed
            } else {
                CloseReason::Truncated
            })
        }
        Ok(n) => {
            buf.truncate(start + n);
            Ok(())
        }
        Err(e) => {
            buf.truncate(start);
            Err(e.into())
        }
    }
}

/// Between requests a connection waits for the client, the idle timeout or shutdown; inside a
/// partially received frame it waits for the rest, bounded by the same timeout.
async fn idle_or_shutdown(ctx: &Rc<BrokerCtx>, between_requests: bool) -> CloseReason {
    let idle = std::pin::pin!(glommio::timer::sleep(IDLE_TIMEOUT));
    if !between_requests {
        idle.await;
        return CloseReason::Idle(IDLE_TIMEOUT);
    }
    let stop = std::pin::pin!(ctx.state.shared.shutdown.wait());
    match select(idle, stop).await {
        Either::Left(_) => CloseReason::Idle(IDLE_TIMEOUT),
        Either::Right(_) => CloseReason::Shutdown,
    }
}
