//! The transaction state machine of one transactional id: pure decisions from the durable
//! value and a request to the value to write next (Kafka's TransactionMetadata transitions).
//! The coordinator writes the value, and only once it is durable makes it current.

use kafka_protocol::error::ResponseError;

use super::records::{TxnPartitions, TxnState, TxnValue};

/// Kafka's epoch limit: past it the producer gets a new id at epoch 0.
const EPOCH_MAX: i16 = i16::MAX - 1;

/// What InitProducerId leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitDecision {
    /// Write this value, then answer with its producer id and epoch.
    Write(TxnValue),
    /// An open transaction must be aborted first (at a bumped epoch, which fences its
    /// producer): write this PrepareAbort value, complete it, and answer
    /// CONCURRENT_TRANSACTIONS so the client asks again.
    AbortFirst(TxnValue),
}

/// What InitProducerId with a transactional id decides, given the id's durable value.
/// `expected` is the producer id and epoch a v3+ request names (KIP-360), `new_id` allocates.
pub fn init_producer(
    current: Option<&TxnValue>,
    (timeout_ms, now_ms): (i32, i64),
    expected: Option<(i64, i16)>,
    new_id: i64,
) -> Result<InitDecision, ResponseError> {
    if needs_new_producer_id(current) && new_id < 0 {
        // The value changed while an id was (not) allocated: the client asks again.
        return Err(ResponseError::ConcurrentTransactions);
    }
    let Some(current) = current else {
        return Ok(InitDecision::Write(fresh(new_id, timeout_ms, now_ms)));
    };
    if let Some((id, epoch)) = expected {
        // A producer that names its id must be the current one (or its epoch just bumped).
        let known = id == current.producer_id
            && (epoch == current.producer_epoch || epoch.checked_add(1) == Some(current.producer_epoch));
        if !known {
            return Err(ResponseError::ProducerFenced);
        }
    }
    match current.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
            Err(ResponseError::ConcurrentTransactions)
        }
        TxnState::Ongoing => Ok(InitDecision::AbortFirst(TxnValue {
            state: TxnState::PrepareAbort,
            producer_epoch: bumped(current.producer_epoch),
            last_update_ms: now_ms,
            ..current.clone()
        })),
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort | TxnState::Dead => {
            if current.producer_epoch >= EPOCH_MAX {
                return Ok(InitDecision::Write(fresh(new_id, timeout_ms, now_ms)));
            }
            Ok(InitDecision::Write(TxnValue {
                producer_epoch: current.producer_epoch + 1,
                timeout_ms,
                state: TxnState::Empty,
                partitions: TxnPartitions::new(),
                last_update_ms: now_ms,
                start_ms: -1,
                ..current.clone()
            }))
        }
    }
}

/// Whether InitProducerId for an id with this value hands out a new producer id.
pub fn needs_new_producer_id(current: Option<&TxnValue>) -> bool {
    current.is_none_or(|v| v.producer_id < 0 || v.producer_epoch >= EPOCH_MAX)
}

fn fresh(producer_id: i64, timeout_ms: i32, now_ms: i64) -> TxnValue {
    TxnValue {
        producer_id,
        producer_epoch: 0,
        timeout_ms,
        state: TxnState::Empty,
        partitions: TxnPartitions::new(),
        last_update_ms: now_ms,
        start_ms: -1,
    }
}

/// An epoch one higher, kept within Kafka's range (a transaction aborted at the limit is
/// aborted at the limit; the next InitProducerId moves to a new id).
fn bumped(epoch: i16) -> i16 {
    (epoch + 1).min(EPOCH_MAX)
}

/// Checks that a request of producer `(id, epoch)` belongs to the id's current producer.
pub fn check_producer(
    current: Option<&TxnValue>,
    (id, epoch): (i64, i16),
) -> Result<&TxnValue, ResponseError> {
    let current = current.ok_or(ResponseError::InvalidProducerIdMapping)?;
    if current.producer_id != id {
        return Err(ResponseError::InvalidProducerIdMapping);
    }
    if current.producer_epoch != epoch {
        return Err(ResponseError::ProducerFenced);
    }
    Ok(current)
}

