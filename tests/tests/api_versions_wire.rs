//! Version negotiation as the target clients need it (see docs/ARCHITECTURE.md, "Compatibility"): every
//! ApiVersions version answers with a v0 response header; v3 ends with an empty tag section
//! (librdkafka 2.0.2 in Debian's kcat rejects anything else); Produce is advertised from v0 and
//! up to >= 7 and Fetch up to >= 10 (zstd); the APIs the broker serves today are all listed.

use anyhow::Result;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::wire::{Reaction, WireConnection};
use laminar_tests::Broker;

/// (api key, name, highest version the clients need at least).
const SERVED_APIS: [(i16, &str, i16); 21] = [
    (0, "Produce", 7),
    (29, "DescribeAcls", 1),
    (30, "CreateAcls", 1),
    (31, "DeleteAcls", 1),
    (1, "Fetch", 10),
    (2, "ListOffsets", 1),
    (3, "Metadata", 1),
    (17, "SaslHandshake", 1),
    (36, "SaslAuthenticate", 1),
    (50, "DescribeUserScramCredentials", 0),
    (51, "AlterUserScramCredentials", 0),
    (18, "ApiVersions", 3),
    (19, "CreateTopics", 0),
    (20, "DeleteTopics", 0),
    (21, "DeleteRecords", 0),
    (23, "OffsetForLeaderEpoch", 2),
    (32, "DescribeConfigs", 0),
    (33, "AlterConfigs", 0),
    (37, "CreatePartitions", 0),
    (44, "IncrementalAlterConfigs", 0),
    (60, "DescribeCluster", 0),
];

fn check_listing(response: &ApiVersionsResponse, version: i16) {
    assert_eq!(response.error_code, 0, "ApiVersions v{version}");
    for (key, name, needed) in SERVED_APIS {
        let listed = response.api_keys.iter().find(|k| k.api_key == key);
        let listed = listed.unwrap_or_else(|| panic!("v{version}: {name} ({key}) not advertised"));
        assert!(listed.min_version <= listed.max_version, "{name}: {listed:?}");
        assert!(
            listed.max_version >= needed,
            "{name} max v{} < v{needed}",
            listed.max_version
        );
    }
    let produce = response.api_keys.iter().find(|k| k.api_key == 0).expect("listed");
    assert_eq!(
        produce.min_version, 0,
        "Produce must be advertised from v0 (librdkafka < 2.11.1)"
    );
}

#[test]
fn every_api_versions_version_answers_with_the_served_apis() -> Result<()> {
    let broker = Broker::start_default()?;
    for version in 0..=3 {
        let mut conn = WireConnection::connect(broker.addr())?;
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("laminar-tests"))
            .with_client_software_version(StrBytes::from_static_str("0.1.0"));
        // `request` decodes the response header as v0 for every version (kafka-protocol's
        // HeaderVersion for ApiVersionsResponse), so a v1 header would fail decoding here.
        let response = conn.request(&request, version)?;
        check_listing(&response, version);
    }
    Ok(())
}

#[test]
fn api_versions_v3_ends_with_an_empty_tag_section() -> Result<()> {
    let broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("laminar-tests"))
        .with_client_software_version(StrBytes::from_static_str("0.1.0"));
    let correlation_id = conn.send(&request, 3)?;
    let Reaction::Frame(frame) = conn.reaction(std::time::Duration::from_secs(5))? else {
        panic!("no answer to ApiVersions v3");
    };
    // Hand parse: correlation id (4) | error_code (2) | compact array of (key, min, max, tags) |
    // throttle_time_ms (4) | tag section, which must be the single byte 0.
    let mut at = 0usize;
    let take = |at: &mut usize, n: usize| {
        let slice = &frame[*at..*at + n];
        *at += n;
        slice
    };
    assert_eq!(i32::from_be_bytes(take(&mut at, 4).try_into()?), correlation_id);
    assert_eq!(i16::from_be_bytes(take(&mut at, 2).try_into()?), 0);
    let count_plus_one = frame[at];
    assert!(
        count_plus_one < 0x80,
        "more than 126 APIs would need a longer varint"
    );
    at += 1;
    for i in 0..count_plus_one.saturating_sub(1) {
        take(&mut at, 6);
        assert_eq!(take(&mut at, 1), [0], "API entry {i} has tagged fields");
    }
    take(&mut at, 4);
    assert_eq!(
        &frame[at..],
        [0],
        "the v3 body must end with exactly one empty tag section"
    );
    Ok(())
}
