//! One shard's transaction coordinator: the transactional ids of the `__transaction_state`
//! partitions this shard owns (and, in a cluster, leads), each with its durable value.
//! Owned by that shard; not Send: every transition of an id runs there, so no lock is needed.
//!
//! An id is *busy* while a write of its value, or its markers, are in flight: a request meeting
//! a busy id answers CONCURRENT_TRANSACTIONS (retriable), as Kafka's pending state does, so at
//! most one transition of an id is in flight. Memory: one entry per transactional id the
//! partitions hold (their records bound it), dropped when the id expires or the partition
//! moves away.

use std::cell::RefCell;
use std::collections::HashMap;

use kafka_protocol::error::ResponseError;
use laminar_model::LeaderEpoch;

use super::records::{TxnRecord, TxnState, TxnValue};

/// A transactional id's durable value and whether a transition of it is in flight.
#[derive(Debug, Clone)]
pub struct TxnEntry {
    pub partition: i32,
    pub value: TxnValue,
    pub busy: bool,
}

/// Where a `__transaction_state` partition's ids are on this shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    Loading(LeaderEpoch),
    Ready(LeaderEpoch),
}

#[derive(Default)]
pub struct TxnCoordinator {
    entries: RefCell<HashMap<String, TxnEntry>>,
    loads: RefCell<HashMap<i32, Load>>,
}

impl TxnCoordinator {
    /// The leader epoch `partition` is ready at, if it is.
    pub fn ready_epoch(&self, partition: i32) -> Option<LeaderEpoch> {
        match self.loads.borrow().get(&partition) {
            Some(Load::Ready(epoch)) => Some(*epoch),
            _ => None,
        }
    }

    pub fn load_state(&self, partition: i32) -> Option<Load> {
        self.loads.borrow().get(&partition).copied()
    }

    pub fn begin_load(&self, partition: i32, epoch: LeaderEpoch) {
        self.forget_partition(partition);
        self.loads.borrow_mut().insert(partition, Load::Loading(epoch));
    }

    /// Ends a load begun at `epoch` (a newer load may have begun meanwhile: then nothing).
    pub fn end_load(&self, partition: i32, epoch: LeaderEpoch, ok: bool) {
        let mut loads = self.loads.borrow_mut();
        if loads.get(&partition) != Some(&Load::Loading(epoch)) {
            return;
        }
        if ok {
            loads.insert(partition, Load::Ready(epoch));
        } else {
            loads.remove(&partition);
        }
    }

    /// Drops the ids of `partition` (its leadership moved, or it is reloaded).
    pub fn forget_partition(&self, partition: i32) {
        self.loads.borrow_mut().remove(&partition);
        self.entries.borrow_mut().retain(|_, e| e.partition != partition);
    }

    pub fn loaded_partitions(&self) -> Vec<i32> {
        self.loads.borrow().keys().copied().collect()
    }

    /// Applies a replayed record: the last one of an id wins.
    pub fn apply(&self, partition: i32, record: TxnRecord) {
        let mut entries = self.entries.borrow_mut();
        match record.value {
            Some(value) => {
                let entry = TxnEntry {
                    partition,
                    value,
                    busy: false,
                };
                entries.insert(record.transactional_id, entry);
            }
            None => {
                entries.remove(&record.transactional_id);
            }
        }
    }

    /// The durable value of `id`, unless a transition of it is in flight.
    pub fn idle_value(&self, id: &str) -> Result<Option<TxnValue>, ResponseError> {
        match self.entries.borrow().get(id) {
            Some(entry) if entry.busy => Err(ResponseError::ConcurrentTransactions),
            Some(entry) => Ok(Some(entry.value.clone())),
            None => Ok(None),
        }
    }

    pub fn value(&self, id: &str) -> Option<TxnValue> {
        self.entries.borrow().get(id).map(|e| e.value.clone())
    }

    /// Marks `id` busy (a transition of it begins); false if it already was.
    pub fn claim(&self, id: &str, partition: i32) -> bool {
        let mut entries = self.entries.borrow_mut();
        match entries.get_mut(id) {
            Some(entry) if entry.busy => false,
            Some(entry) => {
                entry.busy = true;
                true
            }
            None => {
                // A new id: a placeholder until its first value is durable.
                let placeholder = TxnEntry {
                    partition,
                    value: TxnValue {
                        producer_id: -1,
                        producer_epoch: -1,
                        timeout_ms: 0,
                        state: TxnState::Dead,
                        partitions: Default::default(),
                        last_update_ms: -1,
                        start_ms: -1,
                    },
                    busy: true,
                };
                entries.insert(id.to_string(), placeholder);
                true
            }
        }
    }

    /// Ends a transition of `id`: with the value now durable, or none (the write failed: the
    /// old value stays, and a placeholder goes).
    pub fn release(&self, id: &str, written: Option<TxnValue>) {
        let mut entries = self.entries.borrow_mut();
        let Some(entry) = entries.get_mut(id) else {
            return;
        };
        entry.busy = false;
        match written {
            Some(value) => entry.value = value,
            None if entry.value.producer_id < 0 => {
                entries.remove(id);
            }
            None => {}
        }
    }

    /// Forgets `id` (its tombstone is durable).
    pub fn forget(&self, id: &str) {
        self.entries.borrow_mut().remove(id);
    }

    /// Ids whose state needs the coordinator's own action: prepared ones to complete (after a
    /// load), ongoing ones past their timeout (`expired(value)`).
    pub fn idle_ids_where(&self, wanted: impl Fn(&TxnValue) -> bool) -> Vec<(String, i32)> {
        self.entries
            .borrow()
            .iter()
            .filter(|(_, e)| !e.busy && wanted(&e.value))
            .map(|(id, e)| (id.clone(), e.partition))
            .collect()
    }

    /// Every id with its value (DescribeTransactions, ListTransactions).
    pub fn snapshot(&self) -> Vec<(String, TxnValue)> {
        self.entries
            .borrow()
            .iter()
            .filter(|(_, e)| e.value.producer_id >= 0)
            .map(|(id, e)| (id.clone(), e.value.clone()))
            .collect()
    }
}
