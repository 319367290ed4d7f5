//! A TLS client for tests that talk to a broker's SSL or SASL_SSL listener with raw Kafka
//! frames (rustls over a blocking socket), trusting one CA and presenting a client certificate
//! when asked to.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use kafka_protocol::protocol::Request;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::wire::{decode_response, request_frame};

/// A TLS stream to `addr` as `localhost`, trusting the CA in `ca_pem`, with the client
/// certificate and key of `client` if given; returned once the handshake is done.
pub fn connect(
    addr: SocketAddr,
    ca_pem: &Path,
    client: Option<(&Path, &Path)>,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_file_iter(ca_pem).context("reading the CA")? {
        roots.add(certificate?)?;
    }
    let provider = laminar_security::tls::crypto_provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
            builder.with_client_auth_cert(chain, PrivateKeyDer::from_pem_file(key)?)?
        }
        None => builder.with_no_client_auth(),
    };
    let name = ServerName::try_from("localhost")?;
    let connection = rustls::ClientConnection::new(Arc::new(config), name)?;
    let socket = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    socket.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut stream = rustls::StreamOwned::new(connection, socket);
    while stream.conn.is_handshaking() {
        stream
            .conn
            .complete_io(&mut stream.sock)
            .context("the TLS handshake")?;
    }
    Ok(stream)
}

/// One TLS connection. Owned by one test thread.
pub struct TlsConnection {
    stream: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    next_correlation_id: i32,
}

impl TlsConnection {
    /// Connects to `addr` as `localhost`, trusting the CA in `ca_pem`, with the client
    /// certificate and key of `client` if given; returns once the handshake is done.
    pub fn connect(addr: SocketAddr, ca_pem: &Path, client: Option<(&Path, &Path)>) -> Result<TlsConnection> {
        Ok(TlsConnection {
            stream: connect(addr, ca_pem, client)?,
            next_correlation_id: 1,
        })
    }

    /// Sends a request and decodes its response.
    pub fn request<R: Request>(&mut self, request: &R, version: i16) -> Result<R::Response> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        self.stream
            .write_all(&request_frame(request, version, correlation_id)?)?;
        self.stream.flush()?;
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .context("reading a frame size")?;
        let size = usize::try_from(i32::from_be_bytes(size)).context("a negative frame size")?;
        anyhow::ensure!(size <= 64 << 20, "response frame size {size}");
        let mut payload = vec![0u8; size];
        self.stream.read_exact(&mut payload)?;
        decode_response::<R>(Bytes::from(payload), correlation_id, version)
    }
}
