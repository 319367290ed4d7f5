//! The bytes an append writes, staged without copying the produced batches.
//!
//! A stored batch differs from the produced one only in its base offset and partition leader
//! epoch, both inside the first [`PREFIX_LEN`] bytes and outside the CRC'd range (`batch.rs`).
//! So an append writes, per batch, a patched copy of that prefix and then the rest of the batch
//! straight from the request buffer, all in one vectored write. Only topics with
//! `message.timestamp.type=LogAppendTime` copy their batches, because stamping the time changes
//! CRC'd fields.

use super::batch::{self, BatchHeader, INLINE_BATCHES};
use smallvec::SmallVec;
use std::ops::Range;

/// baseOffset (8) + batchLength (4) + partitionLeaderEpoch (4).
const PREFIX_LEN: usize = 16;

/// The parts of an append's write: a prefix and a rest per batch.
pub(super) type Parts<'a> = SmallVec<[&'a [u8]; 2 * INLINE_BATCHES]>;

/// What [`Log::append`](super::Log::append) hands the segment. Lives for one append.
pub(super) enum StagedAppend {
    /// Patched prefixes, and where each batch sits in the produced bytes.
    Prefixed {
        prefixes: SmallVec<[[u8; PREFIX_LEN]; INLINE_BATCHES]>,
        batches: SmallVec<[Range<usize>; INLINE_BATCHES]>,
    },
    /// Whole batches copied and rewritten.
    Rewritten(Vec<u8>),
}

impl StagedAppend {
    /// Assigns offsets from `base_offset` and the leader `epoch`; updates `headers` to match.
    pub(super) fn prefixed(
        records: &[u8],
        headers: &mut [BatchHeader],
        base_offset: i64,
        epoch: i32,
    ) -> Self {
        let mut prefixes = SmallVec::with_capacity(headers.len());
        let mut batches = SmallVec::with_capacity(headers.len());
        let (mut next, mut position) = (base_offset, 0);
        for h in headers.iter_mut() {
            let range = position..position + h.total_len();
            let mut prefix: [u8; PREFIX_LEN] = records[range.start..range.start + PREFIX_LEN]
                .try_into()
                .expect("a validated batch is longer than its prefix");
            batch::set_base_offset(&mut prefix, next);
            batch::set_partition_leader_epoch(&mut prefix, epoch);
            h.base_offset = next;
            h.partition_leader_epoch = epoch;
            next = h.next_offset();
            position = range.end;
            prefixes.push(prefix);
            batches.push(range);
        }
        assert_eq!(position, records.len(), "headers describe every produced byte");
        StagedAppend::Prefixed { prefixes, batches }
    }

    /// As [`prefixed`](Self::prefixed), and stamps `now_ms` as each batch's LogAppendTime.
    pub(super) fn rewritten(
        records: &[u8],
        headers: &mut [BatchHeader],
        base_offset: i64,
        epoch: i32,
        now_ms: i64,
    ) -> Self {
        let mut data = records.to_vec();
        let (mut next, mut position) = (base_offset, 0);
        for h in headers.iter_mut() {
            let bytes = &mut data[position..position + h.total_len()];
            batch::set_base_offset(bytes, next);
            batch::set_partition_leader_epoch(bytes, epoch);
            batch::set_log_append_time(bytes, now_ms);
            *h = BatchHeader::parse(bytes).expect("patched a validated batch");
            position += h.total_len();
            next = h.next_offset();
        }
        StagedAppend::Rewritten(data)
    }

    /// The bytes to write, in order.
    pub(super) fn parts<'a>(&'a self, records: &'a [u8]) -> Parts<'a> {
        match self {
            StagedAppend::Prefixed { prefixes, batches } => prefixes
                .iter()
                .zip(batches)
                .flat_map(|(prefix, range)| [&prefix[..], &records[range.start + PREFIX_LEN..range.end]])
                .collect(),
            StagedAppend::Rewritten(data) => smallvec::smallvec![&data[..]],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::testing::BatchBuilder;

    fn two_batches() -> Vec<u8> {
        let first = BatchBuilder::new(1000).records_of(3, 10).build();
        let second = BatchBuilder::new(2000).records_of(2, 10).build();
        [first, second].concat()
    }

    fn headers_of(records: &[u8]) -> Vec<BatchHeader> {
        batch::BatchIter::new(records, usize::MAX)
            .map(|item| item.unwrap().1)
            .collect()
    }

    #[test]
    fn prefixed_parts_equal_the_rewritten_bytes_but_for_append_time() {
        let records = two_batches();
        let mut headers = headers_of(&records);
        let staged = StagedAppend::prefixed(&records, &mut headers, 40, 7);
        let written = staged.parts(&records).concat();
        let mut expected = records.clone();
        batch::set_base_offset(&mut expected[..], 40);
        batch::set_partition_leader_epoch(&mut expected[..], 7);
        let second = headers[0].total_len();
        batch::set_base_offset(&mut expected[second..], 43);
        batch::set_partition_leader_epoch(&mut expected[second..], 7);
        assert_eq!(written, expected);
        assert_eq!(headers_of(&written), headers);
        assert_eq!((headers[0].base_offset, headers[1].base_offset), (40, 43));
        assert_eq!(headers[1].next_offset(), 45);
    }

    #[test]
    fn rewritten_batches_carry_the_append_time_and_a_valid_crc() {
        let records = two_batches();
        let mut headers = headers_of(&records);
        let staged = StagedAppend::rewritten(&records, &mut headers, 0, 1, 1_700_000_000_000);
        let written = staged.parts(&records).concat();
        for h in headers_of(&written) {
            assert_eq!(h.max_timestamp, 1_700_000_000_000);
            assert_eq!(h.timestamp_type(), batch::TimestampType::LogAppendTime);
        }
        assert!(batch::validate(&written[..headers[0].total_len()], usize::MAX).is_ok());
    }
}
