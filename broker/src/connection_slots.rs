//! Client connections' share of the open-file limit (`max.connections`).
//!
//! A connection holds one descriptor for as long as it lives, so connections and partition
//! files draw from one pool (`open_files::descriptor_shares`). Connections are guaranteed up
//! to `max` of it: the pool withholds from the storage what connections hold plus a headroom
//! for those about to come, and the storage closes idle files to fit what is left. So the
//! storage uses what connections do not, and a burst of connections finds room at once (the
//! headroom) or after the storage gave some back (a bounded wait).
//!
//! A connection past `max`, or one still without room after the wait, is closed as soon as it
//! is accepted, which uses a descriptor of the kept reserve for an instant: `accept` itself
//! never meets a full table, the listener's backlog keeps draining, and a client learns at once
//! (and retries with its backoff) instead of waiting for its connection timeout. (Kafka stops
//! accepting at `max.connections` instead.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use laminar_engine::io::DescriptorBudget;

/// How often, at most, the broker logs that it refuses connections.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(60);
/// The longest an accepted connection waits for the storage to give back a descriptor.
pub const ROOM_WAIT_MAX: Duration = Duration::from_secs(1);
/// Connections withheld ahead of those open: an 8th of `max`, at most this many.
const HEADROOM_MAX: u64 = 2048;

/// The count of open client connections against their share of the descriptor pool. Shared by
/// every shard.
#[derive(Debug)]
pub struct ConnectionSlots {
    max: u64,
    headroom: u64,
    /// Accepted connections that may wait for room at once: each holds a descriptor of the
    /// reserve kept out of the pool meanwhile (`open_files`), so this is part of it.
    waiting_max: u64,
    waiting: AtomicU64,
    /// The pool shared with the storage's files.
    pool: Arc<DescriptorBudget>,
    open: AtomicU64,
    refused_total: AtomicU64,
    /// A flood of refusals logs once a minute.
    refusal_log: LogAtMostEvery,
}

/// Says when a repeated event is due to be logged again: at most once per interval.
#[derive(Debug)]
pub struct LogAtMostEvery {
    interval: Duration,
    logged_at: Mutex<Option<Instant>>,
}

impl LogAtMostEvery {
    pub fn minute() -> LogAtMostEvery {
        LogAtMostEvery {
            interval: REFUSAL_LOG_INTERVAL,
            logged_at: Mutex::new(None),
        }
    }

    /// Whether to log now (then not again for the interval).
    pub fn due(&self) -> bool {
        let mut logged_at = self
            .logged_at
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if logged_at.is_some_and(|at| at.elapsed() < self.interval) {
            return false;
        }
        *logged_at = Some(Instant::now());
        true
    }
}

/// A connection's turn among those waiting for room, given back when dropped.
#[derive(Debug)]
pub struct WaitingForRoom {
    slots: Arc<ConnectionSlots>,
}

impl Drop for WaitingForRoom {
    fn drop(&mut self) {
        self.slots.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One open connection's slot, given back when dropped.
#[derive(Debug)]
pub struct ConnectionSlot {
    slots: Arc<ConnectionSlots>,
}

/// Why a connection got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoSlot {
    /// All `max` are open.
    AllTaken,
    /// The storage holds what is left of the pool (in use at this instant); it gives back
    /// under the pressure this raised.
    NoRoomYet,
}

impl ConnectionSlots {
    /// At most `max` connections, drawn from `pool` (which must leave room for them: see
    /// `open_files::descriptor_shares`); at most `waiting_max` waiting for room at once.
    pub fn new(max: u64, pool: Arc<DescriptorBudget>, waiting_max: u64) -> Arc<ConnectionSlots> {
        let headroom = (max / 8).clamp(max.min(1), HEADROOM_MAX);
        pool.withhold(headroom.min(max));
        Arc::new(ConnectionSlots {
            max,
            headroom,
            waiting_max,
            waiting: AtomicU64::new(0),
            pool,
            open: AtomicU64::new(0),
            refused_total: AtomicU64::new(0),
            refusal_log: LogAtMostEvery::minute(),
        })
    }

