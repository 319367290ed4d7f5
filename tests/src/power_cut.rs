//! Brokers whose log dirs are `laminar-faultfs` mounts: data no fsync covered lives only in the
//! mount's memory, so a power cut leaves each disk as losing power would (every unsynced write
//! lost, or a seeded random subset of its pages kept, some torn), then the brokers start again
//! on them (docs/decisions/0019-power-cut-tests.md).

use std::path::PathBuf;

use anyhow::{Context, Result};
use laminar_faultfs::{Cut, CutReport, FaultFs};
use tempfile::TempDir;

use crate::{Broker, BrokerOptions, Cluster};

/// One fault-injecting mount per node, each over its own backing directory.
pub struct Mounts {
    mounts: Vec<Option<FaultFs>>,
    dirs: TempDir,
}

impl Mounts {
    /// `None` (after saying why on stderr) where this process cannot mount: not root, or no
    /// /dev/fuse (a failure instead under `FAULTFS_TESTS_MUST_MOUNT`, which `tests/run.sh`
    /// sets for root; CI runs as root).
    pub fn new(count: usize) -> Result<Option<Mounts>> {
        if !laminar_faultfs::available_for_tests() {
            return Ok(None);
        }
        // In the target directory, not /tmp (which may be a tmpfs): the backing directories
        // are on a real disk, as a broker's would be.
        let dirs = tempfile::Builder::new()
            .prefix("laminar-power-cut-")
            .tempdir_in(crate::broker::target_dir())
            .context("creating the backing and mount directories")?;
        let mut mounts = Mounts {
            mounts: Vec::with_capacity(count),
            dirs,
        };
        for node in 0..count {
            std::fs::create_dir(mounts.backing_dir(node))?;
            std::fs::create_dir(mounts.log_dir(node))?;
            mounts.mounts.push(None);
            mounts.mount(node)?;
        }
        Ok(Some(mounts))
    }

    fn backing_dir(&self, node: usize) -> PathBuf {
        self.dirs.path().join(format!("backing-{node}"))
    }

    /// Where node `node`'s broker keeps its log dir: its mount point.
    fn log_dir(&self, node: usize) -> PathBuf {
        self.dirs.path().join(format!("mount-{node}"))
    }

    pub fn log_dirs(&self) -> Vec<PathBuf> {
        (0..self.mounts.len()).map(|node| self.log_dir(node)).collect()
    }

    /// Mounts node `node`'s backing directory again, unless it is mounted.
    pub fn mount(&mut self, node: usize) -> Result<()> {
        if self.mounts[node].is_none() {
            let mount = FaultFs::mount(&self.backing_dir(node), &self.log_dir(node))
                .context("mounting laminar-faultfs")?;
            self.mounts[node] = Some(mount);
        }
        Ok(())
    }

    /// The cut of node `node`'s disk; its broker must be dead.
    pub fn cut(&mut self, node: usize, cut: Cut) -> Result<CutReport> {
        let mount = self.mounts[node].take().context("the power is already off")?;
        mount.cut_power(cut).context("the power cut (unmount)")
    }

    fn unsynced_bytes(&self) -> u64 {
        self.mounts.iter().flatten().map(FaultFs::unsynced_bytes).sum()
    }
}

/// One broker on a fault-injecting mount. Fields drop in order: the broker is killed before
/// the mount goes (an unmount waits for no process using it).
pub struct BrokerOnFaultFs {
    broker: Broker,
    mounts: Mounts,
}

impl BrokerOnFaultFs {
    /// Mounts a fault-injecting file system over a fresh backing directory and starts a broker
    /// with its log dir there; `None` where this process cannot mount.
    pub fn start(options: BrokerOptions) -> Result<Option<BrokerOnFaultFs>> {
        let Some(mounts) = Mounts::new(1)? else {
            return Ok(None);
        };
        let options = BrokerOptions {
            log_dir: Some(mounts.log_dir(0)),
            ..options
        };
        let broker = Broker::start(options)?;
        Ok(Some(BrokerOnFaultFs { broker, mounts }))
    }

    /// The running broker.
    pub fn broker(&mut self) -> &mut Broker {
        &mut self.broker
    }

    /// Bytes written to the log dir that no fsync covered yet.
    pub fn unsynced_bytes(&self) -> u64 {
        self.mounts.unsynced_bytes()
    }

    /// The power cut: SIGKILL to the broker, then the mount goes and `cut` decides what of the
    /// unsynced data the disk keeps. [`BrokerOnFaultFs::restart`] brings it back.
    pub fn cut_power(&mut self, cut: Cut) -> Result<CutReport> {
        self.broker.kill9()?;
        self.mounts.cut(0, cut)
    }

    /// After a cut: the same backing directory mounted again, the broker restarted on it.
    pub fn restart(&mut self) -> Result<()> {
        self.mounts.mount(0)?;
        self.broker.restart()
    }

    /// [`BrokerOnFaultFs::cut_power`], then [`BrokerOnFaultFs::restart`].
    pub fn cut_power_and_restart(&mut self, cut: Cut) -> Result<CutReport> {
        let report = self.cut_power(cut)?;
        self.restart()?;
        Ok(report)
    }
}

/// A [`Cluster`] whose nodes each keep their log dir on their own fault-injecting mount. As
/// for one broker, the nodes are killed before their mounts go.
pub struct ClusterOnFaultFs {
    cluster: Cluster,
    mounts: Mounts,
}

impl ClusterOnFaultFs {
    /// As [`Cluster::start`], each node on its own mount; `None` where this process cannot
    /// mount.
    pub fn start(
        count: usize,
        session_timeout_ms: u64,
        base: BrokerOptions,
    ) -> Result<Option<ClusterOnFaultFs>> {
        let Some(mounts) = Mounts::new(count)? else {
            return Ok(None);
        };
        let cluster = Cluster::start_on_log_dirs(count, session_timeout_ms, base, &mounts.log_dirs())?;
        Ok(Some(ClusterOnFaultFs { cluster, mounts }))
    }

    /// The running cluster.
    pub fn cluster(&mut self) -> &mut Cluster {
        &mut self.cluster
    }

    /// The power goes everywhere at once: every node is killed, then each disk is cut as
    /// `cut(node_id)` says. [`ClusterOnFaultFs::restart`] brings them back.
    pub fn cut_power_everywhere(&mut self, cut: impl Fn(i32) -> Cut) -> Result<Vec<CutReport>> {
        self.cluster.kill9_all()?;
        (0..self.cluster.nodes.len())
            .map(|index| self.mounts.cut(index, cut(index as i32 + 1)))
            .collect()
    }

    /// After a cut: every disk mounted again, every node restarted on its own.
    pub fn restart(&mut self) -> Result<()> {
        for index in 0..self.cluster.nodes.len() {
            self.mounts.mount(index)?;
        }
        self.cluster.restart_stopped()
    }
}
