use super::*;

fn tp(partition: i32) -> TopicPartition {
    TopicPartition::new("t", partition)
}

fn fetch(offset: i64) -> PartitionFetch {
    PartitionFetch {
        fetch_offset: offset,
        partition_max_bytes: 1 << 20,
        current_leader_epoch: -1,
    }
}

fn named(partitions: &[(i32, i64)]) -> Vec<(TopicPartition, PartitionFetch)> {
    partitions
        .iter()
        .map(|&(p, offset)| (tp(p), fetch(offset)))
        .collect()
}

fn at(high_watermark: i64) -> Answered {
    Answered {
        state: PartitionState {
            high_watermark,
            last_stable_offset: high_watermark,
            log_start_offset: 0,
        },
        has_records: false,
        error_code: 0,
    }
}

fn indices(opened: &Opened) -> Vec<i32> {
    opened.partitions.iter().map(|(tp, _)| tp.partition).collect()
}

/// Opens a session over `partitions` (each answered at high watermark 10); returns its id.
fn full_fetch(sessions: &FetchSessions, partitions: &[i32], now: Instant) -> i32 {
    let named: Vec<_> = partitions.iter().map(|&p| (tp(p), fetch(0))).collect();
    let opened = sessions.open((0, 0), named, &[], false, now).unwrap();
    assert!(matches!(opened.context, FetchContext::Full { .. }));
    let answers = vec![at(10); partitions.len()];
    let (id, sent) = sessions.answered(&opened, &answers, now);
    assert_eq!(sent, None, "a full fetch answers every partition");
    id
}

#[test]
fn an_incremental_fetch_reads_the_whole_session_and_answers_only_what_changed() {
    let sessions = FetchSessions::new(10);
    let now = Instant::now();
    let id = full_fetch(&sessions, &[0, 1, 2], now);
    assert!(id > 0);

    // Nothing named: every partition of the session is read, at the offsets cached.
    let opened = sessions.open((id, 1), Vec::new(), &[], false, now).unwrap();
    assert_eq!(opened.context, FetchContext::Incremental { id, next_epoch: 2 });
    assert_eq!(indices(&opened), vec![0, 1, 2]);
    let mut grown = at(11);
    grown.has_records = true;
    let (answer_id, sent) = sessions.answered(&opened, &[at(10), grown, at(10)], now);
    assert_eq!((answer_id, sent), (id, Some(vec![false, true, false])));

    // The partition answered went to the end; a new fetch position is taken as named.
    let opened = sessions.open((id, 2), named(&[(1, 5)]), &[], false, now).unwrap();
    assert_eq!(indices(&opened), vec![0, 2, 1]);
    assert_eq!(opened.partitions[2].1.fetch_offset, 5);
    let failed = Answered {
        error_code: 6,
        ..at(11)
    };
    let (_, sent) = sessions.answered(&opened, &[at(10), at(12), failed], now);
    assert_eq!(
        sent,
        Some(vec![false, true, true]),
        "a changed high watermark and an error go out"
    );
}

#[test]
fn epochs_must_follow_each_other_and_unknown_sessions_are_refused() {
    let sessions = FetchSessions::new(10);
    let now = Instant::now();
    let id = full_fetch(&sessions, &[0], now);
    let unknown = if id == i32::MAX { 1 } else { id + 1 };
    let refused = sessions.open((unknown, 1), Vec::new(), &[], false, now).err();
    assert_eq!(refused, Some(ResponseError::FetchSessionIdNotFound));
    let refused = sessions.open((id, 2), Vec::new(), &[], false, now).err();
    assert_eq!(refused, Some(ResponseError::InvalidFetchSessionEpoch));
    assert!(sessions.open((id, 1), Vec::new(), &[], false, now).is_ok());
    let again = sessions.open((id, 1), Vec::new(), &[], false, now).err();
    assert_eq!(
        again,
        Some(ResponseError::InvalidFetchSessionEpoch),
        "epoch 1 was used"
    );
    assert!(sessions.open((id, 2), Vec::new(), &[], false, now).is_ok());
    let below_final = sessions.open((id, -2), Vec::new(), &[], false, now).err();
    assert_eq!(
        below_final,
        Some(ResponseError::InvalidFetchSessionEpoch),
        "as Kafka answers"
    );
    let no_session = sessions.open((0, -2), Vec::new(), &[], false, now).err();
    assert_eq!(no_session, Some(ResponseError::FetchSessionIdNotFound));
}

