//! The SASL boundary on the wire: what a connection to a SASL_PLAINTEXT listener may send before
//! it has authenticated, how each failure is answered and closed (KIP-152), the v0 exchange's
//! bare token frames, session expiry (KIP-368), and that the broker keeps serving others
//! through all of it. Real broker process, raw Kafka frames.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiVersionsRequest, MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::wire::{Reaction, WireConnection};
use laminar_tests::{Broker, BrokerOptions};

const SASL: &str = "SASL_PLAINTEXT";
const WAIT: Duration = Duration::from_secs(5);

/// A broker with a PLAINTEXT listener and a SASL_PLAINTEXT one offering PLAIN (user alice)
/// and SCRAM, with `extra` overrides.
fn sasl_broker(extra: &[(&str, &str)]) -> Result<Broker> {
    let mut options = BrokerOptions {
        extra_listeners: vec![SASL.to_string()],
        ..BrokerOptions::default()
    }
    .with_override("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
    .with_override("laminar.sasl.plain.plaintext.enable", "true")
    .with_override(
        "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";"#,
    )
    .with_override("connection.failed.authentication.delay.ms", "50");
    for (key, value) in extra {
        options = options.with_override(key, value);
    }
    Broker::start(options)
}

fn connect_sasl(broker: &Broker) -> Result<WireConnection> {
    WireConnection::connect(broker.listener_addr(SASL).context("the SASL listener")?)
}

fn handshake(conn: &mut WireConnection, mechanism: &str, version: i16) -> Result<i16> {
    let request = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into()));
    Ok(conn.request(&request, version)?.error_code)
}

fn plain_token(user: &str, password: &str) -> Bytes {
    Bytes::from(format!("\0{user}\0{password}").into_bytes())
}

fn authenticate(conn: &mut WireConnection, token: Bytes, version: i16) -> Result<(i16, i64)> {
    let response = conn.request(
        &SaslAuthenticateRequest::default().with_auth_bytes(token),
        version,
    )?;
    Ok((response.error_code, response.session_lifetime_ms))
}

fn metadata_works(conn: &mut WireConnection) -> Result<()> {
    let answer = conn.request(&MetadataRequest::default().with_topics(Some(vec![])), 9)?;
    ensure!(!answer.brokers.is_empty(), "a Metadata answer lists this broker");
    Ok(())
}

fn closes(conn: &mut WireConnection) -> Result<()> {
    let reaction = conn.reaction(WAIT)?;
    ensure!(
        reaction == Reaction::Closed,
        "expected the broker to close, got {reaction:?}"
    );
    Ok(())
}

#[test]
fn a_request_before_authentication_closes_the_connection_but_api_versions_is_answered() -> Result<()> {
    let broker = sasl_broker(&[])?;
    let mut conn = connect_sasl(&broker)?;
    let versions = conn.request(&ApiVersionsRequest::default(), 3)?;
    ensure!(
        versions.error_code == 0,
        "ApiVersions before authentication is answered"
    );
    conn.send(&MetadataRequest::default().with_topics(None), 9)?;
    closes(&mut conn)?;
    // The same on a connection that chose a mechanism but did not finish.
    let mut conn = connect_sasl(&broker)?;
    ensure!(handshake(&mut conn, "PLAIN", 1)? == 0, "PLAIN is enabled");
    conn.send(&MetadataRequest::default().with_topics(None), 9)?;
    closes(&mut conn)?;
    metadata_works(&mut WireConnection::connect(broker.addr())?)
}

#[test]
fn plain_with_the_right_password_authenticates_and_the_listener_advertises_itself() -> Result<()> {
    let broker = sasl_broker(&[])?;
    let mut conn = connect_sasl(&broker)?;
    ensure!(handshake(&mut conn, "PLAIN", 1)? == 0, "PLAIN is enabled");
    let (code, lifetime) = authenticate(&mut conn, plain_token("alice", "alice-secret"), 2)?;
    ensure!(
        (code, lifetime) == (0, 0),
        "authenticated, no expiry: {code} {lifetime}"
    );
    let answer = conn.request(&MetadataRequest::default().with_topics(Some(vec![])), 9)?;
    let advertised = answer.brokers.first().context("one broker")?;
    let sasl = broker.listener_addr(SASL).context("the SASL listener")?;
    ensure!(
        advertised.port == i32::from(sasl.port()),
        "Metadata on the SASL listener names its port {}, not {}",
        sasl.port(),
        advertised.port
    );
    Ok(())
}

#[test]
fn wrong_passwords_unknown_users_and_garbage_are_answered_with_the_failure_then_closed() -> Result<()> {
    let broker = sasl_broker(&[])?;
    let failed = ResponseError::SaslAuthenticationFailed.code();
    let tokens = [
        plain_token("alice", "wrong"),
        plain_token("mallory", "alice-secret"),
        Bytes::from_static(b"\xff\xfe no separators"),
        Bytes::new(),
    ];
    for token in tokens {
        let mut conn = connect_sasl(&broker)?;
        ensure!(handshake(&mut conn, "PLAIN", 1)? == 0, "PLAIN is enabled");
        let response = conn.request(
            &SaslAuthenticateRequest::default().with_auth_bytes(token.clone()),
            1,
        )?;
        ensure!(
            response.error_code == failed,
            "{token:?}: error {}",
            response.error_code
        );
        let message = response.error_message.map(|m| m.to_string()).unwrap_or_default();
        ensure!(
            !message.contains("alice-secret"),
            "the message never echoes a password: {message}"
        );
        closes(&mut conn)?;
    }
    // SCRAM garbage too.
    let mut conn = connect_sasl(&broker)?;
    ensure!(
        handshake(&mut conn, "SCRAM-SHA-256", 1)? == 0,
        "SCRAM-SHA-256 is enabled"
    );
    let (code, _) = authenticate(&mut conn, Bytes::from_static(b"n,,n=,r="), 1)?;
    ensure!(code == failed, "malformed client-first: error {code}");
    closes(&mut conn)?;
    // Others are served throughout.
    let mut good = connect_sasl(&broker)?;
    handshake(&mut good, "PLAIN", 1)?;
    ensure!(authenticate(&mut good, plain_token("alice", "alice-secret"), 1)?.0 == 0);
    metadata_works(&mut good)
}

