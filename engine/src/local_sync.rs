//! Waiting on state that one shard owns: a lock its tasks take turns at, first come first
//! served ([`LocalLock`]), and an event its tasks wait for ([`LocalEvent`]).
//!
//! A partition and its log serialize appends, fdatasyncs, retention and opens with locks held
//! across awaits, and wake long polls at each append. Every such lock and event lives on one
//! shard's thread, so atomics and an internal mutex (what `async_lock::Mutex` and
//! `event_listener::Event` pay on every release and notification, to wake waiters on any
//! thread) buy nothing: an append into a partition of many took and released three locks and
//! notified one event, and at 10 000 partitions that showed as 6 % of the broker's CPU
//! (docs/decisions/0026, per-batch cost across many partitions).
//!
//! Fairness: a release hands the lock to the longest waiter, which then holds it before anyone
//! else can take it; a task that keeps taking the lock cannot starve the others.
//!
//! Bounds: one queue entry (a waker) per task waiting for a lock, and one per listener of an
//! event that has been polled, so each is as long as the tasks of the shard that wait there,
//! which the callers bound (requests in flight per connection, connections per shard, the
//! shard's own maintenance tasks). An entry goes when its waiter is woken or dropped.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Mutual exclusion between one shard's tasks. Not Send: it belongs to the shard whose state it
/// guards.
#[derive(Default)]
pub struct LocalLock {
    locked: Cell<bool>,
    /// The ticket of the waiter the last release handed the lock to (0: none), until it takes it.
    handed_to: Cell<u64>,
    /// Tickets start at 1: 0 stands for "not queued".
    last_ticket: Cell<u64>,
    waiters: RefCell<VecDeque<(u64, Waker)>>,
}

impl LocalLock {
    pub fn new() -> Self {
        Self::default()
    }

    /// Resolves once this task holds the lock; dropping the guard releases it.
    pub fn lock(&self) -> Acquire<'_> {
        Acquire {
            lock: self,
            ticket: 0,
        }
    }

    /// Whether some task holds the lock (or it was handed to a waiter that has not run yet).
    pub fn is_locked(&self) -> bool {
        self.locked.get()
    }

    fn release(&self) {
        debug_assert!(self.locked.get(), "only a holder releases the lock");
        let next = self.waiters.borrow_mut().pop_front();
        match next {
            Some((ticket, waker)) => {
                // Stays locked: it is that waiter's now, and nobody else may take it first.
                self.handed_to.set(ticket);
                waker.wake();
            }
            None => self.locked.set(false),
        }
    }
}

/// A task's turn at a [`LocalLock`]: waiting for it, then holding it (the guard).
pub struct Acquire<'a> {
    lock: &'a LocalLock,
    /// This waiter's place in the queue (0: not queued).
    ticket: u64,
}

impl<'a> Future for Acquire<'a> {
    type Output = LocalLockGuard<'a>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<LocalLockGuard<'a>> {
        let lock = self.lock;
        if self.ticket == 0 {
            if !lock.locked.get() {
                lock.locked.set(true);
                return Poll::Ready(LocalLockGuard { lock });
            }
            let ticket = lock.last_ticket.get() + 1;
            lock.last_ticket.set(ticket);
            lock.waiters.borrow_mut().push_back((ticket, cx.waker().clone()));
            self.ticket = ticket;
            return Poll::Pending;
        }
        if lock.handed_to.get() == self.ticket {
            lock.handed_to.set(0);
            self.ticket = 0;
            return Poll::Ready(LocalLockGuard { lock });
        }
        // Still queued (polled again by its task for another reason): keep its waker current.
        let mut waiters = lock.waiters.borrow_mut();
        let queued = waiters.iter_mut().find(|(ticket, _)| *ticket == self.ticket);
        let (_, waker) = queued.expect("a waiter not handed the lock is queued");
        if !waker.will_wake(cx.waker()) {
            *waker = cx.waker().clone();
        }
        Poll::Pending
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        if self.ticket == 0 {
            return;
        }
        if self.lock.handed_to.get() == self.ticket {
            // Handed the lock but gone before it ran: the next waiter gets it.
            self.lock.handed_to.set(0);
            self.lock.release();
        } else {
            self.lock
                .waiters
                .borrow_mut()
                .retain(|(ticket, _)| *ticket != self.ticket);
        }
    }
}

