//! How the live target is reached: plain TCP, or TLS (a SASL_SSL or SSL listener) with, when a
//! login is given, a SASL PLAIN login made before the first fuzzed frame, so that frames reach
//! the broker both before authentication (where it must refuse all but ApiVersions and SASL)
//! and after it (where every API is served).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::{Encodable, StrBytes};

use crate::seeds;

/// The listener's security as the fuzzer connects to it.
#[derive(Debug, Clone, Default)]
pub struct Security {
    /// TLS, trusting the CAs of this PEM file.
    pub tls_ca: Option<PathBuf>,
    /// A SASL PLAIN login (user, password) made on every connection before any frame.
    pub plain_login: Option<(String, String)>,
}

/// A connection to the target.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    fn socket(&self) -> &TcpStream {
        match self {
            Stream::Plain(socket) => socket,
            Stream::Tls(tls) => tls.get_ref(),
        }
    }

    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.socket().set_read_timeout(timeout)
    }

    /// Shuts the write side (for TLS, of the socket under it: the session ends uncleanly,
    /// as a client that vanishes mid-record would end it).
    pub fn shutdown_write(&mut self) -> io::Result<()> {
        if let Stream::Tls(tls) = self {
            tls.flush()?;
        }
        self.socket().shutdown(Shutdown::Write)
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(socket) => socket.read(buf),
            Stream::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(socket) => socket.write(buf),
            Stream::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(socket) => socket.flush(),
            Stream::Tls(tls) => tls.flush(),
        }
    }
}

/// The TLS configuration `security` asks for, read once per run.
pub fn tls_config(security: &Security) -> io::Result<Option<Arc<rustls::ClientConfig>>> {
    security
        .tls_ca
        .as_deref()
        .map(laminar_client::Security::tls_trusting)
        .transpose()
}

/// Connects within `bound`, with TLS if `tls` is given and the login of `security` if any.
pub fn connect(
    addr: SocketAddr,
    bound: Duration,
    (security, tls): (&Security, Option<&Arc<rustls::ClientConfig>>),
) -> io::Result<Stream> {
    let socket = TcpStream::connect_timeout(&addr, bound)?;
    socket.set_nodelay(true)?;
    socket.set_write_timeout(Some(bound))?;
    socket.set_read_timeout(Some(bound))?;
    let mut stream = match tls {
        None => Stream::Plain(socket),
        Some(config) => {
            let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
            let session = rustls::ClientConnection::new(config.clone(), name).map_err(io::Error::other)?;
            let mut tls = rustls::StreamOwned::new(session, socket);
            while tls.conn.is_handshaking() {
                tls.conn.complete_io(&mut tls.sock)?;
            }
            Stream::Tls(Box::new(tls))
        }
    };
    if let Some((user, password)) = &security.plain_login {
        log_in(&mut stream, user, password)?;
    }
    Ok(stream)
}

/// SaslHandshake v1 for PLAIN, then SaslAuthenticate v1 with the token; both must succeed.
fn log_in(stream: &mut Stream, user: &str, password: &str) -> io::Result<()> {
    let handshake = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    exchange_ok(stream, ApiKey::SaslHandshake, 1, &handshake)?;
    let token = Bytes::from(format!("\0{user}\0{password}").into_bytes());
    let authenticate = SaslAuthenticateRequest::default().with_auth_bytes(token);
    exchange_ok(stream, ApiKey::SaslAuthenticate, 1, &authenticate)
}

/// Sends one request and reads its answer; its error code (the first field of both answers
/// here, after a v0 header: neither version is a flexible one) must be 0.
fn exchange_ok<R: Encodable>(stream: &mut Stream, api: ApiKey, version: i16, request: &R) -> io::Result<()> {
    let invalid = |e: &dyn std::fmt::Display| io::Error::new(io::ErrorKind::InvalidData, e.to_string());
    let header = seeds::encode_header(api, version, 1).map_err(|e| invalid(&e))?;
    let mut body = BytesMut::new();
    request.encode(&mut body, version).map_err(|e| invalid(&e))?;
    let mut frame = BytesMut::with_capacity(4 + header.len() + body.len());
    frame.put_i32((header.len() + body.len()) as i32);
    frame.put_slice(&header);
    frame.put_slice(&body);
    stream.write_all(&frame)?;
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix)?;
    let len = usize::try_from(i32::from_be_bytes(prefix))
        .unwrap_or(0)
        .min(1 << 20);
    let mut answer = vec![0u8; len];
    stream.read_exact(&mut answer)?;
    // Correlation id (4 bytes), then the error code: both answers' header is v0.
    match answer.get(4..6) {
        Some([0, 0]) => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{api:?} refused"),
        )),
    }
}
