//! The admin HTTP endpoints of a real broker: `/metrics` parsed after produce and fetch traffic
//! and checked family by family, `/v1/status` and the readiness probe, and the HTTP bounds
//! (404, 405, oversized head).

use anyhow::{ensure, Result};
use laminar_tests::http::{get_ok, request, MetricsPage};
use laminar_tests::wire::{create_topic, fetch, produce, record_batch, WireConnection};
use laminar_tests::Broker;

const FAMILIES: [(&str, &str); 17] = [
    ("laminar_build_info", "gauge"),
    ("laminar_uptime_seconds_total", "counter"),
    ("laminar_kafka_requests_total", "counter"),
    ("laminar_kafka_request_errors_total", "counter"),
    ("laminar_kafka_request_latency_seconds", "histogram"),
    ("laminar_kafka_request_bytes_total", "counter"),
    ("laminar_kafka_records_produced_total", "counter"),
    ("laminar_kafka_records_fetched_total", "counter"),
    ("laminar_kafka_fetch_bytes_total", "counter"),
    ("laminar_kafka_connections_active", "gauge"),
    ("laminar_kafka_partitions", "gauge"),
    ("laminar_storage_log_bytes", "gauge"),
    ("laminar_storage_fdatasync_latency_seconds", "histogram"),
    ("laminar_kafka_consumer_group_lag", "gauge"),
    ("laminar_kafka_consumer_group_lag_sum", "gauge"),
    ("laminar_kafka_consumer_group_lag_max", "gauge"),
    ("laminar_kafka_under_replicated_partitions", "gauge"),
];

/// Creates `topic` with three partitions, produces two records to each (acks=all) and fetches
/// them back; returns the connection, still open, and the bytes of the batches produced.
fn produce_and_fetch_every_partition(broker: &Broker, topic: &str) -> Result<(WireConnection, u64)> {
    let mut conn = WireConnection::connect(broker.addr())?;
    create_topic(&mut conn, topic, 3)?;
    let mut bytes_in = 0u64;
    for partition in 0..3 {
        let batch = record_batch(&[b"one", b"two"], 1_700_000_000_000)?;
        bytes_in += batch.len() as u64;
        let answer = produce(&mut conn, topic, partition, batch, -1)?;
        ensure!(answer.error_code == 0, "produce: {answer:?}");
    }
    for partition in 0..3 {
        let fetched = fetch(&mut conn, topic, partition, 0)?;
        ensure!(fetched.error_code == 0, "fetch: {fetched:?}");
    }
    Ok((conn, bytes_in))
}

/// The value of `series`, which the page must have.
fn value(page: &MetricsPage, series: &str) -> f64 {
    page.value(series).unwrap_or_else(|| panic!("no {series}"))
}

/// Requests per API, and bytes and records per topic: each batch in once and out once.
fn check_requests_and_topic_traffic(page: &MetricsPage, topic: &str, bytes_in: u64) {
    let value = |series: &str| value(page, series);
    assert_eq!(value("laminar_kafka_requests_total{request=\"Produce\"}"), 3.0);
    assert_eq!(value("laminar_kafka_requests_total{request=\"Fetch\"}"), 3.0);
    assert_eq!(
        value("laminar_kafka_requests_total{request=\"CreateTopics\"}"),
        1.0
    );
    let in_series = format!("laminar_kafka_request_bytes_total{{topic=\"{topic}\",direction=\"in\"}}");
    let out_series = format!("laminar_kafka_request_bytes_total{{topic=\"{topic}\",direction=\"out\"}}");
    assert_eq!(value(&in_series), bytes_in as f64);
    assert_eq!(
        value(&out_series),
        bytes_in as f64,
        "fetched every batch back once"
    );
    let produced = format!("laminar_kafka_records_produced_total{{topic=\"{topic}\"}}");
    assert_eq!(value(&produced), 6.0);
    let fetched = format!("laminar_kafka_records_fetched_total{{topic=\"{topic}\"}}");
    assert_eq!(value(&fetched), 6.0);
}

/// Partitions per shard add up to those `/v1/status?partitions=true` lists (two shards: our
/// three partitions and those of __consumer_offsets), and plain `/v1/status` gives only their
/// counts; storage, connections and fdatasyncs are counted.
fn check_shards_and_storage(broker: &Broker, page: &MetricsPage, topic: &str, bytes_in: u64) -> Result<()> {
    let status = get_ok(broker.http_addr(), "/v1/status?partitions=true")?;
    let owned_total = status.matches("\"partition\": ").count() as f64;
    assert_eq!(
        status.matches(&format!("\"topic\": \"{topic}\"")).count(),
        3,
        "{status}"
    );
    assert_eq!(page.sum("laminar_kafka_partitions"), owned_total);
    let totals_only = get_ok(broker.http_addr(), "/v1/status")?;
    assert_eq!(totals_only.matches("\"partition\": ").count(), 0, "{totals_only}");
    let counted: f64 = totals_only
        .lines()
        .filter_map(|l| l.trim().strip_prefix("\"partition_count\": "))
        .map(|n| n.trim_end_matches(',').parse::<f64>().unwrap_or(f64::NAN))
        .sum();
    assert_eq!(counted, owned_total, "{totals_only}");
    assert!(page.value("laminar_kafka_partitions{shard=\"1\"}").is_some());
    assert!(page.sum("laminar_storage_log_bytes") >= bytes_in as f64);
    assert!(
        page.sum("laminar_kafka_connections_active") >= 1.0,
        "our connection is open"
    );
    // acks=all with laminar.fsync=always: each produce waited for an fdatasync.
    assert!(value(page, "laminar_storage_fdatasync_latency_seconds_count") >= 3.0);
    assert!(value(page, "laminar_storage_fdatasync_latency_seconds_sum") > 0.0);
    assert_eq!(value(page, "laminar_kafka_under_replicated_partitions"), 0.0);
    Ok(())
}

