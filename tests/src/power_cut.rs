//! A broker whose log dir is a `laminar-faultfs` mount: data no fsync covered lives only in the
//! mount's memory, so [`BrokerOnFaultFs::cut_power_and_restart`] leaves the disk as a power cut
//! would (every unsynced write lost, or a seeded random subset of its pages kept, some torn),
//! then starts the broker again on it (docs/decisions/0019-power-cut-tests.md).

use anyhow::{Context, Result};
use laminar_faultfs::{Cut, CutReport, FaultFs};
use tempfile::TempDir;

use crate::{Broker, BrokerOptions};

/// One broker on a fault-injecting mount. Fields drop in order: the broker is killed before
/// the mount goes (an unmount waits for no process using it).
pub struct BrokerOnFaultFs {
    broker: Broker,
    mount: Option<FaultFs>,
    dirs: TempDir,
}

impl BrokerOnFaultFs {
    /// Mounts a fault-injecting file system over a fresh backing directory and starts a broker
    /// with its log dir there. `None` (after saying why on stderr) where this process cannot
    /// mount: not root, or no /dev/fuse. CI runs as root.
    pub fn start(options: BrokerOptions) -> Result<Option<BrokerOnFaultFs>> {
        if !laminar_faultfs::available() {
            eprintln!("skipped: a FUSE mount needs root and /dev/fuse");
            return Ok(None);
        }
        // In the target directory, not /tmp (which may be a tmpfs): the backing directory is
        // on a real disk, as a broker's would be.
        let dirs = tempfile::Builder::new()
            .prefix("laminar-power-cut-")
            .tempdir_in(crate::broker::target_dir())
            .context("creating the backing and mount directories")?;
        std::fs::create_dir(dirs.path().join("backing"))?;
        std::fs::create_dir(dirs.path().join("mount"))?;
        let mount = mount(&dirs)?;
        let options = BrokerOptions {
            log_dir: Some(dirs.path().join("mount")),
            ..options
        };
        let broker = Broker::start(options)?;
        Ok(Some(BrokerOnFaultFs {
            broker,
            mount: Some(mount),
            dirs,
        }))
    }

    /// The running broker.
    pub fn broker(&mut self) -> &mut Broker {
        &mut self.broker
    }

    /// Bytes written to the log dir that no fsync covered yet.
    pub fn unsynced_bytes(&self) -> u64 {
        self.mount.as_ref().map_or(0, FaultFs::unsynced_bytes)
    }

    /// The power cut: SIGKILL to the broker, then the mount goes and `cut` decides what of the
    /// unsynced data the disk keeps. [`BrokerOnFaultFs::restart`] brings it back.
    pub fn cut_power(&mut self, cut: Cut) -> Result<CutReport> {
        self.broker.kill9()?;
        let mount = self.mount.take().context("the power is already off")?;
        mount.cut_power(cut).context("the power cut (unmount)")
    }

    /// After a cut: the same backing directory mounted again, the broker restarted on it.
    pub fn restart(&mut self) -> Result<()> {
        if self.mount.is_none() {
            self.mount = Some(mount(&self.dirs)?);
        }
        self.broker.restart()
    }

    /// [`BrokerOnFaultFs::cut_power`], then [`BrokerOnFaultFs::restart`].
    pub fn cut_power_and_restart(&mut self, cut: Cut) -> Result<CutReport> {
        let report = self.cut_power(cut)?;
        self.restart()?;
        Ok(report)
    }
}

fn mount(dirs: &TempDir) -> Result<FaultFs> {
    FaultFs::mount(&dirs.path().join("backing"), &dirs.path().join("mount"))
        .context("mounting laminar-faultfs")
}
