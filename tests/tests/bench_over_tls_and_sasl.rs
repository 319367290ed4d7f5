//! Laminar's own client over TLS and SASL: `laminar user create` makes a SCRAM-SHA-512 user (the
//! password salted and hashed by the CLI), then `laminar bench produce` and `consume` run against
//! a SASL_SSL listener as that user, and are refused with a wrong password or an untrusted CA;
//! the CLI's commands reach the same listener with a `--command-config` file as Kafka's tools
//! take it. Real broker process, the real `laminar` binary, certificates made by the run.

use anyhow::{ensure, Result};
use laminar_tests::certs::TestCertificates;
use laminar_tests::{cli, Broker, BrokerOptions};

const PASSWORD: &str = "bench-secret";

/// `laminar user create`, then `laminar user list` shows the user without any secret.
fn add_scram_user(broker: &Broker, user: &str, password: &str) -> Result<()> {
    let brokers = broker.bootstrap();
    cli::create_scram_user(&brokers, (user, password))?;
    let listed = cli::run(&["user", "list", "--brokers", &brokers], "")?;
    ensure!(listed.success, "user list: {}", listed.stderr);
    let line = listed
        .stdout
        .lines()
        .find(|l| l.starts_with(user))
        .unwrap_or_default();
    ensure!(
        line.contains("SCRAM-SHA-512") && line.contains("4096"),
        "{}",
        listed.stdout
    );
    ensure!(!listed.stdout.contains(password), "no secret is listed");
    Ok(())
}

/// A broker with a SASL_SSL listener (SCRAM-SHA-512) beside its PLAINTEXT one.
fn broker_with_sasl_ssl(certs: &TestCertificates) -> Result<Broker> {
    let options = BrokerOptions {
        extra_listeners: vec!["SASL_SSL".to_string()],
        ..BrokerOptions::default()
    }
    .with_override(
        "ssl.keystore.location",
        &certs.server_keystore.display().to_string(),
    )
    .with_override("sasl.enabled.mechanisms", "SCRAM-SHA-512");
    Broker::start(options)
}

#[test]
fn laminar_bench_produces_and_consumes_over_sasl_ssl_and_is_refused_without_the_right_secrets() -> Result<()>
{
    let dir = tempfile::tempdir()?;
    let certs = TestCertificates::write(dir.path())?;
    let broker = broker_with_sasl_ssl(&certs)?;
    add_scram_user(&broker, "bench", PASSWORD)?;
    let address = broker
        .listener_addr("SASL_SSL")
        .expect("the SASL_SSL listener")
        .to_string();
    let ca = certs.ca.display().to_string();
    let run = |command: &str, password: &str, ca: &str| {
        let args = [
            "bench",
            command,
            "--brokers",
            &address,
            "--topic",
            "secured",
            "--num-records",
            "2000",
            "--no-limits",
            "--security-protocol",
            "SASL_SSL",
            "--sasl-mechanism",
            "SCRAM-SHA-512",
            "--sasl-username",
            "bench",
            "--sasl-password",
            password,
            "--ssl-ca-location",
            ca,
        ];
        cli::run(&args, "")
    };
    let produced = run("produce", PASSWORD, &ca)?;
    ensure!(produced.success, "produce: {}", produced.stderr);
    let consumed = run("consume", PASSWORD, &ca)?;
    ensure!(consumed.success, "consume: {}", consumed.stderr);
    ensure!(
        consumed.stdout.contains("2000"),
        "consume read the 2000 records: {}",
        consumed.stdout
    );
    let wrong = run("produce", "not-the-password", &ca)?;
    ensure!(
        !wrong.success && wrong.stderr.contains("SaslAuthenticationFailed"),
        "{}",
        wrong.stderr
    );
    ensure!(
        !wrong.stderr.contains("not-the-password"),
        "the password is never printed"
    );
    let stranger = dir.path().join("stranger");
    std::fs::create_dir(&stranger)?;
    let untrusted = TestCertificates::write(&stranger)?.ca.display().to_string();
    let refused = run("produce", PASSWORD, &untrusted)?;
    ensure!(!refused.success, "a server whose CA is not trusted is refused");
    Ok(())
}

#[test]
fn the_cli_reaches_a_sasl_ssl_listener_with_a_kafka_style_command_config_file() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let certs = TestCertificates::write(dir.path())?;
    let broker = broker_with_sasl_ssl(&certs)?;
    add_scram_user(&broker, "operator", PASSWORD)?;
    let address = broker
        .listener_addr("SASL_SSL")
        .expect("the SASL_SSL listener")
        .to_string();
    let write_config = |name: &str, password: &str| -> Result<String> {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n\
                 ssl.truststore.type=PEM\nssl.truststore.location={}\n\
                 sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\\n  \
                 required username=\"operator\" password=\"{password}\";\n",
                certs.ca.display()
            ),
        )?;
        Ok(path.display().to_string())
    };
    let config = write_config("client.properties", PASSWORD)?;
    let cli = |args: &[&str], stdin: &str| {
        let mut all = args.to_vec();
        all.extend(["--brokers", &address, "--command-config", &config]);
        cli::run(&all, stdin)
    };
    let created = cli(&["topic", "create", "guarded", "--partitions", "2"], "")?;
    ensure!(created.success, "topic create: {}", created.stderr);
    let produced = cli(&["produce", "guarded", "--key-separator", ":"], "a:1\nb:2\nc:3\n")?;
    ensure!(produced.success, "produce: {}", produced.stderr);
    let consumed = cli(&["consume", "guarded", "--from-beginning", "--exit-at-end"], "")?;
    ensure!(consumed.success, "consume: {}", consumed.stderr);
    let mut values: Vec<&str> = consumed.stdout.lines().collect();
    values.sort_unstable();
    ensure!(values == ["1", "2", "3"], "consumed {:?}", consumed.stdout);
    let described = cli(&["topic", "describe", "guarded"], "")?;
    ensure!(
        described.success && described.stdout.contains("partitions: 2"),
        "topic describe: {}",
        described.stderr
    );
    let listed = cli(&["user", "list"], "")?;
    ensure!(
        listed.success && listed.stdout.contains("operator"),
        "user list: {}",
        listed.stderr
    );

    let wrong = write_config("wrong.properties", "not-the-password")?;
    let refused = cli::run(
        &["topic", "list", "--brokers", &address, "--command-config", &wrong],
        "",
    )?;
    ensure!(!refused.success, "a wrong password in the file is refused");
    ensure!(
        !refused.stderr.contains("not-the-password"),
        "the password is never printed"
    );
    let plaintext = cli::run(&["topic", "list", "--brokers", &address], "")?;
    ensure!(
        !plaintext.success,
        "without the file the SASL_SSL listener is not reached"
    );
    Ok(())
}
