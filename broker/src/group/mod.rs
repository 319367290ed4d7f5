//! The classic consumer-group coordinator (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit, OffsetFetch, ...).
//!
//! State lives where Kafka keeps it: the internal topic `__consumer_offsets`, created at start
//! with `offsets.topic.num.partitions` partitions and `cleanup.policy=compact`. A group belongs
//! to partition `abs(java_hashcode(group_id)) % partitions` (Kafka's rule); the shard that owns
//! that partition coordinates the group: every state transition of the group runs there (the
//! handlers forward with `submit_to`), so group state needs no lock.
//!
//! - [`state`], [`member`]: the group state machine, pure logic driven by a clock.
//! - [`coordinator`]: one shard's groups and committed offsets.
//! - [`records`]: the on-disk record formats (Kafka's schemas).
//! - [`store`]: writing records, replay at start, the timer task.
//! - [`transactions`]: offsets committed by transactions (TxnOffsetCommit), pending until the
//!   transaction's marker.

pub mod consumer;
pub mod coordinator;
pub mod member;
pub mod records;
pub mod state;
pub mod store;
pub mod transactions;

#[cfg(test)]
mod state_tests;

#[cfg(test)]
mod encode_tests;

#[cfg(test)]
mod transactions_tests;

use std::future::Future;
use std::rc::Rc;

use futures::channel::oneshot;
use futures::future::{select, Either};
use futures::FutureExt;
use kafka_protocol::error::ResponseError;
use laminar_engine::shard::{shard_of_partition, ShardId};

use crate::broker::BrokerCtx;
use crate::reply::Reply;

pub use coordinator::GroupCoordinator;
pub use store::{ensure_offsets_topic, load, run_timers};
pub use transactions::complete_transaction;

/// Kafka's internal topic for committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Java's `String.hashCode` (over UTF-16 code units), which Kafka's placement rule uses.
pub fn java_string_hashcode(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The `__consumer_offsets` partition of `group_id` (Kafka's `Utils.abs(hash) % partitions`,
/// where `abs(i32::MIN)` is 0).
pub fn partition_for(group_id: &str, partition_count: i32) -> i32 {
    assert!(partition_count > 0);
    let hash = java_string_hashcode(group_id);
    let positive = if hash == i32::MIN { 0 } else { hash.abs() };
    positive % partition_count
}

/// The shard coordinating `group_id`, and the group's `__consumer_offsets` partition.
pub fn coordinator_of(ctx: &BrokerCtx, group_id: &str) -> (ShardId, i32) {
    let partition = partition_for(group_id, ctx.state.groups.offsets_partition_count);
    (
        shard_of_partition(OFFSETS_TOPIC, partition, ctx.shard_count()),
        partition,
    )
}

/// Runs `work` on the shard that coordinates `group_id`, with the group's partition, once that
/// shard has loaded its groups.
pub async fn on_coordinator<R, F, Fut>(
    ctx: &Rc<BrokerCtx>,
    group_id: &str,
    work: F,
) -> Result<R, ResponseError>
where
    F: FnOnce(Rc<BrokerCtx>, i32) -> Fut + Send + 'static,
    Fut: Future<Output = R> + 'static,
    R: Send + 'static,
{
    let (shard, partition) = coordinator_of(ctx, group_id);
    let done = ctx
        .submit_to(shard, move |there| async move {
            if !there.state.groups.is_loaded() {
                return Err(ResponseError::CoordinatorLoadInProgress);
            }
            store::check_coordinating(&there, partition)?;
            Ok(work(there, partition).await)
        })
        .await;
    done.unwrap_or(Err(ResponseError::CoordinatorNotAvailable))
}

/// Said by a request running on its group's coordinator shard once it has done what must
/// happen in its connection's request order (checked the member, appended its records): the
/// connection goes on to its next request while this one waits (for durability, for a
/// rebalance). Dropping it says the same. Sent from the coordinator shard to the connection's.
pub struct OrderedPart(Option<oneshot::Sender<()>>);

impl OrderedPart {
    /// Lets the connection go on to its next request.
    pub fn finish(&mut self) {
        if let Some(passed) = self.0.take() {
            let _ = passed.send(());
        }
    }
}

/// As [`on_coordinator`], for a request that may be answered late: returns once `work` has
/// finished its [`OrderedPart`] (or ended), with the answer if it is ready, or the rest of the work to
/// await otherwise.
pub async fn on_coordinator_in_turn<R, F, Fut>(
    ctx: &Rc<BrokerCtx>,
    group_id: &str,
    work: F,
) -> Reply<Result<R, ResponseError>>
where
    F: FnOnce(Rc<BrokerCtx>, i32, OrderedPart) -> Fut + Send + 'static,
    Fut: Future<Output = R> + 'static,
    R: Send + 'static,
{
    let (ordered, passed) = oneshot::channel();
    let (ctx, group_id) = (ctx.clone(), group_id.to_string());
    let mut answer = Box::pin(async move {
        let work = move |there, partition| work(there, partition, OrderedPart(Some(ordered)));
        on_coordinator(&ctx, &group_id, work).await
    });
    if let Either::Right((answer, _)) = select(passed, answer.as_mut()).await {
        return Reply::Now(answer);
    }
    match answer.as_mut().now_or_never() {
        Some(answer) => Reply::Now(answer),
        None => Reply::Later(answer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_matches_kafka() {
        // Values of Java's "...".hashCode().
        assert_eq!(java_string_hashcode(""), 0);
        assert_eq!(java_string_hashcode("a"), 97);
        assert_eq!(java_string_hashcode("my-group"), -1_906_497_762);
        assert_eq!(java_string_hashcode("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("a", 50), 47);
        assert_eq!(partition_for("my-group", 50), 12);
        for id in ["g", "group-1", "ünïcode"] {
            assert!((0..50).contains(&partition_for(id, 50)));
        }
    }
}
