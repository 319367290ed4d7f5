//! The fetch's side of its fetch session (KIP-227, `crate::fetch_sessions`): which partitions a
//! request reads once its session fields are applied, and what the session keeps of each
//! partition's answer. Apart from the reads: a session decides what is read and sent, not how.

use std::rc::Rc;
use std::time::Instant;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::FetchRequest;
use laminar_protocol::fetch_response::PartitionAnswer;

use crate::broker::{BrokerCtx, TopicPartition};
use crate::fetch_sessions::{Answered, FetchContext, Opened, PartitionFetch, PartitionState};
use crate::handlers::partition_answers::items_by_partition;

use super::wanted::Reader;

/// The partitions to read for `request`, once its fetch session fields (v7+) are applied: those
/// it names, or its session's; or the error that answers it whole.
pub(super) fn open_session(
    ctx: &Rc<BrokerCtx>,
    request: &FetchRequest,
    version: i16,
    reader: Reader,
) -> Result<Opened, ResponseError> {
    let named = items_by_partition(
        &request.topics,
        |t| (t.topic.as_str(), t.partitions.as_slice()),
        |p| {
            let fetch = PartitionFetch {
                fetch_offset: p.fetch_offset,
                partition_max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
            };
            (p.partition, fetch)
        },
    );
    if version < 7 {
        let context = FetchContext::Sessionless;
        return Ok(Opened {
            context,
            partitions: named,
        });
    }
    let forgotten: Vec<TopicPartition> = items_by_partition(
        &request.forgotten_topics_data,
        |t| (t.topic.as_str(), t.partitions.as_slice()),
        |p| (*p, ()),
    )
    .into_iter()
    .map(|(tp, ())| tp)
    .collect();
    let session = (request.session_id, request.session_epoch);
    let follower = matches!(reader, Reader::Follower(_));
    let sessions = &ctx.state.shared.fetch_sessions;
    sessions.open(session, named, &forgotten, follower, Instant::now())
}

/// What a fetch session keeps of a partition's answer.
pub(super) fn told_of(answer: &PartitionAnswer) -> Answered {
    let state = PartitionState {
        high_watermark: answer.high_watermark,
        last_stable_offset: answer.last_stable_offset,
        log_start_offset: answer.log_start_offset,
    };
    Answered {
        state,
        has_records: !answer.records.is_empty(),
        error_code: answer.error_code,
    }
}
