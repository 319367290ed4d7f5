//! A network of test hosts on one machine: each node of a cluster, and the clients, in a network
//! namespace of its own, joined by veth pairs to a bridge that lives in a namespace of its own
//! too, so traffic between nodes crosses real interfaces whose packets can be dropped.
//!
//! Addresses come from 198.18.0.0/15 (reserved for network benchmarks, RFC 2544) and exist only
//! inside the namespaces: node `i` is 198.18.0.`i`, the clients' host is 198.18.0.200. A cut is
//! a pair of nftables rules, one in each host's input chain, that drops whatever the other sends:
//! both directions go silent, as a pulled cable looks to TCP (retransmits, then timeouts), not
//! as a refusal. Needs root, `ip` (iproute2) and `nft` (nftables); [`Network::create`] names what
//! is missing. Everything is removed when the [`Network`] is dropped.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context, Result};

/// The first three octets of every host's address.
const SUBNET: [u8; 3] = [198, 18, 0];
/// Last octet of the clients' host.
const CLIENT_OCTET: u8 = 200;
/// The nftables table and set each host drops the sources of.
const TABLE: &str = "laminar_nemesis";
const CUT_SET: &str = "cut";

/// A host of a [`Network`]: node `n` (1-based, as node ids) or the clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Host {
    Node(i32),
    Clients,
}

impl Host {
    /// The host's address, reachable only inside the network.
    pub fn address(self) -> Ipv4Addr {
        let [a, b, c] = SUBNET;
        match self {
            Host::Node(id) => {
                let octet = u8::try_from(id).expect("node ids of a test network fit in an octet");
                assert!((1..CLIENT_OCTET).contains(&octet), "node id {id} out of range");
                Ipv4Addr::new(a, b, c, octet)
            }
            Host::Clients => Ipv4Addr::new(a, b, c, CLIENT_OCTET),
        }
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Host::Node(id) => write!(f, "node {id}"),
            Host::Clients => f.write_str("clients"),
        }
    }
}

/// Namespaces made by this process so far, so two networks of one test run never share names.
static NETWORKS_MADE: AtomicU32 = AtomicU32::new(0);

/// Nodes `1..=nodes` and the clients' host, each in its own namespace, on one bridge.
pub struct Network {
    /// Prefix of every namespace name of this network: unique per process and network.
    prefix: String,
    nodes: i32,
    /// Pairs of hosts currently cut from each other (smaller first).
    cuts: BTreeSet<(Host, Host)>,
}

impl Network {
    /// Makes the namespaces, the bridge, one veth pair per host and the packet filters. Fails
    /// with what is missing when not root or without `ip` or `nft`.
    pub fn create(nodes: i32) -> Result<Network> {
        check_prerequisites()?;
        let made = NETWORKS_MADE.fetch_add(1, Ordering::Relaxed);
        let network = Network {
            prefix: format!("lmn{}-{made}", std::process::id()),
            nodes,
            cuts: BTreeSet::new(),
        };
        network
            .build()
            .with_context(|| format!("making test network {}", network.prefix))?;
        Ok(network)
    }

    fn build(&self) -> Result<()> {
        let bridge = self.bridge_namespace();
        run("ip", &["netns", "add", &bridge])?;
        run("ip", &["-n", &bridge, "link", "set", "lo", "up"])?;
        run("ip", &["-n", &bridge, "link", "add", "br0", "type", "bridge"])?;
        run("ip", &["-n", &bridge, "link", "set", "br0", "up"])?;
        for host in self.hosts() {
            self.attach(host)?;
        }
        Ok(())
    }

    /// A namespace for `host`, its end of a veth pair as `eth0` with its address, the other end
    /// on the bridge, and its packet filter with an empty cut set.
    fn attach(&self, host: Host) -> Result<()> {
        let namespace = self.namespace(host);
        let port = match host {
            Host::Node(id) => format!("n{id}"),
            Host::Clients => "clients".to_string(),
        };
        run("ip", &["netns", "add", &namespace])?;
        let bridge = self.bridge_namespace();
        run(
            "ip",
            &[
                "link", "add", &port, "netns", &bridge, "type", "veth", "peer", "name", "eth0", "netns",
                &namespace,
            ],
        )?;
        run(
            "ip",
            &["-n", &bridge, "link", "set", &port, "master", "br0", "up"],
        )?;
        let address = format!("{}/24", host.address());
        run("ip", &["-n", &namespace, "addr", "add", &address, "dev", "eth0"])?;
        run("ip", &["-n", &namespace, "link", "set", "eth0", "up"])?;
        run("ip", &["-n", &namespace, "link", "set", "lo", "up"])?;
        let rules = format!(
            "table inet {TABLE} {{ set {CUT_SET} {{ type ipv4_addr; }}; \
             chain input {{ type filter hook input priority 0; ip saddr @{CUT_SET} drop; }}; }}"
        );
        run("ip", &["netns", "exec", &namespace, "nft", &rules])
    }

