//! A cluster's ACLs live in its metadata log: granted with `laminar acl create` through one
//! node, every node enforces them (a user writes the prefix it was granted, on every node, and
//! is refused elsewhere); taken back through another node, every node refuses again. The
//! brokers replicate as a super user over a SASL listener of their own, whose replica fetches
//! need ClusterAction: a user who logs in there without it cannot pass for a follower. Three
//! real broker processes, the real `laminar` binary.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::http::broker_epoch;
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::{cli, wait_for, BrokerOptions, Cluster};

const NODES: i32 = 3;
const USERS: [(&str, &str); 3] = [
    ("admin", "admin-secret"),
    ("alice", "alice-secret"),
    ("replicator", "replicator-secret"),
];
const APPLIED_WITHIN: Duration = Duration::from_secs(20);

fn options() -> BrokerOptions {
    let users: Vec<String> = USERS
        .iter()
        .map(|(user, password)| format!("user_{user}=\"{password}\""))
        .collect();
    let module = "org.apache.kafka.common.security.plain.PlainLoginModule required";
    let clients = format!("{module} {};", users.join(" "));
    let replication = format!(
        "{module} username=\"replicator\" password=\"replicator-secret\" {};",
        users.join(" ")
    );
    BrokerOptions {
        extra_listeners: vec!["REPLICATION".to_string(), "CLIENTS".to_string()],
        ..Cluster::node_options()
    }
    .with_override(
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,REPLICATION:SASL_PLAINTEXT,CLIENTS:SASL_PLAINTEXT",
    )
    .with_override("inter.broker.listener.name", "REPLICATION")
    .with_override("sasl.enabled.mechanisms", "PLAIN")
    .with_override("laminar.sasl.plain.plaintext.enable", "true")
    .with_override("sasl.mechanism.inter.broker.protocol", "PLAIN")
    .with_override("listener.name.replication.plain.sasl.jaas.config", &replication)
    .with_override("listener.name.clients.plain.sasl.jaas.config", &clients)
    .with_override("authorizer.class.name", "laminar")
    .with_override("super.users", "User:admin;User:replicator")
    .with_override("replica.lag.time.max.ms", "2000")
}

/// The CLI as any user on any node's CLIENTS listener.
struct Users {
    cluster: Cluster,
    dir: tempfile::TempDir,
}

impl Users {
    /// The CLI as `user` on node `node`.
    fn run(&mut self, (node, user): (i32, &str), args: &[&str], stdin: &str) -> Result<cli::CliRun> {
        let password = USERS.iter().find(|(u, _)| *u == user).context("a known user")?.1;
        let config = self.dir.path().join(format!("{user}.properties"));
        std::fs::write(
            &config,
            format!("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username={user}\nsasl.password={password}\n"),
        )?;
        let node = self.cluster.node(node);
        let address = node.listener_addr("CLIENTS").context("CLIENTS")?.to_string();
        let config = config.display().to_string();
        let mut all = args.to_vec();
        all.extend(["--brokers", &address, "--command-config", &config]);
        cli::run(&all, stdin)
    }

    /// Whether alice's produce to `topic` through `node` is taken.
    fn alice_writes(&mut self, node: i32, topic: &str) -> Result<bool> {
        Ok(self.run((node, "alice"), &["produce", topic], "one\n")?.success)
    }
}

#[test]
fn acls_granted_through_one_node_are_enforced_by_every_node_until_taken_back_through_another() -> Result<()> {
    let cluster = Cluster::start(NODES as usize, 3000, options())?;
    let mut users = Users {
        cluster,
        dir: tempfile::tempdir()?,
    };
    for topic in ["alice-orders", "bob-orders"] {
        let created = users.run((1, "admin"), &["topic", "create", topic, "-r", "3"], "")?;
        ensure!(created.success, "topic create {topic}: {}", created.stderr);
    }
    let grant = [
        "acl",
        "create",
        "--allow-principal",
        "User:alice",
        "--operation",
        "write,read,describe",
        "--topic",
        "alice-",
        "--prefixed",
    ];
    let granted = users.run((1, "admin"), &grant, "")?;
    ensure!(granted.success, "acl create: {}", granted.stderr);
    granted_everywhere(&mut users)?;
    every_replica_in_sync(&mut users, "alice-orders")?;
    let her_own = [
        "acl",
        "create",
        "--allow-principal",
        "User:alice",
        "--operation",
        "write",
        "--topic",
        "bob-orders",
    ];
    let her_own = users.run((2, "alice"), &her_own, "")?;
    ensure!(
        !her_own.success && her_own.stderr.contains("ClusterAuthorizationFailed"),
        "alice cannot create ACLs: {}",
        her_own.stderr
    );
    let take_back = [
        "acl",
        "delete",
        "--topic",
        "alice-",
        "--prefixed",
        "--operation",
        "WRITE",
    ];
    let deleted = users.run((2, "admin"), &take_back, "")?;
    ensure!(
        deleted.success && deleted.stdout.contains("WRITE"),
        "acl delete: {}",
        deleted.stderr
    );
    for node in 1..=NODES {
        wait_for(APPLIED_WITHIN, "Write taken back", || {
            Ok(!users.alice_writes(node, "alice-orders")?)
        })?;
    }
    Ok(())
}