/// Holds a [`LocalLock`]; dropping it releases the lock.
#[must_use = "the lock is released when the guard is dropped"]
pub struct LocalLockGuard<'a> {
    lock: &'a LocalLock,
}

impl Drop for LocalLockGuard<'_> {
    fn drop(&mut self) {
        self.lock.release();
    }
}

/// Wakes every task waiting at the time of a notification. Not Send: it belongs to the shard
/// whose state changes it announces.
///
/// Its state is made by the first [`listen`](Self::listen): an event nobody listened to
/// (a partition only produced to) costs no allocation, and its notification no visit to one.
#[derive(Default)]
pub struct LocalEvent {
    state: std::cell::OnceCell<Rc<EventState>>,
}

#[derive(Default)]
struct EventState {
    /// Notifications so far: a listener resolves once this moved past what it saw at creation.
    notified: Cell<u64>,
    /// The waker of each listener polled since the last notification, by listener id.
    waiting: RefCell<Vec<(u64, Waker)>>,
    last_listener: Cell<u64>,
}

impl LocalEvent {
    pub fn new() -> Self {
        Self::default()
    }

    /// A future that resolves at the first notification after this call (even one that comes
    /// before it is first polled: listen, then check the state, and no change is missed).
    pub fn listen(&self) -> LocalListener {
        let state = self.state.get_or_init(Rc::default);
        let id = state.last_listener.get() + 1;
        state.last_listener.set(id);
        LocalListener {
            state: state.clone(),
            seen: state.notified.get(),
            id,
        }
    }

    /// Wakes every listener. Without listeners it costs a counter increment; before the first
    /// listener, a check.
    pub fn notify_all(&self) {
        // No listener yet: none to wake, and the first one counts from what it finds.
        let Some(state) = self.state.get() else {
            return;
        };
        state.notified.set(state.notified.get() + 1);
        if state.waiting.borrow().is_empty() {
            return;
        }
        let waiting = std::mem::take(&mut *state.waiting.borrow_mut());
        for (_, waker) in waiting {
            waker.wake();
        }
    }
}

/// One wait for a [`LocalEvent`]'s next notification.
pub struct LocalListener {
    state: Rc<EventState>,
    seen: u64,
    id: u64,
}

impl Future for LocalListener {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.state.notified.get() != self.seen {
            return Poll::Ready(());
        }
        let mut waiting = self.state.waiting.borrow_mut();
        match waiting.iter_mut().find(|(id, _)| *id == self.id) {
            Some((_, waker)) if waker.will_wake(cx.waker()) => {}
            Some((_, waker)) => *waker = cx.waker().clone(),
            None => waiting.push((self.id, cx.waker().clone())),
        }
        Poll::Pending
    }
}

