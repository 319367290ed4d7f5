//! The controller listener (the broker's `CONTROLLER://` listener): accepts peers' Raft RPCs
//! and forwarded controller requests. Runs on the controller runtime (tokio thread).
//!
//! Bounds: at most [`CONNECTIONS_MAX`] connections at once (the accept loop waits for a slot);
//! per connection one frame in, one answer out (see `network.rs`).

use std::sync::Arc;

use openraft::Raft;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::api::ControllerResponse;
use crate::command::Command;
use crate::network::{read_frame, write_frame, RpcRequest, RpcResponse};
use crate::transport::{TransportSecurity, ACCEPT_HANDSHAKE_TIMEOUT};
use crate::TypeConfig;

/// Concurrent connections: the other voters (a handful) and brokers forwarding requests.
pub const CONNECTIONS_MAX: usize = 256;

/// What a connection needs to answer requests. Cheap to clone.
#[derive(Clone)]
pub struct RpcHandler {
    pub raft: Raft<TypeConfig>,
    pub commands: mpsc::Sender<Command>,
}

pub async fn serve(listener: TcpListener, handler: RpcHandler, security: Arc<dyn TransportSecurity>) {
    let slots = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "controller listener: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let security = security.clone();
        tokio::spawn(async move {
            let secured = tokio::time::timeout(ACCEPT_HANDSHAKE_TIMEOUT, security.accept(stream, peer)).await;
            let served = match secured {
                Ok(Ok(stream)) => serve_connection(stream, handler).await,
                Ok(Err(e)) => {
                    note_refused(peer, &e);
                    Ok(())
                }
                Err(_) => Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "handshake not done in time",
                )),
            };
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "controller connection closed");
            }
            drop(permit);
        });
    }
}

/// A peer whose handshake failed (no certificate, a wrong password, TLS garbage): logged at
/// most once a minute, since a misconfigured voter retries many times a second.
fn note_refused(peer: std::net::SocketAddr, error: &std::io::Error) {
    static LOGGED_AT: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
    let mut logged_at = LOGGED_AT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if logged_at.is_some_and(|at| at.elapsed() < REFUSAL_LOG_INTERVAL) {
        tracing::debug!(%peer, %error, "controller listener: connection refused");
        return;
    }
    *logged_at = Some(std::time::Instant::now());
    tracing::warn!(%peer, %error, "controller listener: connection refused (logged at most once a minute)");
}

const REFUSAL_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// Answers requests on one stream until it closes. Generic so that a TLS or SASL stream can
/// be served the same way as plain TCP.
pub async fn serve_connection<S>(mut stream: S, handler: RpcHandler) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    while let Some(request) = read_frame::<_, RpcRequest>(&mut stream).await? {
        let response = handler.answer(request).await;
        write_frame(&mut stream, &response).await?;
    }
    Ok(())
}

impl RpcHandler {
    async fn answer(&self, request: RpcRequest) -> RpcResponse {
        match request {
            RpcRequest::AppendEntries(rpc) => RpcResponse::AppendEntries(self.raft.append_entries(rpc).await),
            RpcRequest::Vote(rpc) => RpcResponse::Vote(self.raft.vote(rpc).await),
            RpcRequest::InstallSnapshot(rpc) => {
                RpcResponse::InstallSnapshot(self.raft.install_snapshot(rpc).await)
            }
            RpcRequest::Controller(request) => {
                let (reply, answer) = oneshot::channel();
                let command = Command {
                    request,
                    forwarded: true,
                    reply,
                };
                let response = match self.commands.send(command).await {
                    Ok(()) => answer.await.ok(),
                    Err(_) => None,
                };
                RpcResponse::Controller(response.unwrap_or(ControllerResponse::not_controller(None)))
            }
        }
    }
}
