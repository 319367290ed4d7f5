//! The JSON admin API under `/v1/` (documented in `docs/admin-api.md`): what the console shows
//! and does, usable without it (`curl`).
//!
//! State-changing requests build the Kafka request a client would send and call the broker's own
//! handler for it (CreateTopics, CreatePartitions, DeleteTopics, OffsetCommit), so an action here
//! follows exactly the rules, limits and cluster paths of the Kafka API. Reads use the same
//! handlers where one answers the question (Metadata, DescribeConfigs, ListGroups,
//! DescribeGroups, OffsetFetch, ListTransactions' gathering) and the owning shards otherwise
//! (offsets, sizes, records).
//!
//! Everything from the request is checked before use: paths match a fixed set, query parameters
//! are a fixed set parsed strictly, bodies are JSON of a fixed shape (`deny_unknown_fields`) of at
//! most 64 KiB. A bad request is a 4xx with `{"error": "..."}`. POST bodies must say
//! `Content-Type: application/json`, which a browser sends across origins only after a CORS
//! preflight this server never grants: another site's page cannot make a visitor's browser
//! change the broker.

pub mod groups;
pub mod overview;
pub mod records;
pub mod topics;
pub mod transactions;

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::request::RequestHead;
use super::routes::Response;
use super::AdminState;
use crate::broker::BrokerCtx;

/// A refused or failed API request: an HTTP status and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, message)
    }

    /// A Kafka error code from a handler, with the HTTP status that fits it.
    pub fn kafka(code: i16, message: Option<&str>) -> ApiError {
        let name = ResponseError::try_from_code(code).map_or(format!("error {code}"), |e| format!("{e:?}"));
        let status = match ResponseError::try_from_code(code) {
            Some(ResponseError::UnknownTopicOrPartition | ResponseError::GroupIdNotFound) => 404,
            Some(ResponseError::TopicAlreadyExists | ResponseError::NonEmptyGroup) => 409,
            Some(ResponseError::TopicDeletionDisabled | ResponseError::TopicAuthorizationFailed) => 403,
            Some(
                ResponseError::InvalidTopicException
                | ResponseError::InvalidPartitions
                | ResponseError::InvalidReplicationFactor
                | ResponseError::InvalidConfig
                | ResponseError::InvalidRequest
                | ResponseError::PolicyViolation
                | ResponseError::UnknownMemberId
                | ResponseError::IllegalGeneration
                | ResponseError::OffsetOutOfRange,
            ) => 422,
            Some(
                ResponseError::CoordinatorLoadInProgress
                | ResponseError::CoordinatorNotAvailable
                | ResponseError::NotCoordinator
                | ResponseError::NotController
                | ResponseError::NotLeaderOrFollower
                | ResponseError::LeaderNotAvailable
                | ResponseError::RequestTimedOut
                | ResponseError::RebalanceInProgress,
            ) => 503,
            _ => 500,
        };
        let message = match message {
            Some(text) if !text.is_empty() => format!("{name}: {text}"),
            _ => name,
        };
        ApiError::new(status, message)
    }

    fn response(&self) -> Response {
        Response::json(self.status, &json!({ "error": self.message }))
    }
}

pub type ApiResult = Result<Response, ApiError>;

/// A 200 with `value` as its body.
pub fn ok(value: &serde_json::Value) -> ApiResult {
    Ok(Response::json(200, value))
}

/// Answers one request to the API (any path the fixed routes did not take).
pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    head: &RequestHead,
    body: &[u8],
    admin: &Rc<AdminState>,
) -> Response {
    match dispatch(ctx, head, body, admin).await {
        Ok(response) => response,
        Err(error) => error.response(),
    }
}