#[test]
fn each_failure_in_a_row_from_one_address_is_answered_later_than_the_last() -> Result<()> {
    let broker = sasl_broker(&[])?;
    let mut waited = Vec::new();
    for _ in 0..5 {
        let mut conn = connect_sasl(&broker)?;
        handshake(&mut conn, "PLAIN", 1)?;
        let asked = std::time::Instant::now();
        let (code, _) = authenticate(&mut conn, plain_token("alice", "a-guess"), 1)?;
        waited.push(asked.elapsed());
        ensure!(
            code == ResponseError::SaslAuthenticationFailed.code(),
            "error {code}"
        );
    }
    // 50 ms doubled per failure: the fifth is held back at least 800 ms.
    ensure!(
        waited[4] >= std::time::Duration::from_millis(800),
        "the delays did not grow: {waited:?}"
    );
    // The right password still gets in at once from the same address.
    let mut good = connect_sasl(&broker)?;
    handshake(&mut good, "PLAIN", 1)?;
    ensure!(authenticate(&mut good, plain_token("alice", "alice-secret"), 1)?.0 == 0);
    metadata_works(&mut good)
}

#[test]
fn an_unknown_mechanism_gets_the_enabled_list_and_a_close() -> Result<()> {
    let broker = sasl_broker(&[])?;
    let mut conn = connect_sasl(&broker)?;
    let request = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("GSSAPI"));
    let response = conn.request(&request, 1)?;
    ensure!(response.error_code == ResponseError::UnsupportedSaslMechanism.code());
    let enabled: Vec<String> = response.mechanisms.iter().map(|m| m.to_string()).collect();
    ensure!(
        enabled == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
        "enabled: {enabled:?}"
    );
    closes(&mut conn)
}

#[test]
fn a_v0_handshake_takes_bare_token_frames() -> Result<()> {
    let broker = sasl_broker(&[])?;
    let mut conn = connect_sasl(&broker)?;
    ensure!(handshake(&mut conn, "PLAIN", 0)? == 0, "PLAIN is enabled");
    let token = plain_token("alice", "alice-secret");
    let mut frame = (token.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&token);
    conn.write_raw(&frame)?;
    let answer = conn.read_frame()?.context("PLAIN's (empty) answer")?;
    ensure!(answer.is_empty(), "PLAIN answers with an empty token: {answer:?}");
    metadata_works(&mut conn)?;
    // A wrong password after a v0 handshake can only be answered by the close.
    let mut conn = connect_sasl(&broker)?;
    handshake(&mut conn, "PLAIN", 0)?;
    let token = plain_token("alice", "nope");
    let mut frame = (token.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&token);
    conn.write_raw(&frame)?;
    closes(&mut conn)
}

#[test]
fn sasl_on_a_plaintext_listener_is_an_illegal_state_and_closes() -> Result<()> {
    let broker = sasl_broker(&[])?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let code = handshake(&mut conn, "PLAIN", 1)?;
    ensure!(code == ResponseError::IllegalSaslState.code(), "error {code}");
    closes(&mut conn)
}

#[test]
fn an_expired_session_is_closed_at_its_next_request_and_reauthentication_renews_it() -> Result<()> {
    let broker = sasl_broker(&[("connections.max.reauth.ms", "1500")])?;
    let mut conn = connect_sasl(&broker)?;
    handshake(&mut conn, "PLAIN", 1)?;
    let (code, lifetime) = authenticate(&mut conn, plain_token("alice", "alice-secret"), 1)?;
    ensure!(
        (code, lifetime) == (0, 1500),
        "the session lasts connections.max.reauth.ms: {lifetime}"
    );
    std::thread::sleep(Duration::from_millis(1000));
    // KIP-368: a new handshake on the same connection, as the same principal.
    handshake(&mut conn, "PLAIN", 1)?;
    ensure!(authenticate(&mut conn, plain_token("alice", "alice-secret"), 1)?.0 == 0);
    std::thread::sleep(Duration::from_millis(1000));
    metadata_works(&mut conn)?; // 2 s after the first authentication, 1 s after the second
    std::thread::sleep(Duration::from_millis(1000));
    conn.send(&MetadataRequest::default().with_topics(None), 9)?;
    closes(&mut conn)
}

#[test]
fn failures_and_successes_are_counted_in_metrics() -> Result<()> {
    let broker = sasl_broker(&[])?;
    for password in ["alice-secret", "wrong", "alice-secret"] {
        let mut conn = connect_sasl(&broker)?;
        handshake(&mut conn, "PLAIN", 1)?;
        authenticate(&mut conn, plain_token("alice", password), 1)?;
    }
    let text = laminar_tests::http::get_ok(broker.http_addr(), "/metrics")?;
    let page = laminar_tests::http::MetricsPage::parse(&text)?;
    let count = |result: &str| {
        page.value(&format!(
            "laminar_kafka_authentications_total{{result=\"{result}\"}}"
        ))
    };
    ensure!(count("success") == Some(2.0), "successes: {:?}", count("success"));
    ensure!(count("failure") == Some(1.0), "failures: {:?}", count("failure"));
    Ok(())
}
