//! The request head of a minimal HTTP/1.1 server: request line and headers, at most
//! [`HEAD_BYTES_MAX`] bytes, ending in an empty line. Bodies are never read (only GET is served),
//! and every response closes the connection.

/// Largest request line plus headers accepted.
pub const HEAD_BYTES_MAX: usize = 8 * 1024;

/// A parsed request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub method: String,
    /// The path without the query string.
    pub path: String,
    /// The query string, without its `?` (empty when there is none).
    pub query: String,
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
    Ok(Some(RequestHead {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
    }))
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
