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
//!
//! With `laminar.http.ssl.keystore.location` it serves HTTPS only; with tokens or certificate
//! principals configured, requests must say who they are ([`access`]). Every request that may
//! change state is logged with who made it (target `laminar::audit`).

pub mod access;
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
use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use laminar_security::Principal;

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

/// The bound admin listener, and its HTTPS config if it has one.
pub struct AdminListener {
    pub listener: TcpListener,
    tls: Option<futures_rustls::TlsAcceptor>,
}

/// Binds the admin listener (on shard 0, before the broker reports ready) and reads its
/// certificates, so that a bad file stops the start.
///
/// Not through glommio's `TcpListener::bind`, which sets SO_REUSEPORT (right for the Kafka
/// listener every shard binds): here a second process on the same port must fail to start
/// instead of silently sharing it.
pub fn bind(config: &crate::config::BrokerConfig) -> Result<AdminListener, String> {
    let addr: SocketAddr = config.laminar_http_listen;
    let tls = match &config.admin_http.tls {
        Some(settings) => {
            let server = settings
                .server_config()
                .map_err(|e| format!("laminar.http.ssl.*: {e}"))?;
            Some(futures_rustls::TlsAcceptor::from(server))
        }
        None => None,
    };
    let exclusive = std::net::TcpListener::bind(addr)
        .map_err(|e| format!("laminar.http.listen: cannot listen on {addr}: {e}"))?;
    Ok(AdminListener {
        listener: laminar_sys::glommio::tcp_listener(exclusive),
        tls,
    })
}

/// Serves admin requests until shutdown.
pub async fn serve(ctx: Rc<BrokerCtx>, admin_listener: AdminListener, started: Instant) {
    let AdminListener { listener, tls } = admin_listener;
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
        let (ctx, open, admin, tls) = (ctx.clone(), open.clone(), admin.clone(), tls.clone());
        glommio::spawn_local(async move {
            if let Err(e) = serve_connection(&ctx, stream, &admin, tls).await {
                tracing::debug!(error = %e, "admin HTTP connection failed");
            }
            open.set(open.get() - 1);
        })
        .detach();
    }
}

/// A connection's stream, plain or HTTPS: what the server needs besides reading and writing.
trait AdminStream: AsyncRead + AsyncWrite + Unpin {
    /// Says the answer is complete while the client may still send (a half close).
    async fn finish_writing(&mut self) -> std::io::Result<()>;
}

impl AdminStream for TcpStream {
    async fn finish_writing(&mut self) -> std::io::Result<()> {
        Ok(self.shutdown(std::net::Shutdown::Write).await?)
    }
}

impl AdminStream for futures_rustls::server::TlsStream<TcpStream> {
    async fn finish_writing(&mut self) -> std::io::Result<()> {
        self.get_mut().1.send_close_notify();
        self.flush().await?;
        Ok(self.get_mut().0.shutdown(std::net::Shutdown::Write).await?)
    }
}

/// Serves one connection: the TLS handshake first on an HTTPS endpoint (bounded by the same
/// timeouts), then its request.
async fn serve_connection(
    ctx: &Rc<BrokerCtx>,
    stream: TcpStream,
    admin: &Rc<AdminState>,
    tls: Option<futures_rustls::TlsAcceptor>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let Some(acceptor) = tls else {
        return serve_one(ctx, stream, admin, None).await;
    };
    let stream = acceptor.accept(stream).await?;
    let certificates = stream.get_ref().1.peer_certificates();
    let rules = laminar_security::PrincipalMappingRules::default();
    let principal = certificates.and_then(|c| laminar_security::principal_of(Some(c), &rules).ok());
    serve_one(ctx, stream, admin, principal).await
}

async fn serve_one(
    ctx: &Rc<BrokerCtx>,
    mut stream: impl AdminStream,
    admin: &Rc<AdminState>,
    certificate: Option<Principal>,
) -> std::io::Result<()> {
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
            let security = &ctx.state.shared.config.admin_http;
            match access::authorize(security, &head, certificate.as_ref()) {
                Ok(caller) => {
                    let response = respond(ctx, &head, &received[head.head_len..], admin).await;
                    audit(&caller, &head, &response);
                    response
                }
                Err(refused) => refused,
            }
        }
    };
    stream.write_all(&response.encode()).await?;
    if unread_input {
        // The client may still be sending what we refused: closing with unread input would
        // reset the connection and could destroy the answer before the client reads it. Say we
        // are done, then read what is left (bounded) until the client closes.
        stream.finish_writing().await?;
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

/// Logs a request that may change state with who made it and how it ended.
fn audit(caller: &access::Caller, head: &RequestHead, response: &Response) {
    if head.method == "GET" || head.method == "HEAD" {
        return;
    }
    tracing::info!(
        target: "laminar::audit",
        caller = %caller.name,
        role = caller.role.name(),
        method = %head.method,
        path = %head.path,
        status = response.status,
        "admin request"
    );
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
    stream: &mut impl AdminStream,
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
    stream: &mut impl AdminStream,
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
