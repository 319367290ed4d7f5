//! Calls to the quorum from the handlers (glommio tasks): retried while the quorum elects a
//! leader, and followed by a bounded wait until this broker's view shows the result.

use std::future::Future;
use std::time::{Duration, Instant};

use kafka_protocol::protocol::StrBytes;
use laminar_controller::Refusal;

use super::ClusterLink;

/// How long a request keeps retrying NOT_CONTROLLER (an election takes 2–4 s with the default
/// 1–2 s timeouts, decision 0012) before the client gets the error.
const NO_CONTROLLER_WAIT: Duration = Duration::from_secs(10);
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// How long a handler waits for its change to reach this broker's view before answering.
pub const VIEW_WAIT: Duration = Duration::from_secs(5);

/// Runs `call` until it is not refused for want of a controller, or [`NO_CONTROLLER_WAIT`].
pub async fn with_retries<T, F, Fut>(call: F) -> Result<T, Refusal>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, Refusal>>,
{
    let deadline = Instant::now() + NO_CONTROLLER_WAIT;
    loop {
        match call().await {
            Err(e) if retriable(&e) && Instant::now() < deadline => {
                glommio::timer::sleep(RETRY_PAUSE).await;
            }
            done => return done,
        }
    }
}

fn retriable(refusal: &Refusal) -> bool {
    matches!(refusal, Refusal::NotController { .. } | Refusal::RequestTimedOut)
}

/// Kafka's error code and message for a part of a request the quorum answered (a partition,
/// a topic): no error and no message when it was done.
pub fn error_fields<T>(result: &Result<T, Refusal>) -> (i16, Option<StrBytes>) {
    match result {
        Ok(_) => (0, None),
        Err(refusal) => {
            let message = StrBytes::from_string(refusal.to_string());
            (refusal.response_error().code(), Some(message))
        }
    }
}

/// Waits until `ready` holds for the published metadata, at most [`VIEW_WAIT`]; whether it does.
pub async fn wait_for_view(
    link: &ClusterLink,
    ready: impl Fn(&laminar_controller::MetadataImage) -> bool,
) -> bool {
    let deadline = Instant::now() + VIEW_WAIT;
    loop {
        if ready(&link.image()) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }
}

impl ClusterLink {
    /// A producer id unique across the cluster: from this broker's current block, or a new
    /// block from the quorum (`AllocateProducerIds`) when it is used up.
    pub async fn next_producer_id(&self) -> Result<i64, Refusal> {
        if let Some(id) = self.take_producer_id() {
            return Ok(id);
        }
        let (start, len) = with_retries(|| {
            self.handle
                .allocate_producer_ids(self.node_id, self.broker_epoch())
        })
        .await?;
        let mut block = self.producer_ids.lock().unwrap_or_else(|p| p.into_inner());
        // Another task may have refilled meanwhile; the newer block wins, the other's ids are
        // skipped (ids need to be unique, not dense).
        *block = (
            start.get().saturating_add(1),
            start.get().saturating_add(i64::from(len)),
        );
        Ok(start.get())
    }

    fn take_producer_id(&self) -> Option<i64> {
        let mut block = self.producer_ids.lock().unwrap_or_else(|p| p.into_inner());
        let (next, end) = *block;
        (next < end).then(|| {
            block.0 = next + 1;
            next
        })
    }
}
