//! DescribeTransactions (API 65, KIP-664): each named transactional id's state, producer and
//! partitions, from the shard that coordinates it (`transactions::on_coordinator`). What
//! `laminar txn describe` shows.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use laminar_security::{Operation, ResourceType};

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::transactions::on_coordinator;
use crate::transactions::records::TxnValue;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    // One answer per id the request names, asked of the coordinators concurrently.
    let answers = request.transactional_ids.into_iter().map(|id| async move {
        let described = match may_describe(access, &id) {
            true => describe(ctx, &id).await,
            false => Err(ResponseError::TransactionalIdAuthorizationFailed),
        };
        state_answer(id, described)
    });
    let states = futures::future::join_all(answers).await;
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

/// Kafka's check for describing or listing a transactional id: Describe on it (which Write
/// implies).
pub fn may_describe(access: &Access, transactional_id: &str) -> bool {
    access.allows(
        Operation::Describe,
        ResourceType::TransactionalId,
        transactional_id,
    )
}

/// The value of `id` on its coordinator shard; TRANSACTIONAL_ID_NOT_FOUND when it has none.
async fn describe(ctx: &Rc<BrokerCtx>, id: &str) -> Result<TxnValue, ResponseError> {
    let owned = id.to_string();
    on_coordinator(ctx, id, move |there, _| async move {
        // A new id's placeholder (no producer id yet, its first value being written) is no
        // transaction yet.
        let value = there.state.transactions.value(&owned);
        value
            .filter(|v| v.producer_id >= 0)
            .ok_or(ResponseError::TransactionalIdNotFound)
    })
    .await
}

/// The answer for `id`: its value, or only the error code.
pub fn state_answer(id: TransactionalId, described: Result<TxnValue, ResponseError>) -> TransactionState {
    let answer = TransactionState::default().with_transactional_id(id);
    let value = match described {
        Ok(value) => value,
        Err(error) => return answer.with_error_code(error.code()),
    };
    let topics = value.partitions.into_iter().map(|(topic, partitions)| {
        TopicData::default()
            .with_topic(TopicName(StrBytes::from_string(topic)))
            .with_partitions(partitions.into_iter().collect())
    });
    answer
        .with_transaction_state(StrBytes::from_static_str(value.state.name()))
        .with_transaction_timeout_ms(value.timeout_ms)
        .with_transaction_start_time_ms(value.start_ms)
        .with_producer_id(ProducerId(value.producer_id))
        .with_producer_epoch(value.producer_epoch)
        .with_topics(topics.collect())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::transactions::records::{TxnPartitions, TxnState};

    #[test]
    fn describing_an_id_asks_describe_on_it_which_write_implies() {
        use crate::handlers::txn_offset_commit::tests::access;
        let describe = access(&[(ResourceType::TransactionalId, "tx", Operation::Describe)]);
        assert!(may_describe(&describe, "tx"));
        assert!(!may_describe(&describe, "tx-other"));
        let write = access(&[(ResourceType::TransactionalId, "tx", Operation::Write)]);
        assert!(may_describe(&write, "tx"));
        let topic_only = access(&[(ResourceType::Topic, "tx", Operation::Describe)]);
        assert!(!may_describe(&topic_only, "tx"));
    }

    #[test]
    fn an_ongoing_transaction_is_answered_with_its_partitions_by_topic() {
        let value = TxnValue {
            producer_id: 7,
            producer_epoch: 2,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: TxnPartitions::from([
                ("a".to_string(), BTreeSet::from([0, 3])),
                ("b".to_string(), BTreeSet::from([1])),
            ]),
            last_update_ms: 1_000,
            start_ms: 900,
        };
        let id = TransactionalId(StrBytes::from_static_str("tx"));
        let answer = state_answer(id.clone(), Ok(value));
        assert_eq!(answer.error_code, 0);
        assert_eq!(answer.transaction_state.as_str(), "Ongoing");
        assert_eq!(
            (
                answer.producer_id.0,
                answer.producer_epoch,
                answer.transaction_timeout_ms
            ),
            (7, 2, 60_000)
        );
        assert_eq!(answer.transaction_start_time_ms, 900);
        let topics: Vec<(&str, &[i32])> = answer
            .topics
            .iter()
            .map(|t| (t.topic.as_str(), t.partitions.as_slice()))
            .collect();
        assert_eq!(topics, vec![("a", &[0, 3][..]), ("b", &[1][..])]);

        let refused = state_answer(id, Err(ResponseError::TransactionalIdAuthorizationFailed));
        assert_eq!(
            refused.error_code,
            ResponseError::TransactionalIdAuthorizationFailed.code()
        );
        assert!(refused.topics.is_empty());
        assert_eq!(refused.transactional_id.as_str(), "tx");
    }
}
