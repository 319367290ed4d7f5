//! [`once_per_wake`]: a glommio file operation polled only after it woke.
//!
//! glommio keeps a clone of the polling task's waker for every poll of a pending file operation
//! (its `Source::collect_rw` pushes one per poll), and a task counts its waker clones in an
//! `i16`: past 32 767 the shard panics ("Waker invariant broken"). A task whose other futures
//! keep waking it (`join_all` of a few partitions, `select`) re-polls a slow open or read each
//! time; one open that waited long on a busy disk took a shard down that way, mid-produce into
//! 10 000 new partitions. Behind the gate, glommio holds one clone of the gate's own waker,
//! whatever the task's other futures do, and is polled again only once that waker fired
//! (docs/decisions/0016).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::task::{waker_ref, ArcWake, AtomicWaker};

/// `operation`, polled once and then only after it woke (see the module comment).
pub fn once_per_wake<F: Future>(operation: F) -> OncePerWake<F> {
    OncePerWake {
        operation,
        gate: Arc::new(Gate {
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        }),
    }
}

pin_project_lite::pin_project! {
    /// See [`once_per_wake`]. Owned by the task that polls it, on its shard.
    pub struct OncePerWake<F> {
        #[pin]
        operation: F,
        gate: Arc<Gate>,
    }
}

/// The waker glommio holds: it records the wake and passes it on to the task.
struct Gate {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl ArcWake for Gate {
    fn wake_by_ref(gate: &Arc<Self>) {
        gate.woken.store(true, Ordering::Release);
        gate.task.wake();
    }
}

impl<F: Future> Future for OncePerWake<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        // Register first, then look: a wake between the two is not lost.
        this.gate.task.register(cx.waker());
        if !this.gate.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let waker = waker_ref(this.gate);
        this.operation.poll(&mut Context::from_waker(&waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_tasks::yield_now;
    use std::cell::Cell;
    use std::rc::Rc;

    /// Pending until `ready`; counts its polls.
    struct Counted {
        polls: Rc<Cell<u32>>,
        ready: Rc<Cell<bool>>,
    }

    impl Future for Counted {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.set(self.polls.get() + 1);
            if self.ready.get() {
                return Poll::Ready(());
            }
            cx.waker().wake_by_ref(); // stands for the I/O completing later
            Poll::Pending
        }
    }

    #[test]
    fn the_operation_is_polled_again_only_after_it_woke() {
        let (polls, ready) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(false)));
        let counted = Counted {
            polls: polls.clone(),
            ready: ready.clone(),
        };
        let mut gated = std::pin::pin!(once_per_wake(counted));
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        assert!(gated.as_mut().poll(&mut cx).is_pending());
        assert_eq!(polls.get(), 1);
        // It woke once: one more poll of it, however often the task polls the gate.
        assert!(gated.as_mut().poll(&mut cx).is_pending());
        assert_eq!(polls.get(), 2);
        ready.set(true);
        assert!(gated.as_mut().poll(&mut cx).is_ready());
        assert_eq!(polls.get(), 3);
    }

    #[test]
    fn polls_of_the_task_in_between_do_not_reach_the_operation() {
        let polls = Rc::new(Cell::new(0));
        let never = futures::future::poll_fn({
            let polls = polls.clone();
            move |_cx: &mut Context<'_>| {
                polls.set(polls.get() + 1);
                Poll::<()>::Pending // and never wakes
            }
        });
        let mut gated = std::pin::pin!(once_per_wake(never));
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        for _ in 0..100_000 {
            assert!(gated.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(polls.get(), 1);
    }

    /// The failure itself: a glommio open polled again on each of 40 000 wakes of its task
    /// (another future yielding) before glommio reaps its completion; without the gate glommio
    /// panics at 32 767. The file is a FIFO opened without blocking (O_NONBLOCK), so the open
    /// never waits on the kernel's worker threads or on a writer.
    #[test]
    fn a_pending_glommio_open_survives_a_task_woken_40_000_times() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success(), "mkfifo");
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let mut options = glommio::io::OpenOptions::new();
                options.read(true).custom_flags(libc::O_NONBLOCK);
                let open = once_per_wake(options.buffered_open(&fifo));
                let spin = async {
                    for _ in 0..40_000 {
                        yield_now().await;
                    }
                };
                let (opened, ()) = futures::join!(open, spin);
                opened.expect("opens").close().await.unwrap();
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
