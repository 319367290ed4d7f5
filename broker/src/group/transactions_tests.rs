//! Transactional offsets in the coordinator: pending until the marker, then applied or
//! dropped in log order; the replay of a log holding transactional and control batches; and a
//! randomised check that the live path (plain commits settled in any order, markers reported
//! as they are written) ends where a replay of the same log ends.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{Compression, Record};
use laminar_engine::log::batch::{set_base_offset, BatchHeader};
use laminar_engine::partition::TxnResult;
use laminar_model::Offset;
use laminar_protocol::records::{self as client_records, plain_record};

use super::coordinator::{CommitTicket, GroupCoordinator};
use super::records::{
    decode_replayed, encode_batch, encode_txn_batch, GroupRecord, OffsetKey, OffsetValue, ReplayedBatch,
};
use super::state::GroupSettings;
use super::transactions::{
    PendingOffset, PendingTxnOffsets, PENDING_OFFSETS_PER_GROUP_MAX, PENDING_OFFSETS_PER_PRODUCER_MAX,
};

const PRODUCER: i64 = 7;

fn coordinator() -> GroupCoordinator {
    let settings = GroupSettings {
        initial_rebalance_delay_ms: 0,
    };
    GroupCoordinator::new(settings, 1)
}

fn key(partition: i32) -> OffsetKey {
    OffsetKey {
        group: "g".into(),
        topic: "t".into(),
        partition,
    }
}

fn value(offset: i64) -> OffsetValue {
    OffsetValue {
        offset,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp_ms: 0,
    }
}

fn committed(coordinator: &GroupCoordinator, partition: i32) -> Option<i64> {
    let offsets = coordinator.committed("g");
    offsets.get(&("t".to_string(), partition)).map(|v| v.offset)
}

/// A plain OffsetCommit of `offset` for partition 0, appended at `position` and settled.
fn plain_commit(coordinator: &GroupCoordinator, position: i64, offset: i64) {
    let ticket = coordinator.await_commit(0, Offset::new(position));
    coordinator.settle(
        ticket,
        Some(vec![GroupRecord::Offset(key(0), Some(value(offset)))]),
    );
}

#[test]
fn a_commit_marker_applies_pending_offsets_and_an_abort_drops_them() {
    let coordinator = coordinator();
    let slot = ("t".to_string(), 0);
    coordinator.add_txn_batch(0, PRODUCER, Offset::new(5), vec![(key(0), value(10))]);
    assert_eq!(committed(&coordinator, 0), None, "pending, not committed");
    assert!(coordinator.pending_txn_slots("g").contains(&slot));
    coordinator.complete_transaction(0, PRODUCER, TxnResult::Commit);
    assert_eq!(committed(&coordinator, 0), Some(10));
    assert!(coordinator.pending_txn_slots("g").is_empty());

    coordinator.add_txn_batch(0, PRODUCER, Offset::new(8), vec![(key(0), value(20))]);
    coordinator.complete_transaction(0, PRODUCER, TxnResult::Abort);
    assert_eq!(committed(&coordinator, 0), Some(10), "the abort dropped 20");
    assert!(coordinator.pending_txn_slots("g").is_empty());
    // A second marker for the same transaction (a replay meeting it again) changes nothing.
    coordinator.complete_transaction(0, PRODUCER, TxnResult::Commit);
    assert_eq!(committed(&coordinator, 0), Some(10));
}

