//! A TLS listener's certificates reload on SIGHUP without a restart: new connections get the
//! new certificate, connections already open keep theirs, and files that do not load leave
//! the listener as it was. Real broker process, a rustls client, certificates made by the run.

use std::time::Duration;

use anyhow::{ensure, Result};
use kafka_protocol::messages::ApiVersionsRequest;
use laminar_tests::certs::TestCertificates;
use laminar_tests::tls_client::TlsConnection;
use laminar_tests::{wait_for, Broker, BrokerOptions};

fn answers(connection: &mut TlsConnection) -> Result<()> {
    let versions = connection.request(&ApiVersionsRequest::default(), 3)?;
    ensure!(
        versions.error_code == 0,
        "ApiVersions error {}",
        versions.error_code
    );
    Ok(())
}

#[test]
fn sighup_reloads_the_certificates_for_new_connections_and_keeps_open_ones() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    std::fs::create_dir_all(&first)?;
    std::fs::create_dir_all(&second)?;
    let (old, new) = (
        TestCertificates::write(&first)?,
        TestCertificates::write(&second)?,
    );
    let keystore = dir.path().join("keystore.pem");
    std::fs::copy(&old.server_keystore, &keystore)?;
    let options = BrokerOptions {
        extra_listeners: vec!["SSL".to_string()],
        ..BrokerOptions::default()
    }
    .with_override("ssl.keystore.location", &keystore.display().to_string());
    let mut broker = Broker::start(options)?;
    let addr = broker.listener_addr("SSL").expect("the SSL listener");
    let mut open = TlsConnection::connect(addr, &old.ca, None)?;
    answers(&mut open)?;
    ensure!(
        TlsConnection::connect(addr, &new.ca, None).is_err(),
        "the new CA is not yet served"
    );

    std::fs::copy(&new.server_keystore, &keystore)?;
    broker.hang_up()?;
    wait_for(Duration::from_secs(10), "the new certificate", || {
        Ok(TlsConnection::connect(addr, &new.ca, None).is_ok())
    })?;
    ensure!(
        TlsConnection::connect(addr, &old.ca, None).is_err(),
        "the old certificate is gone"
    );
    answers(&mut open)?; // the connection made before keeps its session

    std::fs::write(&keystore, "not a PEM file")?;
    broker.hang_up()?;
    std::thread::sleep(Duration::from_millis(500));
    answers(&mut TlsConnection::connect(addr, &new.ca, None)?)?;
    let logged = broker.stderr_lines_where(|line| line.contains("TLS certificates not reloaded"));
    ensure!(logged == 1, "a failed reload is logged once: {logged}");
    Ok(())
}
