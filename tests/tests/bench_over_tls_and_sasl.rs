//! Laminar's own client over TLS and SASL: `laminar user create` makes a SCRAM-SHA-512 user (the
//! password salted and hashed by the CLI), then `laminar bench produce` and `consume` run against
//! a SASL_SSL listener as that user, and are refused with a wrong password or an untrusted CA. Real broker process,
//! the real `laminar` binary, certificates made by the run.

use anyhow::{ensure, Result};
use laminar_tests::certs::TestCertificates;
use laminar_tests::{cli, Broker, BrokerOptions};

const PASSWORD: &str = "bench-secret";

/// `laminar user create`, then `laminar user list` shows the user without any secret.
fn add_scram_user(broker: &Broker, user: &str, password: &str) -> Result<()> {
    let brokers = broker.bootstrap();
    let created = cli::run(
        &[
            "user",
            "create",
            user,
            "--mechanism",
            "SCRAM-SHA-512",
            "--iterations",
            "4096",
            "--brokers",
            &brokers,
        ],
        &format!("{password}\n"),
    )?;
    ensure!(created.success, "user create: {}", created.stderr);
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

#[test]
fn laminar_bench_produces_and_consumes_over_sasl_ssl_and_is_refused_without_the_right_secrets() -> Result<()>
{
    let dir = tempfile::tempdir()?;
    let certs = TestCertificates::write(dir.path())?;
    let options = BrokerOptions {
        extra_listeners: vec!["SASL_SSL".to_string()],
        ..BrokerOptions::default()
    }
    .with_override(
        "ssl.keystore.location",
        &certs.server_keystore.display().to_string(),
    )
    .with_override("sasl.enabled.mechanisms", "SCRAM-SHA-512");
    let broker = Broker::start(options)?;
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
