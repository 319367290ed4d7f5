//! Client quotas on the wire: AlterClientQuotas and DescribeClientQuotas answer as Kafka's
//! (per entity, INVALID_REQUEST for what breaks Kafka's rules, filters by name, default or
//! any), and the quotas survive a restart; a client past its `request_percentage` gets its
//! answers with `throttle_time_ms` and its next request waits that long (the connection is
//! muted); a client past its `controller_mutation_rate` is refused with
//! THROTTLING_QUOTA_EXCEEDED by CreateTopics v6, and throttled (not refused) by v5; an address
//! past its `connection_creation_rate` has its new connections closed, another address not.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, ApiVersionsRequest, DescribeClientQuotasRequest, MetadataRequest,
};
use kafka_protocol::protocol::StrBytes;
use laminar_tests::cli;
use laminar_tests::wire::{self, WireConnection};
use laminar_tests::{Broker, BrokerOptions};

/// The client id of every request `WireConnection` sends.
const WIRE_CLIENT_ID: &str = "laminar-wire-test";
const INVALID_REQUEST: i16 = 42;
const THROTTLING_QUOTA_EXCEEDED: i16 = 89;

fn broker() -> Result<Broker> {
    Broker::start(BrokerOptions::default().with_override("quota.window.num", "3"))
}

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

