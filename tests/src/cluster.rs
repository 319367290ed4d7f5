//! [`Cluster`]: several real broker processes forming one cluster (combined mode), on loopback
//! ports or each in a network namespace of a test network, started together and waited for;
//! broker-only nodes may join it later.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

use crate::broker::{
    check_runnable, copy_dir, default_binary, loopback_ports, Broker, BrokerOptions, FIRST_START_TRIES,
};

/// Brokers of a [`Cluster`] may only serve once a quorum exists, so all are started first and
/// then waited for; this is how long each may take to join and be unfenced.
const CLUSTER_STARTUP_TIMEOUT: Duration = Duration::from_secs(40);

/// Where one node of a [`Cluster`] listens, and the namespace it runs in.
struct NodePlace {
    host: IpAddr,
    network_namespace: Option<String>,
    port: u16,
    http_port: u16,
    controller_port: u16,
}

impl NodePlace {
    /// `count` nodes on loopback, each on three ports that were free a moment ago.
    fn on_loopback(count: usize) -> Result<Vec<NodePlace>> {
        let ports = loopback_ports(count * 3)?;
        Ok((0..count)
            .map(|i| NodePlace {
                host: IpAddr::V4(Ipv4Addr::LOCALHOST),
                network_namespace: None,
                port: ports[i],
                http_port: ports[count + i],
                controller_port: ports[2 * count + i],
            })
            .collect())
    }

    fn controller_addr(&self) -> SocketAddr {
        SocketAddr::new(self.host, self.controller_port)
    }

    /// Ports for `count` listeners besides PLAINTEXT and CONTROLLER: free loopback ports, or on
    /// a test network (an address of the node's own) 9094 and up.
    fn extra_ports(&self, count: usize) -> Result<Vec<u16>> {
        match self.network_namespace {
            None => loopback_ports(count),
            Some(_) => Ok((0..count as u16).map(|i| 9094 + i).collect()),
        }
    }

    /// The node's `listeners`: PLAINTEXT, CONTROLLER, then `extra` on `extra_ports`.
    fn listeners(&self, extra: &[String], extra_ports: &[u16]) -> String {
        let mut listeners = vec![
            format!("PLAINTEXT://{}", SocketAddr::new(self.host, self.port)),
            format!("CONTROLLER://{}", self.controller_addr()),
        ];
        for (name, port) in extra.iter().zip(extra_ports) {
            listeners.push(format!("{name}://{}", SocketAddr::new(self.host, *port)));
        }
        listeners.join(",")
    }
}

/// Several `laminar broker` processes in combined mode (`process.roles=broker,controller`) on
/// loopback, each with its own ports and data dir, forming one controller quorum. Owned by the
/// test thread; every node is killed when it is dropped.
pub struct Cluster {
    pub nodes: Vec<Broker>,
    /// Node id of `nodes[i]` is `i + 1`.
    pub controller_ports: Vec<u16>,
    /// `controller.quorum.voters` of every node.
    voters: String,
    session_timeout_ms: u64,
    /// The options every node starts from.
    base: BrokerOptions,
    /// `broker.rack` of node `i + 1`, where given.
    racks: Vec<String>,
}

impl Cluster {
    /// Starts `count` nodes with `broker.session.timeout.ms=session_timeout_ms` (heartbeats at
    /// a sixth of it) and waits until every one serves.
    pub fn start(count: usize, session_timeout_ms: u64, base: BrokerOptions) -> Result<Cluster> {
        Self::start_seeded(count, session_timeout_ms, base, None)
    }

    /// As [`Cluster::start`], with node 1's data dir a copy of `node1_data` (a stopped
    /// broker's, e.g. a single-node one to migrate). Another process may take a probed port
    /// before a node binds it (a node binds its Kafka listener only once it has joined): a
    /// first start that lost that race starts again on fresh ports.
    pub fn start_seeded(
        count: usize,
        session_timeout_ms: u64,
        base: BrokerOptions,
        node1_data: Option<&Path>,
    ) -> Result<Cluster> {
        Self::start_retrying(count, session_timeout_ms, base, node1_data, &[])
    }

