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
