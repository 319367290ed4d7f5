//! Seeds of the transactional producer's APIs, of WriteTxnMarkers and of the transactions'
//! admin APIs, for the fuzz topics and the fuzz group, under one transactional id.

use kafka_protocol::messages::*;

use super::data_requests::{s, topic, TOPICS};
use super::group_requests::GROUP;
use super::Marks;

const TRANSACTIONAL_ID: &str = "fuzz-tx";

/// The seed of `api` if it is one of these.
pub fn seed(api: ApiKey, version: i16, marks: &Marks) -> Option<RequestKind> {
    Some(match api {
        ApiKey::AddPartitionsToTxn => RequestKind::AddPartitionsToTxn(add_partitions_to_txn(version, marks)),
        ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(add_offsets_to_txn()),
        ApiKey::EndTxn => RequestKind::EndTxn(end_txn()),
        ApiKey::WriteTxnMarkers => RequestKind::WriteTxnMarkers(write_txn_markers(marks)),
        ApiKey::DescribeProducers => RequestKind::DescribeProducers(describe_producers(marks)),
        ApiKey::DescribeTransactions => RequestKind::DescribeTransactions(describe_transactions()),
        ApiKey::ListTransactions => RequestKind::ListTransactions(list_transactions()),
        _ => return None,
    })
}

/// v0-3 as a client adds the fuzz topics; v4 as a broker verifies them.
pub fn add_partitions_to_txn(version: i16, marks: &Marks) -> AddPartitionsToTxnRequest {
    let topics: Vec<_> = TOPICS
        .iter()
        .map(|name| {
            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(topic(name))
                .with_partitions(marks.partitions.to_vec())
        })
        .collect();
    if version >= 4 {
        let transaction = add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(s(TRANSACTIONAL_ID)))
            .with_producer_id(ProducerId(1))
            .with_producer_epoch(0)
            .with_verify_only(true)
            .with_topics(topics);
        return AddPartitionsToTxnRequest::default().with_transactions(vec![transaction]);
    }
    AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s(TRANSACTIONAL_ID)))
        .with_v3_and_below_producer_id(ProducerId(1))
        .with_v3_and_below_producer_epoch(0)
        .with_v3_and_below_topics(topics)
}

pub fn add_offsets_to_txn() -> AddOffsetsToTxnRequest {
    AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s(TRANSACTIONAL_ID)))
        .with_producer_id(ProducerId(1))
        .with_producer_epoch(0)
        .with_group_id(GroupId(s(GROUP)))
}

pub fn end_txn() -> EndTxnRequest {
    EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s(TRANSACTIONAL_ID)))
        .with_producer_id(ProducerId(1))
        .with_producer_epoch(0)
        .with_committed(true)
}

/// An ABORT marker for producer 1 on the fuzz topics' partitions.
pub fn write_txn_markers(marks: &Marks) -> WriteTxnMarkersRequest {
    let topics = TOPICS
        .iter()
        .map(|name| {
            write_txn_markers_request::WritableTxnMarkerTopic::default()
                .with_name(topic(name))
                .with_partition_indexes(marks.partitions.to_vec())
        })
        .collect();
    let marker = write_txn_markers_request::WritableTxnMarker::default()
        .with_producer_id(ProducerId(1))
        .with_producer_epoch(0)
        .with_transaction_result(false)
        .with_topics(topics)
        .with_coordinator_epoch(0);
    WriteTxnMarkersRequest::default().with_markers(vec![marker])
}

/// The producers of the fuzz topics' partitions.
pub fn describe_producers(marks: &Marks) -> DescribeProducersRequest {
    let topics = TOPICS
        .iter()
        .map(|name| {
            describe_producers_request::TopicRequest::default()
                .with_name(topic(name))
                .with_partition_indexes(marks.partitions.to_vec())
        })
        .collect();
    DescribeProducersRequest::default().with_topics(topics)
}

/// The fuzz id and one no transaction has.
pub fn describe_transactions() -> DescribeTransactionsRequest {
    DescribeTransactionsRequest::default().with_transactional_ids(vec![
        TransactionalId(s(TRANSACTIONAL_ID)),
        TransactionalId(s("fuzz-tx-unknown")),
    ])
}

/// A known state and an unknown one, and a producer. The duration filter stays at its
/// default (none), which v0, lacking the field, encodes too.
pub fn list_transactions() -> ListTransactionsRequest {
    ListTransactionsRequest::default()
        .with_state_filters(vec![s("Ongoing"), s("fuzz-state")])
        .with_producer_id_filters(vec![ProducerId(1)])
}