    /// As [`Cluster::start`], with node `i + 1`'s `log.dirs` at `log_dirs[i]` (made by the
    /// test: a fault-injecting mount, say).
    pub fn start_on_log_dirs(
        count: usize,
        session_timeout_ms: u64,
        base: BrokerOptions,
        log_dirs: &[PathBuf],
    ) -> Result<Cluster> {
        assert_eq!(log_dirs.len(), count, "one log dir per node");
        Self::start_retrying(count, session_timeout_ms, base, None, log_dirs)
    }

    /// Starts a node per node of `network`, each in its namespace on its own address (Kafka
    /// on 9092, the controller on 9093, HTTP on 8080) with its `log.dirs` at `log_dirs[i]` if
    /// given (a tmpfs, a fault-injecting mount), and waits until every one serves. The
    /// calling thread must be on the network ([`crate::netns::Network::enter_clients_host`]).
    pub fn start_in_network(
        network: &crate::netns::Network,
        session_timeout_ms: u64,
        base: BrokerOptions,
        log_dirs: &[PathBuf],
    ) -> Result<Cluster> {
        let places: Vec<NodePlace> = network
            .node_ids()
            .map(|id| {
                let host = crate::netns::Host::Node(id);
                NodePlace {
                    host: IpAddr::V4(host.address()),
                    network_namespace: Some(network.namespace(host)),
                    port: 9092,
                    http_port: 8080,
                    controller_port: 9093,
                }
            })
            .collect();
        Self::start_once(&places, session_timeout_ms, base, None, log_dirs)
    }

    fn start_retrying(
        count: usize,
        session_timeout_ms: u64,
        base: BrokerOptions,
        node1_data: Option<&Path>,
        log_dirs: &[PathBuf],
    ) -> Result<Cluster> {
        for _ in 1..FIRST_START_TRIES {
            let places = NodePlace::on_loopback(count)?;
            match Self::start_once(&places, session_timeout_ms, base.clone(), node1_data, log_dirs) {
                Err(error) if format!("{error:#}").contains("Address already in use") => {}
                started => return started,
            }
        }
        let places = NodePlace::on_loopback(count)?;
        Self::start_once(&places, session_timeout_ms, base, node1_data, log_dirs)
    }

    fn start_once(
        places: &[NodePlace],
        session_timeout_ms: u64,
        base: BrokerOptions,
        node1_data: Option<&Path>,
        log_dirs: &[PathBuf],
    ) -> Result<Cluster> {
        Self::start_racked(
            places,
            session_timeout_ms,
            base,
            (node1_data, log_dirs),
            Vec::new(),
        )
    }

    /// As [`Cluster::start`], node `i + 1` in rack `racks[i]` (`broker.rack`).
    pub fn start_in_racks(session_timeout_ms: u64, base: BrokerOptions, racks: &[&str]) -> Result<Cluster> {
        let places = NodePlace::on_loopback(racks.len())?;
        let racks = racks.iter().map(|r| r.to_string()).collect();
        Self::start_racked(&places, session_timeout_ms, base, (None, &[]), racks)
    }

    fn start_racked(
        places: &[NodePlace],
        session_timeout_ms: u64,
        base: BrokerOptions,
        (node1_data, log_dirs): (Option<&Path>, &[PathBuf]),
        racks: Vec<String>,
    ) -> Result<Cluster> {
        let binary = base.binary.clone().unwrap_or_else(default_binary);
        check_runnable(&binary)?;
        let mut cluster = Cluster::unstarted(places, places.len(), (session_timeout_ms, base), racks);
        for (i, place) in places.iter().enumerate() {
            let seed = node1_data.filter(|_| i == 0);
            let node = cluster.spawn_node(
                place,
                (i + 1, "broker,controller"),
                seed,
                log_dirs.get(i).cloned(),
            )?;
            cluster.nodes.push(node);
        }
        for node in &mut cluster.nodes {
            node.wait_until_serving()?;
        }
        Ok(cluster)
    }