async fn dispatch(ctx: &Rc<BrokerCtx>, head: &RequestHead, body: &[u8], admin: &Rc<AdminState>) -> ApiResult {
    let path = head.path.strip_suffix('/').unwrap_or(&head.path);
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let query = Query::parse(&head.query)?;
    let method = head.method.as_str();
    match (method, segments.as_slice()) {
        ("GET", ["v1", "overview"]) => overview::get(ctx, admin, &query).await,
        ("GET", ["v1", "history"]) => overview::history(ctx, admin, &query),
        ("GET", ["v1", "topics"]) => topics::list(ctx, &query).await,
        ("POST", ["v1", "topics"]) => topics::create(ctx, json_body(head, body)?).await,
        ("GET", ["v1", "topics", name]) => topics::describe(ctx, &decode(name)?, &query).await,
        ("DELETE", ["v1", "topics", name]) => topics::delete(ctx, &decode(name)?, &query).await,
        ("POST", ["v1", "topics", name, "partitions"]) => {
            topics::add_partitions(ctx, &decode(name)?, json_body(head, body)?).await
        }
        ("GET", ["v1", "topics", name, "records"]) => records::browse(ctx, &decode(name)?, &query).await,
        ("GET", ["v1", "groups"]) => groups::list(ctx, &query).await,
        ("GET", ["v1", "groups", id]) => groups::describe(ctx, &decode(id)?, &query).await,
        ("POST", ["v1", "groups", id, "reset-offsets"]) => {
            groups::reset_offsets(ctx, &decode(id)?, json_body(head, body)?).await
        }
        ("GET", ["v1", "transactions"]) => transactions::list(ctx, &query).await,
        (_, path) => match allowed_methods(path) {
            Some(allow) => {
                let message = format!("{method} is not served on {}", head.path);
                let mut refusal = ApiError::new(405, message).response();
                refusal.allow = allow;
                Ok(refusal)
            }
            None => Err(ApiError::new(404, format!("no such path: {}", head.path))),
        },
    }
}

/// The methods an API path serves (for a 405's `Allow`), or `None` for no such path.
fn allowed_methods(path: &[&str]) -> Option<&'static str> {
    Some(match path {
        ["v1", "overview" | "history" | "groups" | "transactions"] => "GET",
        ["v1", "topics"] => "GET, POST",
        ["v1", "topics", _] => "GET, DELETE",
        ["v1", "topics", _, "partitions"] => "POST",
        ["v1", "topics", _, "records"] => "GET",
        ["v1", "groups", _] => "GET",
        ["v1", "groups", _, "reset-offsets"] => "POST",
        _ => return None,
    })
}

/// The JSON body of a POST, of type `T` (which refuses unknown fields).
fn json_body<T: DeserializeOwned>(head: &RequestHead, body: &[u8]) -> Result<T, ApiError> {
    if head.content_type != "application/json" {
        return Err(ApiError::new(
            415,
            "send the body as Content-Type: application/json",
        ));
    }
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("body: {e}")))
}

