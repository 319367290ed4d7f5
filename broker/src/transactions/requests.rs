//! The coordinator's side of the transactional producer's requests, on the id's coordinator
//! shard: adding partitions (AddPartitionsToTxn, AddOffsetsToTxn) and ending the transaction
//! (EndTxn). The handlers check the request and shape the answers.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;

use super::records::TxnPartitions;
use super::{on_coordinator, state, store};
use crate::broker::BrokerCtx;
use crate::clock::now_ms;

/// Adds `partitions` to the ongoing transaction of `id`, begun if need be, and returns once
/// that is durable.
pub async fn add_partitions(
    ctx: &Rc<BrokerCtx>,
    id: String,
    producer: (i64, i16),
    partitions: TxnPartitions,
) -> Result<(), ResponseError> {
    on_coordinator(ctx, &id.clone(), move |there, partition| async move {
        let coordinator = &there.state.transactions;
        let current = coordinator.idle_value(&id)?;
        let current = state::check_producer(current.as_ref(), producer)?;
        let Some(next) = state::add_partitions(current, &partitions, now_ms())? else {
            return Ok(());
        };
        if !coordinator.claim(&id, partition) {
            return Err(ResponseError::ConcurrentTransactions);
        }
        store::write(&there, partition, &id, next).await
    })
    .await
}

/// Ends the transaction of `id` (`commit` or abort): answers once the Prepare value is
/// durable; the markers and the Complete value follow in the background.
pub async fn end(
    ctx: &Rc<BrokerCtx>,
    id: String,
    producer: (i64, i16),
    commit: bool,
) -> Result<(), ResponseError> {
    on_coordinator(ctx, &id.clone(), move |there, partition| async move {
        let coordinator = &there.state.transactions;
        let current = coordinator.idle_value(&id)?;
        let current = state::check_producer(current.as_ref(), producer)?;
        let Some(prepared) = state::end_transaction(current, commit, now_ms())? else {
            return Ok(());
        };
        if !coordinator.claim(&id, partition) {
            return Err(ResponseError::ConcurrentTransactions);
        }
        store::write(&there, partition, &id, prepared.clone()).await?;
        if coordinator.claim(&id, partition) {
            store::complete_in_background(&there, partition, id, prepared);
        }
        Ok(())
    })
    .await
}
