//! Lets one connection's produce requests overlap while its appends to each partition keep
//! request order.
//!
//! A connection hands a produce request's appends to the owning shards and reads the next
//! request without waiting for them (acks=1 answers no longer hold the connection, as acks=all
//! ones did not already), so two shards can append for one client at once. Kafka promises order
//! per partition within a connection, and idempotent producers with several requests in flight
//! rely on it; a shard's lock alone does not give it (a later task can take a free lock before
//! an earlier, woken one runs). So each request takes a place in line here, in request order, before it
//! goes anywhere: it waits until the earlier requests of this connection that wrote the same
//! partitions are done.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use event_listener::Event;

use crate::broker::TopicPartition;

/// The last request of this connection to write each partition. Owned by one connection (one
/// shard); not Send.
#[derive(Default)]
pub struct AppendOrder {
    last: RefCell<HashMap<TopicPartition, Rc<Done>>>,
}

/// Set once a request's appends are finished (or abandoned).
#[derive(Default)]
struct Done {
    done: Cell<bool>,
    event: Event,
}

impl Done {
    async fn wait(&self) {
        loop {
            if self.done.get() {
                return;
            }
            let listener = self.event.listen();
            if self.done.get() {
                return;
            }
            listener.await;
        }
    }
}

/// One request's place in line. Dropping it (appends finished, failed, or the connection
/// closed) lets the next request of those partitions go.
pub struct PlaceInLine {
    before: Vec<Rc<Done>>,
    mine: Rc<Done>,
}

/// Beyond this many partitions remembered, finished ones are forgotten.
const REMEMBERED_MAX: usize = 1024;

impl AppendOrder {
    /// Takes the next place in line for a request writing `partitions`. Call in request order.
    pub fn take_place<'a>(&self, partitions: impl IntoIterator<Item = &'a TopicPartition>) -> PlaceInLine {
        let mine = Rc::new(Done::default());
        let mut last = self.last.borrow_mut();
        if last.len() > REMEMBERED_MAX {
            last.retain(|_, done| !done.done.get());
        }
        // A partition named twice in one request must not make the request wait for itself.
        let before = partitions
            .into_iter()
            .filter_map(|tp| last.insert(tp.clone(), mine.clone()))
            .filter(|earlier| !earlier.done.get() && !Rc::ptr_eq(earlier, &mine))
            .collect();
        PlaceInLine { before, mine }
    }
}

impl PlaceInLine {
    /// Returns once every earlier request of this connection to the same partitions is done.
    pub async fn wait(&self) {
        for earlier in &self.before {
            earlier.wait().await;
        }
    }
}

impl Drop for PlaceInLine {
    fn drop(&mut self) {
        self.mine.done.set(true);
        self.mine.event.notify(usize::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use std::future::Future;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    #[test]
    fn a_place_waits_only_for_earlier_writers_of_its_partitions() {
        let order = AppendOrder::default();
        let first = order.take_place(&[tp("a", 0), tp("a", 1)]);
        let other_partition = order.take_place(&[tp("a", 2)]);
        let same_partition = order.take_place(&[tp("a", 1)]);
        let then_again = order.take_place(&[tp("a", 1)]);
        assert!(first.wait().now_or_never().is_some());
        assert!(other_partition.wait().now_or_never().is_some());
        assert!(same_partition.wait().now_or_never().is_none(), "behind `first`");
        drop(first);
        assert!(same_partition.wait().now_or_never().is_some());
        assert!(
            then_again.wait().now_or_never().is_none(),
            "behind `same_partition`"
        );
        drop(same_partition);
        assert!(then_again.wait().now_or_never().is_some());
    }

    #[test]
    fn a_waiting_place_is_woken_when_the_earlier_one_is_dropped() {
        let order = AppendOrder::default();
        let first = order.take_place(&[tp("t", 0)]);
        let second = order.take_place(&[tp("t", 0)]);
        let mut waiting = Box::pin(second.wait());
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        drop(first);
        assert!(waiting.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn a_request_naming_a_partition_twice_does_not_wait_for_itself() {
        let order = AppendOrder::default();
        let twice = order.take_place(&[tp("t", 0), tp("t", 0)]);
        assert!(twice.wait().now_or_never().is_some());
        let next = order.take_place(&[tp("t", 0)]);
        assert!(next.wait().now_or_never().is_none(), "behind `twice`");
        drop(twice);
        assert!(next.wait().now_or_never().is_some());
    }

    #[test]
    fn finished_partitions_are_forgotten_past_the_limit() {
        let order = AppendOrder::default();
        for partition in 0..=REMEMBERED_MAX as i32 + 1 {
            drop(order.take_place(&[tp("t", partition)]));
        }
        assert!(order.last.borrow().len() <= 2, "{}", order.last.borrow().len());
    }
}