/// What AddPartitionsToTxn (and AddOffsetsToTxn) decides: `None` when every partition is
/// already part of the ongoing transaction, or the value to write.
pub fn add_partitions(
    current: &TxnValue,
    added: &TxnPartitions,
    now_ms: i64,
) -> Result<Option<TxnValue>, ResponseError> {
    match current.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
            return Err(ResponseError::ConcurrentTransactions)
        }
        TxnState::Dead => return Err(ResponseError::InvalidTxnState),
        TxnState::Empty | TxnState::Ongoing | TxnState::CompleteCommit | TxnState::CompleteAbort => {}
    }
    let ongoing = current.state == TxnState::Ongoing;
    let included = added.iter().all(|(topic, partitions)| {
        current
            .partitions
            .get(topic)
            .is_some_and(|have| partitions.is_subset(have))
    });
    if ongoing && included {
        return Ok(None);
    }
    let mut partitions = if ongoing {
        current.partitions.clone()
    } else {
        TxnPartitions::new()
    };
    for (topic, ids) in added {
        partitions.entry(topic.clone()).or_default().extend(ids);
    }
    Ok(Some(TxnValue {
        state: TxnState::Ongoing,
        partitions,
        last_update_ms: now_ms,
        start_ms: if ongoing { current.start_ms } else { now_ms },
        ..current.clone()
    }))
}

/// What EndTxn decides: `Ok(None)` answers at once (a retried EndTxn that already ended so),
/// `Ok(Some(value))` writes the Prepare value, then the markers go out.
pub fn end_transaction(
    current: &TxnValue,
    commit: bool,
    now_ms: i64,
) -> Result<Option<TxnValue>, ResponseError> {
    let prepare = if commit {
        TxnState::PrepareCommit
    } else {
        TxnState::PrepareAbort
    };
    match (current.state, commit) {
        (TxnState::Ongoing, _) => Ok(Some(TxnValue {
            state: prepare,
            last_update_ms: now_ms,
            ..current.clone()
        })),
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(None),
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
            Err(ResponseError::ConcurrentTransactions)
        }
        _ => Err(ResponseError::InvalidTxnState),
    }
}

/// The value that completes a prepared transaction once its markers are written.
pub fn complete(prepared: &TxnValue, now_ms: i64) -> TxnValue {
    let state = match prepared.state {
        TxnState::PrepareCommit => TxnState::CompleteCommit,
        TxnState::PrepareAbort | TxnState::PrepareEpochFence => TxnState::CompleteAbort,
        other => unreachable!("only a prepared transaction completes, not {other:?}"),
    };
    TxnValue {
        state,
        partitions: TxnPartitions::new(),
        last_update_ms: now_ms,
        ..prepared.clone()
    }
}

/// Whether an id with no transaction in progress was last used `expiration_ms` ago or more
/// (Kafka's `transactional.id.expiration.ms`): its record is then removed.
pub fn is_expired(current: &TxnValue, now_ms: i64, expiration_ms: i32) -> bool {
    let idle = matches!(
        current.state,
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
    );
    idle && now_ms.saturating_sub(current.last_update_ms) >= i64::from(expiration_ms)
}

/// The coordinator aborting a transaction that outlived its timeout: PrepareAbort at a bumped
/// epoch, so its producer is fenced (Kafka's timeout abort).
pub fn time_out(current: &TxnValue, now_ms: i64) -> Option<TxnValue> {
    let expired = current.state == TxnState::Ongoing
        && now_ms.saturating_sub(current.start_ms) > i64::from(current.timeout_ms);
    expired.then(|| TxnValue {
        state: TxnState::PrepareAbort,
        producer_epoch: bumped(current.producer_epoch),
        last_update_ms: now_ms,
        ..current.clone()
    })
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
