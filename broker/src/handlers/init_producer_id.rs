//! InitProducerId: a producer id and epoch for an idempotent or transactional producer.
//!
//! Without a transactional id Kafka always hands out a fresh producer id at epoch 0, also when
//! a v3+ request names its current id and epoch (KIP-360): only transactional producers keep
//! their id and get the epoch bumped. Laminar does the same; the client starts its sequences
//! at 0 under the new id, which is what it expects after a bump too.
//!
//! With a transactional id the request goes to the id's transaction coordinator
//! (`transactions`): the id keeps its producer id and gets its epoch bumped, which fences the
//! previous producer of that id; an open transaction of it is aborted first
//! (CONCURRENT_TRANSACTIONS until that is done, and the client asks again).
//!
//! In cluster mode ids come from blocks of 1 000 allocated by the controller quorum
//! (`AllocateProducerIds`), so they are unique across brokers.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::broker::BrokerCtx;
use crate::clock::now_ms;
use crate::transactions::state::{self, InitDecision};
use crate::transactions::store;

const NO_PRODUCER_ID: i64 = -1;
const NO_PRODUCER_EPOCH: i16 = -1;

pub async fn handle(ctx: &Rc<BrokerCtx>, request: InitProducerIdRequest) -> InitProducerIdResponse {
    let answer = match &request.transactional_id {
        Some(id) if id.is_empty() => Err(ResponseError::InvalidRequest),
        Some(id) => init_transactional(ctx, id.to_string(), &request).await,
        None => next_producer_id(ctx).await.map(|id| (id, 0)),
    };
    match answer {
        Ok((id, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Err(error) => InitProducerIdResponse::default()
            .with_error_code(error.code())
            .with_producer_id(ProducerId(NO_PRODUCER_ID))
            .with_producer_epoch(NO_PRODUCER_EPOCH),
    }
}

/// A new producer id: from the quorum's blocks in a cluster, from the node's own counter
/// otherwise.
pub async fn next_producer_id(ctx: &Rc<BrokerCtx>) -> Result<i64, ResponseError> {
    let next = match &ctx.state.shared.cluster {
        Some(link) => link.next_producer_id().await.map_err(|e| e.to_string()),
        None => ctx.state.shared.producer_ids.next_id().map_err(|e| e.to_string()),
    };
    next.map_err(|error| {
        tracing::error!(%error, "cannot allocate a producer id");
        ResponseError::UnknownServerError
    })
}

async fn init_transactional(
    ctx: &Rc<BrokerCtx>,
    id: String,
    request: &InitProducerIdRequest,
) -> Result<(i64, i16), ResponseError> {
    let timeout_ms = request.transaction_timeout_ms;
    let timeout_max_ms = ctx.state.shared.config.transactions.max_timeout_ms;
    if timeout_ms <= 0 || timeout_ms > timeout_max_ms {
        return Err(ResponseError::InvalidTransactionTimeout);
    }
    store::ensure_topic(ctx).await?;
    let expected = (request.producer_id.0 >= 0).then_some((request.producer_id.0, request.producer_epoch));
    crate::transactions::on_coordinator(ctx, &id.clone(), move |there, partition| async move {
        let coordinator = &there.state.transactions;
        let current = coordinator.idle_value(&id)?;
        let new_id = match state::needs_new_producer_id(current.as_ref()) {
            true => next_producer_id(&there).await?,
            false => NO_PRODUCER_ID,
        };
        if !coordinator.claim(&id, partition) {
            return Err(ResponseError::ConcurrentTransactions);
        }
        let current = coordinator.value(&id).filter(|v| v.producer_id >= 0);
        let decided = state::init_producer(current.as_ref(), (timeout_ms, now_ms()), expected, new_id);
        match decided {
            Err(error) => {
                coordinator.release(&id, None);
                Err(error)
            }
            Ok(InitDecision::Write(value)) => {
                store::write(&there, partition, &id, value.clone()).await?;
                Ok((value.producer_id, value.producer_epoch))
            }
            Ok(InitDecision::AbortFirst(aborting)) => {
                store::write(&there, partition, &id, aborting.clone()).await?;
                if coordinator.claim(&id, partition) {
                    store::complete_in_background(&there, partition, id, aborting);
                }
                Err(ResponseError::ConcurrentTransactions)
            }
        }
    })
    .await
}
