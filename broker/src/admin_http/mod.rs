//! The admin HTTP server on `laminar.http.listen`: `GET /metrics` (Prometheus text),
//! `GET /v1/status` (JSON), `GET /v1/status/ready` (200 when every shard serves, else 503), the
//! JSON admin API under `/v1/` ([`api`], documented in `docs/admin-api.md`) and the console at
//! `/ui` ([`console`]: static pages embedded in the binary that use that API).
//!
//! It runs on shard 0 only, as one glommio task. A scrape asks every shard for its counters
//! (`submit_to`), so no shard shares anything with another on the data path; nothing runs while
//! nobody asks (the console's history samples only while it is being looked at, see
//! [`history`]). The server is bounded: at most [`CONNECTIONS_MAX`] connections at once, 8 KiB
//! of request head, 64 KiB of body, a read and write timeout, one request per connection.

pub mod api;
pub mod console;
pub mod history;
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
use history::History;
use request::{parse_head, HeadError, RequestHead, HEAD_BYTES_MAX};
use routes::{answer, route, BrokerFacts, Response};

/// What the admin server keeps between requests (on shard 0 only; not Send).
pub struct AdminState {
    pub started: Instant,
    /// The console's charts: samples of the `/metrics` figures (bounded, see [`History`]).
    pub history: std::cell::RefCell<History>,
}

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
    Ok(laminar_sys::glommio::tcp_listener(exclusive))
}

/// Serves admin requests until shutdown.
pub async fn serve(ctx: Rc<BrokerCtx>, listener: TcpListener, started: Instant) {
    let shutdown = ctx.state.shared.shutdown.clone();
    let admin = Rc::new(AdminState {
        started,
        history: Default::default(),
    });
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
        let (ctx, open, admin) = (ctx.clone(), open.clone(), admin.clone());
        glommio::spawn_local(async move {
            if let Err(e) = serve_one(&ctx, stream, &admin).await {
                tracing::debug!(error = %e, "admin HTTP connection failed");
            }
            open.set(open.get() - 1);
        })
        .detach();
    }
}

async fn serve_one(
    ctx: &Rc<BrokerCtx>,
    mut stream: TcpStream,
    admin: &Rc<AdminState>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let (head, mut received) = read_head(&mut stream).await?;
    let unread_input = matches!(
        head,
        Err(HeadError::TooLarge | HeadError::BodyTooLarge | HeadError::Chunked)
    );
    let response = match head {
        Err(HeadError::TooLarge) => Response::error(431, "request head too large"),
        Err(HeadError::BodyTooLarge) => Response::error(413, "request body too large"),
        Err(HeadError::Chunked) => Response::error(411, "send the body with a Content-Length"),
        Err(HeadError::Version(v)) => Response::error(505, &format!("unsupported protocol {v}")),
        Err(HeadError::Malformed) => Response::error(400, "malformed request"),
        Ok(None) => return Ok(()),
        Ok(Some(head)) => {
            read_body(&mut stream, &head, &mut received).await?;
            respond(ctx, &head, &received[head.head_len..], admin).await
        }
    };
    stream.write_all(&response.encode()).await?;
    if unread_input {
        // The client may still be sending what we refused: closing with unread input would
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

/// The answer to one well-formed request: a console page, a fixed route, or the JSON API.
async fn respond(ctx: &Rc<BrokerCtx>, head: &RequestHead, body: &[u8], admin: &Rc<AdminState>) -> Response {
    if let Some(page) = console::page(head) {
        return page;
    }
    match route(head) {
        Ok(route) => {
            let snapshot = metrics::gather(ctx, routes::detail(head)).await;
            answer(route, &snapshot, &facts(ctx, admin.started))
        }
        // Not one of the fixed routes: the JSON API answers (or says 404 itself).
        Err(refusal) if refusal.status == 404 => api::handle(ctx, head, body, admin).await,
        Err(refusal) => refusal,
    }
}

/// Reads the rest of the body the head announced (at most `BODY_BYTES_MAX`, checked by the
/// head's parser) into `received`, which holds the head and what came after it; bytes beyond
/// the announced length are dropped.
async fn read_body(
    stream: &mut TcpStream,
    head: &RequestHead,
    received: &mut Vec<u8>,
) -> std::io::Result<()> {
    let wanted = head.head_len + head.content_length;
    if received.len() >= wanted {
        received.truncate(wanted);
        return Ok(());
    }
    let mut filled = received.len();
    received.resize(wanted, 0);
    while filled < wanted {
        let read = stream.read(&mut received[filled..]).await?;
        if read == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the client closed before sending its whole body",
            ));
        }
        filled += read;
    }
    Ok(())
}

/// Refused input read after a 431 before the connection closes anyway.
const DRAIN_BYTES_MAX: usize = 1 << 20;

/// Reads until the head is complete, malformed or too large; `Ok(None)` when the client closed
/// the connection first. Also returns every byte read (the head and the start of a body).
async fn read_head(
    stream: &mut TcpStream,
) -> std::io::Result<(Result<Option<RequestHead>, HeadError>, Vec<u8>)> {
    let mut buf = vec![0u8; HEAD_BYTES_MAX];
    let mut filled = 0;
    loop {
        let read = stream.read(&mut buf[filled..]).await?;
        if read == 0 {
            return Ok((Ok(None), Vec::new()));
        }
        filled += read;
        let parsed = match parse_head(&buf[..filled]) {
            Ok(None) if filled < buf.len() => continue,
            Ok(None) => Err(HeadError::TooLarge),
            other => other,
        };
        buf.truncate(filled);
        return Ok((parsed, buf));
    }
}

fn facts(ctx: &Rc<BrokerCtx>, started: Instant) -> BrokerFacts {
    let shared = &ctx.state.shared;
    BrokerFacts {
        version: env!("CARGO_PKG_VERSION"),
        node_id: shared.node_id().get(),
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
