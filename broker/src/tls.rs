//! TLS on a client connection, in user space (rustls): the handshake, the client's records
//! decrypted into the frame reader, and answers encrypted on their way out, file ranges
//! included. Those are read into memory first: sendfile cannot encrypt, and kernel TLS, which
//! could, is not in every kernel (docs/decisions/0033-tls-and-sasl.md has what this costs).
//!
//! A connection's `TlsSession` is owned by its task, and moves with it between shards.

use std::io::{self, Read, Write};
use std::os::fd::RawFd;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use futures::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use laminar_protocol::chunk::Chunk;
use laminar_sys::sockets::{recv_into, Wait};
use rustls::ServerConnection;

use crate::metrics::shard::FetchPaths;

/// A connection's TLS state. Boxed: rustls' connection is large and moves with the connection.
pub type TlsSession = Box<ServerConnection>;

/// Plaintext encrypted before its records are written out: bounds what encrypting one answer
/// holds in memory, whatever the answer's size.
const PLAINTEXT_PER_WRITE_BYTES: usize = 64 * 1024;
/// Ciphertext read from the socket at once: one TLS record at most (16 KiB and its overhead).
const CIPHERTEXT_READ_BYTES: usize = 16 * 1024 + 512;

/// Runs the server side of the handshake until it completes, fails, or `within` passes.
pub async fn handshake(
    stream: &mut TcpStream,
    tls: &mut ServerConnection,
    within: Duration,
) -> io::Result<()> {
    let deadline = Instant::now() + within;
    let work = async {
        let mut ciphertext = vec![0u8; CIPHERTEXT_READ_BYTES];
        while tls.is_handshaking() {
            flush(stream, tls).await?;
            if !tls.is_handshaking() {
                break;
            }
            let read = stream.read(&mut ciphertext).await?;
            if read == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "closed during the TLS handshake",
                ));
            }
            if let Err(e) = take_ciphertext(tls, &ciphertext[..read]) {
                flush(stream, tls).await?; // the alert that says why
                return Err(e);
            }
        }
        // TLS 1.3 sends its session tickets after the handshake.
        flush(stream, tls).await
    };
    let timeout = glommio::timer::sleep(deadline.saturating_duration_since(Instant::now()));
    match futures::future::select(std::pin::pin!(work), std::pin::pin!(timeout)).await {
        futures::future::Either::Left((done, _)) => done,
        futures::future::Either::Right(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("TLS handshake not done within {within:?}"),
        )),
    }
}

/// Feeds the client's bytes to rustls and processes them; a protocol error is InvalidData.
fn take_ciphertext(tls: &mut ServerConnection, mut ciphertext: &[u8]) -> io::Result<()> {
    while !ciphertext.is_empty() {
        tls.read_tls(&mut ciphertext)?;
        tls.process_new_packets()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    }
    Ok(())
}

/// Writes every TLS record rustls has ready.
async fn flush(stream: &mut TcpStream, tls: &mut ServerConnection) -> io::Result<()> {
    while tls.wants_write() {
        let mut records = Vec::new();
        tls.write_tls(&mut records)?;
        stream.write_all(&records).await?;
    }
    Ok(())
}

/// The frame reader's source on a TLS connection: plaintext rustls already decrypted, else the
/// socket's next bytes decrypted, never waiting (`WouldBlock` when nothing is there).
pub struct TlsReceive<'a> {
    pub socket: RawFd,
    pub tls: &'a mut ServerConnection,
}

impl laminar_protocol::frame::Receive for TlsReceive<'_> {
    fn receive(&mut self, buffer: &mut BytesMut, max: usize) -> io::Result<usize> {
        loop {
            match read_plaintext(self.tls, buffer, max) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            let mut ciphertext = BytesMut::with_capacity(CIPHERTEXT_READ_BYTES);
            if recv_into(self.socket, &mut ciphertext, CIPHERTEXT_READ_BYTES, Wait::No)? == 0 {
                return Ok(0);
            }
            // Records rustls owes the client in return (a KeyUpdate's) leave with the next
            // answer: nothing here waits for them.
            take_ciphertext(self.tls, &ciphertext)?;
        }
    }
}

/// Appends up to `max` decrypted bytes; `WouldBlock` when rustls holds none; `Ok(0)` once the
/// client closed the TLS session.
fn read_plaintext(tls: &mut ServerConnection, buffer: &mut BytesMut, max: usize) -> io::Result<usize> {
    // rustls hands out at most a record's plaintext at a time: zeroing room for a whole large
    // frame on every call would cost more than the decryption.
    let max = max.min(CIPHERTEXT_READ_BYTES);
    let held = buffer.len();
    buffer.resize(held + max, 0);
    let read = tls.reader().read(&mut buffer[held..]);
    buffer.truncate(held + *read.as_ref().unwrap_or(&0));
    read
}

/// Writes one answer over TLS: each chunk encrypted in order, file ranges read into memory
/// first, records written out every [`PLAINTEXT_PER_WRITE_BYTES`].
pub async fn write_frame(
    stream: &mut TcpStream,
    tls: &mut ServerConnection,
    chunks: &[Chunk],
) -> io::Result<FetchPaths> {
    let mut paths = FetchPaths::default();
    for chunk in chunks {
        match chunk {
            Chunk::Memory(bytes) => {
                for piece in bytes.chunks(PLAINTEXT_PER_WRITE_BYTES) {
                    tls.writer().write_all(piece)?;
                    flush(stream, tls).await?;
                }
            }
            Chunk::File(range) => {
                let mut piece = vec![0u8; PLAINTEXT_PER_WRITE_BYTES.min(range.len as usize)];
                let mut done = 0u64;
                while done < range.len {
                    let len = ((range.len - done) as usize).min(piece.len());
                    range
                        .file
                        .read_exact_at(&mut piece[..len], range.position + done)?;
                    tls.writer().write_all(&piece[..len])?;
                    flush(stream, tls).await?;
                    done += len as u64;
                }
                paths.copied += range.len;
            }
        }
    }
    Ok(paths)
}

/// A TLS listener's server side: rustls' config, swapped whole when the certificates are
/// reloaded (connections keep the config they started with), and how client certificates
/// name principals. Shared read-only by every shard; built at start.
pub struct ListenerTls {
    settings: laminar_security::tls::TlsServerSettings,
    config: arc_swap::ArcSwap<rustls::ServerConfig>,
}

impl ListenerTls {
    /// Reads the listener's key, certificates and trust store.
    pub fn new(settings: &laminar_security::tls::TlsServerSettings) -> Result<ListenerTls, TlsError> {
        Ok(ListenerTls {
            config: arc_swap::ArcSwap::new(settings.server_config()?),
            settings: settings.clone(),
        })
    }

    /// The config a new connection's handshake uses.
    pub fn config(&self) -> std::sync::Arc<rustls::ServerConfig> {
        self.config.load_full()
    }

    /// Reads the files again; on an error the listener keeps the config it had.
    pub fn reload(&self) -> Result<(), TlsError> {
        self.config.store(self.settings.server_config()?);
        Ok(())
    }

    /// The principal a client certificate (or its absence) names, by `ssl.principal.mapping.rules`.
    pub fn principal_of(
        &self,
        certificates: Option<&[rustls::pki_types::CertificateDer<'_>]>,
    ) -> Result<laminar_security::Principal, TlsError> {
        laminar_security::tls::principal_of(certificates, &self.settings.principal_mapping)
    }
}

pub use laminar_security::tls::TlsError;
