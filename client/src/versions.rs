//! ApiVersions negotiation: for each API, the highest version both this client and the broker
//! speak.

use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::VersionRange;

use crate::error::ClientError;

/// The versions this client speaks for an API. Usually the whole range of the `kafka-protocol`
/// crate, narrowed where this client's helpers depend on a field that changes meaning:
/// Produce and Fetch from v13 name topics by id only, and the helpers address topics by name;
/// the group APIs are capped where their request shape changes (see `client::groups`), and
/// AddPartitionsToTxn at v3, the last a client sends.
pub fn client_versions(api: ApiKey) -> VersionRange {
    let crate_range = api.valid_versions();
    let max = match api {
        ApiKey::Produce | ApiKey::Fetch => crate_range.max.min(12),
        // Later versions batch keys / groups, or name topics by id: see client::groups.
        ApiKey::FindCoordinator => crate_range.max.min(3),
        ApiKey::OffsetFetch => crate_range.max.min(7),
        ApiKey::OffsetCommit => crate_range.max.min(9),
        // v4 on are brokers' own verification requests (KIP-890); clients send v3 and below.
        ApiKey::AddPartitionsToTxn => crate_range.max.min(3),
        _ => crate_range.max,
    };
    VersionRange {
        min: crate_range.min,
        max,
    }
}

/// The negotiated version of each API on one connection. Owned by that connection.
#[derive(Debug, Clone, Default)]
pub struct ApiVersionTable {
    /// `(broker range, negotiated version)` by API key, for the keys the broker advertised.
    entries: Vec<(i16, VersionRange, Option<i16>)>,
}

impl ApiVersionTable {
    /// Intersects the broker's advertised ranges with [`client_versions`].
    pub fn negotiate(response: &ApiVersionsResponse) -> ApiVersionTable {
        let entries = response
            .api_keys
            .iter()
            .map(|advertised| {
                let broker = VersionRange {
                    min: advertised.min_version,
                    max: advertised.max_version,
                };
                let chosen = ApiKey::try_from(advertised.api_key).ok().and_then(|api| {
                    let common = client_versions(api).intersect(&broker);
                    (!common.is_empty()).then_some(common.max)
                });
                (advertised.api_key, broker, chosen)
            })
            .collect();
        ApiVersionTable { entries }
    }

    /// The version to use for `api`, or why there is none.
    pub fn version(&self, api: ApiKey) -> Result<i16, ClientError> {
        let entry = self.entries.iter().find(|(key, _, _)| *key == api as i16);
        match entry {
            Some((_, _, Some(version))) => Ok(*version),
            _ => {
                let client = client_versions(api);
                Err(ClientError::UnsupportedApi {
                    api,
                    client_min: client.min,
                    client_max: client.max,
                    broker: entry.map_or_else(|| "nothing".to_owned(), |(_, b, _)| b.to_string()),
                })
            }
        }
    }

    /// The broker's advertised range for `api`, if it advertised one.
    pub fn broker_range(&self, api: ApiKey) -> Option<VersionRange> {
        self.entries
            .iter()
            .find(|(key, _, _)| *key == api as i16)
            .map(|(_, range, _)| *range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;

    fn advertised(api: ApiKey, min: i16, max: i16) -> ApiVersion {
        ApiVersion::default()
            .with_api_key(api as i16)
            .with_min_version(min)
            .with_max_version(max)
    }

    #[test]
    fn picks_highest_common_version() {
        let response = ApiVersionsResponse::default().with_api_keys(vec![
            advertised(ApiKey::Produce, 0, 11),
            advertised(ApiKey::Fetch, 0, 17),
            advertised(ApiKey::Metadata, 0, 99),
            advertised(ApiKey::CreateTopics, 0, 1),
            advertised(ApiKey::AddPartitionsToTxn, 0, 5),
        ]);
        let table = ApiVersionTable::negotiate(&response);
        assert_eq!(table.version(ApiKey::Produce).unwrap(), 11);
        assert_eq!(
            table.version(ApiKey::Fetch).unwrap(),
            12,
            "capped: v13 drops topic names"
        );
        assert_eq!(
            table.version(ApiKey::AddPartitionsToTxn).unwrap(),
            3,
            "capped: v4 on are brokers' requests"
        );
        assert_eq!(
            table.version(ApiKey::Metadata).unwrap(),
            ApiKey::Metadata.valid_versions().max
        );
        // CreateTopics 0..=1 does not meet the crate's 2..: no common version.
        let error = table.version(ApiKey::CreateTopics).unwrap_err();
        assert!(error.to_string().contains("broker offers 0..1"), "{error}");
        assert!(matches!(
            table.version(ApiKey::DeleteTopics),
            Err(ClientError::UnsupportedApi { broker, .. }) if broker == "nothing"
        ));
    }
}
