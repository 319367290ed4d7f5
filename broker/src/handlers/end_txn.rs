//! EndTxn: a transactional producer commits or aborts its transaction. Answered once the
//! coordinator's Prepare value is durable; the markers follow (`transactions::markers`).

use std::rc::Rc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use crate::broker::BrokerCtx;
use crate::transactions::requests;

pub async fn handle(ctx: &Rc<BrokerCtx>, request: EndTxnRequest) -> EndTxnResponse {
    let id = request.transactional_id.0.to_string();
    let producer = (request.producer_id.0, request.producer_epoch);
    let answer = requests::end(ctx, id, producer, request.committed).await;
    EndTxnResponse::default().with_error_code(answer.err().map_or(0, |e| e.code()))
}
