//! `max.connection.creation.rate` per listener (KIP-612), on real sockets: a listener limited
//! to 5 new connections a second serves a burst of 5 at once and the rest one per 200 ms, every
//! one of them (held, never refused), and counts the held ones; another listener of the same
//! broker, unlimited, serves its connections without holding any.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::ApiVersionsRequest;
use laminar_tests::http::{self, MetricsPage};
use laminar_tests::wire::WireConnection;
use laminar_tests::{Broker, BrokerOptions};

const THROTTLED: &str = "laminar_kafka_connections_throttled_total";
const CONNECTIONS: usize = 15;

/// Opens `count` connections to `address` one after the other, each answered; the time taken.
fn open_served(address: SocketAddr, count: usize) -> Result<(Duration, Vec<WireConnection>)> {
    let started = Instant::now();
    let mut open = Vec::with_capacity(count);
    for i in 0..count {
        let mut conn = WireConnection::connect(address)?;
        conn.request(&ApiVersionsRequest::default(), 0)
            .with_context(|| format!("connection {i} is served"))?;
        open.push(conn);
    }
    Ok((started.elapsed(), open))
}

fn throttled(broker: &Broker) -> Result<f64> {
    let page = MetricsPage::parse(&http::get_ok(broker.http_addr(), "/metrics")?)?;
    page.value(THROTTLED).context("the throttled counter")
}

#[test]
fn a_listener_past_its_creation_rate_holds_new_connections_and_serves_them_all() -> Result<()> {
    let options = BrokerOptions {
        extra_listeners: vec!["CLIENTS".to_string()],
        ..BrokerOptions::default()
    }
    .with_override(
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,CLIENTS:PLAINTEXT",
    )
    .with_override("listener.name.clients.max.connection.creation.rate", "5");
    let broker = Broker::start(options)?;
    let (_, unlimited) = open_served(broker.addr(), CONNECTIONS)?;
    ensure!(
        throttled(&broker)? == 0.0,
        "the unlimited listener held connections"
    );
    let clients = broker.listener_addr("CLIENTS").context("CLIENTS")?;
    let (took, limited) = open_served(clients, CONNECTIONS)?;
    // 5 at once, then 10 more at 5 a second: 2 s at least (less a margin for the bucket's
    // refill while the first ones were served).
    ensure!(
        took >= Duration::from_millis(1500),
        "{CONNECTIONS} connections in {took:?}"
    );
    let held = throttled(&broker)?;
    // Tokens refill while the first ones are served, so a few fewer may be held on a slow run.
    ensure!((5.0..=10.0).contains(&held), "{held} connections held");
    ensure!(unlimited.len() + limited.len() == 2 * CONNECTIONS);
    Ok(())
}
