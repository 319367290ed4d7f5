//! This broker's membership in the cluster: registration (retried until the quorum has a
//! leader and the old incarnation's session ended), heartbeats from one background thread,
//! the wait until unfenced, and controlled shutdown.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use laminar_controller::{BrokerEndpoint, Refusal};

use super::ClusterLink;
use crate::config::BrokerConfig;

/// Pause between attempts to register or to reach an unfenced state.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// How often a still-failing registration is logged.
const LOG_EVERY: Duration = Duration::from_secs(5);
/// How long controlled shutdown waits for this broker's leaderships to move.
pub const CONTROLLED_SHUTDOWN_WAIT: Duration = Duration::from_secs(10);

/// This broker's session with the controller quorum, as the broker itself can tell it: held
/// until `broker.session.timeout.ms` plus [`CONTROLLER_ELECTION_ALLOWANCE`] after it sent the
/// last heartbeat that was answered unfenced. The active controller fences a broker whose
/// heartbeats stopped arriving for the session timeout, counted from their arrival, which is
/// later than their sending: so once the lease lapses here the controller may have fenced
/// this broker and given its leaderships to others. The allowance keeps the brokers of a
/// healthy majority leading while its controllers elect another (no heartbeat is answered
/// meanwhile, and the new controller gives every broker a whole session before it fences any).
/// A leader without the lease answers clients NOT_LEADER_OR_FOLLOWER, so that they look for the
/// new leader instead of waiting on one that cannot commit (docs/ARCHITECTURE.md, "Faults
/// between nodes"; decision 0032).
/// Shared by the heartbeat thread (which renews it) and every shard (which read it).
pub struct SessionLease {
    base: Instant,
    /// When the last heartbeat answered unfenced was sent, in ms after `base`.
    renewed_at_ms: AtomicU64,
    timeout: Duration,
    /// The session timeout alone: for answers served from memory (`is_held_for_reads`).
    session: Duration,
}

impl SessionLease {
    /// A lease of a session of `session_timeout`, held from now as if a heartbeat had just been
    /// answered.
    pub fn new(session_timeout: Duration) -> SessionLease {
        SessionLease {
            base: Instant::now(),
            renewed_at_ms: AtomicU64::new(0),
            timeout: session_timeout + CONTROLLER_ELECTION_ALLOWANCE,
            session: session_timeout,
        }
    }

    /// A heartbeat sent at `sent` was answered unfenced.
    pub fn renew(&self, sent: Instant) {
        let at_ms = u64::try_from(sent.saturating_duration_since(self.base).as_millis()).unwrap_or(u64::MAX);
        self.renewed_at_ms.fetch_max(at_ms, Ordering::AcqRel);
    }

    /// Whether no controller can have fenced this broker yet: the last renewal is less than the
    /// session timeout old (no election allowance). What answers served from memory alone need
    /// (a group coordinator's committed offsets and group state): no replication round stops
    /// a replaced coordinator from giving them, as one stops a replaced leader's appends.
    pub fn is_held_for_reads(&self) -> bool {
        let renewed = Duration::from_millis(self.renewed_at_ms.load(Ordering::Acquire));
        self.base.elapsed() < renewed + self.session
    }

    /// Whether the last renewal is less than the session timeout and the allowance old.
    pub fn is_held(&self) -> bool {
        let renewed = Duration::from_millis(self.renewed_at_ms.load(Ordering::Acquire));
        self.base.elapsed() < renewed + self.timeout
    }
}

/// How long a controller election may take (openraft waits out its leader's lease, 2 s, and an
/// election timeout, 1 to 2 s, and a candidate may lose a round): a broker whose heartbeats
/// go unanswered for this long past its session is taken to be cut off, not waiting for a
/// new controller.
pub const CONTROLLER_ELECTION_ALLOWANCE: Duration = Duration::from_secs(5);

/// The endpoints clients reach this broker at: its advertised listeners.
fn endpoints(config: &BrokerConfig) -> Vec<BrokerEndpoint> {
    config
        .advertised_listeners
        .iter()
        .map(|l| BrokerEndpoint {
            listener_name: l.name.clone(),
            host: l.host.clone(),
            port: l.port,
        })
        .collect()
}

/// Registers with a fresh incarnation id, retrying until the quorum accepts: while it has no
/// leader (NOT_CONTROLLER) and while this id's previous incarnation still has a live session
/// (DUPLICATE_BROKER_REGISTRATION, after a kill -9 and a quick restart).
pub fn register(link: &ClusterLink, config: &BrokerConfig) -> anyhow::Result<laminar_model::BrokerEpoch> {
    let mut incarnation = [0u8; 16];
    getrandom::fill(&mut incarnation).map_err(|e| anyhow::anyhow!("no OS randomness: {e}"))?;
    let mut logged = Instant::now();
    loop {
        let attempt = link.handle.register_broker(
            link.node_id,
            incarnation,
            endpoints(config),
            config.broker_rack.clone(),
        );
        match block_on(attempt) {
            Ok(epoch) => {
                link.broker_epoch.store(epoch.get(), Ordering::Release);
                tracing::info!(
                    broker_epoch = epoch.get(),
                    "registered with the controller quorum"
                );
                return Ok(epoch);
            }
            Err(error) if logged.elapsed() >= LOG_EVERY => {
                tracing::info!(%error, "not registered yet; retrying");
                logged = Instant::now();
            }
            Err(_) => {}
        }
        std::thread::sleep(RETRY_PAUSE);
    }
}

