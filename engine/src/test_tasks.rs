//! Helpers for the engine's unit tests that drive futures by hand, or on a glommio executor.

use std::future::Future;
use std::task::Poll;

/// Wakes the task and gives way once: polled again, it is done.
pub async fn yield_now() {
    let mut yielded = false;
    futures::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// Runs `test` to its end on a glommio executor of its own (a shard's runtime, io_uring
/// included), on a thread of its own; a panic in it fails the caller.
pub fn on_executor<F, Fut>(test: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    glommio::LocalExecutorBuilder::default()
        .spawn(test)
        .expect("a glommio executor")
        .join()
        .expect("the test's executor ran to its end");
}