#[test]
fn the_later_write_in_the_log_wins_whichever_applies_first() {
    // Transaction's offset at 5, plain commit at 6, marker later: the plain commit stays.
    let coordinator = coordinator();
    coordinator.add_txn_batch(0, PRODUCER, Offset::new(5), vec![(key(0), value(10))]);
    plain_commit(&coordinator, 6, 11);
    coordinator.complete_transaction(0, PRODUCER, TxnResult::Commit);
    assert_eq!(committed(&coordinator, 0), Some(11));

    // Plain commit at 3 settles only after the marker of a transaction written at 5.
    let coordinator = self::coordinator();
    let late = coordinator.await_commit(0, Offset::new(3));
    coordinator.add_txn_batch(0, PRODUCER, Offset::new(5), vec![(key(0), value(10))]);
    coordinator.complete_transaction(0, PRODUCER, TxnResult::Commit);
    coordinator.settle(late, Some(vec![GroupRecord::Offset(key(0), Some(value(3)))]));
    assert_eq!(committed(&coordinator, 0), Some(10));

    // Plain commit at 9, after the marker: it wins.
    plain_commit(&coordinator, 9, 12);
    assert_eq!(committed(&coordinator, 0), Some(12));
}

#[test]
fn tombstones_drop_pending_offsets_written_before_them_only() {
    let coordinator = coordinator();
    coordinator.add_txn_batch(
        0,
        PRODUCER,
        Offset::new(5),
        vec![(key(0), value(10)), (key(1), value(11))],
    );
    let deleted = coordinator.await_commit(0, Offset::new(6));
    coordinator.settle(deleted, Some(vec![GroupRecord::Offset(key(0), None)]));
    coordinator.add_txn_batch(0, PRODUCER, Offset::new(7), vec![(key(2), value(12))]);
    let group_deleted = coordinator.await_commit(0, Offset::new(8));
    coordinator.settle(group_deleted, Some(vec![GroupRecord::Group("g".into(), None)]));
    coordinator.add_txn_batch(0, PRODUCER, Offset::new(9), vec![(key(3), value(13))]);
    coordinator.complete_transaction(0, PRODUCER, TxnResult::Commit);
    let offsets: Vec<i32> = coordinator.committed("g").keys().map(|(_, p)| *p).collect();
    assert_eq!(offsets, [3], "only what was written after the group's tombstone");
}

#[test]
fn unload_forgets_pending_offsets_and_a_stale_abandon_changes_nothing() {
    let coordinator = coordinator();
    let stale = coordinator.add_txn_batch(0, PRODUCER, Offset::new(5), vec![(key(0), value(10))]);
    coordinator.begin_load(0, laminar_model::LeaderEpoch::new(1));
    assert!(coordinator.pending_txn_slots("g").is_empty());
    // The replay of the new load finds the batch again at the same offset.
    let records = vec![GroupRecord::Offset(key(0), Some(value(10)))];
    let replayed = ReplayedBatch::Transactional {
        producer_id: PRODUCER,
        records,
    };
    coordinator.replay(0, Offset::new(5), replayed);
    coordinator.abandon_txn_batch(stale);
    assert_eq!(
        coordinator.pending_txn_slots("g").len(),
        1,
        "kept: the ticket is stale"
    );
    let current = coordinator.add_txn_batch(0, PRODUCER, Offset::new(6), vec![(key(1), value(1))]);
    coordinator.abandon_txn_batch(current);
    assert_eq!(coordinator.pending_txn_slots("g").len(), 1, "the batch at 6 went");
    coordinator.complete_transaction(0, PRODUCER, TxnResult::Commit);
    assert_eq!(
        (committed(&coordinator, 0), committed(&coordinator, 1)),
        (Some(10), None)
    );
}

