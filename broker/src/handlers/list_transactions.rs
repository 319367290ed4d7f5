//! ListTransactions (API 66, KIP-664): every transactional id this broker coordinates, from
//! each shard's coordinator, filtered by state, producer id and (v1) how long the transaction
//! has run; only the ids the principal may Describe. What `laminar txn list` shows.

use std::collections::BTreeSet;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use crate::authorization::Access;
use crate::broker::BrokerCtx;
use crate::clock::now_ms;
use crate::handlers::describe_transactions::may_describe;
use crate::transactions::coordinator::Load;
use crate::transactions::records::{TxnState, TxnValue};

/// What a transaction must match to be listed. Each list is bounded by the request's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxnFilter {
    /// Empty: any state. Each state once: at most the 8 states.
    pub states: Vec<TxnState>,
    /// Empty: any producer. Bounded by the request's list.
    pub producer_ids: BTreeSet<i64>,
    /// Listed only if it started more than this many ms before `now_ms`; `None`: any.
    pub running_longer_than_ms: Option<i64>,
    pub now_ms: i64,
}

impl TxnFilter {
    /// The filter a request asks for, and the state names it gave that name no state (Kafka
    /// answers them back and filters by the others).
    pub fn of(request: &ListTransactionsRequest, now_ms: i64) -> (TxnFilter, Vec<StrBytes>) {
        let mut states = Vec::new();
        let mut unknown = Vec::new();
        for name in &request.state_filters {
            match state_named(name) {
                Some(state) if !states.contains(&state) => states.push(state),
                Some(_) => {}
                None => unknown.push(name.clone()),
            }
        }
        let filter = TxnFilter {
            states,
            producer_ids: request.producer_id_filters.iter().map(|p| p.0).collect(),
            // v0 has no duration filter: its default, -1, asks for none.
            running_longer_than_ms: (request.duration_filter >= 0).then_some(request.duration_filter),
            now_ms,
        };
        (filter, unknown)
    }

    pub fn matches(&self, value: &TxnValue) -> bool {
        (self.states.is_empty() || self.states.contains(&value.state))
            && (self.producer_ids.is_empty() || self.producer_ids.contains(&value.producer_id))
            && self
                .running_longer_than_ms
                .is_none_or(|least| self.now_ms.saturating_sub(value.start_ms) > least)
    }
}

/// The state Kafka names `name`.
pub fn state_named(name: &str) -> Option<TxnState> {
    (0..=i8::MAX)
        .map_while(TxnState::from_id)
        .find(|state| state.name() == name)
}

pub async fn handle(
    ctx: &Rc<BrokerCtx>,
    access: &Access,
    request: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let (filter, unknown) = TxnFilter::of(&request, now_ms());
    let response = ListTransactionsResponse::default().with_unknown_state_filters(unknown);
    let mut listed = match gather(ctx, &filter).await {
        Ok(listed) => listed,
        Err(error) => return response.with_error_code(error.code()),
    };
    listed.retain(|(id, _)| may_describe(access, id));
    let states = listed.into_iter().map(|(id, value)| {
        TransactionState::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
            .with_producer_id(ProducerId(value.producer_id))
            .with_transaction_state(StrBytes::from_static_str(value.state.name()))
    });
    response.with_transaction_states(states.collect())
}

/// Every transaction matching `filter` on every shard, by transactional id: one entry per id the
/// shards coordinate at most. COORDINATOR_LOAD_IN_PROGRESS while any shard loads a
/// `__transaction_state` partition (its ids are not all known yet), as Kafka answers. Also what
/// the admin HTTP API's `/v1/transactions` lists.
pub async fn gather(
    ctx: &Rc<BrokerCtx>,
    filter: &TxnFilter,
) -> Result<Vec<(String, TxnValue)>, ResponseError> {
    let per_shard = (0..ctx.shard_count()).map(|shard| {
        let filter = filter.clone();
        ctx.submit_to(shard, move |there| async move { listed_here(&there, &filter) })
    });
    let mut listed = Vec::new();
    for answer in futures::future::join_all(per_shard).await {
        listed.extend(answer.unwrap_or(Err(ResponseError::CoordinatorNotAvailable))?);
    }
    listed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(listed)
}

/// The matching transactions of this shard's coordinator.
fn listed_here(ctx: &BrokerCtx, filter: &TxnFilter) -> Result<Vec<(String, TxnValue)>, ResponseError> {
    let coordinator = &ctx.state.transactions;
    let loading = coordinator
        .loaded_partitions()
        .into_iter()
        .any(|p| matches!(coordinator.load_state(p), Some(Load::Loading(_))));
    if loading {
        return Err(ResponseError::CoordinatorLoadInProgress);
    }
    let mut matching = coordinator.snapshot();
    matching.retain(|(_, v)| filter.matches(v));
    Ok(matching)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(state: TxnState, producer_id: i64, start_ms: i64) -> TxnValue {
        TxnValue {
            producer_id,
            producer_epoch: 0,
            timeout_ms: 60_000,
            state,
            partitions: Default::default(),
            last_update_ms: start_ms,
            start_ms,
        }
    }

    fn names(names: &[&'static str]) -> Vec<StrBytes> {
        names.iter().map(|n| StrBytes::from_static_str(n)).collect()
    }

    #[test]
    fn unknown_state_names_are_answered_back_and_the_known_ones_filter() {
        let request =
            ListTransactionsRequest::default().with_state_filters(names(&["Ongoing", "Sleeping", "ongoing"]));
        let (filter, unknown) = TxnFilter::of(&request, 0);
        assert_eq!(filter.states, vec![TxnState::Ongoing]);
        assert_eq!(unknown, names(&["Sleeping", "ongoing"]));
        assert!(filter.matches(&value(TxnState::Ongoing, 1, 0)));
        assert!(!filter.matches(&value(TxnState::CompleteCommit, 1, 0)));
        // Only unknown names: nothing filters by state.
        let request = ListTransactionsRequest::default().with_state_filters(names(&["Sleeping"]));
        let (filter, _) = TxnFilter::of(&request, 0);
        assert!(filter.matches(&value(TxnState::CompleteAbort, 1, 0)));
    }

    #[test]
    fn producer_ids_and_duration_filter() {
        let request = ListTransactionsRequest::default()
            .with_producer_id_filters(vec![ProducerId(5), ProducerId(6)])
            .with_duration_filter(1_000);
        let (filter, unknown) = TxnFilter::of(&request, 10_000);
        assert!(unknown.is_empty());
        assert!(filter.matches(&value(TxnState::Ongoing, 5, 8_000)));
        assert!(
            !filter.matches(&value(TxnState::Ongoing, 7, 8_000)),
            "another producer"
        );
        assert!(!filter.matches(&value(TxnState::Ongoing, 6, 9_500)), "too recent");
        let every = TxnFilter::of(&ListTransactionsRequest::default(), 10_000).0;
        assert_eq!(every.running_longer_than_ms, None, "-1 by default");
        assert!(every.matches(&value(TxnState::Empty, 9, 9_999)));
    }

    #[test]
    fn every_kafka_state_name_is_known() {
        for name in [
            "Empty",
            "Ongoing",
            "PrepareCommit",
            "PrepareAbort",
            "CompleteCommit",
            "CompleteAbort",
            "Dead",
            "PrepareEpochFence",
        ] {
            assert_eq!(state_named(name).map(TxnState::name), Some(name));
        }
    }
}
