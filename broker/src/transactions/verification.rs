//! KIP-890 part 1: a partition's leader takes the first transactional batch of a producer's
//! transaction only once the transaction coordinator says the producer added that partition
//! to its ongoing transaction (AddPartitionsToTxn). Without the check, a batch that arrives
//! after its transaction ended (a retry delayed in the network) would open a transaction no
//! coordinator knows, and hold the last stable offset back for good. Later batches of the
//! same transaction find it open in the partition and are not checked again.
//!
//! The coordinator is asked directly on this broker, or with AddPartitionsToTxn v4
//! (`verify_only`) where another broker leads the id's `__transaction_state` partition.

use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;

use super::records::{TxnState, TxnValue};
use super::{on_coordinator, store, TRANSACTION_TOPIC};
use crate::broker::{BrokerCtx, TopicPartition};

/// AddPartitionsToTxn's version with `verify_only` (clients negotiate no higher than v3).
const VERIFY_VERSION: i16 = 4;
/// How long a leader waits for another broker's answer.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether producer `(id, epoch)` of `transactional_id` has `tp` in its ongoing transaction:
/// Ok when it has; INVALID_TXN_STATE when it has not (Kafka's answer to such a produce
/// before KIP-890 part 2); a retriable error when the coordinator cannot say now.
pub async fn verify(
    ctx: &Rc<BrokerCtx>,
    transactional_id: &str,
    producer: (i64, i16),
    tp: &TopicPartition,
) -> Result<(), ResponseError> {
    let count = store::partition_count(ctx).ok_or(ResponseError::InvalidTxnState)?;
    let remote = ctx.state.shared.cluster.as_ref().and_then(|link| {
        let partition = crate::group::partition_for(transactional_id, count);
        let image = link.image();
        let leader = image
            .metadata
            .partition_by_name(TRANSACTION_TOPIC, partition)?
            .leader;
        (leader != link.node_id).then_some(leader)
    });
    match remote {
        None => verify_here(ctx, transactional_id, producer, tp).await,
        Some(node) => {
            let request = verify_request(transactional_id, producer, tp);
            let answer =
                crate::peer_request::call(ctx, node, (request, Some(VERIFY_VERSION)), VERIFY_TIMEOUT).await;
            let response = answer.ok_or(ResponseError::NotEnoughReplicas)?;
            let code = response
                .results_by_transaction
                .iter()
                .flat_map(|t| &t.topic_results)
                .flat_map(|t| &t.results_by_partition)
                .map(|p| p.partition_error_code)
                .find(|code| *code != 0)
                .unwrap_or(response.error_code);
            match ResponseError::try_from_code(code) {
                None => Ok(()),
                Some(error) => Err(retriable_or_refused(error)),
            }
        }
    }
}

/// The check on this broker's coordinator shard.
pub async fn verify_here(
    ctx: &Rc<BrokerCtx>,
    transactional_id: &str,
    producer: (i64, i16),
    tp: &TopicPartition,
) -> Result<(), ResponseError> {
    let (id, tp) = (transactional_id.to_string(), tp.clone());
    let checked = on_coordinator(ctx, transactional_id, move |there, _| async move {
        let value = there.state.transactions.value(&id);
        Ok(value.is_some_and(|v| includes(&v, producer, &tp)))
    })
    .await;
    match checked {
        Ok(true) => Ok(()),
        Ok(false) => Err(ResponseError::InvalidTxnState),
        Err(error) => Err(retriable_or_refused(error)),
    }
}

fn includes(value: &TxnValue, (id, epoch): (i64, i16), tp: &TopicPartition) -> bool {
    value.producer_id == id
        && value.producer_epoch == epoch
        && value.state == TxnState::Ongoing
        && value
            .partitions
            .get(&*tp.topic)
            .is_some_and(|partitions| partitions.contains(&tp.partition))
}

/// A coordinator that cannot answer now (moving, loading) makes the produce retriable
/// (NOT_ENOUGH_REPLICAS, which every client retries), as Kafka does; any other answer
/// refuses it.
fn retriable_or_refused(error: ResponseError) -> ResponseError {
    match error {
        ResponseError::CoordinatorLoadInProgress
        | ResponseError::CoordinatorNotAvailable
        | ResponseError::NotCoordinator
        | ResponseError::ConcurrentTransactions
        | ResponseError::RequestTimedOut => ResponseError::NotEnoughReplicas,
        _ => ResponseError::InvalidTxnState,
    }
}

fn verify_request(
    transactional_id: &str,
    (id, epoch): (i64, i16),
    tp: &TopicPartition,
) -> AddPartitionsToTxnRequest {
    let topic = AddPartitionsToTxnTopic::default()
        .with_name(TopicName(StrBytes::from_string(tp.topic.to_string())))
        .with_partitions(vec![tp.partition]);
    let transaction = AddPartitionsToTxnTransaction::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(
            transactional_id.to_string(),
        )))
        .with_producer_id(ProducerId(id))
        .with_producer_epoch(epoch)
        .with_verify_only(true)
        .with_topics(vec![topic]);
    AddPartitionsToTxnRequest::default().with_transactions(vec![transaction])
}