#[test]
fn bounds_count_new_partitions_per_producer_and_per_group() {
    let mut pending = PendingTxnOffsets::default();
    let offset = |position| PendingOffset {
        value: value(0),
        position: Offset::new(position),
    };
    let slots: Vec<(String, i32)> = (0..PENDING_OFFSETS_PER_PRODUCER_MAX as i32)
        .map(|p| ("t".to_string(), p))
        .collect();
    assert!(pending.has_room("g", 1, &slots));
    for (topic, partition) in &slots {
        let key = OffsetKey {
            group: "g".into(),
            topic: topic.clone(),
            partition: *partition,
        };
        pending.insert(0, 1, key, offset(1));
    }
    assert!(pending.has_room("g", 1, &slots), "held slots cost nothing");
    let one_more = [("t".to_string(), -1)];
    assert!(!pending.has_room("g", 1, &one_more), "the producer's bound");
    assert!(pending.has_room("g", 2, &one_more), "another producer has room");
    assert!(pending.has_room("other", 1, &one_more), "another group too");
    let producers = PENDING_OFFSETS_PER_GROUP_MAX / PENDING_OFFSETS_PER_PRODUCER_MAX;
    for producer_id in 2..=producers as i64 {
        for (topic, partition) in &slots {
            let key = OffsetKey {
                group: "g".into(),
                topic: topic.clone(),
                partition: *partition,
            };
            pending.insert(0, producer_id, key, offset(1));
        }
    }
    assert_eq!(pending.len(), PENDING_OFFSETS_PER_GROUP_MAX);
    assert!(
        !pending.has_room("g", producers as i64 + 1, &one_more),
        "the group's bound"
    );
    pending.take(0, 1);
    assert!(pending.has_room("g", producers as i64 + 1, &one_more));
    pending.unload(0);
    assert!(pending.is_empty());
}

/// A control batch of `producer_id` at `position` (key: version 0, type).
fn control_batch(producer_id: i64, result: TxnResult, position: i64) -> Bytes {
    let control_type: i16 = match result {
        TxnResult::Abort => 0,
        TxnResult::Commit => 1,
    };
    let mut key = BytesMut::new();
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&control_type.to_be_bytes());
    let record = Record {
        transactional: true,
        control: true,
        producer_id,
        producer_epoch: 0,
        ..plain_record(
            0,
            0,
            Some(key.freeze()),
            Some(Bytes::from_static(&[0, 0, 0, 0, 0, 0])),
        )
    };
    let mut out = BytesMut::new();
    client_records::encode_batch(&mut out, &[record], Compression::None).unwrap();
    set_base_offset(&mut out, position);
    out.freeze()
}

fn at(batch: Bytes, position: i64) -> Bytes {
    let mut batch = BytesMut::from(&batch[..]);
    set_base_offset(&mut batch, position);
    batch.freeze()
}

/// Replays stored batches as `store::replay_partition` does.
fn replay(coordinator: &GroupCoordinator, batches: Vec<Bytes>) {
    for batch in batches {
        let header = BatchHeader::parse(&batch).unwrap();
        let replayed = decode_replayed(&header, batch).unwrap();
        coordinator.replay(0, Offset::new(header.base_offset), replayed);
    }
}

#[test]
fn replay_keeps_open_transactions_pending_and_ends_them_at_their_markers() {
    let offset_record = |partition, offset| GroupRecord::Offset(key(partition), Some(value(offset)));
    let txn = |producer_id, records: &[GroupRecord], position| {
        at(encode_txn_batch(records, (producer_id, 0), 0).unwrap(), position)
    };
    let plain = |records: &[GroupRecord], position| at(encode_batch(records, 0).unwrap(), position);
    let header = BatchHeader::parse(&txn(1, &[offset_record(0, 1)], 0)).unwrap();
    assert!(header.is_transactional() && !header.is_control());
    assert_eq!((header.producer_id, header.base_sequence), (1, -1));
    let coordinator = coordinator();
    replay(
        &coordinator,
        vec![
            plain(&[offset_record(0, 100), offset_record(1, 100)], 0),
            txn(1, &[offset_record(0, 1)], 2),
            txn(2, &[offset_record(1, 2)], 3),
            plain(&[offset_record(1, 300)], 4),
            txn(3, &[offset_record(2, 3)], 5),
            control_batch(1, TxnResult::Commit, 6),
            control_batch(2, TxnResult::Commit, 7),
            txn(1, &[offset_record(0, 11)], 8),
            control_batch(1, TxnResult::Abort, 9),
        ],
    );
    assert_eq!(
        committed(&coordinator, 0),
        Some(1),
        "producer 1's first transaction"
    );
    assert_eq!(
        committed(&coordinator, 1),
        Some(300),
        "written after producer 2's offset"
    );
    assert_eq!(
        committed(&coordinator, 2),
        None,
        "producer 3's transaction is open"
    );
    let open: Vec<i32> = coordinator.pending_txn_slots("g").iter().map(|s| s.1).collect();
    assert_eq!(open, [2]);
    coordinator.complete_transaction(0, 3, TxnResult::Commit);
    assert_eq!(committed(&coordinator, 2), Some(3));
}