#[test]
fn the_final_epoch_closes_a_session_and_fetches_without_one() {
    let sessions = FetchSessions::new(10);
    let now = Instant::now();
    let id = full_fetch(&sessions, &[0, 1], now);
    let opened = sessions
        .open((id, -1), named(&[(3, 0)]), &[], false, now)
        .unwrap();
    assert_eq!(opened.context, FetchContext::Sessionless);
    assert_eq!(indices(&opened), vec![3]);
    assert_eq!(
        sessions.answered(&opened, &[], now),
        (0, None),
        "sessionless: everything goes out"
    );
    assert!(sessions.is_empty());
    let refused = sessions.open((id, 1), Vec::new(), &[], false, now).err();
    assert_eq!(refused, Some(ResponseError::FetchSessionIdNotFound));
}

#[test]
fn a_full_fetch_in_a_session_replaces_it() {
    let sessions = FetchSessions::new(10);
    let now = Instant::now();
    let first = full_fetch(&sessions, &[0], now);
    let opened = sessions
        .open((first, 0), named(&[(1, 0)]), &[], false, now)
        .unwrap();
    let (second, _) = sessions.answered(&opened, &[at(1)], now);
    assert_eq!(sessions.len(), 1);
    assert_ne!(second, first);
    let refused = sessions.open((first, 1), Vec::new(), &[], false, now).err();
    assert_eq!(refused, Some(ResponseError::FetchSessionIdNotFound));
}

#[test]
fn forgotten_partitions_leave_and_new_ones_are_answered_at_once() {
    let sessions = FetchSessions::new(10);
    let now = Instant::now();
    let id = full_fetch(&sessions, &[0, 1], now);
    let opened = sessions
        .open((id, 1), named(&[(7, 0)]), &[tp(0)], false, now)
        .unwrap();
    assert_eq!(indices(&opened), vec![1, 7]);
    let (_, sent) = sessions.answered(&opened, &[at(10), at(10)], now);
    assert_eq!(
        sent,
        Some(vec![false, true]),
        "the new partition was never answered in the session"
    );
}

#[test]
fn a_full_cache_gives_way_to_larger_or_idle_sessions_only() {
    let sessions = FetchSessions::new(1);
    let start = Instant::now();
    let small = full_fetch(&sessions, &[0, 1], start);
    assert!(small > 0);
    assert_eq!(
        full_fetch(&sessions, &[5], start),
        0,
        "a smaller session gets no slot"
    );
    let large = full_fetch(&sessions, &[0, 1, 2], start);
    assert!(large > 0, "a larger one evicts the smaller");
    let refused = sessions.open((small, 1), Vec::new(), &[], false, start).err();
    assert_eq!(refused, Some(ResponseError::FetchSessionIdNotFound));
    let later = start + SESSION_IDLE_EVICTION;
    assert!(
        full_fetch(&sessions, &[9], later) > 0,
        "an idle session gives way to any"
    );
    assert_eq!(sessions.len(), 1);
}

#[test]
fn cached_partitions_stay_within_their_bound() {
    let sessions = FetchSessions::with_partitions_max(10, 4);
    let now = Instant::now();
    assert_eq!(
        full_fetch(&sessions, &[0, 1, 2, 3, 4], now),
        0,
        "larger than the bound"
    );
    let id = full_fetch(&sessions, &[0, 1, 2], now);
    assert!(id > 0);
    let grown = sessions
        .open((id, 1), named(&[(3, 0), (4, 0)]), &[], false, now)
        .err();
    assert_eq!(
        grown,
        Some(ResponseError::FetchSessionIdNotFound),
        "grown past it: closed"
    );
    assert!(sessions.is_empty());
    assert_eq!(sessions.lock().partitions, 0, "its partitions are counted out");
    assert!(full_fetch(&sessions, &[0, 1, 2, 3], now) > 0);
}

