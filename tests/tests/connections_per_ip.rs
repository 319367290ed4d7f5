//! `max.connections.per.ip` and its overrides, on real sockets from two loopback addresses: an
//! address holds at most its limit of connections, one past it is closed as soon as accepted
//! (and counted), another address is not affected, and a connection that closes gives its
//! place back.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use kafka_protocol::messages::ApiVersionsRequest;
use laminar_tests::http::{self, MetricsPage};
use laminar_tests::wire::{Reaction, WireConnection};
use laminar_tests::{Broker, BrokerOptions};

const DEFAULT_MAX: usize = 2;
/// 127.0.0.2 may hold more (`max.connections.per.ip.overrides`).
const OVERRIDDEN_MAX: usize = 3;
const REFUSED: &str = "laminar_kafka_connections_refused_per_ip_total";

fn address(text: &str) -> IpAddr {
    text.parse().expect("a loopback address")
}

/// A connection from `source` whose ApiVersions request is answered.
fn served(broker: &Broker, source: IpAddr) -> Result<WireConnection> {
    let mut conn = WireConnection::connect_from(source, broker.addr())?;
    conn.request(&ApiVersionsRequest::default(), 0)
        .with_context(|| format!("a connection from {source} within its limit is served"))?;
    Ok(conn)
}

/// Whether a connection from `source` is closed before its request is answered.
fn closed_at_once(broker: &Broker, source: IpAddr) -> Result<bool> {
    let mut conn = WireConnection::connect_from(source, broker.addr())?;
    // The broker may close before the request is written: a failed write is a close too.
    if conn.send(&ApiVersionsRequest::default(), 0).is_err() {
        return Ok(true);
    }
    Ok(matches!(
        conn.reaction(Duration::from_secs(10))?,
        Reaction::Closed
    ))
}

fn refused_total(broker: &Broker) -> Result<f64> {
    let page = MetricsPage::parse(&http::get_ok(broker.http_addr(), "/metrics")?)?;
    page.value(REFUSED)
        .context("the per-address refusals are counted")
}

#[test]
fn an_address_holds_at_most_its_limit_of_connections_and_gets_each_back_when_one_closes() -> Result<()> {
    let broker = Broker::start(
        BrokerOptions::default()
            .with_override("max.connections.per.ip", &DEFAULT_MAX.to_string())
            .with_override(
                "max.connections.per.ip.overrides",
                &format!("127.0.0.2:{OVERRIDDEN_MAX}"),
            ),
    )?;
    let (limited, overridden) = (address("127.0.0.1"), address("127.0.0.2"));

    let mut open: Vec<WireConnection> = (0..DEFAULT_MAX)
        .map(|_| served(&broker, limited))
        .collect::<Result<_>>()?;
    assert!(
        closed_at_once(&broker, limited)?,
        "one past max.connections.per.ip is closed"
    );
    assert_eq!(refused_total(&broker)?, 1.0);

    let others: Vec<WireConnection> = (0..OVERRIDDEN_MAX)
        .map(|_| served(&broker, overridden))
        .collect::<Result<_>>()
        .context("another address has its own count, and its override")?;
    assert!(
        closed_at_once(&broker, overridden)?,
        "one past the override is closed"
    );
    assert_eq!(refused_total(&broker)?, 2.0);

    // A closed connection's place comes back once the broker has seen it close.
    drop(open.pop());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let again = loop {
        match served(&broker, limited) {
            Ok(conn) => break conn,
            Err(_) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(e.context("a place given back is taken again")),
        }
    };
    for conn in open.iter_mut().chain(std::iter::once(&mut { again })) {
        conn.request(&ApiVersionsRequest::default(), 0)
            .context("connections within the limit keep being served")?;
    }
    drop(others);
    Ok(())
}

#[test]
fn a_zero_limit_without_overrides_is_refused_at_start() -> Result<()> {
    let started = Broker::start(BrokerOptions::default().with_override("max.connections.per.ip", "0"));
    let error = started
        .err()
        .context("max.connections.per.ip=0 alone lets no client in: refused")?;
    assert!(
        format!("{error:#}").contains("max.connections.per.ip"),
        "the refusal names the key: {error:#}"
    );
    Ok(())
}
