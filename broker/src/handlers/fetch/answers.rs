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
                last_stable_offset: read.last_stable_offset.get(),
                log_start_offset: read.log_start_offset.get(),
                // Null for READ_UNCOMMITTED, as Kafka encodes it; a list (maybe empty) else.
                aborted_transactions: read_committed.then(|| read.aborted_transactions.unwrap_or_default()),
                records: read.data,
                preferred_read_replica,
            },
            Err(e) => PartitionAnswer {
                partition: tp.partition,
                error_code: partition_error_code(&e),
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                aborted_transactions: read_committed.then(Vec::new),
                records: RecordBytes::default(),
                preferred_read_replica: None,
            },
        };
        answers.push((tp, partition));
    }
    answers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::PartitionAccessError;
    use laminar_engine::partition::{AbortedTxn, ReadResult};
    use laminar_model::{LeaderEpoch, Offset};

    use super::super::wanted::Reader;

    fn want() -> Wanted {
        Wanted {
            offset: Offset::new(3),
            max_bytes: 1 << 20,
            min_one_batch: true,
            reader: Reader::Consumer,
            read_committed: true,
            current_leader_epoch: LeaderEpoch::UNKNOWN,
            authorized: true,
            preferred_replica: None,
            follower_may_serve: false,
        }
    }

    /// A read at high watermark 20 and last stable offset 12, with one aborted transaction.
    fn read() -> ReadResult<RecordBytes> {
        ReadResult {
            high_watermark: Offset::new(20),
            last_stable_offset: Offset::new(12),
            aborted_transactions: Some(vec![AbortedTxn::new(7, 5)]),
            ..ReadResult::default()
        }
    }

    #[test]
    fn answers_carry_the_last_stable_offset_and_read_committed_ones_the_aborted_list() {
        let tp = TopicPartition::new("t", 0);
        let wanted = vec![(tp.clone(), want()), (tp.clone(), want())];
        let reads = || {
            vec![
                (tp.clone(), Ok(read())),
                (tp.clone(), Err(PartitionAccessError::NotLeader)),
            ]
        };
        let committed = partition_answers(reads(), &wanted, READ_COMMITTED);
        let ok = &committed[0].1;
        assert_eq!((ok.high_watermark, ok.last_stable_offset), (20, 12));
        assert_eq!(ok.aborted_transactions, Some(vec![AbortedTxn::new(7, 5)]));
        assert_eq!(
            committed[1].1.aborted_transactions,
            Some(vec![]),
            "an error: an empty list"
        );
        let uncommitted = partition_answers(reads(), &wanted, 0);
        assert_eq!(uncommitted[0].1.last_stable_offset, 12);
        assert!(
            uncommitted.iter().all(|(_, a)| a.aborted_transactions.is_none()),
            "null"
        );
    }
}
