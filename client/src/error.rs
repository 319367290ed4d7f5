//! The client's one error type, so callers (CLI, bench, replication) can tell an I/O failure from
//! a malformed response from an error the broker reported on purpose.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ApiKey;

use laminar_protocol::frame::FrameError;

/// An error code a broker returned, with its protocol name and optional message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaError {
    /// The wire error code (never 0).
    pub code: i16,
    /// The error message the broker attached, if any.
    pub message: Option<String>,
}

impl KafkaError {
    /// Returns `None` for code 0 (no error), the error otherwise.
    pub fn from_code(code: i16, message: Option<&str>) -> Option<KafkaError> {
        (code != 0).then(|| KafkaError {
            code,
            message: message.map(str::to_owned),
        })
    }

    /// The protocol's error kind for this code (`Unknown(code)` for codes this crate does not know).
    pub fn kind(&self) -> ResponseError {
        ResponseError::try_from_code(self.code).unwrap_or(ResponseError::Unknown(self.code))
    }

    /// The protocol name of the error, e.g. `UnknownTopicOrPartition`.
    pub fn name(&self) -> String {
        match self.kind() {
            ResponseError::Unknown(code) => format!("UnknownErrorCode{code}"),
            kind => format!("{kind:?}"),
        }
    }

    /// Whether the protocol says a retry may succeed.
    pub fn is_retriable(&self) -> bool {
        self.kind().is_retriable()
    }
}

impl std::fmt::Display for KafkaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (error code {})", self.name(), self.code)?;
        if let Some(message) = &self.message {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}

/// Everything that can go wrong talking to a broker.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket failed (connect, read, write, timeout).
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection while responses were still expected.
    #[error("connection closed by the broker with {in_flight} request(s) in flight")]
    Closed {
        /// Requests sent whose responses never came.
        in_flight: usize,
    },
    /// A response frame's size prefix is invalid.
    #[error("bad frame from the broker: {0}")]
    Frame(#[from] FrameError),
    /// A request could not be encoded (a value out of the version's range).
    #[error("cannot encode {api:?} v{version} request: {message}")]
    Encode {
        /// The API of the request.
        api: ApiKey,
        /// The negotiated version.
        version: i16,
        /// What the encoder said.
        message: String,
    },
    /// A response frame could not be decoded as the expected API and version.
    #[error("cannot decode {api:?} v{version} response: {message}")]
    Decode {
        /// The API of the response.
        api: ApiKey,
        /// The negotiated version.
        version: i16,
        /// What the decoder said.
        message: String,
    },
    /// A record batch could not be encoded or decoded.
    #[error("record batch: {0}")]
    Records(String),
    /// A response carried another correlation id than the oldest request in flight.
    #[error("correlation id mismatch: expected {expected}, got {actual}")]
    CorrelationMismatch {
        /// The id of the oldest request in flight.
        expected: i32,
        /// The id in the response header.
        actual: i32,
    },
    /// The broker and this client share no version of an API.
    #[error(
        "broker does not support {api:?} in versions {client_min}..={client_max} (broker offers {broker})"
    )]
    UnsupportedApi {
        /// The API.
        api: ApiKey,
        /// Lowest version this client speaks.
        client_min: i16,
        /// Highest version this client speaks.
        client_max: i16,
        /// What the broker advertised ("nothing" when absent).
        broker: String,
    },
    /// The broker answered with an error code.
    #[error("{api:?}{context}: {error}")]
    Kafka {
        /// The API that failed.
        api: ApiKey,
        /// Where in the response (topic / partition), empty for a top-level error.
        context: String,
        /// The code, its name and message.
        error: KafkaError,
    },
    /// The response lacks an entry the request asked for (topic or partition).
    #[error("{api:?} response has no entry for {what}")]
    MissingInResponse {
        /// The API.
        api: ApiKey,
        /// The topic / partition asked for.
        what: String,
    },
}

impl ClientError {
    /// The broker's error, when this is one.
    pub fn kafka_error(&self) -> Option<&KafkaError> {
        match self {
            ClientError::Kafka { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// `Err(ClientError::Kafka)` when `code` is not 0.
pub(crate) fn check_code(
    api: ApiKey,
    code: i16,
    message: Option<&str>,
    context: impl FnOnce() -> String,
) -> Result<(), ClientError> {
    match KafkaError::from_code(code, message) {
        None => Ok(()),
        Some(error) => Err(ClientError::Kafka {
            api,
            context: context(),
            error,
        }),
    }
}

impl From<laminar_protocol::records::RecordsError> for ClientError {
    fn from(error: laminar_protocol::records::RecordsError) -> Self {
        ClientError::Records(error.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_error_names_its_code() {
        let error = KafkaError::from_code(3, Some("no such topic")).expect("non-zero code");
        assert_eq!(error.name(), "UnknownTopicOrPartition");
        assert!(error.is_retriable());
        assert_eq!(
            error.to_string(),
            "UnknownTopicOrPartition (error code 3): no such topic"
        );
        assert!(KafkaError::from_code(0, None).is_none());
        assert_eq!(
            KafkaError::from_code(-42, None).expect("non-zero").name(),
            "UnknownErrorCode-42"
        );
    }

    #[test]
    fn check_code_maps_to_typed_error() {
        assert!(check_code(ApiKey::Produce, 0, None, String::new).is_ok());
        let error = check_code(ApiKey::Produce, 36, None, || " t-0".into()).unwrap_err();
        assert_eq!(error.kafka_error().map(|e| e.code), Some(36));
        assert_eq!(
            error.to_string(),
            "Produce t-0: TopicAlreadyExists (error code 36)"
        );
    }
}