/// Heartbeats every `interval` from a thread of its own until controlled shutdown begins or the
/// controller stops. A heartbeat the quorum no longer knows the epoch of (the broker was
/// fenced and re-registered elsewhere, or its registration was replaced) registers again.
pub fn start_heartbeats(
    link: Arc<ClusterLink>,
    config: BrokerConfig,
    interval: Duration,
) -> anyhow::Result<()> {
    std::thread::Builder::new()
        .name("laminar-heartbeat".into())
        .spawn(move || {
            while !link.is_stopping() {
                let epoch = link.broker_epoch();
                let sent = Instant::now();
                match block_on(link.handle.broker_heartbeat(link.node_id, epoch)) {
                    Ok((false, version)) => renew_once_caught_up(&link, sent, version, interval),
                    Ok((true, _)) => tracing::debug!("heartbeat answered: still fenced"),
                    Err(e @ (Refusal::StaleBrokerEpoch | Refusal::BrokerIdNotRegistered)) => {
                        tracing::warn!(error = %e, "heartbeat refused; registering again");
                        let _ = register(&link, &config);
                        continue;
                    }
                    Err(e) => {
                        // Soon, not in an interval: the session lease runs out meanwhile
                        // (a controller election, say) and this broker would step back.
                        tracing::debug!(error = %e, "heartbeat failed; trying again");
                        std::thread::sleep(RETRY_PAUSE.min(interval));
                        continue;
                    }
                }
                std::thread::sleep(interval);
            }
        })?;
    Ok(())
}

/// Renews the lease once this broker's published metadata has reached `version`, the one the
/// controller's answer was decided at: a broker back from a partition may still think it leads
/// what was moved away meanwhile, and must not serve as leader or coordinator on that stale
/// view. Waits at most `within`; a later heartbeat tries again.
fn renew_once_caught_up(link: &ClusterLink, sent: Instant, version: u64, within: Duration) {
    let deadline = Instant::now() + within;
    while link.image().version < version {
        if Instant::now() >= deadline {
            tracing::debug!(
                version,
                applied = link.image().version,
                "metadata behind the controller's; lease not renewed"
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    link.session.renew(sent);
}

/// Blocks until this node's metadata shows this broker's current registration unfenced (its
/// first heartbeat did it). The epoch matters: a node restarted after a crash holds metadata
/// in which its previous registration may still be unfenced, from before every leadership that
/// moved away while it was down; it must not serve on that.
pub fn wait_until_unfenced(link: &ClusterLink) {
    let mut logged = Instant::now();
    let current = |link: &ClusterLink| {
        let metadata = link.handle.metadata();
        let registration = metadata.metadata.brokers.get(&link.node_id);
        registration.is_some_and(|b| !b.fenced && b.broker_epoch.get() == link.broker_epoch().get())
    };
    while !current(link) {
        if logged.elapsed() >= LOG_EVERY {
            tracing::info!("waiting for the controller to unfence this broker");
            logged = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Controlled shutdown (on SIGTERM): stops heartbeats, asks the quorum to move this broker's
/// leaderships and fence it, and waits (at most [`CONTROLLED_SHUTDOWN_WAIT`]) until the
/// metadata shows it leads nothing. Blocking; runs on the signal thread.
pub fn controlled_shutdown(link: &ClusterLink) {
    link.stopping.store(true, Ordering::Release);
    let deadline = Instant::now() + CONTROLLED_SHUTDOWN_WAIT;
    let started = Instant::now();
    while Instant::now() < deadline {
        match block_on(link.handle.controlled_shutdown(link.node_id, link.broker_epoch())) {
            Ok(remaining) => {
                if !remaining.is_empty() {
                    tracing::warn!(
                        partitions = remaining.len(),
                        "left without a leader by this shutdown"
                    );
                }
                break;
            }
            Err(error) => tracing::info!(%error, "controlled shutdown not accepted yet; retrying"),
        }
        std::thread::sleep(RETRY_PAUSE);
    }
    while Instant::now() < deadline && link.handle.metadata().metadata.leads_any(link.node_id) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let leads = link.handle.metadata().metadata.leads_any(link.node_id);
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        still_leads = leads,
        "controlled shutdown done"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_runs_from_the_sending_of_the_last_answered_heartbeat() {
        let session = Duration::from_millis(200);
        let lease = SessionLease::new(session);
        let timeout = session + CONTROLLER_ELECTION_ALLOWANCE;
        assert!(lease.is_held(), "held from the start, as if just renewed");
        std::thread::sleep(timeout + Duration::from_millis(50));
        assert!(!lease.is_held(), "lapsed without a heartbeat");
        let sent_long_ago = Instant::now() - timeout * 2;
        lease.renew(sent_long_ago);
        assert!(
            !lease.is_held(),
            "an answer to a heartbeat sent a timeout ago renews nothing"
        );
        let sent = Instant::now();
        lease.renew(sent);
        assert!(lease.is_held());
        lease.renew(sent_long_ago);
        assert!(
            lease.is_held(),
            "a late answer to an older heartbeat never shortens it"
        );
    }
}
