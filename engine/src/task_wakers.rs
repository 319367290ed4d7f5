//! Keeping glommio's count of a task's wakers bounded.
//!
//! glommio counts the references to a task, waker clones included, in an `i16`: a task whose
//! waker is held in more than 32 767 places at once panics ("Waker invariant broken"), and the
//! panic stops the process (docs/decisions/0016). Two ways a task got there, one tool each:
//!
//! - **One operation polled again and again.** glommio keeps a clone of the polling task's
//!   waker for every poll of a pending file operation or socket peek (`Source::collect_rw`
//!   pushes one per poll). A task whose other futures keep waking it (`join_all` of a few
//!   partitions, `select`) re-polls a slow open, or a connection's wait for its next request,
//!   each time; one open that waited long on a busy disk took a shard down that way,
//!   mid-produce into 10 000 new partitions. [`once_per_wake`]: glommio holds one clone of
//!   the gate's own waker, whatever the task's other futures do, and the operation is polled
//!   again only once that waker fired.
//! - **Many operations at once.** A request may name tens of thousands of partitions of one
//!   shard, and a task that polls one future per partition with its own waker leaves a clone
//!   with each partition it waits on (an open, a lock, an append event). [`SharedWaker`]: one
//!   clone of the task's waker behind an `Arc`, whose clones count in a `usize`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

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

/// The task's waker, behind a count that does not overflow.
struct TaskWaker(Waker);

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.0.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.wake_by_ref();
    }
}

/// A waker for one task that any number of futures may hold at once. Lives for one poll or
/// one wait of its task; [`waker_for`](SharedWaker::waker_for) makes a new one if the task's
/// waker changed.
#[derive(Default)]
pub struct SharedWaker {
    shared: Option<(Arc<TaskWaker>, Waker)>,
}

impl SharedWaker {
    /// The waker to poll with on behalf of the task `cx` belongs to.
    pub fn waker_for(&mut self, cx: &Context<'_>) -> &Waker {
        let current = matches!(&self.shared, Some((task, _)) if task.0.will_wake(cx.waker()));
        if !current {
            let task = Arc::new(TaskWaker(cx.waker().clone()));
            self.shared = Some((task.clone(), Waker::from(task)));
        }
        let (_, waker) = self.shared.as_ref().expect("just set");
        waker
    }
}

/// Polls `inner` with a [`SharedWaker`] of the polling task.
pub fn with_shared_waker<F: Future + Unpin>(inner: F) -> WithSharedWaker<F> {
    WithSharedWaker {
        inner,
        waker: SharedWaker::default(),
    }
}

/// See [`with_shared_waker`].
pub struct WithSharedWaker<F> {
    inner: F,
    waker: SharedWaker,
}

impl<F: Future + Unpin> Future for WithSharedWaker<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let waker = this.waker.waker_for(cx);
        Pin::new(&mut this.inner).poll(&mut Context::from_waker(waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local_sync::LocalEvent;
    use crate::test_tasks::{on_executor, yield_now};
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

    /// A connection waiting for its next request peeks its socket while the answers of earlier
    /// requests keep waking its task (a Produce into tens of thousands of new partitions, each
    /// opened in turn): the peek is re-polled on every wake. Here the client writes only after
    /// the task was woken 40 000 times; ungated, glommio panics at 32 767.
    #[test]
    fn a_pending_socket_peek_survives_a_task_woken_40_000_times() {
        on_executor(|| async {
            let listener = glommio::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let address = listener.local_addr().unwrap();
            let (written, write) = (Rc::new(Cell::new(false)), Rc::new(Cell::new(false)));
            let client = glommio::spawn_local({
                let (written, write) = (written.clone(), write.clone());
                async move {
                    use futures::AsyncWriteExt;
                    let mut stream = glommio::net::TcpStream::connect(address).await.unwrap();
                    while !write.get() {
                        glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
                    }
                    stream.write_all(b"x").await.unwrap();
                    written.set(true);
                    stream
                }
            });
            let server = listener.accept().await.unwrap();
            let mut probe = [0u8; 1];
            let peek = once_per_wake(server.peek(&mut probe));
            let spin = async {
                for _ in 0..40_000 {
                    yield_now().await;
                }
                write.set(true);
            };
            let (peeked, ()) = futures::join!(peek, spin);
            assert_eq!(peeked.expect("peeks"), 1);
            assert!(written.get(), "the byte came after the wakes");
            drop(client.await);
        });
    }

    /// More waits than glommio's count of a task's wakers holds.
    const WAITS: usize = 40_000;

    #[test]
    fn a_glommio_task_waits_on_more_events_than_its_waker_count_holds() {
        on_executor(|| async {
            let events: Rc<Vec<LocalEvent>> = Rc::new((0..WAITS).map(|_| LocalEvent::default()).collect());
            let listeners: Vec<_> = events.iter().map(|e| e.listen()).collect();
            let notifier = events.clone();
            glommio::spawn_local(async move {
                glommio::yield_if_needed().await;
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
                notifier[WAITS - 1].notify_all();
            })
            .detach();
            // Every listener registers the waker it is polled with before the last one fires.
            let (_, fired, _) = with_shared_waker(futures::future::select_all(listeners)).await;
            assert_eq!(fired, WAITS - 1, "the notified event ends the wait");
        });
    }

    #[test]
    fn a_changed_task_waker_gets_a_new_shared_waker() {
        let first = futures::task::noop_waker();
        let mut shared = SharedWaker::default();
        let made = shared.waker_for(&Context::from_waker(&first)).clone();
        let again = shared.waker_for(&Context::from_waker(&first)).clone();
        assert!(made.will_wake(&again), "the same task keeps its shared waker");
        let counted = Arc::new(WakeCount::default());
        let other = Waker::from(counted.clone());
        shared.waker_for(&Context::from_waker(&other)).wake_by_ref();
        assert_eq!(counted.wakes.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[derive(Default)]
    struct WakeCount {
        wakes: std::sync::atomic::AtomicUsize,
    }

    impl Wake for WakeCount {
        fn wake(self: Arc<Self>) {
            self.wakes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
