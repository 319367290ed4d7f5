//! Helpers for the engine's unit tests that drive futures by hand.

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
