//! ElectLeaders (API 43): moves leaderships back to the preferred replicas (the first of each
//! partition's replica list), as after a reassignment reordered them.

use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::connection::Connection;
use crate::error::{check_code, ClientError};

/// Kafka's election type for the preferred replica.
const PREFERRED: i8 = 0;
/// ELECTION_NOT_NEEDED: the preferred replica leads already.
const ELECTION_NOT_NEEDED: i16 = 84;

impl Connection {
    /// A preferred-replica election of `partitions` (`(topic, indexes)`); the partitions whose
    /// election failed, with Kafka's code (those already led by their preferred replica are
    /// not failures).
    pub fn elect_preferred_leaders(
        &mut self,
        partitions: &[(String, Vec<i32>)],
        timeout_ms: i32,
    ) -> Result<Vec<(String, i32, i16)>, ClientError> {
        let topics = partitions
            .iter()
            .map(|(topic, indexes)| {
                TopicPartitions::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(indexes.clone())
            })
            .collect();
        let request = ElectLeadersRequest::default()
            .with_election_type(PREFERRED)
            .with_topic_partitions(Some(topics))
            .with_timeout_ms(timeout_ms);
        let response = self.request(&request)?;
        check_code(ApiKey::ElectLeaders, response.error_code, None, String::new)?;
        let failed = response.replica_election_results.iter().flat_map(|topic| {
            topic
                .partition_result
                .iter()
                .filter(|p| p.error_code != 0 && p.error_code != ELECTION_NOT_NEEDED)
                .map(|p| (topic.topic.to_string(), p.partition_id, p.error_code))
        });
        Ok(failed.collect())
    }
}