/// xorshift64*: a deterministic stream from a seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// One batch of a generated `__consumer_offsets` log.
#[derive(Debug, Clone)]
enum Written {
    Plain(GroupRecord),
    Txn(i64, GroupRecord),
    Marker(i64, TxnResult),
}

fn generated_log(rng: &mut Rng, length: usize) -> Vec<Written> {
    (0..length)
        .map(|at| {
            let producer = rng.below(3) as usize;
            let partition = rng.below(3) as i32;
            let offset = at as i64;
            match rng.below(10) {
                0..=2 => Written::Plain(GroupRecord::Offset(key(partition), Some(value(offset)))),
                3 => Written::Plain(GroupRecord::Offset(key(partition), None)),
                4 => Written::Plain(GroupRecord::Group("g".into(), None)),
                5..=7 => Written::Txn(
                    producer as i64,
                    GroupRecord::Offset(key(partition), Some(value(offset))),
                ),
                roll => {
                    let result = [TxnResult::Abort, TxnResult::Commit][roll as usize % 2];
                    Written::Marker(producer as i64, result)
                }
            }
        })
        .collect()
}

/// The live path over `log`: plain batches settle in a random order (applied in log order by
/// the coordinator), transactional ones are pending once appended, markers are reported as
/// they are written.
fn live(rng: &mut Rng, log: &[Written]) -> GroupCoordinator {
    let coordinator = coordinator();
    let mut unsettled: Vec<(CommitTicket, GroupRecord)> = Vec::new();
    for (at, written) in log.iter().enumerate() {
        let position = Offset::new(at as i64);
        match written.clone() {
            Written::Plain(record) => unsettled.push((coordinator.await_commit(0, position), record)),
            Written::Txn(producer_id, GroupRecord::Offset(key, Some(value))) => {
                coordinator.add_txn_batch(0, producer_id, position, vec![(key, value)]);
            }
            Written::Txn(..) => unreachable!("transactions write offsets"),
            Written::Marker(producer_id, result) => coordinator.complete_transaction(0, producer_id, result),
        }
        while !unsettled.is_empty() && rng.below(2) == 0 {
            let (ticket, record) = unsettled.swap_remove(rng.below(unsettled.len() as u64) as usize);
            coordinator.settle(ticket, Some(vec![record]));
        }
    }
    for (ticket, record) in unsettled {
        coordinator.settle(ticket, Some(vec![record]));
    }
    coordinator
}

#[test]
fn the_live_path_in_any_order_ends_where_a_replay_of_the_log_ends() {
    for seed in 1..=500u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let length = 1 + rng.below(40) as usize;
        let log = generated_log(&mut rng, length);
        let replayed = coordinator();
        for (at, written) in log.iter().cloned().enumerate() {
            let batch = match written {
                Written::Plain(record) => ReplayedBatch::Plain(vec![record]),
                Written::Txn(producer_id, record) => ReplayedBatch::Transactional {
                    producer_id,
                    records: vec![record],
                },
                Written::Marker(producer_id, result) => ReplayedBatch::Marker { producer_id, result },
            };
            replayed.replay(0, Offset::new(at as i64), batch);
        }
        let live = live(&mut rng, &log);
        assert_eq!(
            live.committed("g"),
            replayed.committed("g"),
            "seed {seed}: {log:?}"
        );
        assert_eq!(
            live.pending_txn_slots("g"),
            replayed.pending_txn_slots("g"),
            "seed {seed}: {log:?}"
        );
    }
}