impl Drop for LocalListener {
    fn drop(&mut self) {
        let mut waiting = self.state.waiting.borrow_mut();
        if let Some(at) = waiting.iter().position(|(id, _)| *id == self.id) {
            waiting.swap_remove(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_tasks::yield_now;
    use futures::executor::LocalPool;
    use futures::task::LocalSpawnExt;
    use futures::FutureExt;
    use std::rc::Rc;

    #[test]
    fn an_unheld_lock_is_taken_at_once_and_released_by_its_guard() {
        let lock = LocalLock::new();
        let guard = lock.lock().now_or_never().expect("taken without waiting");
        assert!(lock.is_locked());
        assert!(lock.lock().now_or_never().is_none(), "held: a second task waits");
        drop(guard);
        assert!(!lock.is_locked());
        assert!(
            lock.waiters.borrow().is_empty(),
            "the dropped waiter left the queue"
        );
    }

    #[test]
    fn waiters_take_the_lock_in_arrival_order_one_at_a_time() {
        let mut pool = LocalPool::new();
        let lock = Rc::new(LocalLock::new());
        let order = Rc::new(RefCell::new(Vec::new()));
        let inside = Rc::new(Cell::new(0));
        let held = lock.lock().now_or_never().unwrap();
        for task in 0..20 {
            let (lock, order, inside) = (lock.clone(), order.clone(), inside.clone());
            pool.spawner()
                .spawn_local(async move {
                    let _guard = lock.lock().await;
                    inside.set(inside.get() + 1);
                    assert_eq!(inside.get(), 1, "one holder at a time");
                    // Yield while holding it, so the others get polled meanwhile.
                    yield_now().await;
                    order.borrow_mut().push(task);
                    inside.set(inside.get() - 1);
                })
                .unwrap();
        }
        pool.run_until_stalled();
        assert!(
            order.borrow().is_empty(),
            "nobody got in while the first holder held it"
        );
        assert_eq!(lock.waiters.borrow().len(), 20);
        drop(held);
        pool.run_until_stalled();
        assert_eq!(*order.borrow(), (0..20).collect::<Vec<_>>());
        assert!(!lock.is_locked());
    }

    #[test]
    fn a_waiter_dropped_before_or_after_its_turn_does_not_keep_the_lock() {
        let lock = LocalLock::new();
        let first = lock.lock().now_or_never().unwrap();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut second = Box::pin(lock.lock());
        let mut third = Box::pin(lock.lock());
        let mut fourth = Box::pin(lock.lock());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        assert!(third.as_mut().poll(&mut cx).is_pending());
        assert!(fourth.as_mut().poll(&mut cx).is_pending());
        // Gone while queued: it leaves the queue.
        drop(third);
        assert_eq!(lock.waiters.borrow().len(), 2);
        // Handed the lock, then gone before taking it: the next waiter gets it.
        drop(first);
        drop(second);
        let Poll::Ready(guard) = fourth.as_mut().poll(&mut cx) else {
            panic!("the last waiter holds the lock once those before it are gone");
        };
        drop(guard);
        assert!(!lock.is_locked());
        assert!(lock.lock().now_or_never().is_some());
    }

    #[test]
    fn notifications_before_the_first_listener_are_not_seen_by_it_nor_allocate() {
        let event = LocalEvent::new();
        event.notify_all();
        event.notify_all();
        assert!(event.state.get().is_none(), "no listener yet: no state");
        let mut first = Box::pin(event.listen());
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(
            first.as_mut().poll(&mut cx).is_pending(),
            "the notifications before it were not for it"
        );
        event.notify_all();
        assert!(first.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn a_listener_resolves_at_the_first_notification_after_it_was_made() {
        let event = LocalEvent::new();
        let early = event.listen();
        event.notify_all();
        let late = event.listen();
        assert!(
            early.now_or_never().is_some(),
            "notified before its first poll: not missed"
        );
        let mut late = Box::pin(late);
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(
            late.as_mut().poll(&mut cx).is_pending(),
            "made after the notification"
        );
        assert!(late.as_mut().poll(&mut cx).is_pending());
        let state = event.state.get().expect("made by the first listen");
        assert_eq!(
            state.waiting.borrow().len(),
            1,
            "one entry per listener, however polled"
        );
        event.notify_all();
        assert!(
            state.waiting.borrow().is_empty(),
            "a notification takes every waker"
        );
        assert!(late.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn a_notification_wakes_every_waiting_task_and_a_dropped_listener_leaves() {
        let mut pool = LocalPool::new();
        let event = Rc::new(LocalEvent::new());
        let woken = Rc::new(Cell::new(0));
        for _ in 0..10 {
            let (listener, woken) = (event.listen(), woken.clone());
            pool.spawner()
                .spawn_local(async move {
                    listener.await;
                    woken.set(woken.get() + 1);
                })
                .unwrap();
        }
        pool.run_until_stalled();
        assert_eq!(woken.get(), 0);
        let dropped = event.listen();
        let mut dropped = Box::pin(dropped);
        let waker = futures::task::noop_waker();
        assert!(dropped
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        assert_eq!(event.state.get().expect("listened to").waiting.borrow().len(), 11);
        drop(dropped);
        assert_eq!(event.state.get().expect("listened to").waiting.borrow().len(), 10);
        event.notify_all();
        pool.run_until_stalled();
        assert_eq!(woken.get(), 10);
    }
}