#[test]
fn idle_sessions_are_dropped_and_no_slots_means_no_sessions() {
    let sessions = FetchSessions::new(10);
    let start = Instant::now();
    full_fetch(&sessions, &[0], start);
    let later = start + SESSION_IDLE_EVICTION + SWEEP_INTERVAL;
    sessions.open((0, -1), Vec::new(), &[], false, later).unwrap();
    assert!(
        sessions.is_empty(),
        "swept at the next fetch after they went idle"
    );
    assert_eq!(sessions.lock().partitions, 0);

    let none = FetchSessions::new(0);
    let opened = none.open((0, 0), named(&[(0, 0)]), &[], false, start).unwrap();
    assert_eq!(opened.context, FetchContext::Sessionless);
}

#[test]
fn an_answer_to_a_session_another_fetch_changed_meanwhile_goes_out_whole_without_it() {
    let sessions = FetchSessions::new(10);
    let now = Instant::now();
    let id = full_fetch(&sessions, &[0, 1], now);
    let first = sessions.open((id, 1), Vec::new(), &[], false, now).unwrap();
    let second = sessions
        .open((id, 2), named(&[(5, 0)]), &[tp(0)], false, now)
        .unwrap();
    assert_eq!(sessions.answered(&first, &[at(10), at(10)], now), (0, None));
    let (answer_id, sent) = sessions.answered(&second, &[at(10), at(10)], now);
    assert_eq!(
        (answer_id, sent),
        (id, Some(vec![false, true])),
        "the latest fetch keeps the session"
    );
}

#[test]
fn a_quiet_answer_keeps_the_sessions_order_and_the_next_answered_partition_moves_last() {
    let sessions = FetchSessions::new(10);
    let now = Instant::now();
    let id = full_fetch(&sessions, &[0, 1, 2], now);
    let quiet = sessions.open((id, 1), Vec::new(), &[], false, now).unwrap();
    let (_, sent) = sessions.answered(&quiet, &[at(10), at(10), at(10)], now);
    assert_eq!(sent, Some(vec![false, false, false]));
    let next = sessions.open((id, 2), Vec::new(), &[], false, now).unwrap();
    assert_eq!(indices(&next), vec![0, 1, 2], "nothing answered, nothing moved");
    sessions.answered(&next, &[at(11), at(10), at(10)], now);
    let after = sessions.open((id, 3), Vec::new(), &[], false, now).unwrap();
    assert_eq!(indices(&after), vec![1, 2, 0]);
}

#[test]
fn an_incremental_fetch_answers_a_partition_whose_last_stable_offset_moved() {
    let sessions = FetchSessions::new(10);
    let now = Instant::now();
    let id = full_fetch(&sessions, &[0, 1], now);
    let opened = sessions.open((id, 1), Vec::new(), &[], false, now).unwrap();
    // A transaction committed in partition 1: its last stable offset moved up to the high
    // watermark, which stayed; no records for this read_committed consumer yet.
    let mut committed = at(10);
    committed.state.last_stable_offset = 10;
    let mut still_open = at(10);
    still_open.state.last_stable_offset = 4;
    let (_, sent) = sessions.answered(&opened, &[at(10), still_open], now);
    assert_eq!(
        sent,
        Some(vec![false, true]),
        "the last stable offset fell behind"
    );
    let opened = sessions.open((id, 2), Vec::new(), &[], false, now).unwrap();
    let (_, sent) = sessions.answered(&opened, &[at(10), committed], now);
    assert_eq!(sent, Some(vec![false, true]), "and caught up again");
}
