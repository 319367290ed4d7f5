//! One blocking, pipelined connection to a broker.
//!
//! Requests are written as soon as they are sent; responses come back in request order, so the
//! connection keeps a FIFO of requests in flight and checks each response's correlation id against
//! the oldest one. A produce with acks=0 gets no response and never enters the FIFO.

use std::collections::VecDeque;
use std::io::Write;
use std::marker::PhantomData;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use crate::error::ClientError;
use crate::transport::{Security, Transport};
use crate::versions::{client_versions, ApiVersionTable};
use laminar_protocol::frame::{FrameReader, ReadFrameError};

/// How a connection behaves.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Sent in every request header.
    pub client_id: String,
    /// Largest response frame accepted; larger is a protocol error, not an allocation.
    pub frame_bytes_max: usize,
    /// Limit on establishing the TCP connection.
    pub connect_timeout: Duration,
    /// Limit on any one socket read or write (`None`: wait forever). Must exceed the longest
    /// broker-side wait asked for (fetch `max_wait_ms`, produce `timeout_ms`).
    pub io_timeout: Option<Duration>,
    /// TLS and SASL (Kafka's `security.protocol`); PLAINTEXT by default.
    pub security: Security,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            client_id: "laminar".to_owned(),
            frame_bytes_max: 256 * 1024 * 1024,
            connect_timeout: Duration::from_secs(10),
            io_timeout: Some(Duration::from_secs(60)),
            security: Security::default(),
        }
    }
}

/// A request sent whose response is still to be received; hand it to [`Connection::receive`].
/// Responses must be received in the order their requests were sent.
#[must_use = "a pending response must be received before later ones"]
#[derive(Debug)]
pub struct Pending<Response> {
    correlation_id: i32,
    api: ApiKey,
    version: i16,
    response: PhantomData<fn() -> Response>,
}

impl<Response> Pending<Response> {
    /// The correlation id of the request.
    pub fn correlation_id(&self) -> i32 {
        self.correlation_id
    }
}

#[derive(Debug)]
struct InFlight {
    correlation_id: i32,
    api: ApiKey,
}

/// A connection to one broker. Owned by one thread; `Send` but not shared.
#[derive(Debug)]
pub struct Connection {
    stream: Transport,
    client_id: StrBytes,
    versions: ApiVersionTable,
    next_correlation_id: i32,
    in_flight: VecDeque<InFlight>,
    write_buffer: BytesMut,
    frames: FrameReader,
}

