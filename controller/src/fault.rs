//! What a controller node does when it finds a bug in its own metadata: a committed record
//! that does not apply, a state that does not encode. Kafka's controllers call a fatal fault
//! handler there; so does this one. Continuing would serve metadata that differs from what
//! the quorum decided, so the process stops, saying why, and a restart replays the log.

use std::sync::Arc;

/// Called with what went wrong. The node's own handler ([`stop_the_process`]) does not
/// return; a test's may, to record the fault.
pub type FaultHandler = Arc<dyn Fn(&str) + Send + Sync>;

/// Exit status of a process stopped by a fault (EX_SOFTWARE, as a shard's panic uses).
const FAULT_EXIT_STATUS: i32 = 70;

/// The handler of a running node: logs the fault and ends the process.
pub fn stop_the_process() -> FaultHandler {
    Arc::new(|fault: &str| {
        tracing::error!(
            fault,
            "controller: a bug in the cluster metadata; stopping the process"
        );
        eprintln!("laminar: controller fault (a bug): {fault}; stopping the process");
        std::process::exit(FAULT_EXIT_STATUS);
    })
}

/// Exit status of a process whose controller stopped on a storage failure (EX_IOERR).
const STORAGE_EXIT_STATUS: i32 = 74;

/// Watches this node's Raft core and ends the process, saying why, if the core stops on a
/// fatal error (a metadata disk that fails other than by filling up). A process left running
/// without its controller would serve clients while its broker can no longer be told
/// anything; a supervisor (the systemd unit's `Restart=on-failure`) starts it again, and the
/// restart replays the log.
pub async fn stop_the_process_if_raft_stops(
    mut metrics: tokio::sync::watch::Receiver<openraft::RaftMetrics<u64, openraft::BasicNode>>,
) {
    loop {
        let stopped = match &metrics.borrow().running_state {
            // A clean shutdown stops the core too.
            Err(openraft::error::Fatal::Stopped) | Ok(()) => None,
            Err(fatal) => Some(fatal.to_string()),
        };
        if let Some(fatal) = stopped {
            tracing::error!(error = %fatal, "controller: the Raft core stopped; stopping the process");
            eprintln!("laminar: the controller's Raft core stopped ({fatal}); stopping the process");
            std::process::exit(STORAGE_EXIT_STATUS);
        }
        // The sender goes with the core when it shuts down cleanly: nothing more to watch.
        if metrics.changed().await.is_err() {
            return;
        }
    }
}
