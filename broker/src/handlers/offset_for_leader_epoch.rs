//! OffsetForLeaderEpoch (API 23): the end offset of a leader epoch in this broker's log, from
//! the partition's leader epoch cache (KIP-101, KIP-279). Followers ask it before they fetch,
//! to truncate what diverged; consumers ask it to validate their position after a leader
//! change (KIP-320).

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::EpochEndOffset;
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use laminar_engine::partition::leader_epochs::UNDEFINED_EPOCH_OFFSET;
use laminar_model::{LeaderEpoch, Offset};

use crate::broker::on_owning_shards;
use crate::broker::BrokerCtx;
use crate::errors::partition_error_code;
use crate::handlers::partition_answers::{items_by_partition, push_partition};

/// A request's current_leader_epoch that asks for no check (Kafka's NO_PARTITION_LEADER_EPOCH).
const NO_CURRENT_EPOCH: i32 = -1;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let items = items_by_partition(
        &request.topics,
        |t| (t.topic.as_str(), t.partitions.as_slice()),
        |p| (p.partition, (p.current_leader_epoch, p.leader_epoch)),
    );
    let results = on_owning_shards(ctx, items, |there, tp, (current, asked)| async move {
        let partition = there.state.partition_to_read(&tp).await?;
        let leader_epoch = there.state.leader_epoch_of(&tp);
        if let Some(error) = fencing_error(current, leader_epoch) {
            return Ok(Err(error));
        }
        let (asked, leader_epoch) = (LeaderEpoch::new(asked), LeaderEpoch::new(leader_epoch));
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

/// KIP-320: a requester that names the leader epoch it knows is refused when that is not this
/// leader's: FENCED_LEADER_EPOCH when it is older (its metadata is stale), UNKNOWN_LEADER_EPOCH
/// when it is newer (this broker's metadata is behind).
fn fencing_error(current: i32, leader_epoch: i32) -> Option<ResponseError> {
    match current {
        NO_CURRENT_EPOCH => None,
        c if c < leader_epoch => Some(ResponseError::FencedLeaderEpoch),
        c if c > leader_epoch => Some(ResponseError::UnknownLeaderEpoch),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_leader_epoch_is_checked_as_kip_320_says() {
        assert_eq!(fencing_error(-1, 3), None);
        assert_eq!(fencing_error(3, 3), None);
        assert_eq!(fencing_error(2, 3), Some(ResponseError::FencedLeaderEpoch));
        assert_eq!(fencing_error(4, 3), Some(ResponseError::UnknownLeaderEpoch));
    }
}