/// A path segment, percent-decoded (strictly: `%` must start two hex digits, and the result
/// must be UTF-8 without control characters). Names are checked again by the handler they reach.
pub fn decode(segment: &str) -> Result<String, ApiError> {
    let bad = || ApiError::bad_request(format!("bad percent-encoding in {segment:?}"));
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
            let text = std::str::from_utf8(hex).map_err(|_| bad())?;
            out.push(u8::from_str_radix(text, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let text = String::from_utf8(out).map_err(|_| bad())?;
    if text.is_empty() || text.chars().any(char::is_control) {
        return Err(bad());
    }
    Ok(text)
}

/// Query parameters: `key=value` pairs, each key at most once. Keys are checked by
/// [`Query::only`] against what the route takes; values are parsed by the typed getters.
#[derive(Debug, Default)]
pub struct Query {
    pairs: BTreeMap<String, String>,
}

/// Query strings longer than this are refused (the head is bounded anyway; this keeps the
/// number of pairs small).
const QUERY_PAIRS_MAX: usize = 16;

impl Query {
    pub fn parse(query: &str) -> Result<Query, ApiError> {
        let mut pairs = BTreeMap::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| ApiError::bad_request(format!("query: {pair:?} is not key=value")))?;
            let value = if value.is_empty() {
                String::new()
            } else {
                decode(value)?
            };
            if pairs.insert(decode(key)?, value).is_some() || pairs.len() > QUERY_PAIRS_MAX {
                return Err(ApiError::bad_request(format!(
                    "query: {key} given twice, or too many"
                )));
            }
        }
        Ok(Query { pairs })
    }

    /// Refuses any key not in `allowed`.
    pub fn only(&self, allowed: &[&str]) -> Result<(), ApiError> {
        match self.pairs.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(key) => Err(ApiError::bad_request(format!(
                "unknown query parameter {key:?} (this path takes: {})",
                allowed.join(", ")
            ))),
            None => Ok(()),
        }
    }

    pub fn text(&self, key: &str) -> Option<&str> {
        self.pairs.get(key).map(String::as_str)
    }

    /// An integer in `min..=max`, if given.
    pub fn int(&self, key: &str, min: i64, max: i64) -> Result<Option<i64>, ApiError> {
        let Some(text) = self.text(key) else {
            return Ok(None);
        };
        let value: i64 = text
            .parse()
            .map_err(|_| ApiError::bad_request(format!("{key}: {text:?} is not an integer")))?;
        if !(min..=max).contains(&value) {
            return Err(ApiError::bad_request(format!(
                "{key}: {value} is not in {min}..={max}"
            )));
        }
        Ok(Some(value))
    }

    /// `true` or `false`, if given.
    pub fn flag(&self, key: &str) -> Result<bool, ApiError> {
        match self.text(key) {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "{key}: {other:?} is not true or false"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_parsed_strictly() {
        let query = Query::parse("partition=3&offset=-1&encoding=hex").unwrap();
        assert!(query.only(&["partition", "offset", "encoding"]).is_ok());
        assert_eq!(query.only(&["partition"]).unwrap_err().status, 400);
        assert_eq!(query.int("partition", 0, 10).unwrap(), Some(3));
        assert!(query.int("offset", 0, 10).is_err());
        assert!(query.int("encoding", 0, 10).is_err());
        assert_eq!(query.int("missing", 0, 10).unwrap(), None);
        for bad in ["a", "a=1&a=2", "a=%zz", "a=%4", "%ff=1"] {
            assert!(Query::parse(bad).is_err(), "{bad}");
        }
        assert!(Query::parse("").unwrap().only(&[]).is_ok());
    }

    #[test]
    fn path_segments_decode_strictly() {
        assert_eq!(decode("a%2Eb").unwrap(), "a.b");
        assert_eq!(decode("my%20group").unwrap(), "my group");
        for bad in ["", "%", "%0", "%0a", "%c3", "%00"] {
            assert!(decode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_405_names_the_methods_of_its_path() {
        assert_eq!(allowed_methods(&["v1", "topics"]), Some("GET, POST"));
        assert_eq!(
            allowed_methods(&["v1", "groups", "g", "reset-offsets"]),
            Some("POST")
        );
        assert_eq!(allowed_methods(&["v1", "topics", "t", "nothing"]), None);
        let mut refusal = ApiError::new(405, "no").response();
        refusal.allow = "GET, DELETE";
        let encoded = String::from_utf8(refusal.encode()).unwrap();
        assert!(encoded.contains("\r\nAllow: GET, DELETE\r\n"), "{encoded}");
    }

    #[test]
    fn kafka_errors_map_to_http_statuses() {
        assert_eq!(ApiError::kafka(3, None).status, 404);
        assert_eq!(ApiError::kafka(36, Some("x")).status, 409);
        assert!(ApiError::kafka(36, Some("x"))
            .message
            .contains("TopicAlreadyExists: x"));
        assert_eq!(ApiError::kafka(37, None).status, 422);
        assert_eq!(ApiError::kafka(-1, None).status, 500);
        assert_eq!(ApiError::kafka(999, None).status, 500);
    }
}
