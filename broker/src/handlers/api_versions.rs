//! ApiVersions: which APIs and versions Laminar serves.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::ApiVersionsResponse;

use laminar_protocol::codec::{supported, ServedApis};

/// Answers any version: an unknown one gets UNSUPPORTED_VERSION with the full list (encoded as
/// v0 by the caller), so the client can retry with a version both sides know. `served` adds
/// the cluster-mode APIs (ElectLeaders) in cluster mode only.
pub fn handle(version: i16, served: ServedApis) -> ApiVersionsResponse {
    let support = supported(kafka_protocol::messages::ApiKey::ApiVersions).expect("ApiVersions is served");
    let error_code = if (support.min..=support.max).contains(&version) {
        0
    } else {
        ResponseError::UnsupportedVersion.code()
    };
    let api_keys = served
        .all()
        .map(|api| {
            ApiVersion::default()
                .with_api_key(api.key as i16)
                .with_min_version(api.min)
                .with_max_version(api.max)
        })
        .collect();
    // Feature fields stay at their defaults: they are tagged fields, and librdkafka 2.0.2 cannot
    // parse a response that writes them out (docs/ARCHITECTURE.md, Compatibility).
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(api_keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ApiKey, ResponseKind};
    use laminar_protocol::codec::{encode_response, SUPPORTED_APIS};

    #[test]
    fn elect_leaders_is_advertised_in_cluster_mode_only() {
        let elect = |served| {
            handle(3, served)
                .api_keys
                .iter()
                .find(|a| a.api_key == ApiKey::ElectLeaders as i16)
                .map(|a| (a.min_version, a.max_version))
        };
        assert_eq!(elect(ServedApis::SingleNode), None);
        assert_eq!(elect(ServedApis::Cluster), Some((0, 2)));
    }

    #[test]
    fn unknown_version_gets_the_list_and_an_error() {
        let response = handle(9, ServedApis::SingleNode);
        assert_eq!(response.error_code, ResponseError::UnsupportedVersion.code());
        assert_eq!(response.api_keys.len(), SUPPORTED_APIS.len());
        assert!(response
            .api_keys
            .iter()
            .any(|a| a.api_key == ApiKey::Produce as i16 && a.min_version == 0));
    }

    /// v3 answer with an empty tag section: librdkafka 2.0.2 reads exactly these bytes.
    #[test]
    fn v3_answer_writes_no_tagged_fields() {
        let frame = encode_response(
            ApiKey::ApiVersions,
            3,
            7,
            &ResponseKind::ApiVersions(handle(3, ServedApis::SingleNode)),
        )
        .unwrap();
        // size(4) correlation id(4) — v0 response header, no tag section
        assert_eq!(&frame[4..8], &7i32.to_be_bytes());
        // error_code(2), then the compact array length (N+1 as an unsigned varint)
        assert_eq!(&frame[8..10], &[0, 0]);
        assert_eq!(frame[10] as usize, SUPPORTED_APIS.len() + 1);
        // after the array: throttle_time_ms (4 bytes of zero) and an empty tag section (one 0)
        assert_eq!(&frame[frame.len() - 5..], &[0, 0, 0, 0, 0]);
    }
}