    /// A slot for a new connection, whose descriptor is already open.
    pub fn take(self: &Arc<Self>) -> Result<ConnectionSlot, NoSlot> {
        let pool_limit = self.pool.limit();
        let taken = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                let room = self.pool.used().saturating_add(open) < pool_limit;
                (open < self.max && room).then_some(open + 1)
            });
        match taken {
            Ok(before) => {
                self.withhold_for(before + 1);
                Ok(ConnectionSlot { slots: self.clone() })
            }
            Err(open) if open >= self.max => Err(NoSlot::AllTaken),
            Err(_) => {
                self.pool.raise_pressure();
                Err(NoSlot::NoRoomYet)
            }
        }
    }

    /// A turn to wait for room, unless `waiting_max` connections already wait.
    pub fn start_waiting(self: &Arc<Self>) -> Option<WaitingForRoom> {
        self.waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |waiting| {
                (waiting < self.waiting_max).then_some(waiting + 1)
            })
            .ok()
            .map(|_| WaitingForRoom { slots: self.clone() })
    }

    /// Resolves the next time the storage gives descriptors back (create it before [`take`]).
    pub fn room_released(&self) -> impl std::future::Future<Output = ()> {
        self.pool.released()
    }

    /// Counts a connection closed for want of a slot, and logs it at most once a minute.
    pub fn refused(&self, why: NoSlot) {
        let refused_total = self.refused_total.fetch_add(1, Ordering::Relaxed) + 1;
        if !self.refusal_log.due() {
            return;
        }
        tracing::warn!(
            connections_max = self.max,
            connections_open = self.open(),
            partition_file_descriptors = self.pool.used(),
            refused_total,
            ?why,
            "refusing new connections: no connection slot (max.connections, at most half the \
             open-file limit; raise LimitNOFILE or max.connections for more)"
        );
    }

    fn withhold_for(&self, open: u64) {
        self.pool
            .withhold(open.saturating_add(self.headroom).min(self.max));
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn open(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    pub fn refused_total(&self) -> u64 {
        self.refused_total.load(Ordering::Relaxed)
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let before = self.slots.open.fetch_sub(1, Ordering::AcqRel);
        assert!(before > 0, "a connection slot was given back twice");
        self.slots.withhold_for(before - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_refused_past_max_and_come_back_when_dropped() {
        let pool = DescriptorBudget::new(100);
        let slots = ConnectionSlots::new(2, pool.clone(), 1);
        let first = slots.take().expect("first slot");
        let second = slots.take().expect("second slot");
        assert_eq!(slots.take().unwrap_err(), NoSlot::AllTaken);
        assert_eq!(pool.storage_limit(), 98);
        drop(first);
        assert_eq!(slots.open(), 1);
        let third = slots.take().expect("a slot given back is taken again");
        drop((second, third));
        assert_eq!(slots.open(), 0);
        assert_eq!(pool.storage_limit(), 99, "the headroom stays withheld");
    }

    #[test]
    fn connections_withhold_from_the_storage_what_they_hold_and_a_headroom() {
        let pool = DescriptorBudget::new(1000);
        let slots = ConnectionSlots::new(160, pool.clone(), 1);
        assert_eq!(pool.storage_limit(), 980, "an 8th of max withheld ahead");
        let shard = pool.shard();
        let files = shard
            .take(980)
            .expect("the storage may use all it is not withheld");
        let held: Vec<_> = (0..20).map(|_| slots.take().expect("the headroom")).collect();
        assert_eq!(pool.storage_limit(), 960, "20 open and 20 ahead");
        assert!(shard.take_pressure(), "the storage holds more than it may now");
        assert_eq!(
            slots.take().unwrap_err(),
            NoSlot::NoRoomYet,
            "980 + 20 fill the pool"
        );
        let waiting = slots.start_waiting().expect("one may wait");
        assert!(slots.start_waiting().is_none(), "only one at once");
        drop(waiting);
        assert!(slots.start_waiting().is_some(), "a turn comes back");
        let released = slots.room_released();
        drop(files);
        futures::executor::block_on(released);
        let more = slots.take().expect("room again once the storage gave back");
        drop((held, more));
        assert_eq!(pool.storage_limit(), 980);
    }
}
