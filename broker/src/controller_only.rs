//! A controller-only node (`process.roles=controller`): a voter of the metadata quorum (or an
//! observer waiting to be made one) on its controller listener, with no shards, no Kafka
//! listeners and no replicas. It never registers as a broker, so nothing is placed on it.
//! Its log dirs are checked and locked as a broker's are; the metadata lives under the first.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;

use crate::config::BrokerConfig;
use crate::log_dir_lock::LogDirLock;
use crate::quorum::ClusterLink;

/// A running controller-only node. Owned by the main thread; [`RunningController::stop`] ends it.
pub struct RunningController {
    link: Arc<ClusterLink>,
    /// Held for the node's lifetime.
    _log_dir_locks: Vec<LogDirLock>,
}

impl RunningController {
    /// Checks and locks the log dirs and starts the quorum's node.
    pub fn start(config: &BrokerConfig) -> anyhow::Result<RunningController> {
        let settings = config
            .cluster
            .as_ref()
            .context("a controller-only node without a quorum")?;
        let log_dir_locks = crate::server::checked_log_dir_locks(config)?;
        let log_dir = log_dir_locks[0].dir().to_path_buf();
        let link = ClusterLink::start(config, settings, &log_dir)?;
        Ok(RunningController {
            link,
            _log_dir_locks: log_dir_locks,
        })
    }

    /// Where the controller listener is bound.
    pub fn listen_addr(&self) -> SocketAddr {
        self.link.handle.listen_addr()
    }

    /// Stops the quorum's node and joins its thread.
    pub fn stop(self) {
        self.link.stop_controller();
    }
}