impl Connection {
    /// Connects (TCP_NODELAY) and negotiates API versions.
    pub fn connect(address: &str, config: &ClientConfig) -> Result<Connection, ClientError> {
        let mut last_error = None;
        for socket_address in address.to_socket_addrs()? {
            match TcpStream::connect_timeout(&socket_address, config.connect_timeout) {
                Ok(stream) => return Connection::over_to(stream, config, host_of(address)),
                Err(error) => last_error = Some(error),
            }
        }
        Err(ClientError::Io(last_error.unwrap_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{address} resolves to no address"),
            )
        })))
    }

    /// Reserves and touches receive memory for a response of `bytes`: a benchmark's consumer
    /// calls it before its clock starts, so that it measures a consumer in its steady state
    /// (decision 0029, bench scale and its goals).
    pub fn warm_receive_buffer(&mut self, bytes: usize) {
        self.frames.warm(bytes);
    }

    /// Whether the oldest response has started to arrive (buffered bytes, or bytes waiting on
    /// the socket), checked without blocking. A paced load generator uses it to take
    /// acknowledgements when they come instead of waiting on one and falling behind its schedule.
    pub fn response_waiting(&mut self) -> Result<bool, ClientError> {
        if self.frames.buffered_len() > 0 || self.stream.has_buffered_plaintext() {
            return Ok(true);
        }
        let socket = self.stream.socket();
        socket.set_nonblocking(true)?;
        let peeked = socket.peek(&mut [0u8; 1]);
        socket.set_nonblocking(false)?;
        match peeked {
            Ok(_) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
            Err(error) => Err(ClientError::Io(error)),
        }
    }

    /// Takes over an established stream and negotiates API versions on it (PLAINTEXT, or the
    /// TLS `config` asks for with `127.0.0.1` as the server's name).
    pub fn over(stream: TcpStream, config: &ClientConfig) -> Result<Connection, ClientError> {
        Connection::over_to(stream, config, "127.0.0.1")
    }

    /// Takes over an established stream to the server named `host`: TLS if `config` asks for
    /// it, API versions, then the SASL login if any.
    pub fn over_to(stream: TcpStream, config: &ClientConfig, host: &str) -> Result<Connection, ClientError> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(config.io_timeout)?;
        stream.set_write_timeout(config.io_timeout)?;
        let stream = match &config.security.tls {
            Some(tls) => Transport::tls(stream, tls.clone(), host)?,
            None => Transport::Plain(stream),
        };
        let mut connection = Connection {
            stream,
            client_id: StrBytes::from_string(config.client_id.clone()),
            versions: ApiVersionTable::default(),
            next_correlation_id: 0,
            in_flight: VecDeque::new(),
            write_buffer: BytesMut::with_capacity(64 * 1024),
            frames: FrameReader::new(config.frame_bytes_max),
        };
        connection.versions = connection.negotiate_versions()?;
        if let Some(login) = &config.security.sasl {
            connection.authenticate(login)?;
        }
        Ok(connection)
    }

    /// Asks for ApiVersions at the highest version this client knows; a broker that does not
    /// know it answers UNSUPPORTED_VERSION in a v0 body listing what it supports, and we retry.
    fn negotiate_versions(&mut self) -> Result<ApiVersionTable, ClientError> {
        let mut version = client_versions(ApiKey::ApiVersions).max;
        loop {
            let request = ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("laminar"))
                .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
            let pending = self.send_at(&request, version, true)?;
            let frame = self.receive_frame(&pending)?;
            let response = ApiVersionsResponse::decode(&mut frame.clone(), version)
                .or_else(|_| ApiVersionsResponse::decode(&mut frame.clone(), 0))
                .map_err(|error| ClientError::Decode {
                    api: ApiKey::ApiVersions,
                    version,
                    message: error.to_string(),
                })?;
            let unsupported_version = 35;
            if response.error_code == unsupported_version && version > 0 {
                let broker_max = response
                    .api_keys
                    .iter()
                    .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                    .map_or(0, |k| k.max_version);
                version = broker_max.min(version - 1);
                continue;
            }
            super::error::check_code(ApiKey::ApiVersions, response.error_code, None, String::new)?;
            return Ok(ApiVersionTable::negotiate(&response));
        }
    }

    /// The negotiated versions.
    pub fn versions(&self) -> &ApiVersionTable {
        &self.versions
    }

    /// Requests sent whose responses have not been received.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Sends a request at the negotiated version; its response is to be received later.
    pub fn send<R: Request>(&mut self, request: &R) -> Result<Pending<R::Response>, ClientError> {
        let version = self.versions.version(api_key::<R>())?;
        self.send_at(request, version, true)
    }

    /// Sends a request for which the broker sends no response (Produce with acks=0).
    pub fn send_without_response<R: Request>(&mut self, request: &R) -> Result<(), ClientError> {
        let version = self.versions.version(api_key::<R>())?;
        let _no_response = self.send_at(request, version, false)?;
        Ok(())
    }

    /// Sends a request and waits for its response. Earlier pending responses must have been
    /// received first.
    pub fn request<R: Request>(&mut self, request: &R) -> Result<R::Response, ClientError> {
        assert!(
            self.in_flight.is_empty(),
            "request() with responses pending would read theirs first"
        );
        let pending = self.send(request)?;
        self.receive(pending)
    }

    /// Sends a request at exactly `version` (which the broker must advertise) and waits for its
    /// response: for requests whose shape depends on the version beyond what negotiation picks
    /// (a broker's AddPartitionsToTxn v4 verification).
    pub fn request_at<R: Request>(&mut self, request: &R, version: i16) -> Result<R::Response, ClientError> {
        assert!(
            self.in_flight.is_empty(),
            "request_at() with responses pending would read theirs first"
        );
        let api = api_key::<R>();
        let advertised = self.versions.broker_range(api);
        if !advertised.is_some_and(|range| range.min <= version && version <= range.max) {
            let client = crate::versions::client_versions(api);
            return Err(ClientError::UnsupportedApi {
                api,
                client_min: client.min,
                client_max: client.max,
                broker: advertised.map_or_else(|| "nothing".to_owned(), |range| range.to_string()),
            });
        }
        let pending = self.send_at(request, version, true)?;
        self.receive(pending)
    }

    /// Receives the response to `pending`, which must be the oldest request in flight.
    pub fn receive<Response: Decodable + HeaderVersion>(
        &mut self,
        pending: Pending<Response>,
    ) -> Result<Response, ClientError> {
        let mut frame = self.receive_frame(&pending)?;
        Response::decode(&mut frame, pending.version).map_err(|error| ClientError::Decode {
            api: pending.api,
            version: pending.version,
            message: error.to_string(),
        })
    }

    /// Sends a produce request whose batches go to the socket from `batches` themselves (one
    /// gathering write), without being copied into the request buffer first.
    pub(super) fn send_produce_pieces(
        &mut self,
        topic: &str,
        batches: &[(i32, bytes::Bytes)],
        acks: i16,
        timeout_ms: i32,
    ) -> Result<Pending<kafka_protocol::messages::ProduceResponse>, ClientError> {
        let version = self.versions.version(ApiKey::Produce)?;
        let correlation_id = self.take_correlation_id();
        let frame = super::produce_frame::ProduceFrame {
            correlation_id,
            client_id: &self.client_id,
            version,
            acks,
            timeout_ms,
            topic,
            batches,
        };
        let pieces = super::produce_frame::encode(&frame, &mut self.write_buffer)?;
        write_all_pieces(&mut self.stream, &pieces)?;
        Ok(self.sent(correlation_id, ApiKey::Produce, version, acks != 0))
    }

    fn take_correlation_id(&mut self) -> i32 {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        correlation_id
    }

    /// Records a request just written: its response is awaited in order unless none comes.
    fn sent<Response>(
        &mut self,
        correlation_id: i32,
        api: ApiKey,
        version: i16,
        expects_response: bool,
    ) -> Pending<Response> {
        if expects_response {
            self.in_flight.push_back(InFlight { correlation_id, api });
        }
        Pending {
            correlation_id,
            api,
            version,
            response: PhantomData,
        }
    }

    pub(crate) fn send_at<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        expects_response: bool,
    ) -> Result<Pending<R::Response>, ClientError> {
        let api = api_key::<R>();
        let correlation_id = self.take_correlation_id();
        encode_frame(
            &mut self.write_buffer,
            correlation_id,
            &self.client_id,
            request,
            version,
        )?;
        self.stream.write_all(&self.write_buffer)?;
        Ok(self.sent(correlation_id, api, version, expects_response))
    }

    /// Reads the next frame, checks it answers `pending` and returns the body after the header.
    fn receive_frame<Response>(&mut self, pending: &Pending<Response>) -> Result<bytes::Bytes, ClientError> {
        let oldest = self
            .in_flight
            .front()
            .expect("receive() without a request in flight");
        assert_eq!(
            oldest.correlation_id, pending.correlation_id,
            "responses must be received in request order"
        );
        let in_flight = self.in_flight.len();
        let mut frame = match self.frames.read_frame(&mut self.stream) {
            Ok(Some(frame)) => frame,
            Ok(None) => return Err(ClientError::Closed { in_flight }),
            Err(ReadFrameError::Frame(error)) => return Err(ClientError::Frame(error)),
            Err(ReadFrameError::Io(error)) => return Err(ClientError::Io(error)),
        };
        let oldest = self.in_flight.pop_front().expect("checked above");
        let header_version = oldest.api.response_header_version(pending.version);
        let header =
            ResponseHeader::decode(&mut frame, header_version).map_err(|error| ClientError::Decode {
                api: oldest.api,
                version: pending.version,
                message: format!("response header: {error}"),
            })?;
        if header.correlation_id != oldest.correlation_id {
            return Err(ClientError::CorrelationMismatch {
                expected: oldest.correlation_id,
                actual: header.correlation_id,
            });
        }
        Ok(frame)
    }
}

