//! One partition's read on its owning shard, with what is checked first: a follower's fetch
//! reported to replication and held to the leader's throttle, a consumer's leader epoch
//! (KIP-320). Apart from the budget: a read here takes the grant it is given.

use laminar_model::NodeId;
use std::rc::Rc;
use std::time::Instant;

use laminar_engine::partition::{Partition, ReadResult, RecordBytes};
use laminar_model::LeaderEpoch;

use crate::broker::{BrokerCtx, OpenMode, PartitionAccessError, TopicPartition};
use crate::replication::throttle::ThrottleSide;
use crate::replication::FollowerFetch;

use super::wanted::{Reader, Wanted};

/// Reads one partition on its owning shard.
pub(super) async fn read_one(
    there: &Rc<BrokerCtx>,
    tp: &TopicPartition,
    want: Wanted,
) -> Result<ReadResult<RecordBytes>, PartitionAccessError> {
    if !want.authorized {
        return Err(crate::authorization::topic_refusal());
    }
    let partition = match there.state.partition_to_read(tp).await {
        // KIP-392: a consumer's fetch on a follower, read up to the follower's high watermark.
        Err(PartitionAccessError::NotLeader) if want.follower_may_serve => {
            there.state.replica_partition(tp, OpenMode::IfWritten).await?
        }
        opened => opened?,
    };
    let mut throttled = false;
    match want.reader {
        Reader::Follower(replica_id) => {
            follower_fetched(there, tp, &want, replica_id, partition.as_ref())?;
            throttled = there.state.replication_throttled(ThrottleSide::Leader, tp);
        }
        Reader::Consumer => check_consumer_epoch(there, tp, want.current_leader_epoch)?,
    }
    let read = match partition {
        // Throttled and over budget, or a consumer sent to another replica (KIP-392): the
        // partition answers without records this time.
        Some(partition)
            if want.preferred_replica.is_some() || (throttled && !leader_throttle_allows(there)) =>
        {
            partition.read_result(RecordBytes::default())
        }
        Some(partition) => {
            let end = want.reader.read_end(want.read_committed);
            partition
                .read_for_send(want.offset, want.max_bytes, want.min_one_batch, end)
                .await?
        }
        None => ReadResult::of_unwritten(want.offset)?,
    };
    if throttled {
        if let Some(replication) = &there.state.replication {
            replication.leader_throttle.spend(read.data.len(), Instant::now());
        }
    }
    Ok(read)
}

fn leader_throttle_allows(there: &Rc<BrokerCtx>) -> bool {
    let replication = there.state.replication.as_ref();
    replication.is_none_or(|r| r.leader_throttle.allows(Instant::now()))
}

/// KIP-320: a consumer that names the leader epoch it knows (not -1) is refused when that is
/// not this leader's: FENCED_LEADER_EPOCH for an older one (its metadata is stale),
/// UNKNOWN_LEADER_EPOCH for a newer one (this broker's is).
fn check_consumer_epoch(
    there: &Rc<BrokerCtx>,
    tp: &TopicPartition,
    known: LeaderEpoch,
) -> Result<(), PartitionAccessError> {
    if there.state.shared.cluster.is_none() {
        return Ok(());
    }
    let current = there.state.leader_epoch_of(tp);
    crate::errors::leader_epoch_fencing(known, current)
        .map_or(Ok(()), |error| Err(PartitionAccessError::Refused(error)))
}

/// A follower's fetch tells the leader how far it got: checked against the leadership, then
/// it moves the high watermark (and may change the ISR). Refused outside cluster mode.
fn follower_fetched(
    there: &Rc<BrokerCtx>,
    tp: &TopicPartition,
    want: &Wanted,
    replica_id: NodeId,
    partition: Option<&Rc<Partition>>,
) -> Result<(), PartitionAccessError> {
    let replication = there
        .state
        .replication
        .as_ref()
        .ok_or(PartitionAccessError::NotLeader)?;
    let fetch = FollowerFetch {
        replica_id,
        current_leader_epoch: want.current_leader_epoch,
        fetch_offset: want.offset,
    };
    if let Some(change) =
        replication.follower_fetched(tp, fetch, partition, laminar_model::UnixMillis::now())?
    {
        crate::replication::manager::send_isr_change(there, change);
    }
    Ok(())
}
