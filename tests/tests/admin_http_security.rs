//! The admin HTTP endpoint secured: over HTTPS with bearer tokens and client certificates, a
//! request without credentials is refused with 401 (and `WWW-Authenticate`), a read-only token
//! reads but may not change state (403), an admin token or an admin certificate may, and each
//! change is logged with who made it (an audit line); the console's pages stay open, `/metrics`
//! only when `laminar.http.monitoring.open` says so; a plain HTTP request gets no answer from an
//! HTTPS endpoint; and a broker refuses to start with its endpoint off loopback without HTTPS
//! and authentication.

use anyhow::{ensure, Result};
use laminar_tests::certs::{TestCertificates, ALICE_DN};
use laminar_tests::http::{self, https_request, Https};
use laminar_tests::{Broker, BrokerOptions};

const ADMIN_TOKEN: &str = "ops-admin-token-0123456789abcdef";
const READER_TOKEN: &str = "grafana-reader-token-0123456789abcdef";

fn secured(dir: &std::path::Path, certs: &TestCertificates, monitoring_open: bool) -> Result<Broker> {
    let tokens = dir.join("http-tokens");
    std::fs::write(
        &tokens,
        format!("admin ops {ADMIN_TOKEN}\nread-only grafana {READER_TOKEN}\n"),
    )?;
    let options = BrokerOptions::default()
        .with_override(
            "laminar.http.ssl.keystore.location",
            &certs.server_keystore.display().to_string(),
        )
        .with_override(
            "laminar.http.ssl.truststore.location",
            &certs.ca.display().to_string(),
        )
        .with_override("laminar.http.ssl.client.auth", "requested")
        .with_override(
            "laminar.http.authentication.tokens.file",
            &tokens.display().to_string(),
        )
        .with_override(
            "laminar.http.authentication.admin.principals",
            &format!("User:{ALICE_DN}"),
        )
        .with_override("laminar.http.monitoring.open", &monitoring_open.to_string());
    Broker::start(options)
}

#[test]
fn tokens_and_certificates_decide_who_reads_and_who_changes_state_and_changes_are_audited() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let certs = TestCertificates::write(dir.path())?;
    let broker = secured(dir.path(), &certs, false)?;
    let addr = broker.http_addr();
    let ca = Https {
        ca: Some(&certs.ca),
        ..Https::default()
    };
    let with_token = |token| Https {
        token: Some(token),
        ..Https {
            ca: Some(&certs.ca),
            ..Https::default()
        }
    };
    let anonymous = https_request(addr, &ca, ("GET", "/v1/status"), b"")?;
    ensure!(anonymous.status == 401, "no credentials: {}", anonymous.status);
    ensure!(
        anonymous.head.contains("WWW-Authenticate: Bearer"),
        "{}",
        anonymous.head
    );
    ensure!(https_request(addr, &ca, ("GET", "/metrics"), b"")?.status == 401);
    ensure!(https_request(addr, &ca, ("GET", "/ui/app.js"), b"")?.status == 200);
    let reader = with_token(READER_TOKEN);
    ensure!(https_request(addr, &reader, ("GET", "/v1/status"), b"")?.status == 200);
    let topic = br#"{"name": "audited", "partitions": 1}"#;
    let refused = https_request(addr, &reader, ("POST", "/v1/topics"), topic)?;
    ensure!(
        refused.status == 403,
        "a read-only token created a topic: {}",
        refused.status
    );
    let created = https_request(addr, &with_token(ADMIN_TOKEN), ("POST", "/v1/topics"), topic)?;
    ensure!(
        created.status == 201,
        "the admin token: {} {}",
        created.status,
        created.body
    );
    let alice = Https {
        client: Some((&certs.alice.0, &certs.alice.1)),
        ..Https {
            ca: Some(&certs.ca),
            ..Https::default()
        }
    };
    let deleted = https_request(addr, &alice, ("DELETE", "/v1/topics/audited"), b"")?;
    ensure!(
        deleted.status < 300,
        "the admin certificate: {} {}",
        deleted.status,
        deleted.body
    );
    let audited = |who: &str| broker.stderr_lines_where(|l| l.contains("admin request") && l.contains(who));
    ensure!(
        audited("token:ops") == 1,
        "the creation's audit line: {}",
        broker.stderr_tail()
    );
    ensure!(
        audited(ALICE_DN) == 1,
        "the deletion's audit line: {}",
        broker.stderr_tail()
    );
    ensure!(
        http::request(addr, "GET", "/v1/status").map_or(true, |a| a.status != 200),
        "plain HTTP was answered by an HTTPS endpoint"
    );
    the_cli_reads_the_status_over_https_with_a_token(&addr.to_string(), &certs.ca)
}

/// `laminar cluster quorum` reads `/v1/status` (here a single node's, which it says has no
/// quorum) over HTTPS with a token, and is refused without one.
fn the_cli_reads_the_status_over_https_with_a_token(addr: &str, ca: &std::path::Path) -> Result<()> {
    let ca = ca.display().to_string();
    let base = ["cluster", "quorum", "--admin", addr, "--admin-ca", &ca];
    let refused = laminar_tests::cli::run(&base, "")?;
    ensure!(
        refused.stderr.contains("401"),
        "without a token: {}",
        refused.stderr
    );
    let mut with_token = base.to_vec();
    with_token.extend(["--admin-token", READER_TOKEN]);
    let read = laminar_tests::cli::run(&with_token, "")?;
    ensure!(
        read.stderr.contains("single-node mode"),
        "with a token: {}",
        read.stderr
    );
    Ok(())
}

#[test]
fn monitoring_paths_open_only_by_the_setting() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let certs = TestCertificates::write(dir.path())?;
    let broker = secured(dir.path(), &certs, true)?;
    let ca = Https {
        ca: Some(&certs.ca),
        ..Https::default()
    };
    let metrics = https_request(broker.http_addr(), &ca, ("GET", "/metrics"), b"")?;
    ensure!(
        metrics.status == 200 && metrics.body.contains("laminar_"),
        "{}",
        metrics.status
    );
    let status = https_request(broker.http_addr(), &ca, ("GET", "/v1/status"), b"")?;
    ensure!(
        status.status == 401,
        "/v1/status without a token: {}",
        status.status
    );
    Ok(())
}

#[test]
fn an_endpoint_off_loopback_without_https_and_authentication_is_refused_at_start() -> Result<()> {
    let options = BrokerOptions::default().with_override("laminar.http.listen", "0.0.0.0:0");
    let Err(refused) = Broker::start(options) else {
        anyhow::bail!("a broker started with an open HTTP endpoint on 0.0.0.0");
    };
    let message = format!("{refused:#}");
    ensure!(
        message.contains("laminar.http.listen") && message.contains("HTTPS"),
        "{message}"
    );
    Ok(())
}