/// The host part of `host:port` (an IPv6 address without its brackets), the TLS server name.
fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

fn api_key<R: Request>() -> ApiKey {
    ApiKey::try_from(R::KEY).expect("every Request type has a known API key")
}

/// Writes one request frame (size prefix, header, body) into `buffer`, replacing its contents.
/// Writes every piece, in order, with as few gathering writes as the socket allows.
pub fn write_all_pieces(stream: &mut impl Write, pieces: &[bytes::Bytes]) -> std::io::Result<()> {
    let mut slices: Vec<std::io::IoSlice<'_>> = pieces.iter().map(|p| std::io::IoSlice::new(p)).collect();
    let mut left = &mut slices[..];
    while !left.is_empty() {
        match stream.write_vectored(left) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(written) => std::io::IoSlice::advance_slices(&mut left, written),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub fn encode_frame<R: Request>(
    buffer: &mut BytesMut,
    correlation_id: i32,
    client_id: &StrBytes,
    request: &R,
    version: i16,
) -> Result<(), ClientError> {
    let api = api_key::<R>();
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(client_id.clone()));
    let encode_error = |error: anyhow::Error| ClientError::Encode {
        api,
        version,
        message: error.to_string(),
    };
    buffer.clear();
    buffer.put_i32(0);
    header
        .encode(buffer, api.request_header_version(version))
        .map_err(encode_error)?;
    request.encode(buffer, version).map_err(encode_error)?;
    let size = buffer.len() - 4;
    let size = i32::try_from(size).map_err(|_| ClientError::Encode {
        api,
        version,
        message: format!("request of {size} bytes exceeds the protocol's i32 frame size"),
    })?;
    buffer[..4].copy_from_slice(&size.to_be_bytes());
    Ok(())
}

#[cfg(test)]
#[path = "connection_tests.rs"]
mod tests;
