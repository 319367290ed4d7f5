use super::*;

fn partitions(list: &[(&str, i32)]) -> TxnPartitions {
    let mut out = TxnPartitions::new();
    for (topic, p) in list {
        out.entry(topic.to_string()).or_default().insert(*p);
    }
    out
}

fn initialised() -> TxnValue {
    match init_producer(None, (60_000, 10), None, 7).unwrap() {
        InitDecision::Write(value) => value,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_transaction_goes_from_empty_to_ongoing_to_prepared_to_complete() {
    let empty = initialised();
    assert_eq!(
        (empty.producer_id, empty.producer_epoch, empty.state),
        (7, 0, TxnState::Empty)
    );
    let ongoing = add_partitions(&empty, &partitions(&[("t", 0)]), 20)
        .unwrap()
        .unwrap();
    assert_eq!((ongoing.state, ongoing.start_ms), (TxnState::Ongoing, 20));
    assert_eq!(
        add_partitions(&ongoing, &partitions(&[("t", 0)]), 30).unwrap(),
        None
    );
    let more = add_partitions(&ongoing, &partitions(&[("u", 1)]), 30)
        .unwrap()
        .unwrap();
    assert_eq!(more.partitions, partitions(&[("t", 0), ("u", 1)]));
    assert_eq!(more.start_ms, 20, "adding keeps the transaction's start");
    let prepared = end_transaction(&more, true, 40).unwrap().unwrap();
    assert_eq!(prepared.state, TxnState::PrepareCommit);
    assert_eq!(
        end_transaction(&prepared, true, 41),
        Err(ResponseError::ConcurrentTransactions)
    );
    assert_eq!(
        end_transaction(&prepared, false, 41),
        Err(ResponseError::InvalidTxnState)
    );
    let done = complete(&prepared, 50);
    assert_eq!((done.state, done.partitions.len()), (TxnState::CompleteCommit, 0));
    assert_eq!(
        end_transaction(&done, true, 60),
        Ok(None),
        "a retried commit is answered"
    );
    assert_eq!(
        end_transaction(&done, false, 60),
        Err(ResponseError::InvalidTxnState)
    );
    let next = add_partitions(&done, &partitions(&[("u", 2)]), 70)
        .unwrap()
        .unwrap();
    assert_eq!((next.partitions, next.start_ms), (partitions(&[("u", 2)]), 70));
}

#[test]
fn init_bumps_the_epoch_and_aborts_an_open_transaction_first() {
    let empty = initialised();
    let again = match init_producer(Some(&empty), (1_000, 20), None, -1).unwrap() {
        InitDecision::Write(value) => value,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        (again.producer_id, again.producer_epoch, again.timeout_ms),
        (7, 1, 1_000)
    );
    let ongoing = add_partitions(&again, &partitions(&[("t", 0)]), 30)
        .unwrap()
        .unwrap();
    match init_producer(Some(&ongoing), (1_000, 40), None, -1).unwrap() {
        InitDecision::AbortFirst(aborting) => {
            assert_eq!(
                (aborting.state, aborting.producer_epoch),
                (TxnState::PrepareAbort, 2)
            );
            assert_eq!(
                aborting.partitions, ongoing.partitions,
                "the markers go where it wrote"
            );
        }
        other => panic!("{other:?}"),
    }
    let prepared = end_transaction(&ongoing, false, 50).unwrap().unwrap();
    assert_eq!(
        init_producer(Some(&prepared), (1_000, 60), None, -1),
        Err(ResponseError::ConcurrentTransactions)
    );
}

#[test]
fn requests_of_an_older_epoch_or_another_producer_are_refused() {
    let empty = initialised();
    assert_eq!(
        check_producer(Some(&empty), (7, 0)).map(|v| v.producer_epoch),
        Ok(0)
    );
    assert_eq!(
        check_producer(Some(&empty), (7, 1)).err(),
        Some(ResponseError::ProducerFenced)
    );
    assert_eq!(
        check_producer(Some(&empty), (8, 0)).err(),
        Some(ResponseError::InvalidProducerIdMapping)
    );
    assert_eq!(
        check_producer(None, (7, 0)).err(),
        Some(ResponseError::InvalidProducerIdMapping)
    );
    // KIP-360: a producer naming an id and epoch that are not the current ones is fenced.
    assert_eq!(
        init_producer(Some(&empty), (1_000, 20), Some((9, 0)), -1),
        Err(ResponseError::ProducerFenced)
    );
    assert!(init_producer(Some(&empty), (1_000, 20), Some((7, 0)), -1).is_ok());
}

#[test]
fn a_transaction_past_its_timeout_is_aborted_at_a_bumped_epoch() {
    let empty = initialised();
    let ongoing = add_partitions(&empty, &partitions(&[("t", 0)]), 100)
        .unwrap()
        .unwrap();
    assert_eq!(time_out(&ongoing, 100 + 60_000), None);
    let aborting = time_out(&ongoing, 100 + 60_001).unwrap();
    assert_eq!(
        (aborting.state, aborting.producer_epoch),
        (TxnState::PrepareAbort, 1)
    );
    assert_eq!(
        time_out(&empty, i64::MAX),
        None,
        "only an ongoing transaction times out"
    );
}

#[test]
fn an_exhausted_epoch_moves_to_a_new_producer_id() {
    let mut empty = initialised();
    empty.producer_epoch = i16::MAX - 1;
    assert!(needs_new_producer_id(Some(&empty)));
    assert_eq!(
        init_producer(Some(&empty), (1_000, 20), None, -1),
        Err(ResponseError::ConcurrentTransactions)
    );
    match init_producer(Some(&empty), (1_000, 20), None, 42).unwrap() {
        InitDecision::Write(value) => assert_eq!((value.producer_id, value.producer_epoch), (42, 0)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn only_an_id_without_a_transaction_in_progress_expires() {
    let empty = initialised();
    assert!(!is_expired(&empty, 10 + 999, 1_000));
    assert!(is_expired(&empty, 10 + 1_000, 1_000));
    let ongoing = add_partitions(&empty, &partitions(&[("t", 0)]), 10)
        .unwrap()
        .unwrap();
    assert!(
        !is_expired(&ongoing, i64::MAX, 1_000),
        "its timeout aborts it first"
    );
}
