//! The transaction coordinator (KIP-98): transactional ids, their producer ids and epochs, and
//! the two-phase end of each transaction, kept where Kafka keeps them — the internal topic
//! `__transaction_state` (compacted, `transaction.state.log.num.partitions` partitions). An id
//! belongs to partition `abs(java_hashcode(id)) % partitions`, as a group to its
//! `__consumer_offsets` partition; the shard owning (in a cluster, leading) that partition
//! coordinates the id, so its transitions need no lock (docs/ARCHITECTURE.md, Transactions).
//!
//! - [`records`]: the on-disk record format (Kafka's schema).
//! - [`state`]: the state machine, pure.
//! - [`coordinator`]: one shard's ids.
//! - [`store`]: writing values, loading partitions, following leadership, timeouts.
//! - [`markers`]: writing COMMIT / ABORT markers to every partition of a transaction.

pub mod coordinator;
pub mod fencing;
pub mod markers;
pub mod records;
pub mod requests;
pub mod state;
pub mod store;
pub mod verification;

use std::future::Future;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use laminar_engine::shard::{shard_of_partition, ShardId};

use crate::broker::BrokerCtx;

pub use coordinator::TxnCoordinator;

/// Kafka's internal topic for transaction state.
pub const TRANSACTION_TOPIC: &str = "__transaction_state";

/// The shard coordinating `transactional_id`, and its `__transaction_state` partition, given
/// the topic's partition count.
pub fn coordinator_of(ctx: &BrokerCtx, transactional_id: &str, partition_count: i32) -> (ShardId, i32) {
    let partition = crate::group::partition_for(transactional_id, partition_count);
    (
        shard_of_partition(TRANSACTION_TOPIC, partition, ctx.shard_count()),
        partition,
    )
}

/// Runs `work` on the shard that coordinates `transactional_id`, with the id's partition, once
/// that shard has loaded the partition (COORDINATOR_LOAD_IN_PROGRESS until then;
/// NOT_COORDINATOR where another broker leads it; COORDINATOR_NOT_AVAILABLE before the topic
/// exists).
pub async fn on_coordinator<R, F, Fut>(
    ctx: &Rc<BrokerCtx>,
    transactional_id: &str,
    work: F,
) -> Result<R, ResponseError>
where
    F: FnOnce(Rc<BrokerCtx>, i32) -> Fut + Send + 'static,
    Fut: Future<Output = Result<R, ResponseError>> + 'static,
    R: Send + 'static,
{
    let count = store::partition_count(ctx).ok_or(ResponseError::CoordinatorNotAvailable)?;
    let (shard, partition) = coordinator_of(ctx, transactional_id, count);
    let done = ctx
        .submit_to(shard, move |there| async move {
            store::check_coordinating(&there, partition)?;
            work(there, partition).await
        })
        .await;
    done.unwrap_or(Err(ResponseError::CoordinatorNotAvailable))
}