fn entry(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> EntryData {
    let entity = entity.iter().map(|(kind, name)| {
        EntityData::default()
            .with_entity_type(text(kind))
            .with_entity_name(name.map(text))
    });
    let ops = ops.iter().map(|(key, value)| {
        OpData::default()
            .with_key(text(key))
            .with_value(value.unwrap_or(0.0))
            .with_remove(value.is_none())
    });
    EntryData::default()
        .with_entity(entity.collect())
        .with_ops(ops.collect())
}

/// The values DescribeClientQuotas gives for entities of `user` matching `name` (0: exact,
/// 1: default, 2: any), as `(entity, key, value)` text.
fn describe(
    conn: &mut WireConnection,
    (match_type, name): (i8, Option<&str>),
    strict: bool,
) -> Result<Vec<String>> {
    let component = ComponentData::default()
        .with_entity_type(text("user"))
        .with_match_type(match_type)
        .with_match(name.map(text));
    let request = DescribeClientQuotasRequest::default()
        .with_components(vec![component])
        .with_strict(strict);
    let response = conn.request(&request, 1)?;
    ensure!(response.error_code == 0, "{response:?}");
    let mut described = Vec::new();
    for entry in response.entries.unwrap_or_default() {
        let entity: Vec<String> = entry
            .entity
            .iter()
            .map(|p| {
                format!(
                    "{}={}",
                    p.entity_type,
                    p.entity_name.as_deref().unwrap_or("<default>")
                )
            })
            .collect();
        for value in entry.values {
            described.push(format!("{} {}={}", entity.join(","), value.key, value.value));
        }
    }
    described.sort();
    Ok(described)
}

#[test]
fn quotas_are_altered_and_described_as_kafkas_and_survive_a_restart() -> Result<()> {
    let mut broker = broker()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let request = AlterClientQuotasRequest::default().with_entries(vec![
        entry(
            &[("user", Some("alice"))],
            &[("producer_byte_rate", Some(1024.0))],
        ),
        entry(&[("user", Some("bob"))], &[("no_such_quota", Some(1.0))]),
        entry(
            &[("user", Some("bob")), ("ip", Some("10.0.0.1"))],
            &[("request_percentage", Some(5.0))],
        ),
        entry(
            &[("user", None), ("client-id", Some("app"))],
            &[("consumer_byte_rate", Some(2048.0))],
        ),
        entry(&[("user", Some("carol"))], &[("producer_byte_rate", Some(10.5))]),
    ]);
    let response = conn.request(&request, 1)?;
    let codes: Vec<i16> = response.entries.iter().map(|e| e.error_code).collect();
    ensure!(
        codes == [0, INVALID_REQUEST, INVALID_REQUEST, 0, INVALID_REQUEST],
        "{response:?}"
    );
    let alice = describe(&mut conn, (0, Some("alice")), false)?;
    ensure!(alice == ["user=alice producer_byte_rate=1024"], "{alice:?}");
    let default_user = describe(&mut conn, (1, None), false)?;
    ensure!(
        default_user == ["user=<default>,client-id=app consumer_byte_rate=2048"],
        "{default_user:?}"
    );
    let strict_any = describe(&mut conn, (2, None), true)?;
    ensure!(
        strict_any == ["user=alice producer_byte_rate=1024"],
        "{strict_any:?}"
    );
    broker.restart()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let any = describe(&mut conn, (2, None), false)?;
    ensure!(any.len() == 2, "after a restart: {any:?}");
    let removal = AlterClientQuotasRequest::default().with_entries(vec![entry(
        &[("user", Some("alice"))],
        &[("producer_byte_rate", None)],
    )]);
    ensure!(conn.request(&removal, 0)?.entries[0].error_code == 0);
    let alice = describe(&mut conn, (0, Some("alice")), false)?;
    ensure!(alice.is_empty(), "removed, yet {alice:?}");
    let listed = cli::ok_on(&broker.bootstrap(), &["quota", "list", "--user-default"], "")?;
    ensure!(
        listed.contains("consumer_byte_rate") && listed.contains("2048"),
        "{listed}"
    );
    Ok(())
}

#[test]
fn a_client_past_its_request_time_is_throttled_and_its_connection_muted() -> Result<()> {
    let broker = broker()?;
    cli::set_quota(
        &broker.bootstrap(),
        &["--client-id", WIRE_CLIENT_ID],
        "request_percentage=0.01",
    )?;
    let mut conn = WireConnection::connect(broker.addr())?;
    let metadata = MetadataRequest::default().with_topics(None);
    let mut throttle_ms = 0;
    for _ in 0..200 {
        throttle_ms = conn.request(&metadata, 9)?.throttle_time_ms;
        if throttle_ms > 0 {
            break;
        }
    }
    ensure!(throttle_ms > 0, "200 Metadata requests and no throttle_time_ms");
    let asked = Instant::now();
    conn.request(&metadata, 9)?;
    let answered = asked.elapsed();
    ensure!(
        answered >= Duration::from_millis(throttle_ms as u64) / 2,
        "throttled {throttle_ms} ms, yet the next request was answered in {answered:?}"
    );
    // The CLI lists what it set.
    let other = cli::ok_on(&broker.bootstrap(), &["quota", "list"], "")?;
    ensure!(other.contains("request_percentage"), "{other}");
    Ok(())
}

#[test]
fn controller_mutations_past_their_rate_are_refused_by_strict_versions_and_throttled_by_older_ones(
) -> Result<()> {
    let broker = broker()?;
    cli::set_quota(
        &broker.bootstrap(),
        &["--client-id", WIRE_CLIENT_ID],
        "controller_mutation_rate=1",
    )?;
    let mut conn = WireConnection::connect(broker.addr())?;
    // A burst of 3 (1 a second over 3 windows of 1 s) lets one request of 10 through, which
    // takes the client 7 below: 7 s before the next.
    let (code, _) = wire::create_topic_at(&mut conn, 10, 6)?;
    ensure!(code == 0, "the first CreateTopics: error {code}");
    let (code, throttle_ms) = wire::create_topic_at(&mut conn, 1, 6)?;
    ensure!(
        code == THROTTLING_QUOTA_EXCEEDED,
        "the second CreateTopics v6: error {code}"
    );
    ensure!(
        (1..=8_000).contains(&throttle_ms),
        "throttle_time_ms {throttle_ms}"
    );
    let (code, throttle_ms) = wire::create_topic_at(&mut conn, 1, 5)?;
    ensure!(
        code == 0,
        "CreateTopics v5 is not refused for its quota: error {code}"
    );
    ensure!(throttle_ms > 0, "CreateTopics v5 past the quota is throttled");
    Ok(())
}

/// Whether a connection from `source` is served (answered an ApiVersions).
fn served_from(broker: &Broker, source: &str) -> bool {
    let Ok(mut conn) = WireConnection::connect_from(source.parse().expect("an address"), broker.addr())
    else {
        return false;
    };
    conn.request(&ApiVersionsRequest::default(), 0).is_ok()
}

#[test]
fn an_address_past_its_connection_creation_rate_has_new_connections_closed() -> Result<()> {
    let broker = broker()?;
    cli::set_quota(
        &broker.bootstrap(),
        &["--ip", "127.0.0.2"],
        "connection_creation_rate=1",
    )?;
    // A burst of 3 (1 a second over 3 windows), one more taking it below zero, then closed.
    let served: Vec<bool> = (0..8).map(|_| served_from(&broker, "127.0.0.2")).collect();
    let count = served.iter().filter(|s| **s).count();
    ensure!(
        (3..=5).contains(&count),
        "served {count} of 8 quick connections: {served:?}"
    );
    ensure!(
        !served[7],
        "the last of 8 quick connections was served: {served:?}"
    );
    let others = (0..8).filter(|_| served_from(&broker, "127.0.0.3")).count();
    ensure!(
        others == 8,
        "another address had {others} of 8 connections served"
    );
    Ok(())
}
