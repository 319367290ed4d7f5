//! The request head of a minimal HTTP/1.1 server: request line and headers, at most
//! [`HEAD_BYTES_MAX`] bytes, ending in an empty line. A body is read only when `Content-Length`
//! announces one of at most [`BODY_BYTES_MAX`] bytes (chunked bodies are refused), and every
//! response closes the connection.

/// Largest request line plus headers accepted.
pub const HEAD_BYTES_MAX: usize = 8 * 1024;
/// Largest request body accepted (the JSON admin API's requests are a few hundred bytes).
pub const BODY_BYTES_MAX: usize = 64 * 1024;

/// A parsed request line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestHead {
    pub method: String,
    /// The path without the query string.
    pub path: String,
    /// The query string, without its `?` (empty when there is none).
    pub query: String,
    /// `Content-Length` (0 without one); at most [`BODY_BYTES_MAX`].
    pub content_length: usize,
    /// `Content-Type` without parameters, lower-cased (empty without one).
    pub content_type: String,
    /// Bytes of the head, its empty line included: the body starts there.
    pub head_len: usize,
    /// The token of `Authorization: Bearer <token>`, if the request carries one.
    pub bearer_token: Option<String>,
}

/// Why a request head cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("request head exceeds {HEAD_BYTES_MAX} bytes")]
    TooLarge,
    #[error("malformed request line")]
    Malformed,
    #[error("unsupported protocol {0}")]
    Version(String),
    #[error("request body exceeds {BODY_BYTES_MAX} bytes")]
    BodyTooLarge,
    #[error("chunked request bodies are not served")]
    Chunked,
}

/// Looks for the end of the head in `buf`: `Ok(None)` means "need more bytes", an error means
/// "bad bytes" (or too many).
pub fn parse_head(buf: &[u8]) -> Result<Option<RequestHead>, HeadError> {
    let Some(end) = find_head_end(buf) else {
        return if buf.len() >= HEAD_BYTES_MAX {
            Err(HeadError::TooLarge)
        } else {
            Ok(None)
        };
    };
    if end > HEAD_BYTES_MAX {
        return Err(HeadError::TooLarge);
    }
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| HeadError::Malformed)?;
    let request_line = head.split("\r\n").next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Malformed);
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(HeadError::Malformed);
    }
    if !target.starts_with('/') {
        return Err(HeadError::Malformed);
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(HeadError::Version(version.to_string()));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let headers = headers(head)?;
    Ok(Some(RequestHead {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
        content_length: headers.content_length,
        content_type: headers.content_type,
        head_len: end,
        bearer_token: headers.bearer_token,
    }))
}

/// The headers the server reads.
#[derive(Default)]
struct Headers {
    content_length: usize,
    content_type: String,
    bearer_token: Option<String>,
}

/// `Content-Length` (strictly digits, one value), `Content-Type` and a bearer token of a head.
fn headers(head: &str) -> Result<Headers, HeadError> {
    let mut length: Option<usize> = None;
    let mut headers = Headers::default();
    for line in head.split("\r\n").skip(1).filter(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return Err(HeadError::Malformed);
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let digits_only =
                !value.is_empty() && value.len() <= 9 && value.bytes().all(|b| b.is_ascii_digit());
            if !digits_only || length.is_some() {
                return Err(HeadError::Malformed);
            }
            let parsed: usize = value.parse().map_err(|_| HeadError::Malformed)?;
            if parsed > BODY_BYTES_MAX {
                return Err(HeadError::BodyTooLarge);
            }
            length = Some(parsed);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(HeadError::Chunked);
        } else if name.eq_ignore_ascii_case("content-type") {
            let media = value.split(';').next().unwrap_or_default();
            headers.content_type = media.trim().to_ascii_lowercase();
        } else if name.eq_ignore_ascii_case("authorization") {
            let token = value
                .split_once(' ')
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"));
            headers.bearer_token = token.map(|(_, token)| token.trim().to_string());
        }
    }
    headers.content_length = length.unwrap_or(0);
    Ok(headers)
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|at| at + 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_get_and_drops_the_query() {
        let head = parse_head(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(head.method, "GET");
        assert_eq!(head.path, "/metrics");
        assert_eq!((head.content_length, head.content_type.as_str()), (0, ""));
    }

    #[test]
    fn reads_body_headers_strictly() {
        let head = parse_head(b"POST /v1/topics HTTP/1.1\r\nContent-Type: Application/JSON; charset=utf-8\r\ncontent-length: 12\r\n\r\n{}")
            .unwrap()
            .unwrap();
        assert_eq!(
            (head.content_length, head.content_type.as_str()),
            (12, "application/json")
        );
        assert_eq!(head.head_len, 95);
        for bad in ["-1", "1e3", "", "12, 12", "0x10", "9999999999"] {
            let text = format!("POST / HTTP/1.1\r\nContent-Length: {bad}\r\n\r\n");
            assert_eq!(parse_head(text.as_bytes()), Err(HeadError::Malformed), "{bad}");
        }
        let twice = b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n";
        assert_eq!(parse_head(twice), Err(HeadError::Malformed));
        let big = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            BODY_BYTES_MAX + 1
        );
        assert_eq!(parse_head(big.as_bytes()), Err(HeadError::BodyTooLarge));
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(parse_head(chunked), Err(HeadError::Chunked));
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\nno colon\r\n\r\n"),
            Err(HeadError::Malformed)
        );
    }

    #[test]
    fn reads_a_bearer_token() {
        let head = parse_head(b"GET /v1/status HTTP/1.1\r\nAuthorization: Bearer abc.def\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(head.bearer_token.as_deref(), Some("abc.def"));
        let basic = parse_head(b"GET / HTTP/1.1\r\nAuthorization: Basic eA==\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(basic.bearer_token, None);
    }

    #[test]
    fn needs_more_until_the_empty_line() {
        assert_eq!(parse_head(b"GET / HTTP/1.1\r\nHost: a\r\n"), Ok(None));
        assert_eq!(parse_head(b""), Ok(None));
    }

    #[test]
    fn bounds_the_head() {
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.resize(HEAD_BYTES_MAX, b'a');
        assert_eq!(parse_head(&big), Err(HeadError::TooLarge));
        big.extend_from_slice(b"\r\n\r\n");
        assert_eq!(parse_head(&big), Err(HeadError::TooLarge));
    }

    #[test]
    fn rejects_bad_request_lines() {
        for bad in [
            &b"GET\r\n\r\n"[..],
            b"GET /a b HTTP/1.1\r\n\r\n",
            b"get / HTTP/1.1\r\n\r\n",
            b"GET metrics HTTP/1.1\r\n\r\n",
            b"\xff / HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(parse_head(bad), Err(HeadError::Malformed), "{bad:?}");
        }
        assert_eq!(
            parse_head(b"GET / HTTP/2\r\n\r\n"),
            Err(HeadError::Version("HTTP/2".into()))
        );
    }
}
