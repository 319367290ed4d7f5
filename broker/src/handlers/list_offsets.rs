//! ListOffsets: earliest, latest (for read_committed: the last stable offset), or the first
//! offset at or after a timestamp.

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
/// Kafka's READ_COMMITTED isolation level (v2+).
const READ_COMMITTED: i8 = 1;

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
    let read_committed = version >= 2 && request.isolation_level == READ_COMMITTED;
    let results = on_owning_shards(ctx, items, move |there, tp, timestamp| async move {
        let timestamp = timestamp?;
        let Some(partition) = there.state.partition_to_read(&tp).await? else {
            // Never written: empty at offset 0, and no record has a timestamp.
            let empty = matches!(timestamp, LATEST | EARLIEST).then_some((0, -1));
            return Ok(empty.unwrap_or((-1, -1)));
        };
        let found = match timestamp {
            LATEST => Some((latest_offset(&partition, read_committed).get(), -1)),
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

/// Where a consumer of this isolation reads up to: the last stable offset for read_committed,
/// the high watermark otherwise.
fn latest_offset(partition: &Partition, read_committed: bool) -> Offset {
    match read_committed {
        true => partition.last_stable_offset(),
        false => partition.high_watermark(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    use laminar_engine::io::{FileCache, GlommioStorage, ShardStorage, WriteMode};
    use laminar_engine::partition::LogConfig;

    /// One record from producer `producer_id` (-1: none), in a transaction or not.
    fn batch(producer_id: i64, transactional: bool) -> Bytes {
        let record = Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: if producer_id < 0 { -1 } else { 0 },
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: if producer_id < 0 { -1 } else { 0 },
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from_static(b"v")),
            headers: Default::default(),
        };
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, &[record], &options).expect("encodes");
        buf.freeze()
    }

    #[test]
    fn latest_for_read_committed_is_the_last_stable_offset() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t-0");
        let ran = glommio::LocalExecutorBuilder::default().spawn(|| async move {
            let storage: Rc<ShardStorage> =
                Rc::new(FileCache::new(GlommioStorage::new(WriteMode::Buffered), None));
            let partition = Partition::open(storage, path, LogConfig::default())
                .await
                .expect("opens");
            partition.append(batch(-1, false), 0).await.expect("appends");
            partition.append(batch(9, true), 0).await.expect("appends");
            partition.append(batch(-1, false), 0).await.expect("appends");
            assert_eq!(latest_offset(&partition, false).get(), 3, "the high watermark");
            assert_eq!(
                latest_offset(&partition, true).get(),
                1,
                "before the open transaction"
            );
            let abort = laminar_engine::partition::TxnResult::Abort;
            partition
                .append_txn_marker(9, 0, abort, 0, 0)
                .await
                .expect("marks");
            assert_eq!(latest_offset(&partition, true).get(), 4);
            partition.close().await.expect("closes");
        });
        ran.expect("executor").join().expect("test");
    }
}
