//! DeleteRecords: moves each partition's log start offset forward (whole segments below it go).

use std::rc::Rc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use crate::broker::{on_owning_shards, BrokerCtx, TopicPartition};
use crate::errors::partition_error_code;

/// DeleteRecords' "up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

pub async fn handle(ctx: &Rc<BrokerCtx>, request: DeleteRecordsRequest) -> DeleteRecordsResponse {
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
                    p.offset,
                )
            })
        })
        .collect();
    let results = on_owning_shards(ctx, items, |there, tp, offset| async move {
        let partition = there.state.partition(&tp).await?;
        let offset = if offset == HIGH_WATERMARK {
            partition.high_watermark()
        } else {
            offset
        };
        Ok(partition.delete_records_before(offset).await?)
    })
    .await;
    let mut response = DeleteRecordsResponse::default();
    for (tp, result) in results {
        let partition = match result {
            Ok(low_watermark) => DeleteRecordsPartitionResult::default()
                .with_partition_index(tp.partition)
                .with_low_watermark(low_watermark),
            Err(e) => DeleteRecordsPartitionResult::default()
                .with_partition_index(tp.partition)
                .with_low_watermark(-1)
                .with_error_code(partition_error_code(&e)),
        };
        match response.topics.last_mut() {
            Some(last) if last.name.as_str() == tp.topic => last.partitions.push(partition),
            _ => response.topics.push(
                DeleteRecordsTopicResult::default()
                    .with_name(kafka_protocol::messages::TopicName(tp.topic.clone().into()))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    response
}
