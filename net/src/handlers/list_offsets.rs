//! ListOffsets: earliest, latest, or the first offset at or after a timestamp.

use std::rc::Rc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, TopicName};

use crate::broker::{on_owning_shards, BrokerCtx, TopicPartition};
use crate::errors::partition_error_code;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;

pub async fn handle(ctx: &Rc<BrokerCtx>, request: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
    let items: Vec<(TopicPartition, i64)> = request
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(|p| {
                (
                    TopicPartition {
                        topic: topic.name.to_string(),
                        partition: p.partition_index,
                    },
                    p.timestamp,
                )
            })
        })
        .collect();
    let results = on_owning_shards(ctx, items, |there, tp, timestamp| async move {
        let partition = there.state.partition(&tp).await?;
        let found = match timestamp {
            LATEST => Some((partition.high_watermark(), -1)),
            EARLIEST => Some((partition.log_start_offset(), -1)),
            timestamp => partition.offset_for_timestamp(timestamp).await?,
        };
        Ok(found.unwrap_or((-1, -1)))
    })
    .await;
    let mut response = ListOffsetsResponse::default();
    for (tp, result) in results {
        let partition = match result {
            Ok((offset, timestamp)) => ListOffsetsPartitionResponse::default()
                .with_partition_index(tp.partition)
                .with_offset(offset)
                .with_timestamp(timestamp)
                // Leader epochs exist from v4 on; earlier versions must leave the field unset.
                .with_leader_epoch(if version >= 4 { 0 } else { -1 }),
            Err(e) => ListOffsetsPartitionResponse::default()
                .with_partition_index(tp.partition)
                .with_error_code(partition_error_code(&e))
                .with_offset(-1)
                .with_timestamp(-1),
        };
        match response.topics.last_mut() {
            Some(last) if last.name.as_str() == tp.topic => last.partitions.push(partition),
            _ => response.topics.push(
                ListOffsetsTopicResponse::default()
                    .with_name(TopicName(tp.topic.clone().into()))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    response
}
