//! The nemesis of a fault test: injects one fault at a time into a [`Cluster`] on a test
//! [`Network`], on a seeded schedule, and heals it.
//!
//! The faults are the ones that lost acknowledged data in Kafka-compatible systems before: a
//! partition's leader cut off from its followers but not from its clients, the active
//! controller in the minority, a bridge (two nodes that cannot reach each other but both reach
//! the third), a process paused longer than the session timeout (a zombie that comes back
//! believing it still leads), and a crash with a restart.

use std::fmt;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::netns::{Host, Network};
use crate::wire::{partition_view, WireConnection};
use crate::Cluster;

/// One kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// The leader of a partition cut off from every other node, not from the clients.
    IsolateLeader,
    /// The active controller cut off from every other node: the quorum's minority.
    IsolateController,
    /// The leader of a partition and one follower cut off from each other; both still reach
    /// the third node.
    Bridge,
    /// SIGSTOP of a partition's leader, SIGCONT at the heal.
    PauseLeader,
    /// kill -9 of a partition's leader, restarted at the heal.
    KillLeader,
    /// A follower's log dir filled up (a filler file takes its tmpfs), freed at the heal.
    FillFollowerDisk,
    /// The power of a partition's leader cut: kill -9, and its disk (a fault-injecting mount)
    /// loses whatever no fsync covered; mounted again and restarted at the heal.
    PowerCutLeader,
    /// Two at once: a partition's leader isolated and one of its followers killed, so that no
    /// side holds a majority; nothing may be acknowledged or elected until the heal, which
    /// restarts the follower.
    IsolateLeaderKillFollower,
}

impl FaultKind {
    /// The faults of the network and of processes: any disks will do.
    pub const NETWORK_AND_PROCESSES: [FaultKind; 5] = [
        FaultKind::IsolateLeader,
        FaultKind::IsolateController,
        FaultKind::Bridge,
        FaultKind::PauseLeader,
        FaultKind::KillLeader,
    ];
}

impl std::str::FromStr for FaultKind {
    type Err = anyhow::Error;

    /// The short names `isolate-leader`, `isolate-controller`, `bridge`, `pause-leader`,
    /// `kill-leader`, `fill-follower-disk`, `power-cut-leader`, `isolate-leader-kill-follower`.
    fn from_str(name: &str) -> Result<FaultKind> {
        Ok(match name {
            "isolate-leader" => FaultKind::IsolateLeader,
            "isolate-controller" => FaultKind::IsolateController,
            "bridge" => FaultKind::Bridge,
            "pause-leader" => FaultKind::PauseLeader,
            "kill-leader" => FaultKind::KillLeader,
            "fill-follower-disk" => FaultKind::FillFollowerDisk,
            "power-cut-leader" => FaultKind::PowerCutLeader,
            "isolate-leader-kill-follower" => FaultKind::IsolateLeaderKillFollower,
            other => anyhow::bail!("no fault kind {other:?}"),
        })
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultKind::IsolateLeader => "leader isolated",
            FaultKind::IsolateController => "controller isolated",
            FaultKind::Bridge => "bridge",
            FaultKind::PauseLeader => "leader paused",
            FaultKind::KillLeader => "leader killed",
            FaultKind::FillFollowerDisk => "follower's disk full",
            FaultKind::PowerCutLeader => "leader's power cut",
            FaultKind::IsolateLeaderKillFollower => "leader isolated and a follower killed",
        })
    }
}

/// A fault in effect: what, on which node, since when.
#[derive(Clone, Debug)]
pub struct ActiveFault {
    pub kind: FaultKind,
    pub node: i32,
    /// The other node of a bridge's cut; the follower killed with an isolated leader.
    pub peer: Option<i32>,
    /// Whether the node was the active controller when the fault began: the quorum then
    /// elects another, which gives every broker a whole new session before fencing any.
    pub controller_lost: bool,
    pub started: Instant,
}

impl fmt::Display for ActiveFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (node {}", self.kind, self.node)?;
        match (self.kind, self.peer) {
            (FaultKind::IsolateLeaderKillFollower, Some(peer)) => write!(f, ", node {peer} killed")?,
            (_, Some(peer)) => write!(f, ", cut from node {peer}")?,
            (_, None) => {}
        }
        if self.controller_lost {
            f.write_str(", the active controller")?;
        }
        f.write_str(")")
    }
}

/// A small deterministic generator (SplitMix64): the schedule of a seed is the same every run.
pub struct Seeded(u64);

