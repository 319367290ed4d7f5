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

/// Whether producer `(id, epoch)` of `transactional_id` has `tp` in its ongoing transaction,
/// answered as a produce answers it (Kafka's mapping): Ok when it has; INVALID_TXN_STATE when
/// the partition is not in it; INVALID_PRODUCER_EPOCH when the producer was fenced (clients
/// take that as fatal); INVALID_PRODUCER_ID_MAPPING for an unknown producer; the retriable
/// NOT_ENOUGH_REPLICAS while the coordinator cannot say.
pub async fn verify(
    ctx: &Rc<BrokerCtx>,
    transactional_id: &str,
    producer: (i64, i16),
    tp: &TopicPartition,
) -> Result<(), ResponseError> {
    let count = store::partition_count(ctx).ok_or(ResponseError::InvalidProducerIdMapping)?;
    let remote = ctx.state.shared.cluster.as_ref().and_then(|link| {
        let partition = crate::group::partition_for(transactional_id, count);
        let image = link.image();
        let leader = image
            .metadata
            .partition_by_name(TRANSACTION_TOPIC, partition)?
            .leader;
        (leader != link.node_id).then_some(leader)
    });
    let verified = match remote {
        None => verify_here(ctx, transactional_id, producer, tp).await,
        Some(node) => verify_there(ctx, node, transactional_id, producer, tp).await,
    };
    verified.map_err(as_produce_error)
}

async fn verify_there(
    ctx: &Rc<BrokerCtx>,
    node: laminar_model::NodeId,
    transactional_id: &str,
    producer: (i64, i16),
    tp: &TopicPartition,
) -> Result<(), ResponseError> {
    let request = verify_request(transactional_id, producer, tp);
    let answer = crate::peer_request::call(ctx, node, (request, Some(VERIFY_VERSION)), VERIFY_TIMEOUT).await;
    let response = answer.ok_or(ResponseError::CoordinatorNotAvailable)?;
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
        Some(error) => Err(error),
    }
}

/// The check on this broker's coordinator shard, answered as Kafka's coordinator answers a
/// verification (AddPartitionsToTxn v4 `verify_only`).
pub async fn verify_here(
    ctx: &Rc<BrokerCtx>,
    transactional_id: &str,
    producer: (i64, i16),
    tp: &TopicPartition,
) -> Result<(), ResponseError> {
    let (id, tp) = (transactional_id.to_string(), tp.clone());
    on_coordinator(ctx, transactional_id, move |there, _| async move {
        let value = there.state.transactions.value(&id);
        coordinator_answer(value.as_ref(), producer, &tp)
    })
    .await
}

fn coordinator_answer(
    value: Option<&TxnValue>,
    (id, epoch): (i64, i16),
    tp: &TopicPartition,
) -> Result<(), ResponseError> {
    let value = value
        .filter(|v| v.producer_id == id)
        .ok_or(ResponseError::InvalidProducerIdMapping)?;
    if value.producer_epoch != epoch {
        return Err(ResponseError::ProducerFenced);
    }
    match value.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
            return Err(ResponseError::ConcurrentTransactions)
        }
        TxnState::Ongoing => {}
        _ => return Err(ResponseError::InvalidTxnState),
    }
    let added = value
        .partitions
        .get(&*tp.topic)
        .is_some_and(|partitions| partitions.contains(&tp.partition));
    added.then_some(()).ok_or(ResponseError::InvalidTxnState)
}

/// A coordinator's verification answer as the produce that waited for it answers (Kafka's
/// AddPartitionsToTxnManager): a fenced producer hears INVALID_PRODUCER_EPOCH, and a
/// coordinator that cannot answer now makes the produce retriable (NOT_ENOUGH_REPLICAS).
fn as_produce_error(error: ResponseError) -> ResponseError {
    match error {
        ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        ResponseError::CoordinatorLoadInProgress
        | ResponseError::CoordinatorNotAvailable
        | ResponseError::NotCoordinator
        | ResponseError::ConcurrentTransactions
        | ResponseError::RequestTimedOut => ResponseError::NotEnoughReplicas,
        ResponseError::InvalidProducerIdMapping | ResponseError::InvalidProducerEpoch => error,
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::transactions::records::TxnPartitions;

    fn ongoing() -> TxnValue {
        TxnValue {
            producer_id: 7,
            producer_epoch: 3,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: TxnPartitions::from([("t".to_string(), BTreeSet::from([1]))]),
            last_update_ms: 0,
            start_ms: 0,
        }
    }

    #[test]
    fn the_coordinator_answers_as_kafkas_and_a_produce_hears_what_clients_expect() {
        let tp = |p| TopicPartition {
            topic: "t".into(),
            partition: p,
        };
        let value = ongoing();
        let answer = |v: Option<&TxnValue>, producer, p| coordinator_answer(v, producer, &tp(p));
        assert_eq!(answer(Some(&value), (7, 3), 1), Ok(()));
        let cases = [
            (
                answer(Some(&value), (7, 3), 2),
                ResponseError::InvalidTxnState,
                ResponseError::InvalidTxnState,
            ),
            (
                answer(Some(&value), (7, 2), 1),
                ResponseError::ProducerFenced,
                ResponseError::InvalidProducerEpoch,
            ),
            (
                answer(Some(&value), (8, 3), 1),
                ResponseError::InvalidProducerIdMapping,
                ResponseError::InvalidProducerIdMapping,
            ),
            (
                answer(None, (7, 3), 1),
                ResponseError::InvalidProducerIdMapping,
                ResponseError::InvalidProducerIdMapping,
            ),
        ];
        for (got, coordinator, produce) in cases {
            assert_eq!(got, Err(coordinator));
            assert_eq!(as_produce_error(coordinator), produce);
        }
        let preparing = TxnValue {
            state: TxnState::PrepareCommit,
            ..ongoing()
        };
        let concurrent = answer(Some(&preparing), (7, 3), 1);
        assert_eq!(concurrent, Err(ResponseError::ConcurrentTransactions));
        assert_eq!(
            as_produce_error(ResponseError::ConcurrentTransactions),
            ResponseError::NotEnoughReplicas
        );
    }
}
