//! DeleteRecords: moves each partition's log start offset forward (whole segments below it go).

use std::rc::Rc;

use kafka_protocol::messages::delete_records_response::DeleteRecordsPartitionResult;
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use laminar_model::Offset;

use crate::authorization::Access;
use crate::broker::{on_owning_shards, BrokerCtx};
use crate::errors::partition_error_code;
use crate::handlers::partition_answers::{items_by_partition, push_partition};
use laminar_security::Operation;

/// DeleteRecords' "up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let items = items_by_partition(
        &request.topics,
        |t| (t.name.as_str(), t.partitions.as_slice()),
        |p| (p.partition_index, p.offset),
    );
    let items = access.refuse_topics(items, Operation::Delete);
    let results = on_owning_shards(ctx, items, |there, tp, offset| async move {
        let offset = offset?;
        let partition = there.state.partition(&tp).await?;
        let offset = if offset == HIGH_WATERMARK {
            partition.high_watermark()
        } else {
            Offset::new(offset)
        };
        Ok(partition.delete_records_before(offset).await?)
    })
    .await;
    let mut response = DeleteRecordsResponse::default();
    for (tp, result) in results {
        let partition = match result {
            Ok(low_watermark) => DeleteRecordsPartitionResult::default()
                .with_partition_index(tp.partition)
                .with_low_watermark(low_watermark.get()),
            Err(e) => DeleteRecordsPartitionResult::default()
                .with_partition_index(tp.partition)
                .with_low_watermark(-1)
                .with_error_code(partition_error_code(&e)),
        };
        push_partition(&mut response.topics, &tp.topic, partition);
    }
    response
}
