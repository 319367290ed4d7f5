//! What the per-partition handlers (Produce, Fetch, ListOffsets, DeleteRecords, OffsetCommit,
//! OffsetDelete, OffsetFetch, DescribeProducers) share: they turn a request's topics into one
//! work item per partition, and group the per-partition answers back under their topics in
//! request order. Used on one shard's task; holds no state.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::describe_producers_response;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::TopicName;

use std::sync::Arc;

use crate::broker::TopicPartition;

/// One `(partition, item)` per partition of `topics`, in request order. `topic` names a topic
/// and lists its partitions; `item` gives a partition's index and what the handler needs of it.
pub fn items_by_partition<Topic, Partition, Item>(
    topics: &[Topic],
    topic: impl Fn(&Topic) -> (&str, &[Partition]),
    item: impl Fn(&Partition) -> (i32, Item),
) -> Vec<(TopicPartition, Item)> {
    let mut items = Vec::new();
    for t in topics {
        let (name, partitions) = topic(t);
        // One copy of the name for all of the topic's partitions.
        let name: Arc<str> = name.into();
        for p in partitions {
            let (partition, item) = item(p);
            items.push((TopicPartition::new(name.clone(), partition), item));
        }
    }
    items
}

/// A topic's entry in a per-partition answer.
pub trait TopicAnswer {
    type Partition;
    fn topic(&self) -> &str;
    fn partitions_mut(&mut self) -> &mut Vec<Self::Partition>;
    /// A new entry for `topic` holding `first`.
    fn start(topic: String, first: Self::Partition) -> Self;
}

/// Adds `partition` to the last entry when it is `topic`'s, else starts an entry: answers come in
/// request order, so a topic's partitions are adjacent. `topic` is copied only for a new entry.
pub fn push_partition<A: TopicAnswer>(topics: &mut Vec<A>, topic: &str, partition: A::Partition) {
    match topics.last_mut() {
        Some(last) if last.topic() == topic => last.partitions_mut().push(partition),
        _ => topics.push(A::start(topic.to_string(), partition)),
    }
}

/// `(topic, partitions)` pairs, for answers assembled before they are encoded.
impl<P> TopicAnswer for (String, Vec<P>) {
    type Partition = P;
    fn topic(&self) -> &str {
        &self.0
    }
    fn partitions_mut(&mut self) -> &mut Vec<P> {
        &mut self.1
    }
    fn start(topic: String, first: P) -> Self {
        (topic, vec![first])
    }
}

/// Fetch's own answer shape; its topic id is filled in once the answer is whole
/// (`handlers::fetch::topic_ids`).
impl TopicAnswer for laminar_protocol::fetch_response::TopicAnswer {
    type Partition = laminar_protocol::fetch_response::PartitionAnswer;
    fn topic(&self) -> &str {
        &self.name
    }
    fn partitions_mut(&mut self) -> &mut Vec<Self::Partition> {
        &mut self.partitions
    }
    fn start(name: String, first: Self::Partition) -> Self {
        laminar_protocol::fetch_response::TopicAnswer {
            name,
            id: [0; 16],
            partitions: vec![first],
        }
    }
}

/// The protocol's topic entries differ only in type names and the partitions field's name.
macro_rules! kafka_topic_answer {
    ($topic:ty, $partition:ty, $partitions:ident, $with_partitions:ident) => {
        impl TopicAnswer for $topic {
            type Partition = $partition;
            fn topic(&self) -> &str {
                self.name.as_str()
            }
            fn partitions_mut(&mut self) -> &mut Vec<$partition> {
                &mut self.$partitions
            }
            fn start(topic: String, first: $partition) -> Self {
                Self::default()
                    .with_name(TopicName(topic.into()))
                    .$with_partitions(vec![first])
            }
        }
    };
}

kafka_topic_answer!(
    TopicProduceResponse,
    PartitionProduceResponse,
    partition_responses,
    with_partition_responses
);
kafka_topic_answer!(
    ListOffsetsTopicResponse,
    ListOffsetsPartitionResponse,
    partitions,
    with_partitions
);
kafka_topic_answer!(
    DeleteRecordsTopicResult,
    DeleteRecordsPartitionResult,
    partitions,
    with_partitions
);
kafka_topic_answer!(
    OffsetCommitResponseTopic,
    OffsetCommitResponsePartition,
    partitions,
    with_partitions
);
kafka_topic_answer!(
    OffsetDeleteResponseTopic,
    OffsetDeleteResponsePartition,
    partitions,
    with_partitions
);
kafka_topic_answer!(
    describe_producers_response::TopicResponse,
    describe_producers_response::PartitionResponse,
    partitions,
    with_partitions
);

/// OffsetForLeaderEpoch names its topic field `topic`, not `name`.
impl TopicAnswer for OffsetForLeaderTopicResult {
    type Partition = EpochEndOffset;
    fn topic(&self) -> &str {
        self.topic.as_str()
    }
    fn partitions_mut(&mut self) -> &mut Vec<EpochEndOffset> {
        &mut self.partitions
    }
    fn start(topic: String, first: EpochEndOffset) -> Self {
        Self::default()
            .with_topic(TopicName(topic.into()))
            .with_partitions(vec![first])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_follow_request_order() {
        let topics = [("a", vec![2, 0]), ("b", vec![1])];
        let items = items_by_partition(&topics, |t| (t.0, t.1.as_slice()), |p| (*p, *p * 10));
        let tp = |topic: &str, partition| TopicPartition::new(topic, partition);
        assert_eq!(items, vec![(tp("a", 2), 20), (tp("a", 0), 0), (tp("b", 1), 10)]);
        assert!(
            Arc::ptr_eq(&items[0].0.topic, &items[1].0.topic),
            "a topic's partitions share its name"
        );
    }

    #[test]
    fn adjacent_partitions_share_a_topic_entry() {
        let mut answer: Vec<(String, Vec<i32>)> = Vec::new();
        for (topic, partition) in [("a", 0), ("a", 1), ("b", 0), ("a", 2)] {
            push_partition(&mut answer, topic, partition);
        }
        assert_eq!(
            answer,
            vec![
                ("a".to_string(), vec![0, 1]),
                ("b".to_string(), vec![0]),
                ("a".to_string(), vec![2]),
            ]
        );
        let mut produced: Vec<TopicProduceResponse> = Vec::new();
        push_partition(
            &mut produced,
            "t",
            PartitionProduceResponse::default().with_index(3),
        );
        push_partition(
            &mut produced,
            "t",
            PartitionProduceResponse::default().with_index(4),
        );
        assert_eq!(produced.len(), 1);
        assert_eq!(produced[0].name.as_str(), "t");
        assert_eq!(produced[0].partition_responses.len(), 2);
    }
}
