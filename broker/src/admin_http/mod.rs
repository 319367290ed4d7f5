//! The admin HTTP server on `laminar.http.listen`: `GET /metrics` (Prometheus text),
//! `GET /v1/status` (JSON) and `GET /v1/status/ready` (200 when every shard serves, else 503).
//!
//! It runs on shard 0 only, as one glommio task. A scrape asks every shard for its counters
//! (`submit_to`), so no shard shares anything with another on the data path. The server is
//! bounded: at most [`CONNECTIONS_MAX`] connections at once, 8 KiB of request head, a read and
//! write timeout, one request per connection.

pub mod request;
pub mod routes;

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::future::{select, Either};
use futures::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};

use crate::broker::BrokerCtx;
use crate::metrics;
use request::{parse_head, HeadError, HEAD_BYTES_MAX};
use routes::{answer, route, BrokerFacts, Response};

/// Admin connections served at once; more are closed on accept.
pub const CONNECTIONS_MAX: usize = 64;
/// Longest a client may take to send its request head, or to take the response.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds the admin listener (on shard 0, before the broker reports ready).
///
/// Not through glommio's `TcpListener::bind`, which sets SO_REUSEPORT (right for the Kafka
/// listener every shard binds): here a second process on the same port must fail to start
/// instead of silently sharing it.
pub fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    let exclusive = std::net::TcpListener::bind(addr)
        .map_err(|e| format!("laminar.http.listen: cannot listen on {addr}: {e}"))?;
    Ok(crate::sys::glommio_listener(exclusive))
}

/// Serves admin requests until shutdown.
pub async fn serve(ctx: Rc<BrokerCtx>, listener: TcpListener, started: Instant) {
    let shutdown = ctx.state.shared.shutdown.clone();
    let open = Rc::new(Cell::new(0usize));
    loop {
        let accepted = {
            let accept = std::pin::pin!(listener.accept());
            let stop = std::pin::pin!(shutdown.wait());
            match select(accept, stop).await {
                Either::Left((accepted, _)) => accepted,
                Either::Right(_) => return,
            }
        };
        let stream = match accepted {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "admin HTTP accept failed");
                glommio::timer::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if open.get() >= CONNECTIONS_MAX {
            tracing::debug!("admin HTTP: {CONNECTIONS_MAX} connections open, closing a new one");
            drop(stream);
            continue;
        }
        open.set(open.get() + 1);
        let (ctx, open) = (ctx.clone(), open.clone());
        glommio::spawn_local(async move {
            if let Err(e) = serve_one(&ctx, stream, started).await {
                tracing::debug!(error = %e, "admin HTTP connection failed");
            }
            open.set(open.get() - 1);
        })
        .detach();
    }
}

async fn serve_one(ctx: &Rc<BrokerCtx>, mut stream: TcpStream, started: Instant) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let head = read_head(&mut stream).await?;
    let unread_input = matches!(head, Err(HeadError::TooLarge));
    let response = match head {
        Err(HeadError::TooLarge) => Response::error(431, "request head too large"),
        Err(HeadError::Version(v)) => Response::error(505, &format!("unsupported protocol {v}")),
        Err(HeadError::Malformed) => Response::error(400, "malformed request"),
        Ok(None) => return Ok(()),
        Ok(Some(head)) => match route(&head) {
            Err(refusal) => refusal,
            Ok(route) => {
                let snapshot = metrics::gather(ctx, routes::detail(&head)).await;
                answer(route, &snapshot, &facts(ctx, started))
            }
        },
    };
    stream.write_all(&response.encode()).await?;
    if unread_input {
        // The client may still be sending the head we refused: closing with unread input would
        // reset the connection and could destroy the answer before the client reads it. Say we
        // are done, then read what is left (bounded) until the client closes.
        stream.shutdown(std::net::Shutdown::Write).await?;
        let mut sink = vec![0u8; 16 * 1024];
        let mut drained = 0;
        while drained < DRAIN_BYTES_MAX {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(read) => drained += read,
            }
        }
    }
    stream.close().await
}

/// Refused input read after a 431 before the connection closes anyway.
const DRAIN_BYTES_MAX: usize = 1 << 20;

/// Reads until the head is complete, malformed or too large; `Ok(None)` when the client closed
/// the connection first.
async fn read_head(
    stream: &mut TcpStream,
) -> std::io::Result<Result<Option<request::RequestHead>, HeadError>> {
    let mut buf = vec![0u8; HEAD_BYTES_MAX];
    let mut filled = 0;
    loop {
        let read = stream.read(&mut buf[filled..]).await?;
        if read == 0 {
            return Ok(Ok(None));
        }
        filled += read;
        match parse_head(&buf[..filled]) {
            Ok(None) if filled < buf.len() => continue,
            Ok(None) => return Ok(Err(HeadError::TooLarge)),
            other => return Ok(other),
        }
    }
}

fn facts(ctx: &Rc<BrokerCtx>, started: Instant) -> BrokerFacts {
    let shared = &ctx.state.shared;
    BrokerFacts {
        version: env!("CARGO_PKG_VERSION"),
        node_id: shared.node_id(),
        cluster_id: shared.cluster_id.clone(),
        kafka_listener: shared
            .config
            .listeners
            .first()
            .map(|l| format!("{}:{}", l.host, l.port))
            .unwrap_or_default(),
        uptime_seconds: started.elapsed().as_secs_f64(),
        shutting_down: shared.shutdown.is_triggered(),
        write_behind: shared.config.write_behind.clone(),
        write_behind_unavailable: shared.write_behind_unavailable.clone(),
    }
}