    /// A cluster of no node yet at `places`, the first `voters` of them the quorum's voters.
    fn unstarted(
        places: &[NodePlace],
        voters: usize,
        (session_timeout_ms, base): (u64, BrokerOptions),
        racks: Vec<String>,
    ) -> Cluster {
        let voters: Vec<String> = places[..voters]
            .iter()
            .enumerate()
            .map(|(i, place)| format!("{}@{}", i + 1, place.controller_addr()))
            .collect();
        Cluster {
            nodes: Vec::with_capacity(places.len()),
            controller_ports: places.iter().map(|place| place.controller_port).collect(),
            voters: voters.join(","),
            session_timeout_ms,
            base,
            racks,
        }
    }

    /// Starts node `id` with `process.roles=roles` at `place` (its data dir a copy of `seed` if
    /// given, its `log.dirs` at `log_dir` if given); does not wait for it.
    fn spawn_node(
        &self,
        place: &NodePlace,
        (id, roles): (usize, &str),
        seed: Option<&Path>,
        log_dir: Option<PathBuf>,
    ) -> Result<Broker> {
        let base = &self.base;
        let binary = base.binary.clone().unwrap_or_else(default_binary);
        // A controller-only node has its controller listener only, and is reached there.
        let serves_kafka = roles != "controller";
        let extra_ports = match serves_kafka {
            true => place.extra_ports(base.extra_listeners.len())?,
            false => Vec::new(),
        };
        let listeners = match serves_kafka {
            true => place.listeners(&base.extra_listeners, &extra_ports),
            false => format!("CONTROLLER://{}", place.controller_addr()),
        };
        let session_timeout_ms = self.session_timeout_ms;
        let rack = self.racks.get(id - 1).map(|rack| ("broker.rack", rack.as_str()));
        // A broker-only node finds the quorum through its bootstrap servers (KIP-853), as a
        // Kafka broker may; the others are given the voters.
        let bootstrap: Vec<&str> = self
            .voters
            .split(',')
            .filter_map(|v| v.split_once('@').map(|(_, a)| a))
            .collect();
        let (voters, bootstrap) = match roles {
            "broker" => (String::new(), bootstrap.join(",")),
            _ => (self.voters.clone(), String::new()),
        };
        let bootstrap =
            (!bootstrap.is_empty()).then_some(("controller.quorum.bootstrap.servers", bootstrap.as_str()));
        let options = (rack.into_iter().chain(bootstrap))
            .fold(base.clone(), |options, (key, value)| {
                options.with_override(key, value)
            })
            .with_override("process.roles", roles)
            .with_override("node.id", &id.to_string())
            .with_override("controller.quorum.voters", &voters)
            .with_override("listeners", &listeners)
            .with_override("broker.session.timeout.ms", &session_timeout_ms.to_string())
            .with_override(
                "broker.heartbeat.interval.ms",
                &(session_timeout_ms / 6).max(1).to_string(),
            );
        let root = tempfile::Builder::new().prefix("laminar-cluster-").tempdir()?;
        fs::create_dir(root.path().join("data"))?;
        if let Some(seed) = seed {
            copy_dir(seed, &root.path().join("data"))?;
        }
        let options = BrokerOptions {
            startup_timeout: CLUSTER_STARTUP_TIMEOUT,
            log_dir,
            host: place.host,
            network_namespace: place.network_namespace.clone(),
            serves_kafka,
            ..options
        };
        let port = if serves_kafka {
            place.port
        } else {
            place.controller_port
        };
        let ports = (port, place.http_port, extra_ports);
        let mut node = Broker::unstarted(options, binary, ports, root);
        node.spawn()?;
        Ok(node)
    }