/// The produce latency histogram: cumulative buckets, +Inf equals the count (3 requests).
fn check_produce_latency_histogram(page: &MetricsPage) {
    let produce_buckets: Vec<f64> = page
        .samples
        .iter()
        .filter(|(s, _)| s.starts_with("laminar_kafka_request_latency_seconds_bucket{request=\"Produce\""))
        .map(|(_, v)| *v)
        .collect();
    assert!(produce_buckets.len() > 10, "{produce_buckets:?}");
    let inf = value(
        page,
        "laminar_kafka_request_latency_seconds_bucket{request=\"Produce\",le=\"+Inf\"}",
    );
    assert_eq!(
        inf,
        value(
            page,
            "laminar_kafka_request_latency_seconds_count{request=\"Produce\"}"
        )
    );
    assert_eq!(inf, 3.0);
    assert!(produce_buckets.iter().all(|b| *b <= inf));
}

#[test]
fn metrics_count_traffic_per_topic_api_and_shard() -> Result<()> {
    let broker = Broker::start_default()?;
    let topic = "metered";
    let (_open, bytes_in) = produce_and_fetch_every_partition(&broker, topic)?;
    let page = MetricsPage::parse(&get_ok(broker.http_addr(), "/metrics")?)?;
    for (family, kind) in FAMILIES {
        assert_eq!(page.types.get(family).map(String::as_str), Some(kind), "{family}");
    }
    check_requests_and_topic_traffic(&page, topic, bytes_in);
    check_shards_and_storage(&broker, &page, topic, bytes_in)?;
    check_produce_latency_histogram(&page);
    Ok(())
}

#[test]
fn status_and_readiness_describe_the_running_broker() -> Result<()> {
    let broker = Broker::start_default()?;
    let mut conn = WireConnection::connect(broker.addr())?;
    create_topic(&mut conn, "status-topic", 4)?;

    // The harness returns once one shard answers Kafka; the others may still be loading
    // (`__consumer_offsets`). Until every shard serves, readiness says "starting" with a 503.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let ready = request(broker.http_addr(), "GET", "/v1/status/ready")?;
        if ready.status == 200 {
            assert!(ready.body.contains("\"ready\""), "{}", ready.body);
            break;
        }
        assert_eq!(ready.status, 503, "{}", ready.body);
        assert!(ready.body.contains("\"starting\""), "{}", ready.body);
        assert!(
            std::time::Instant::now() < deadline,
            "never ready: {}",
            ready.body
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    let status = get_ok(broker.http_addr(), "/v1/status")?;
    for field in [
        "\"version\": \"",
        "\"node_id\": 1",
        "\"ready\": true",
        "\"uptime_seconds\"",
    ] {
        assert!(status.contains(field), "{field} missing in {status}");
    }
    assert_eq!(status.matches("\"shard\": ").count(), 2, "{status}");
    let detailed = get_ok(broker.http_addr(), "/v1/status?partitions=true")?;
    assert_eq!(
        detailed.matches("\"topic\": \"status-topic\"").count(),
        4,
        "{detailed}"
    );

    let missing = request(broker.http_addr(), "GET", "/nope")?;
    assert_eq!(missing.status, 404);
    let refused = request(broker.http_addr(), "DELETE", "/metrics")?;
    assert_eq!(refused.status, 405);
    assert!(refused.head.contains("Allow: GET"), "{}", refused.head);
    let huge = format!("/{}", "a".repeat(9000));
    assert_eq!(request(broker.http_addr(), "GET", &huge)?.status, 431);
    // The admin server still answers after the refusals.
    assert_eq!(
        request(broker.http_addr(), "GET", "/v1/status/ready")?.status,
        200
    );
    Ok(())
}

#[test]
fn a_taken_admin_port_stops_start_up_with_a_reason() -> Result<()> {
    let first = Broker::start_default()?;
    // The harness returns once one shard serves Kafka; shard 0 may not have bound the admin port
    // yet. Wait until it answers, or the second broker could take the port first.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while request(first.http_addr(), "GET", "/v1/status/ready").is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first broker's admin port never answered"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let taken = first.http_addr().to_string();
    let options = laminar_tests::BrokerOptions::default().with_override("laminar.http.listen", &taken);
    let error = match Broker::start(options) {
        Ok(_) => anyhow::bail!("a second broker started on the taken admin port {taken}"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        error.contains(&format!("laminar.http.listen: cannot listen on {taken}")),
        "{error}"
    );
    Ok(())
}
