//! Each partition's read, or why it failed, as that partition's answer in a Fetch response:
//! the handler assembles the answer, and only this file fills a partition's fields.

use laminar_engine::partition::RecordBytes;
use laminar_protocol::fetch_response::PartitionAnswer;

use crate::broker::TopicPartition;
use crate::errors::partition_error_code;

use super::wanted::{Reads, Wanted};

/// Kafka's READ_COMMITTED isolation level.
pub(super) const READ_COMMITTED: i8 = 1;

/// Builds the answer from reads already within the byte limits.
/// Each partition's answer, in read order.
pub(super) fn partition_answers(
    results: Reads,
    wanted: &[(TopicPartition, Wanted)],
    isolation_level: i8,
) -> Vec<(TopicPartition, PartitionAnswer)> {
    let read_committed = isolation_level == READ_COMMITTED;
    let mut answers = Vec::with_capacity(results.len());
    for ((tp, result), (_, want)) in results.into_iter().zip(wanted) {
        let preferred_read_replica = want.preferred_replica.map(|id| id.get());
        let partition = match result {
            Ok(read) => PartitionAnswer {
                partition: tp.partition,
                error_code: 0,
                high_watermark: read.high_watermark.get(),
                last_stable_offset: read.high_watermark.get(),
                log_start_offset: read.log_start_offset.get(),
                read_committed,
                records: read.data,
                preferred_read_replica,
            },
            Err(e) => PartitionAnswer {
                partition: tp.partition,
                error_code: partition_error_code(&e),
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                read_committed,
                records: RecordBytes::default(),
                preferred_read_replica: None,
            },
        };
        answers.push((tp, partition));
    }
    answers
}
