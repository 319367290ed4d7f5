//! OffsetForLeaderEpoch (API 23): the end offset of a leader epoch in this broker's log, from
//! the partition's leader epoch cache (KIP-101, KIP-279). Followers ask it before they fetch,
//! to truncate what diverged; consumers ask it to validate their position after a leader
//! change (KIP-320).

use std::rc::Rc;

use kafka_protocol::messages::offset_for_leader_epoch_response::EpochEndOffset;
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use laminar_engine::partition::leader_epochs::UNDEFINED_EPOCH_OFFSET;
use laminar_model::{LeaderEpoch, Offset};

use crate::authorization::Access;
use crate::broker::on_owning_shards;
use crate::broker::BrokerCtx;
use crate::errors::leader_epoch_fencing;
use crate::errors::partition_error_code;
use crate::handlers::partition_answers::{items_by_partition, push_partition};
use laminar_security::Operation;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let items = items_by_partition(
        &request.topics,
        |t| (t.topic.as_str(), t.partitions.as_slice()),
        |p| (p.partition, (p.current_leader_epoch, p.leader_epoch)),
    );
    // Kafka's checks: ClusterAction for a follower, Describe on each topic for a consumer.
    let items: Vec<_> = if request.replica_id.0 >= 0 && !access.allows_cluster(Operation::ClusterAction) {
        let refused = || {
            crate::broker::PartitionAccessError::Refused(
                kafka_protocol::error::ResponseError::ClusterAuthorizationFailed,
            )
        };
        items.into_iter().map(|(tp, _)| (tp, Err(refused()))).collect()
    } else {
        access.refuse_topics(items, Operation::Describe)
    };
    let results = on_owning_shards(ctx, items, |there, tp, item| async move {
        let (current, asked) = item?;
        let partition = there.state.partition_to_read(&tp).await?;
        let leader_epoch = there.state.leader_epoch_of(&tp);
        if let Some(error) = leader_epoch_fencing(LeaderEpoch::new(current), leader_epoch) {
            return Ok(Err(error));
        }
        let asked = LeaderEpoch::new(asked);
        Ok(Ok(match partition {
            Some(p) => p.end_offset_for_leader(asked, leader_epoch),
            // Never written: an empty log whose only epoch is the current one.
            None if asked == leader_epoch => (leader_epoch, Offset::ZERO),
            None => (LeaderEpoch::UNKNOWN, UNDEFINED_EPOCH_OFFSET),
        }))
    })
    .await;
    let mut response = OffsetForLeaderEpochResponse::default();
    for (tp, result) in results {
        let answer = EpochEndOffset::default().with_partition(tp.partition);
        let answer = match result {
            Ok(Ok((epoch, end_offset))) => answer
                .with_leader_epoch(epoch.get())
                .with_end_offset(end_offset.get()),
            Ok(Err(error)) => undefined(answer).with_error_code(error.code()),
            Err(e) => undefined(answer).with_error_code(partition_error_code(&e)),
        };
        push_partition(&mut response.topics, &tp.topic, answer);
    }
    response
}

fn undefined(answer: EpochEndOffset) -> EpochEndOffset {
    answer
        .with_leader_epoch(LeaderEpoch::UNKNOWN.get())
        .with_end_offset(UNDEFINED_EPOCH_OFFSET.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::error::ResponseError;

    #[test]
    fn current_leader_epoch_is_checked_as_kip_320_says() {
        let fencing =
            |named, current| leader_epoch_fencing(LeaderEpoch::new(named), LeaderEpoch::new(current));
        assert_eq!(fencing(-1, 3), None);
        assert_eq!(fencing(3, 3), None);
        assert_eq!(fencing(2, 3), Some(ResponseError::FencedLeaderEpoch));
        assert_eq!(fencing(4, 3), Some(ResponseError::UnknownLeaderEpoch));
    }
}
