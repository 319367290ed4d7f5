//! `laminar acl` against a broker with ACLs on: a super user (through `--command-config`, over
//! SASL PLAIN) grants a user Write and Read on a topic prefix; that user's `laminar produce`
//! then works there and is refused with TOPIC_AUTHORIZATION_FAILED elsewhere; `acl list` shows
//! the grants, `acl delete` takes one back (and the produce is refused), and the user cannot
//! create ACLs. Real broker process, the real `laminar` binary.

use anyhow::{ensure, Result};
use laminar_tests::{cli, Broker, BrokerOptions};

const USERS: [(&str, &str); 2] = [("admin", "admin-secret"), ("alice", "alice-secret")];

fn broker_with_acls() -> Result<Broker> {
    let jaas = format!(
        "org.apache.kafka.common.security.plain.PlainLoginModule required {};",
        USERS
            .map(|(user, password)| format!("user_{user}=\"{password}\""))
            .join(" ")
    );
    let options = BrokerOptions {
        extra_listeners: vec!["SASL_PLAINTEXT".to_string()],
        ..BrokerOptions::default()
    }
    .with_override("sasl.enabled.mechanisms", "PLAIN")
    .with_override("laminar.sasl.plain.plaintext.enable", "true")
    .with_override("listener.name.sasl_plaintext.plain.sasl.jaas.config", &jaas)
    .with_override("authorizer.class.name", "laminar")
    .with_override("super.users", "User:admin");
    Broker::start(options)
}

/// The CLI as one user: `--command-config` with that user's PLAIN login.
struct UserCli {
    address: String,
    config: String,
}

impl UserCli {
    fn new(broker: &Broker, dir: &std::path::Path, (user, password): (&str, &str)) -> Result<UserCli> {
        let path = dir.join(format!("{user}.properties"));
        let text = format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username={user}\nsasl.password={password}\n"
        );
        std::fs::write(&path, text)?;
        let address = broker.listener_addr("SASL_PLAINTEXT").expect("the SASL listener");
        Ok(UserCli {
            address: address.to_string(),
            config: path.display().to_string(),
        })
    }

    fn run(&self, args: &[&str], stdin: &str) -> Result<cli::CliRun> {
        let mut all = args.to_vec();
        all.extend(["--brokers", &self.address, "--command-config", &self.config]);
        cli::run(&all, stdin)
    }
}

const GRANT: [&str; 6] = [
    "acl",
    "create",
    "--allow-principal",
    "User:alice",
    "--operation",
    "write,read",
];

#[test]
fn acls_made_with_the_cli_decide_what_a_user_may_do() -> Result<()> {
    let broker = broker_with_acls()?;
    let dir = tempfile::tempdir()?;
    let (admin, alice) = (
        UserCli::new(&broker, dir.path(), USERS[0])?,
        UserCli::new(&broker, dir.path(), USERS[1])?,
    );
    for topic in ["alice-orders", "bob-orders"] {
        let created = admin.run(&["topic", "create", topic], "")?;
        ensure!(created.success, "topic create {topic}: {}", created.stderr);
    }
    let granted = admin.run(&[&GRANT[..], &["--topic", "alice-", "--prefixed"]].concat(), "")?;
    ensure!(
        granted.success && granted.stdout.contains("PREFIXED"),
        "acl create: {}",
        granted.stderr
    );
    let listed = admin.run(&["acl", "list", "--topic", "alice-", "--prefixed"], "")?;
    ensure!(
        listed.success && listed.stdout.lines().count() == 3,
        "acl list: {}",
        listed.stdout
    );

    let produced = alice.run(&["produce", "alice-orders"], "one\ntwo\n")?;
    ensure!(
        produced.success,
        "alice may write her prefix: {}",
        produced.stderr
    );
    let refused = alice.run(&["produce", "bob-orders"], "one\n")?;
    ensure!(
        !refused.success && refused.stderr.contains("TopicAuthorizationFailed"),
        "not bob's: {}",
        refused.stderr
    );
    let her_own = alice.run(&[&GRANT[..], &["--topic", "bob-orders"]].concat(), "")?;
    ensure!(
        !her_own.success && her_own.stderr.contains("ClusterAuthorizationFailed"),
        "alice cannot create ACLs: {}",
        her_own.stderr
    );

    let write = [
        "acl",
        "delete",
        "--topic",
        "alice-",
        "--prefixed",
        "--operation",
        "WRITE",
    ];
    let deleted = admin.run(&write, "")?;
    ensure!(
        deleted.success && deleted.stdout.contains("WRITE"),
        "acl delete: {}",
        deleted.stderr
    );
    let revoked = alice.run(&["produce", "alice-orders"], "three\n")?;
    ensure!(!revoked.success, "Write taken back: {}", revoked.stdout);
    Ok(())
}
