//! Fetch from v13 names topics by id (KIP-516). The session and the reads address partitions by
//! name, so the request's ids become names before they see it, and the answer's topics get their
//! ids back once it is whole. An id the topic table does not hold is answered UNKNOWN_TOPIC_ID
//! (the client then refreshes its metadata).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::FetchTopic;
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use laminar_engine::metadata::TopicTable;
use laminar_protocol::fetch_response::{FetchAnswer, PartitionAnswer, TopicAnswer};

use super::answers::READ_COMMITTED;

/// The first Fetch version that names topics by id.
pub(super) const FIRST_TOPIC_ID_VERSION: i16 = 13;

/// Names the topics of `request` (v13+) after their ids. Topics whose id is unknown are taken
/// out of the request and come back answered; unknown ids among the forgotten are dropped
/// (nothing of them is in a session).
pub(super) fn name_topics(table: &TopicTable, request: &mut FetchRequest, version: i16) -> Vec<TopicAnswer> {
    if version < FIRST_TOPIC_ID_VERSION {
        return Vec::new();
    }
    let read_committed = request.isolation_level == READ_COMMITTED;
    let mut unknown = Vec::new();
    let named = |id: &uuid::Uuid, slot: &mut TopicName| name_of(table, id).map(|name| *slot = name).is_some();
    request.topics.retain_mut(|topic| {
        let known = named(&topic.topic_id, &mut topic.topic);
        if !known {
            unknown.push(unknown_topic(topic, read_committed));
        }
        known
    });
    request
        .forgotten_topics_data
        .retain_mut(|topic| named(&topic.topic_id, &mut topic.topic));
    unknown
}

/// Gives each topic of `answer` its id as the table holds it now (v13+). A topic deleted since
/// the request keeps the nil id: its partitions answer UNKNOWN_TOPIC_OR_PARTITION.
pub(super) fn add_ids(table: &TopicTable, answer: &mut FetchAnswer) {
    for topic in &mut answer.topics {
        if let Some(known) = table.get(&topic.name) {
            topic.id = known.id;
        }
    }
}

fn name_of(table: &TopicTable, id: &uuid::Uuid) -> Option<TopicName> {
    let topic = table.get_by_id(id.as_bytes())?;
    Some(TopicName(StrBytes::from_string(topic.name.clone())))
}

fn unknown_topic(topic: &FetchTopic, read_committed: bool) -> TopicAnswer {
    let partitions = topic
        .partitions
        .iter()
        .map(|p| PartitionAnswer {
            partition: p.partition,
            error_code: ResponseError::UnknownTopicId.code(),
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            aborted_transactions: read_committed.then(Vec::new),
            records: Default::default(),
            preferred_read_replica: None,
        })
        .collect();
    TopicAnswer {
        name: String::new(),
        id: *topic.topic_id.as_bytes(),
        partitions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_request::{FetchPartition, ForgottenTopic};
    use laminar_engine::metadata::TopicMetadata;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    const ORDERS: [u8; 16] = [1; 16];
    const GONE: [u8; 16] = [2; 16];

    fn table() -> TopicTable {
        let orders = Arc::new(TopicMetadata {
            name: "orders".into(),
            id: ORDERS,
            partition_count: 2,
            replication_factor: 1,
            configs: BTreeMap::new(),
        });
        TopicTable::new(BTreeMap::from([("orders".to_string(), orders)]))
    }

    fn fetch_topic(id: [u8; 16], partitions: &[i32]) -> FetchTopic {
        let partitions = partitions
            .iter()
            .map(|p| FetchPartition::default().with_partition(*p))
            .collect();
        FetchTopic::default()
            .with_topic_id(uuid::Uuid::from_bytes(id))
            .with_partitions(partitions)
    }

    #[test]
    fn known_ids_become_names_and_unknown_ones_are_answered_unknown_topic_id() {
        let mut request = FetchRequest::default()
            .with_topics(vec![fetch_topic(ORDERS, &[0, 1]), fetch_topic(GONE, &[4])])
            .with_forgotten_topics_data(vec![
                ForgottenTopic::default().with_topic_id(uuid::Uuid::from_bytes(ORDERS)),
                ForgottenTopic::default().with_topic_id(uuid::Uuid::from_bytes(GONE)),
            ]);
        let unknown = name_topics(&table(), &mut request, 13);
        assert_eq!(request.topics.len(), 1);
        assert_eq!(request.topics[0].topic.as_str(), "orders");
        assert_eq!(request.forgotten_topics_data.len(), 1);
        assert_eq!(request.forgotten_topics_data[0].topic.as_str(), "orders");
        assert_eq!(unknown.len(), 1);
        assert_eq!(unknown[0].id, GONE);
        let codes: Vec<(i32, i16)> = unknown[0]
            .partitions
            .iter()
            .map(|p| (p.partition, p.error_code))
            .collect();
        assert_eq!(codes, [(4, ResponseError::UnknownTopicId.code())]);
    }

    #[test]
    fn requests_before_v13_keep_their_names() {
        let mut request = FetchRequest::default().with_topics(vec![
            fetch_topic(GONE, &[0]).with_topic(TopicName(StrBytes::from_static_str("by-name")))
        ]);
        assert!(name_topics(&table(), &mut request, 12).is_empty());
        assert_eq!(request.topics[0].topic.as_str(), "by-name");
    }

    #[test]
    fn answers_get_their_topics_ids() {
        let mut answer = FetchAnswer {
            topics: vec![
                TopicAnswer {
                    name: "orders".into(),
                    ..Default::default()
                },
                TopicAnswer {
                    name: "deleted".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        add_ids(&table(), &mut answer);
        assert_eq!(answer.topics[0].id, ORDERS);
        assert_eq!(answer.topics[1].id, [0; 16]);
    }
}
