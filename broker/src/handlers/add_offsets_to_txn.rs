//! AddOffsetsToTxn: a transactional producer about to commit a group's offsets in its
//! transaction (TxnOffsetCommit) adds the group's `__consumer_offsets` partition to it, so the
//! transaction's markers settle those offsets there.

use std::collections::BTreeSet;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use laminar_security::Operation;

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::group::OFFSETS_TOPIC;
use crate::transactions::records::TxnPartitions;
use crate::transactions::requests;

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let answer = if access.allows_group(Operation::Read, &request.group_id) {
        add_offsets(ctx, &request).await
    } else {
        Err(ResponseError::GroupAuthorizationFailed)
    };
    AddOffsetsToTxnResponse::default().with_error_code(answer.err().map_or(0, |e| e.code()))
}

async fn add_offsets(ctx: &Rc<BrokerCtx>, request: &AddOffsetsToTxnRequest) -> Result<(), ResponseError> {
    if ctx.state.shared.metadata.current().get(OFFSETS_TOPIC).is_none() {
        // No group has a coordinator yet: the client finds one (FindCoordinator makes the
        // topic in a cluster) and asks again.
        return Err(ResponseError::CoordinatorNotAvailable);
    }
    let (_, partition) = crate::group::coordinator_of(ctx, &request.group_id);
    let partitions = TxnPartitions::from([(OFFSETS_TOPIC.to_string(), BTreeSet::from([partition]))]);
    let id = request.transactional_id.0.to_string();
    let producer = (request.producer_id.0, request.producer_epoch);
    requests::add_partitions(ctx, id, producer, partitions).await
}
