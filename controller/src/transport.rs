//! How the controller transport's connections are secured: the node's owner decides (TLS,
//! SASL, nothing), so this crate knows frames and Raft, not certificates or passwords. Every
//! connection the node opens goes through [`TransportSecurity::connect`] and every one it
//! accepts through [`TransportSecurity::accept`] before a frame of Raft crosses it.
//!
//! Runs on the controller runtime (tokio thread).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// How long an accepted connection has to finish its handshakes (TLS, SASL) before it is
/// closed, so that a peer that connects and says nothing does not hold a connection slot.
pub const ACCEPT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A secured byte stream: TCP, TLS over TCP, ...
pub trait PeerStream: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> PeerStream for T {}

/// A connection once its handshakes are done.
pub type SecuredStream = Box<dyn PeerStream>;
/// The handshakes in progress.
pub type Securing = Pin<Box<dyn Future<Output = io::Result<SecuredStream>> + Send>>;

/// Secures the connections of one node's transport. Shared by its tasks.
pub trait TransportSecurity: Send + Sync {
    /// Secures a connection this node opened to the peer at `addr` (`host:port`, as the voter
    /// list names it); an error abandons the connection.
    fn connect(&self, stream: TcpStream, addr: &str) -> Securing;
    /// Secures a connection a peer opened; an error closes it.
    fn accept(&self, stream: TcpStream, peer: SocketAddr) -> Securing;
    /// For the startup log: `PLAINTEXT`, `SASL_SSL (PLAIN)`, ...
    fn describe(&self) -> String;
}

/// No TLS, no SASL: the stream as it is.
#[derive(Debug, Default, Clone, Copy)]
pub struct Plaintext;

impl TransportSecurity for Plaintext {
    fn connect(&self, stream: TcpStream, _addr: &str) -> Securing {
        Box::pin(async move { Ok(Box::new(stream) as SecuredStream) })
    }

    fn accept(&self, stream: TcpStream, _peer: SocketAddr) -> Securing {
        Box::pin(async move { Ok(Box::new(stream) as SecuredStream) })
    }

    fn describe(&self) -> String {
        "PLAINTEXT".to_string()
    }
}
