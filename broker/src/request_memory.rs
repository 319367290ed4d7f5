//! The bound on memory held by requests on their way in: Kafka's `queued.max.request.bytes`.
//!
//! Every connection receives into its own buffer. Past a small allowance per connection
//! ([`CONNECTION_ALLOWANCE_BYTES`], enough for any ordinary request), the buffer grows only with a
//! lease from one budget that all shards share, and a frame holds its lease until its handler
//! has taken it. When the budget is spent, connections that need more wait (they stop reading:
//! back-pressure) until another frame is handled or a stalled one times out; small requests,
//! within the allowance, never wait. So partial frames, however many, hold at most the budget.
//!
//! Shared by every shard (atomics and a thread-safe event); a [`Lease`] belongs to one connection.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use event_listener::Event;
use futures::future::{select, Either};

/// Buffer bytes a connection holds without a lease: one ordinary read.
pub const CONNECTION_ALLOWANCE_BYTES: usize = 64 * 1024;
/// After request memory has risen by at least this much, and once it has fallen back, freed
/// memory is handed back to the kernel (the allocator otherwise keeps it for the next frames).
const TRIM_AFTER_PEAK_BYTES: usize = 64 << 20;

/// The budget. One per broker.
#[derive(Debug)]
pub struct RequestMemory {
    limit_bytes: usize,
    in_use_bytes: AtomicUsize,
    /// Highest `in_use_bytes` since memory was last handed back.
    peak_bytes: AtomicUsize,
    released: Event,
}

/// The budget ran out and stayed out until the deadline.
#[derive(Debug, thiserror::Error)]
#[error("request memory (queued.max.request.bytes = {limit_bytes}) stayed in use until the receive deadline")]
pub struct BudgetTimedOut {
    pub limit_bytes: usize,
}

impl RequestMemory {
    pub fn new(limit_bytes: usize) -> Arc<RequestMemory> {
        Arc::new(RequestMemory {
            limit_bytes,
            in_use_bytes: AtomicUsize::new(0),
            peak_bytes: AtomicUsize::new(0),
            released: Event::new(),
        })
    }

    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }

    pub fn in_use_bytes(&self) -> usize {
        self.in_use_bytes.load(Ordering::Relaxed)
    }

    fn try_take(&self, bytes: usize) -> bool {
        let taken = self
            .in_use_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |in_use| {
                in_use
                    .checked_add(bytes)
                    .filter(|total| *total <= self.limit_bytes)
            });
        match taken {
            Ok(before) => {
                self.peak_bytes.fetch_max(before + bytes, Ordering::Relaxed);
                true
            }
            Err(_) => false,
        }
    }

    /// Takes `bytes`, waiting for releases until `deadline`.
    async fn take(&self, bytes: usize, deadline: Instant) -> Result<(), BudgetTimedOut> {
        let timed_out = BudgetTimedOut {
            limit_bytes: self.limit_bytes,
        };
        if bytes > self.limit_bytes {
            return Err(timed_out);
        }
        loop {
            if self.try_take(bytes) {
                return Ok(());
            }
            let released = self.released.listen();
            if self.try_take(bytes) {
                return Ok(());
            }
            let timeout = glommio::timer::sleep(deadline.saturating_duration_since(Instant::now()));
            if let Either::Right(_) = select(released, std::pin::pin!(timeout)).await {
                return Err(timed_out);
            }
        }
    }

    fn give_back(&self, bytes: usize) {
        let before = self.in_use_bytes.fetch_sub(bytes, Ordering::AcqRel);
        assert!(before >= bytes, "a lease gives back only what it took");
        self.released.notify(usize::MAX);
    }

    /// Whether memory should be handed back to the kernel now: request memory rose by
    /// [`TRIM_AFTER_PEAK_BYTES`] or more since the last time and has fallen to a quarter of that
    /// peak. Answers true once per such peak.
    pub fn take_trim_due(&self) -> bool {
        let peak = self.peak_bytes.load(Ordering::Relaxed);
        let due = peak >= TRIM_AFTER_PEAK_BYTES && self.in_use_bytes() <= peak / 4;
        due && self
            .peak_bytes
            .compare_exchange(peak, self.in_use_bytes(), Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }
}

/// The budget one connection holds beyond its allowance. Owned by one connection (one shard).
#[derive(Debug)]
pub struct Lease {
    memory: Arc<RequestMemory>,
    bytes: usize,
}