/// After replica.lag.time.max.ms, every replica of `topic` is still in sync: the followers'
/// fetches (as the replicator, a super user) were taken.
fn every_replica_in_sync(users: &mut Users, topic: &str) -> Result<()> {
    std::thread::sleep(Duration::from_secs(3));
    let described = users.run((3, "admin"), &["topic", "describe", topic], "")?;
    let rows = cli::rows_starting(&described.stdout, "0");
    ensure!(
        rows.first()
            .and_then(|row| row.get(3))
            .is_some_and(|isr| isr.split(',').count() == 3),
        "every replica in sync: {}",
        described.stdout
    );
    Ok(())
}

/// Every node takes alice's writes to her prefix, refuses them elsewhere, and lists the grant.
fn granted_everywhere(users: &mut Users) -> Result<()> {
    for node in 1..=NODES {
        wait_for(APPLIED_WITHIN, "alice may write her prefix", || {
            users.alice_writes(node, "alice-orders")
        })?;
        let refused = users.run((node, "alice"), &["produce", "bob-orders"], "one\n")?;
        ensure!(
            !refused.success && refused.stderr.contains("TopicAuthorizationFailed"),
            "node {node}: not bob's: {}",
            refused.stderr
        );
        let listed = users.run(
            (node, "admin"),
            &["acl", "list", "--topic", "alice-", "--prefixed"],
            "",
        )?;
        ensure!(
            listed.stdout.contains("User:alice"),
            "node {node}: {}",
            listed.stdout
        );
    }
    Ok(())
}

/// A Fetch claiming a follower's replica id on the brokers' own listener, from a user who
/// logged in but lacks ClusterAction, is refused (CLUSTER_AUTHORIZATION_FAILED) and cannot
/// move the ISR or the high watermark; the replicating broker's principal is taken.
#[test]
fn a_follower_fetch_without_cluster_action_is_refused_on_the_brokers_listener() -> Result<()> {
    let cluster = Cluster::start(NODES as usize, 3000, options())?;
    let mut users = Users {
        cluster,
        dir: tempfile::tempdir()?,
    };
    let created = users.run((1, "admin"), &["topic", "create", "replicated", "-r", "3"], "")?;
    ensure!(created.success, "topic create: {}", created.stderr);
    let mut row = Vec::new();
    wait_for(APPLIED_WITHIN, "a leader", || {
        let described = users.run((1, "admin"), &["topic", "describe", "replicated"], "")?;
        row = cli::rows_starting(&described.stdout, "0")
            .first()
            .map(|r| r.iter().map(|c| c.to_string()).collect())
            .unwrap_or_default();
        Ok(row
            .get(1)
            .is_some_and(|leader| leader.parse::<i32>().is_ok_and(|l| l > 0)))
    })?;
    let leader: i32 = row[1].parse()?;
    let follower = (1..=NODES).find(|n| *n != leader).context("a follower")?;
    let address = users
        .cluster
        .node(leader)
        .listener_addr("REPLICATION")
        .context("REPLICATION")?;
    let topic_id = wire::partition_view(&mut logged_in(address, "replicator")?, "replicated", 0)?.topic_id;
    let epoch = broker_epoch(users.cluster.node(follower).http_addr())?;
    let forged = wire::replica_fetch_request((topic_id, 0), 0, (follower, epoch));
    for (user, expected) in [("alice", CLUSTER_AUTHORIZATION_FAILED), ("replicator", 0)] {
        let mut conn = logged_in(address, user)?;
        let answer = conn.request(&forged, 15)?;
        ensure!(
            answer.error_code == expected,
            "{user}'s fetch as replica {follower}: error {}",
            answer.error_code
        );
    }
    Ok(())
}

const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

/// A Kafka connection to `address` logged in as `user` with SASL PLAIN.
fn logged_in(address: std::net::SocketAddr, user: &str) -> Result<WireConnection> {
    let password = USERS.iter().find(|(u, _)| *u == user).context("a known user")?.1;
    let mut conn = WireConnection::connect(address)?;
    let handshake = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    ensure!(conn.request(&handshake, 1)?.error_code == 0, "PLAIN is enabled");
    let token = Bytes::from(format!("\0{user}\0{password}").into_bytes());
    let answer = conn.request(&SaslAuthenticateRequest::default().with_auth_bytes(token), 1)?;
    ensure!(
        answer.error_code == 0,
        "{user} logs in: error {}",
        answer.error_code
    );
    Ok(conn)
}