    /// The node ids of the network, 1 and up.
    pub fn node_ids(&self) -> impl Iterator<Item = i32> {
        1..=self.nodes
    }

    /// Every host: the nodes, then the clients.
    pub fn hosts(&self) -> Vec<Host> {
        let mut hosts: Vec<Host> = (1..=self.nodes).map(Host::Node).collect();
        hosts.push(Host::Clients);
        hosts
    }

    /// The name of `host`'s namespace (for `ip netns exec`).
    pub fn namespace(&self, host: Host) -> String {
        match host {
            Host::Node(id) => format!("{}-n{id}", self.prefix),
            Host::Clients => format!("{}-clients", self.prefix),
        }
    }

    fn bridge_namespace(&self) -> String {
        format!("{}-bridge", self.prefix)
    }

    /// Moves the calling thread into the clients' namespace: it and the threads it starts
    /// afterwards (Kafka clients' included) reach the nodes as the clients' host.
    pub fn enter_clients_host(&self) -> Result<()> {
        let path = PathBuf::from("/run/netns").join(self.namespace(Host::Clients));
        laminar_sys::namespaces::enter_network_namespace(&path)
            .with_context(|| format!("entering network namespace {}", path.display()))
    }

    /// Drops every packet between `a` and `b`, both ways, until [`Network::heal`].
    pub fn cut(&mut self, a: Host, b: Host) -> Result<()> {
        assert_ne!(a, b, "a host cannot be cut from itself");
        let pair = if a < b { (a, b) } else { (b, a) };
        if !self.cuts.insert(pair) {
            return Ok(());
        }
        self.filter(a, "add", b)?;
        self.filter(b, "add", a)
    }

    /// Cuts each host of `side` from each host of `other`.
    pub fn split(&mut self, side: &[Host], other: &[Host]) -> Result<()> {
        for a in side {
            for b in other {
                self.cut(*a, *b)?;
            }
        }
        Ok(())
    }

    /// Ends every cut: all hosts reach each other again.
    pub fn heal(&mut self) -> Result<()> {
        for (a, b) in std::mem::take(&mut self.cuts) {
            self.filter(a, "delete", b)?;
            self.filter(b, "delete", a)?;
        }
        Ok(())
    }

    /// The pairs of hosts cut from each other now.
    pub fn cuts(&self) -> &BTreeSet<(Host, Host)> {
        &self.cuts
    }

    fn filter(&self, at: Host, verb: &str, source: Host) -> Result<()> {
        let element = format!("{{ {} }}", source.address());
        run(
            "ip",
            &[
                "netns",
                "exec",
                &self.namespace(at),
                "nft",
                verb,
                "element",
                "inet",
                TABLE,
                CUT_SET,
                &element,
            ],
        )
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        // Deleting a namespace deletes its veth ends, and so their peers on the bridge.
        for host in self.hosts() {
            let _ = run("ip", &["netns", "del", &self.namespace(host)]);
        }
        let _ = run("ip", &["netns", "del", &self.bridge_namespace()]);
    }
}

/// Set (by `tests/run.sh`, for root) to make a test that cannot make its network fail instead
/// of skipping.
pub const MUST_RUN_ENV: &str = "LAMINAR_NETNS_TESTS_MUST_RUN";

/// Whether a test network can be made here. When it cannot, says why on stderr and returns
/// false, or fails with why under [`MUST_RUN_ENV`].
pub fn available_for_tests() -> Result<bool> {
    match check_prerequisites() {
        Ok(()) => Ok(true),
        Err(missing) if std::env::var_os(MUST_RUN_ENV).is_some() => Err(missing),
        Err(missing) => {
            eprintln!("SKIPPED: {missing:#} (set {MUST_RUN_ENV} to fail instead)");
            Ok(false)
        }
    }
}

fn check_prerequisites() -> Result<()> {
    let mut missing = Vec::new();
    if !std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|status| status.lines().any(|line| line.starts_with("Uid:\t0\t")))
    {
        missing.push("root (namespaces and packet filters need CAP_NET_ADMIN)");
    }
    if Command::new("ip").arg("-V").output().is_err() {
        missing.push("`ip` (Debian package iproute2)");
    }
    if Command::new("nft").arg("--version").output().is_err() {
        missing.push("`nft` (Debian package nftables; tests/run.sh installs it)");
    }
    if !missing.is_empty() {
        bail!("a test network needs {}", missing.join(", "));
    }
    Ok(())
}

fn run(program: &str, args: &[&str]) -> Result<()> {
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    if !output.status.success() {
        bail!(
            "{program} {} failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}
