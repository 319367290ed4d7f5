//! `GET /v1/transactions`: every transactional id this broker coordinates, with its current or
//! last transaction, gathered from the shards' coordinators as ListTransactions gathers them.

use std::rc::Rc;

use serde_json::json;

use super::{ok, ApiError, ApiResult, Query};
use crate::broker::BrokerCtx;
use crate::clock::now_ms;
use crate::handlers::list_transactions::{gather, state_named, TxnFilter};
use crate::transactions::records::{TxnState, TxnValue};

/// `GET /v1/transactions[?state=S]`: each id with its state, producer id and epoch, timeout,
/// start and last update times and partitions, sorted by id; `now_ms` is the broker's clock, so
/// that ages need no trust in the caller's.
pub async fn list(ctx: &Rc<BrokerCtx>, query: &Query) -> ApiResult {
    query.only(&["state"])?;
    let now = now_ms();
    let filter = TxnFilter {
        states: query.text("state").map(state).transpose()?.into_iter().collect(),
        now_ms: now,
        ..TxnFilter::default()
    };
    let listed = gather(ctx, &filter)
        .await
        .map_err(|error| ApiError::kafka(error.code(), None))?;
    let transactions: Vec<serde_json::Value> = listed.iter().map(|(id, v)| transaction_json(id, v)).collect();
    ok(&json!({ "now_ms": now, "transactions": transactions }))
}

/// The state a `state` parameter names, by Kafka's name (`Ongoing`, `CompleteCommit`, ...).
fn state(name: &str) -> Result<TxnState, ApiError> {
    state_named(name).ok_or_else(|| {
        let known: Vec<&str> = (0..=i8::MAX)
            .map_while(TxnState::from_id)
            .map(TxnState::name)
            .collect();
        ApiError::bad_request(format!("state: {name:?} is none of {}", known.join(", ")))
    })
}

fn transaction_json(id: &str, value: &TxnValue) -> serde_json::Value {
    let partitions: Vec<serde_json::Value> = value
        .partitions
        .iter()
        .flat_map(|(topic, partitions)| {
            partitions
                .iter()
                .map(move |p| json!({ "topic": topic, "partition": p }))
        })
        .collect();
    json!({
        "transactional_id": id,
        "state": value.state.name(),
        "producer_id": value.producer_id,
        "producer_epoch": value.producer_epoch,
        "timeout_ms": value.timeout_ms,
        // -1 before the id's first transaction.
        "start_ms": value.start_ms,
        "last_update_ms": value.last_update_ms,
        "partitions": partitions,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn states_are_named_as_kafka_names_them() {
        assert_eq!(state("Ongoing").unwrap(), TxnState::Ongoing);
        let refused = state("ongoing").unwrap_err();
        assert_eq!(refused.status, 400);
        assert!(
            refused.message.contains("PrepareEpochFence"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn a_transaction_lists_each_of_its_partitions() {
        let value = TxnValue {
            producer_id: 4,
            producer_epoch: 2,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: [
                ("a".to_string(), BTreeSet::from([1, 0])),
                ("b".to_string(), BTreeSet::from([3])),
            ]
            .into(),
            last_update_ms: 1_500,
            start_ms: 1_000,
        };
        let listed = transaction_json("tx", &value);
        assert_eq!(listed["state"], "Ongoing");
        assert_eq!(listed["producer_epoch"], 2);
        assert_eq!(
            listed["partitions"],
            json!([
                { "topic": "a", "partition": 0 },
                { "topic": "a", "partition": 1 },
                { "topic": "b", "partition": 3 },
            ])
        );
    }
}