impl Seeded {
    pub fn new(seed: u64) -> Seeded {
        Seeded(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound` > 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "an empty range");
        self.next_u64() % bound
    }

    /// The kinds of faults in a seeded order, each `rounds` times.
    pub fn schedule(&mut self, kinds: &[FaultKind], rounds: usize) -> Vec<FaultKind> {
        let mut schedule: Vec<FaultKind> = kinds.iter().copied().cycle().take(kinds.len() * rounds).collect();
        for i in (1..schedule.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            schedule.swap(i, j);
        }
        schedule
    }
}

/// Where the nodes keep their log dirs, which decides the disk faults a [`Nemesis`] can make.
pub enum NodeDisks {
    /// Each node's own temporary directory: no disk faults.
    Plain,
    /// A small tmpfs per node (`nodes[i]`'s at index `i`), which a filler file can fill.
    Tmpfs(Vec<crate::disks::Tmpfs>),
    /// A fault-injecting mount per node, whose power can be cut.
    FaultFs(crate::power_cut::Mounts),
}

impl NodeDisks {
    /// The log dir of each node, if not the default.
    pub fn log_dirs(&self) -> Vec<std::path::PathBuf> {
        match self {
            NodeDisks::Plain => Vec::new(),
            NodeDisks::Tmpfs(mounts) => mounts.iter().map(|m| m.path.clone()).collect(),
            NodeDisks::FaultFs(mounts) => mounts.log_dirs(),
        }
    }
}

/// Injects faults into `cluster` on `network`; the calling thread is on the clients' host.
/// Fields drop in order: the nodes die before their disks are unmounted and their network goes.
pub struct Nemesis {
    pub cluster: Cluster,
    pub disks: NodeDisks,
    pub network: Network,
    /// The topic whose partitions' leaders the faults pick from.
    pub topic: String,
    pub partitions: i32,
    rng: Seeded,
}

impl Nemesis {
    pub fn new(
        (network, cluster, disks): (Network, Cluster, NodeDisks),
        topic: &str,
        partitions: i32,
        seed: u64,
    ) -> Nemesis {
        Nemesis {
            network,
            cluster,
            disks,
            topic: topic.to_string(),
            partitions,
            rng: Seeded::new(seed),
        }
    }

    /// A connection to the first node that answers.
    pub fn any_node(&mut self) -> Result<WireConnection> {
        let ids: Vec<i32> = self.network.node_ids().collect();
        for id in ids {
            if let Ok(connection) = self.cluster.connect(id) {
                return Ok(connection);
            }
        }
        anyhow::bail!("no node answers")
    }

    /// The leader of a partition of the topic picked by the seed.
    fn some_leader(&mut self) -> Result<i32> {
        let partition = self.rng.below(self.partitions as u64) as i32;
        let view = partition_view(&mut self.any_node()?, &self.topic, partition)?;
        anyhow::ensure!(view.leader > 0, "{}-{partition} has no leader", self.topic);
        Ok(view.leader)
    }

    /// A follower of a partition of the topic picked by the seed.
    fn some_follower(&mut self) -> Result<i32> {
        let partition = self.rng.below(self.partitions as u64) as i32;
        let view = partition_view(&mut self.any_node()?, &self.topic, partition)?;
        let followers: Vec<i32> = view
            .replicas
            .iter()
            .copied()
            .filter(|id| *id != view.leader)
            .collect();
        anyhow::ensure!(
            !followers.is_empty(),
            "{}-{partition} has no follower",
            self.topic
        );
        Ok(followers[self.rng.below(followers.len() as u64) as usize])
    }

    /// Where node `node`'s filler file goes: on its tmpfs.
    fn filler(&self, node: i32) -> Result<std::path::PathBuf> {
        match &self.disks {
            NodeDisks::Tmpfs(mounts) => Ok(mounts[node as usize - 1].path.join("nemesis-filler")),
            _ => anyhow::bail!("filling a disk needs the nodes on tmpfs (NodeDisks::Tmpfs)"),
        }
    }

    fn fault_fs(&mut self) -> Result<&mut crate::power_cut::Mounts> {
        match &mut self.disks {
            NodeDisks::FaultFs(mounts) => Ok(mounts),
            _ => anyhow::bail!("a power cut needs the nodes on fault-injecting mounts (NodeDisks::FaultFs)"),
        }
    }

    /// The active controller, as the nodes' Metadata answers name it.
    fn active_controller(&mut self) -> Result<i32> {
        let request = kafka_protocol::messages::MetadataRequest::default().with_topics(Some(vec![]));
        let answer = self.any_node()?.request(&request, 9)?;
        anyhow::ensure!(answer.controller_id.0 > 0, "no active controller");
        Ok(answer.controller_id.0)
    }

    /// Injects a fault of `kind`.
    pub fn inject(&mut self, kind: FaultKind) -> Result<ActiveFault> {
        let (node, peer) = match kind {
            FaultKind::IsolateController => (self.active_controller()?, None),
            FaultKind::Bridge | FaultKind::IsolateLeaderKillFollower => {
                let leader = self.some_leader()?;
                let others: Vec<i32> = self.network.node_ids().filter(|id| *id != leader).collect();
                (leader, Some(others[self.rng.below(others.len() as u64) as usize]))
            }
            FaultKind::FillFollowerDisk => (self.some_follower()?, None),
            _ => (self.some_leader()?, None),
        };
        let takes_the_node = !matches!(kind, FaultKind::Bridge | FaultKind::FillFollowerDisk);
        let controller_lost = takes_the_node && self.active_controller()? == node;
        let started = Instant::now();
        match kind {
            FaultKind::IsolateLeaderKillFollower => {
                self.isolate(node)?;
                self.cluster.node(peer.context("a follower to kill")?).kill9()?;
            }
            FaultKind::IsolateLeader | FaultKind::IsolateController => self.isolate(node)?,
            FaultKind::Bridge => {
                let peer = peer.context("a bridge has a peer")?;
                self.network.cut(Host::Node(node), Host::Node(peer))?;
            }
            FaultKind::PauseLeader => self.cluster.node(node).pause()?,
            FaultKind::KillLeader => self.cluster.node(node).kill9()?,
            FaultKind::FillFollowerDisk => crate::disks::fill(&self.filler(node)?)?,
            FaultKind::PowerCutLeader => {
                self.cluster.node(node).kill9()?;
                self.fault_fs()?
                    .cut(node as usize - 1, laminar_faultfs::Cut::LoseUnsynced)?;
            }
        }
        Ok(ActiveFault {
            kind,
            node,
            peer,
            controller_lost,
            started,
        })
    }

    /// Cuts `node` off from every other node (not from the clients).
    fn isolate(&mut self, node: i32) -> Result<()> {
        let others: Vec<Host> = self
            .network
            .node_ids()
            .filter(|id| *id != node)
            .map(Host::Node)
            .collect();
        self.network.split(&[Host::Node(node)], &others)
    }

    /// Ends `fault`: the network heals, a paused node resumes, a killed node restarts.
    pub fn heal(&mut self, fault: &ActiveFault) -> Result<()> {
        self.network.heal()?;
        match fault.kind {
            FaultKind::PauseLeader => self.cluster.node(fault.node).resume()?,
            FaultKind::KillLeader => self.cluster.node(fault.node).restart()?,
            FaultKind::IsolateLeaderKillFollower => {
                self.cluster
                    .node(fault.peer.context("the killed follower")?)
                    .restart()?;
            }
            FaultKind::FillFollowerDisk => {
                std::fs::remove_file(self.filler(fault.node)?)?;
                self.restart_if_stopped_on_a_failed_disk(fault.node)?;
            }
            FaultKind::PowerCutLeader => {
                self.fault_fs()?.mount(fault.node as usize - 1)?;
                self.cluster.node(fault.node).restart()?;
            }
            _ => {}
        }
        Ok(())
    }

    /// A broker whose log failed stops with status 74 (EX_IOERR) and its supervisor starts it
    /// again (the systemd unit's `Restart=on-failure`): here the nemesis does so, once the
    /// disk has space. Any other exit is a failure of the run.
    fn restart_if_stopped_on_a_failed_disk(&mut self, node: i32) -> Result<()> {
        const EX_IOERR: i32 = 74;
        match self.cluster.node(node).exit_status()? {
            None => Ok(()),
            Some(status) if status.code() == Some(EX_IOERR) => {
                eprintln!("  node {node} had stopped on a failed disk ({status}); restarting it");
                self.cluster.node(node).restart()
            }
            Some(status) => anyhow::bail!(
                "node {node} exited ({status}):\n{}",
                self.cluster.node(node).stderr_tail()
            ),
        }
    }

    /// Waits until every node says every partition of the topic has all its replicas in sync;
    /// returns how long that took.
    pub fn wait_until_in_sync(&mut self, within: Duration) -> Result<Duration> {
        let started = Instant::now();
        let ids: Vec<i32> = self.network.node_ids().collect();
        let (topic, partitions) = (self.topic.clone(), self.partitions);
        crate::wait_for(within, "every replica back in sync", || {
            for id in &ids {
                let mut connection = self.cluster.connect(*id)?;
                for partition in 0..partitions {
                    let view = partition_view(&mut connection, &topic, partition)?;
                    if view.isr.len() != view.replicas.len() || view.leader <= 0 {
                        return Ok(false);
                    }
                }
            }
            Ok(true)
        })?;
        Ok(started.elapsed())
    }
}