impl Lease {
    pub fn new(memory: Arc<RequestMemory>) -> Lease {
        Lease { memory, bytes: 0 }
    }

    /// Makes the lease cover a buffer of `buffer_bytes`, waiting for budget until `deadline`.
    pub async fn cover(&mut self, buffer_bytes: usize, deadline: Instant) -> Result<(), BudgetTimedOut> {
        let wanted = buffer_bytes.saturating_sub(CONNECTION_ALLOWANCE_BYTES);
        if wanted > self.bytes {
            self.memory.take(wanted - self.bytes, deadline).await?;
            self.bytes = wanted;
        }
        Ok(())
    }

    /// Shrinks the lease to a buffer of `buffer_bytes` (a frame was handled).
    pub fn shrink_to(&mut self, buffer_bytes: usize) {
        let wanted = buffer_bytes.saturating_sub(CONNECTION_ALLOWANCE_BYTES);
        if wanted < self.bytes {
            self.memory.give_back(self.bytes - wanted);
            self.bytes = wanted;
        }
    }
}

impl Lease {
    /// Moves up to `bytes` of this lease into a new one (a whole frame leaves the buffer for its
    /// handler, and its memory stays counted until the answer is done).
    pub fn split_off(&mut self, bytes: usize) -> Lease {
        let moved = bytes.min(self.bytes);
        self.bytes -= moved;
        Lease {
            memory: self.memory.clone(),
            bytes: moved,
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.shrink_to(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn run<G, F>(test: G)
    where
        G: FnOnce() -> F + Send + 'static,
        F: std::future::Future<Output = ()> + 'static,
    {
        glommio::LocalExecutorBuilder::default()
            .spawn(test)
            .expect("executor")
            .join()
            .expect("test");
    }

    #[test]
    fn leases_beyond_the_budget_wait_and_time_out_and_small_buffers_need_none() {
        run(|| async {
            let memory = RequestMemory::new(1 << 20);
            let soon = || Instant::now() + Duration::from_millis(50);
            let mut first = Lease::new(memory.clone());
            first
                .cover(CONNECTION_ALLOWANCE_BYTES + (1 << 20), soon())
                .await
                .expect("fits");
            assert_eq!(memory.in_use_bytes(), 1 << 20);
            let mut second = Lease::new(memory.clone());
            second
                .cover(CONNECTION_ALLOWANCE_BYTES, soon())
                .await
                .expect("the allowance is free");
            assert!(second
                .cover(CONNECTION_ALLOWANCE_BYTES + 1, soon())
                .await
                .is_err());
            first.shrink_to(0);
            second
                .cover(CONNECTION_ALLOWANCE_BYTES + 1, soon())
                .await
                .expect("freed");
            drop(second);
            assert_eq!(memory.in_use_bytes(), 0);
        });
    }

    #[test]
    fn a_waiting_lease_is_served_when_another_gives_back() {
        run(|| async {
            let memory = RequestMemory::new(1 << 20);
            let mut holder = Lease::new(memory.clone());
            let later = Instant::now() + Duration::from_secs(5);
            holder
                .cover(CONNECTION_ALLOWANCE_BYTES + (1 << 20), later)
                .await
                .expect("fits");
            let waiter = glommio::spawn_local({
                let memory = memory.clone();
                async move {
                    let mut lease = Lease::new(memory);
                    lease
                        .cover(CONNECTION_ALLOWANCE_BYTES + 4096, later)
                        .await
                        .is_ok()
                }
            });
            glommio::timer::sleep(Duration::from_millis(20)).await;
            drop(holder);
            assert!(waiter.await, "served once the holder gave back");
        });
    }

    #[test]
    fn trimming_is_due_once_after_a_high_peak_has_passed() {
        run(|| async {
            let memory = RequestMemory::new(1 << 30);
            let mut lease = Lease::new(memory.clone());
            let later = Instant::now() + Duration::from_secs(1);
            lease
                .cover(CONNECTION_ALLOWANCE_BYTES + TRIM_AFTER_PEAK_BYTES, later)
                .await
                .expect("fits");
            assert!(!memory.take_trim_due(), "still in use");
            lease.shrink_to(0);
            assert!(memory.take_trim_due());
            assert!(!memory.take_trim_due(), "once per peak");
        });
    }
}
