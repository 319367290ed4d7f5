//! InitProducerId: a producer id and epoch for an idempotent producer.
//!
//! Without a transactional id Kafka always hands out a fresh producer id at epoch 0, also when
//! a v3+ request names its current id and epoch (KIP-360): only transactional producers keep
//! their id and get the epoch bumped. Laminar does the same; the client starts its sequences
//! at 0 under the new id, which is what it expects after a bump too.
//!
//! In cluster mode ids come from blocks of 1 000 allocated by the controller quorum
//! (`AllocateProducerIds`), so they are unique across brokers.
//!
//! Transactions do not exist yet: a transactional id gets COORDINATOR_NOT_AVAILABLE, which is
//! what Kafka answers while no transaction coordinator can serve that id (its
//! `__transaction_state` partition is not available), and an empty one INVALID_REQUEST, as in
//! Kafka. Clients report the former as "coordinator not available" and retry until their
//! transaction init timeout, never mistaking the producer for idempotent-only or unauthorised.

use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::broker::BrokerCtx;

const NO_PRODUCER_ID: i64 = -1;
const NO_PRODUCER_EPOCH: i16 = -1;

pub async fn handle(ctx: &Rc<BrokerCtx>, request: InitProducerIdRequest) -> InitProducerIdResponse {
    match request.transactional_id {
        Some(id) if id.is_empty() => return refused(ResponseError::InvalidRequest),
        Some(_) => return refused(ResponseError::CoordinatorNotAvailable),
        None => {}
    }
    // Cluster mode: ids come from blocks the quorum hands out, so they are unique across brokers.
    let next = match &ctx.state.shared.cluster {
        Some(link) => link.next_producer_id().await.map_err(|e| e.to_string()),
        None => ctx.state.shared.producer_ids.next_id().map_err(|e| e.to_string()),
    };
    match next {
        Ok(id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(error) => {
            tracing::error!(%error, "cannot allocate a producer id");
            refused(ResponseError::UnknownServerError)
        }
    }
}

fn refused(error: ResponseError) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
        .with_error_code(error.code())
        .with_producer_id(ProducerId(NO_PRODUCER_ID))
        .with_producer_epoch(NO_PRODUCER_EPOCH)
}
