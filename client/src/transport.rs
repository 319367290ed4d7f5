//! The byte stream under a connection: TCP, or TLS over it (rustls), and the settings that say
//! which, with the SASL login to make once connected (Kafka's `security.protocol`,
//! `sasl.mechanism`, `sasl.username`, `sasl.password`, `ssl.ca.location`).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use bytes::BytesMut;
use laminar_protocol::frame::Receive;
use laminar_security::Mechanism;

/// How a client secures its connections: TLS (with the CAs it trusts) and/or a SASL login.
/// Both `None`: PLAINTEXT.
#[derive(Clone, Default)]
pub struct Security {
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub sasl: Option<SaslLogin>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl)
            .finish()
    }
}

/// A SASL login. Its `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslLogin {
    pub mechanism: Mechanism,
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SaslLogin({} as {})", self.mechanism, self.user)
    }
}

impl Security {
    /// TLS trusting the CA certificates of the PEM file `ca_pem` (TLS 1.2 and 1.3, ring).
    pub fn tls_trusting(ca_pem: &std::path::Path) -> Result<Arc<rustls::ClientConfig>, io::Error> {
        use rustls::pki_types::pem::PemObject;
        let invalid = |e: &dyn std::fmt::Display| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("{}: {e}", ca_pem.display()))
        };
        let mut roots = rustls::RootCertStore::empty();
        let certificates =
            rustls::pki_types::CertificateDer::pem_file_iter(ca_pem).map_err(|e| invalid(&e))?;
        for certificate in certificates {
            roots
                .add(certificate.map_err(|e| invalid(&e))?)
                .map_err(|e| invalid(&e))?;
        }
        let config = rustls::ClientConfig::builder_with_provider(laminar_security::tls::crypto_provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(&e))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Arc::new(config))
    }
}

/// Plaintext taken from the TLS session per read: one record's worth (16 KiB) and some.
const TLS_PLAINTEXT_READ_BYTES: usize = 32 * 1024;

/// A connection's stream. Owned by the connection.
#[derive(Debug)]
pub enum Transport {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Transport {
    /// TLS over `socket` to the server named `host` (a DNS name or an IP address), the
    /// handshake done.
    pub fn tls(socket: TcpStream, config: Arc<rustls::ClientConfig>, host: &str) -> io::Result<Transport> {
        let name = rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("server name {host}: {e}")))?;
        let connection = rustls::ClientConnection::new(config, name).map_err(io::Error::other)?;
        let mut stream = rustls::StreamOwned::new(connection, socket);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(Transport::Tls(Box::new(stream)))
    }

    /// The TCP socket underneath.
    pub fn socket(&self) -> &TcpStream {
        match self {
            Transport::Plain(socket) => socket,
            Transport::Tls(stream) => &stream.sock,
        }
    }

    /// Whether decrypted bytes wait in the TLS session (read before the socket).
    pub fn has_buffered_plaintext(&mut self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(stream) => stream
                .conn
                .process_new_packets()
                .is_ok_and(|state| state.plaintext_bytes_to_read() > 0),
        }
    }
}

impl Read for Transport {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(socket) => socket.read(buffer),
            Transport::Tls(stream) => stream.read(buffer),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(socket) => socket.write(buffer),
            Transport::Tls(stream) => stream.write(buffer),
        }
    }

    fn write_vectored(&mut self, slices: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Transport::Plain(socket) => socket.write_vectored(slices),
            Transport::Tls(stream) => stream.write_vectored(slices),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(socket) => socket.flush(),
            Transport::Tls(stream) => stream.flush(),
        }
    }
}

impl Receive for Transport {
    fn receive(&mut self, buffer: &mut BytesMut, max: usize) -> io::Result<usize> {
        match self {
            Transport::Plain(socket) => socket.receive(buffer, max),
            Transport::Tls(stream) => {
                // A record's plaintext at most per call: zeroing room for a whole frame on every
                // call would cost more than the decryption.
                let max = max.min(TLS_PLAINTEXT_READ_BYTES);
                let held = buffer.len();
                buffer.resize(held + max, 0);
                let read = stream.read(&mut buffer[held..]);
                buffer.truncate(held + *read.as_ref().unwrap_or(&0));
                read
            }
        }
    }
}
