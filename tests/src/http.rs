//! A tiny HTTP/1.1 GET client for the broker's admin endpoints, and a Prometheus text parser
//! good enough to check samples by name and labels.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// An HTTP answer: status code and body.
#[derive(Debug, Clone)]
pub struct HttpAnswer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// Sends `METHOD path` and reads the answer until the server closes the connection.
pub fn request(addr: SocketAddr, method: &str, path: &str) -> Result<HttpAnswer> {
    request_with_body(addr, method, path, None, b"")
}

/// Sends `METHOD path` with `body` (and `Content-Type: content_type` when given; a
/// `Content-Length` when the body is not empty), and reads the answer.
pub fn request_with_body(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<HttpAnswer> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut headers = vec![("Host", addr.to_string())];
    headers.extend(content_type.map(|t| ("Content-Type", t.to_string())));
    exchange(&mut stream, (method, path), &headers, body)
}

/// What an HTTPS request presents: the CA it trusts, a client certificate and key, a bearer
/// token.
#[derive(Default)]
pub struct Https<'a> {
    pub ca: Option<&'a std::path::Path>,
    pub client: Option<(&'a std::path::Path, &'a std::path::Path)>,
    pub token: Option<&'a str>,
}

/// Sends `METHOD path` with `body` over HTTPS, as `https` says, and reads the answer.
pub fn https_request(
    addr: SocketAddr,
    https: &Https<'_>,
    (method, path): (&str, &str),
    body: &[u8],
) -> Result<HttpAnswer> {
    let ca = https.ca.context("an HTTPS request needs the CA to trust")?;
    let mut stream = crate::tls_client::connect(addr, ca, https.client)?;
    let mut headers = vec![("Host", addr.to_string())];
    headers.extend(https.token.map(|t| ("Authorization", format!("Bearer {t}"))));
    if !body.is_empty() {
        headers.push(("Content-Type", "application/json".to_string()));
    }
    exchange(&mut stream, (method, path), &headers, body)
}

/// Writes one request on `stream` and reads the answer until the server closes.
fn exchange(
    stream: &mut (impl Read + Write),
    (method, path): (&str, &str),
    headers: &[(&str, String)],
    body: &[u8],
) -> Result<HttpAnswer> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    // A server may refuse the head and close before reading a large body: that is an answer.
    let _ = stream.write_all(body);
    let _ = stream.flush();
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw) {
        Ok(_) => {}
        // A TLS peer that closes without close_notify still sent a whole answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e.into()),
    }
    let text = String::from_utf8(raw).context("answer is not UTF-8")?;
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        bail!("no end of head in {text:?}");
    };
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("no status in {head:?}"))?;
    Ok(HttpAnswer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    })
}

/// `GET path`, which must answer 200; returns the body.
pub fn get_ok(addr: SocketAddr, path: &str) -> Result<String> {
    let answer = request(addr, "GET", path)?;
    if answer.status != 200 {
        bail!("GET {path}: {} {}", answer.status, answer.body);
    }
    Ok(answer.body)
}

/// The broker epoch a cluster node registered with, from its `/v1/status`.
pub fn broker_epoch(addr: SocketAddr) -> Result<i64> {
    let status: serde_json::Value = serde_json::from_str(&get_ok(addr, "/v1/status")?)?;
    let epoch = status["cluster"]["broker_epoch"].as_i64();
    epoch.with_context(|| format!("no broker epoch in {status}"))
}

/// A parsed `/metrics` page: sample (`name{labels}` exactly as written) to value, and the
/// families named by `# TYPE` lines with their types.
#[derive(Debug, Clone, Default)]
pub struct MetricsPage {
    pub samples: BTreeMap<String, f64>,
    pub types: BTreeMap<String, String>,
}

impl MetricsPage {
    pub fn parse(text: &str) -> Result<MetricsPage> {
        let mut page = MetricsPage::default();
        for line in text.lines().filter(|l| !l.is_empty()) {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').context("TYPE line")?;
                page.types.insert(name.to_string(), kind.to_string());
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let (series, value) = line
                .rsplit_once(' ')
                .with_context(|| format!("sample {line:?}"))?;
            let value: f64 = value.parse().with_context(|| format!("value in {line:?}"))?;
            page.samples.insert(series.to_string(), value);
        }
        Ok(page)
    }

    /// The value of the series written exactly as `series` (e.g. `a{b="c"}`).
    pub fn value(&self, series: &str) -> Option<f64> {
        self.samples.get(series).copied()
    }

    /// The sum over every series of family `name` (all label sets, no suffixes).
    pub fn sum(&self, name: &str) -> f64 {
        self.samples
            .iter()
            .filter(|(series, _)| series.split('{').next() == Some(name))
            .map(|(_, v)| v)
            .sum()
    }
}
