//! ListOffsets: earliest, latest, or the first offset at or after a timestamp.

use crate::authorization::Access;
use laminar_security::Operation;
use std::rc::Rc;

use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use kafka_protocol::records::RecordBatchDecoder;
use laminar_engine::partition::Partition;
use laminar_model::Offset;

use crate::broker::{on_owning_shards, BrokerCtx, PartitionAccessError};
use crate::errors::partition_error_code;
use crate::handlers::partition_answers::{items_by_partition, push_partition};

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let items = items_by_partition(
        &request.topics,
        |t| (t.name.as_str(), t.partitions.as_slice()),
        |p| (p.partition_index, p.timestamp),
    );
    let items = access.refuse_topics(items, Operation::Describe);
    let results = on_owning_shards(ctx, items, |there, tp, timestamp| async move {
        let timestamp = timestamp?;
        let Some(partition) = there.state.partition_to_read(&tp).await? else {
            // Never written: empty at offset 0, and no record has a timestamp.
            let empty = matches!(timestamp, LATEST | EARLIEST).then_some((0, -1));
            return Ok(empty.unwrap_or((-1, -1)));
        };
        let found = match timestamp {
            LATEST => Some((partition.high_watermark().get(), -1)),
            EARLIEST => Some((partition.log_start_offset().get(), -1)),
            timestamp => match partition.offset_for_timestamp(timestamp).await? {
                Some(batch) => Some(record_at_or_after(&partition, batch, timestamp).await?),
                None => None,
            },
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
        push_partition(&mut response.topics, &tp.topic, partition);
    }
    response
}

/// The storage engine finds the first batch whose max timestamp reaches `timestamp`; Kafka answers
/// with the exact record, so that batch is decoded (decompressed if need be) here. Only the one
/// batch is read, and only for ListOffsets, never on the produce or fetch path.
/// Falls back to the batch's own (offset, max timestamp) when its records do not say more.
async fn record_at_or_after(
    partition: &Partition,
    (batch_offset, batch_max_timestamp): (Offset, i64),
    timestamp: i64,
) -> Result<(i64, i64), PartitionAccessError> {
    let by_batch = (batch_offset.get(), batch_max_timestamp);
    let read = partition.read(batch_offset, 0, true).await?;
    let Some(mut batch) = read.data.into_iter().next() else {
        return Ok(by_batch);
    };
    let log_start = read.log_start_offset.get();
    let records = match RecordBatchDecoder::decode(&mut batch) {
        Ok(set) => set.records,
        Err(error) => {
            // The batch passed validation when it was appended: name it, then answer by batch.
            tracing::warn!(%batch_offset, %error, "cannot decode a stored batch for ListOffsets");
            return Ok(by_batch);
        }
    };
    Ok(records
        .iter()
        .find(|r| r.offset >= log_start && r.timestamp >= timestamp)
        .map_or(by_batch, |r| (r.offset, r.timestamp)))
}
