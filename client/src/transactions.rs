//! Transactions through a broker, as Kafka's `kafka-transactions` tool asks them:
//! DescribeProducers (API 61) of a partition's leader, DescribeTransactions (65) of an id's
//! coordinator, ListTransactions (66) of each broker, and the abort of a hanging transaction:
//! WriteTxnMarkers (27) with an ABORT marker, sent to the partition's leader as its
//! coordinator would.

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeTransactionsRequest, ListTransactionsRequest, ProducerId,
    TopicName, TransactionalId, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::admin::BrokerInfo;
use crate::connection::Connection;
use crate::error::{check_code, ClientError};
use crate::groups::TRANSACTION_KEY;

/// A producer a partition knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerInfo {
    pub producer_id: i64,
    pub producer_epoch: i32,
    /// -1 when no batch of its current epoch is known.
    pub last_sequence: i32,
    /// -1 when no batch is known.
    pub last_timestamp_ms: i64,
    /// -1 when no marker was written for it.
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction, if one is open.
    pub current_txn_start_offset: Option<i64>,
}

/// A transactional id as its coordinator describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionDescription {
    pub transactional_id: String,
    /// Kafka's state name: Empty, Ongoing, PrepareCommit, CompleteAbort, …
    pub state: String,
    pub timeout_ms: i32,
    pub start_time_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// `(topic, partitions)` of its transaction.
    pub partitions: Vec<(String, Vec<i32>)>,
}

/// One transactional id a broker coordinates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTransaction {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: String,
}

/// What ListTransactions is to match; empty lists match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransactionFilter {
    /// Kafka's state names.
    pub states: Vec<String>,
    pub producer_ids: Vec<i64>,
    /// Only transactions running longer than this (ListTransactions v1).
    pub running_longer_than_ms: Option<i64>,
}

/// What one broker listed, and the state names of the filter it knows no state by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransactionListing {
    pub transactions: Vec<ListedTransaction>,
    pub unknown_states: Vec<String>,
}

/// A producer's open transaction on one partition, to end with an ABORT marker: the
/// producer's epoch, and a coordinator epoch at least the last marker's there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HangingTransaction {
    pub topic: String,
    pub partition: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
}

impl Connection {
    /// The producers of `topic`'s `partition`, asked of its leader.
    pub fn describe_producers(
        &mut self,
        topic: &str,
        partition: i32,
    ) -> Result<Vec<ProducerInfo>, ClientError> {
        let request = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_indexes(vec![partition])]);
        let response = self.request(&request)?;
        let answered = response
            .topics
            .iter()
            .filter(|t| t.name.as_str() == topic)
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| ClientError::MissingInResponse {
                api: ApiKey::DescribeProducers,
                what: format!("{topic}-{partition}"),
            })?;
        check_code(
            ApiKey::DescribeProducers,
            answered.error_code,
            answered.error_message.as_deref(),
            || format!(" {topic}-{partition}"),
        )?;
        let producers = answered.active_producers.iter().map(|p| ProducerInfo {
            producer_id: p.producer_id.0,
            producer_epoch: p.producer_epoch,
            last_sequence: p.last_sequence,
            last_timestamp_ms: p.last_timestamp,
            coordinator_epoch: p.coordinator_epoch,
            current_txn_start_offset: (p.current_txn_start_offset >= 0).then_some(p.current_txn_start_offset),
        });
        Ok(producers.collect())
    }

    /// The broker coordinating `transactional_id`.
    pub fn find_transaction_coordinator(
        &mut self,
        transactional_id: &str,
    ) -> Result<BrokerInfo, ClientError> {
        self.find_coordinator_of(transactional_id, TRANSACTION_KEY)
    }

    /// `transactional_id` as its coordinator (this connection's broker) describes it.
    pub fn describe_transaction(
        &mut self,
        transactional_id: &str,
    ) -> Result<TransactionDescription, ClientError> {
        let id = TransactionalId(StrBytes::from_string(transactional_id.to_owned()));
        let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![id]);
        let response = self.request(&request)?;
        let state = response
            .transaction_states
            .iter()
            .find(|s| s.transactional_id.as_str() == transactional_id)
            .ok_or_else(|| ClientError::MissingInResponse {
                api: ApiKey::DescribeTransactions,
                what: transactional_id.to_owned(),
            })?;
        check_code(ApiKey::DescribeTransactions, state.error_code, None, || {
            format!(" transactional id {transactional_id}")
        })?;
        let partitions = state
            .topics
            .iter()
            .map(|t| (t.topic.to_string(), t.partitions.clone()));
        Ok(TransactionDescription {
            transactional_id: transactional_id.to_owned(),
            state: state.transaction_state.to_string(),
            timeout_ms: state.transaction_timeout_ms,
            start_time_ms: state.transaction_start_time_ms,
            producer_id: state.producer_id.0,
            producer_epoch: state.producer_epoch,
            partitions: partitions.collect(),
        })
    }

    /// The transactional ids this connection's broker coordinates that match `filter`.
    pub fn list_transactions(
        &mut self,
        filter: &TransactionFilter,
    ) -> Result<TransactionListing, ClientError> {
        let states = filter.states.iter().map(|s| StrBytes::from_string(s.clone()));
        let request = ListTransactionsRequest::default()
            .with_state_filters(states.collect())
            .with_producer_id_filters(filter.producer_ids.iter().copied().map(ProducerId).collect())
            .with_duration_filter(filter.running_longer_than_ms.unwrap_or(-1));
        let response = self.request(&request)?;
        check_code(ApiKey::ListTransactions, response.error_code, None, String::new)?;
        let transactions = response.transaction_states.iter().map(|t| ListedTransaction {
            transactional_id: t.transactional_id.to_string(),
            producer_id: t.producer_id.0,
            state: t.transaction_state.to_string(),
        });
        Ok(TransactionListing {
            transactions: transactions.collect(),
            unknown_states: response
                .unknown_state_filters
                .iter()
                .map(|s| s.to_string())
                .collect(),
        })
    }

    /// Ends `hanging` with an ABORT marker, written by this connection's broker (which must
    /// lead the partition). The principal needs ClusterAction on the cluster, as in Kafka.
    pub fn abort_transaction(&mut self, hanging: &HangingTransaction) -> Result<(), ClientError> {
        let topic = TopicName(StrBytes::from_string(hanging.topic.clone()));
        let marker = WritableTxnMarker::default()
            .with_producer_id(ProducerId(hanging.producer_id))
            .with_producer_epoch(hanging.producer_epoch)
            .with_transaction_result(false)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(topic)
                .with_partition_indexes(vec![hanging.partition])])
            .with_coordinator_epoch(hanging.coordinator_epoch);
        let response = self.request(&WriteTxnMarkersRequest::default().with_markers(vec![marker]))?;
        let code = response
            .markers
            .iter()
            .flat_map(|m| &m.topics)
            .filter(|t| t.name.as_str() == hanging.topic)
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == hanging.partition)
            .map(|p| p.error_code)
            .ok_or_else(|| ClientError::MissingInResponse {
                api: ApiKey::WriteTxnMarkers,
                what: format!("{}-{}", hanging.topic, hanging.partition),
            })?;
        check_code(ApiKey::WriteTxnMarkers, code, None, || {
            format!(" {}-{}", hanging.topic, hanging.partition)
        })
    }
}