    /// Adds a broker-only node (`process.roles=broker`, the next node id) on loopback to the
    /// running cluster and waits until it serves; returns its node id.
    pub fn add_broker_only(&mut self) -> Result<i32> {
        self.add_node("broker")
    }

    /// Adds a node with `process.roles=roles` and the next node id, outside
    /// `controller.quorum.voters` (it follows the quorum as an observer), on loopback; waits
    /// until it serves and returns its node id.
    pub fn add_node(&mut self, roles: &str) -> Result<i32> {
        let id = self.nodes.len() + 1;
        let place = NodePlace::on_loopback(1)?.remove(0);
        let mut node = self.spawn_node(&place, (id, roles), None, None)?;
        node.wait_until_serving()?;
        self.nodes.push(node);
        self.controller_ports.push(place.controller_port);
        Ok(i32::try_from(id)?)
    }

    /// `bootstrap.servers` naming every node that serves Kafka clients.
    pub fn bootstrap(&self) -> String {
        let brokers = self.nodes.iter().filter(|node| node.options().serves_kafka);
        let each: Vec<String> = brokers.map(Broker::bootstrap).collect();
        each.join(",")
    }

    /// `controllers` controller-only nodes (ids 1 to `controllers`, the voters) and `brokers`
    /// broker-only nodes (the next ids), on loopback; waits until every one serves.
    pub fn start_split(
        controllers: usize,
        brokers: usize,
        session_timeout_ms: u64,
        base: BrokerOptions,
    ) -> Result<Cluster> {
        let places = NodePlace::on_loopback(controllers + brokers)?;
        let mut cluster = Cluster::unstarted(&places, controllers, (session_timeout_ms, base), Vec::new());
        for (i, place) in places.iter().enumerate() {
            let roles = if i < controllers { "controller" } else { "broker" };
            let node = cluster.spawn_node(place, (i + 1, roles), None, None)?;
            cluster.nodes.push(node);
        }
        for node in &mut cluster.nodes {
            node.wait_until_serving()?;
        }
        Ok(cluster)
    }

    /// Options for a cluster's nodes on this 2-core machine: one core each, so three nodes
    /// share the cores as three machines' worth of shards would not.
    pub fn node_options() -> BrokerOptions {
        BrokerOptions {
            cores: 1,
            ..Default::default()
        }
    }

    /// A Kafka connection to node `node_id`.
    pub fn connect(&mut self, node_id: i32) -> Result<crate::wire::WireConnection> {
        crate::wire::WireConnection::connect(self.node(node_id).addr())
    }

    /// The node with id `node_id` (1-based).
    pub fn node(&mut self, node_id: i32) -> &mut Broker {
        let index = usize::try_from(node_id - 1).expect("node ids start at 1");
        &mut self.nodes[index]
    }

    /// Restarts a node on its ports and data dir (it rejoins the quorum and the cluster) and
    /// waits until it serves. A node still running (or paused) is first stopped with SIGTERM.
    pub fn restart(&mut self, node_id: i32) -> Result<()> {
        self.node(node_id).restart()
    }

    /// SIGKILL to every node, all signalled before any is reaped: every machine crashing at
    /// once, as far as each node's peers can tell.
    pub fn kill9_all(&mut self) -> Result<()> {
        for node in &mut self.nodes {
            if let Some(child) = node.child.as_mut() {
                // An already-exited child fails with InvalidInput; kill9() below reaps it.
                let _ = child.kill();
            }
        }
        for node in &mut self.nodes {
            node.kill9()?;
        }
        Ok(())
    }

    /// Starts every stopped node again, then waits until each serves: a node serves only once
    /// a quorum exists, so none is waited for before all were started.
    pub fn restart_stopped(&mut self) -> Result<()> {
        let mut started = Vec::new();
        for (index, node) in self.nodes.iter_mut().enumerate() {
            if node.child.is_none() {
                node.spawn()?;
                started.push(index);
            }
        }
        for index in started {
            self.nodes[index].wait_until_serving()?;
        }
        Ok(())
    }
}
