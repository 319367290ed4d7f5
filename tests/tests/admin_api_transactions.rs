//! The admin HTTP API's view of transactions on a real broker, driven by librdkafka's
//! transactional producer (the client the console's users run): one transaction committed and
//! one left open. `GET /v1/transactions` lists both with their state, producer and partitions,
//! `?state=` filters them, a topic's partitions show the last stable offset the open one holds
//! back, and the overview counts them.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use laminar_tests::http::{get_ok, request, request_with_body};
use laminar_tests::rdkafka_client::client_config;
use laminar_tests::Broker;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{json, Value};

const TOPIC: &str = "payments";
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the committed transaction's markers may take to complete it.
const SETTLE_WITHIN: Duration = Duration::from_secs(15);

/// A transactional producer of `transactional_id` that has begun a transaction and written
/// `values` to `partition`, all acknowledged; the transaction is still open.
fn open_transaction(
    broker: &Broker,
    transactional_id: &str,
    partition: i32,
    values: &[&str],
) -> Result<BaseProducer> {
    let producer: BaseProducer = client_config(&broker.bootstrap())
        .set("transactional.id", transactional_id)
        .set("transaction.timeout.ms", "60000")
        .create()
        .context("creating a transactional producer")?;
    producer.init_transactions(CLIENT_TIMEOUT)?;
    producer.begin_transaction()?;
    for value in values {
        let record = BaseRecord::<(), str>::to(TOPIC)
            .partition(partition)
            .payload(*value);
        producer.send(record).map_err(|(error, _)| error)?;
    }
    producer.flush(CLIENT_TIMEOUT)?;
    Ok(producer)
}

fn transactions(http: std::net::SocketAddr, query: &str) -> Result<Vec<Value>> {
    let listed: Value = serde_json::from_str(&get_ok(http, &format!("/v1/transactions{query}"))?)?;
    Ok(listed["transactions"].as_array().cloned().unwrap_or_default())
}

fn ids(listed: &[Value]) -> Vec<&str> {
    listed
        .iter()
        .filter_map(|t| t["transactional_id"].as_str())
        .collect()
}

/// The listed transactions once `settled` has completed its commit (its markers are written
/// after EndTxn answers).
fn once_committed(http: std::net::SocketAddr) -> Result<Vec<Value>> {
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        let listed = transactions(http, "")?;
        let settled = listed.iter().find(|t| t["transactional_id"] == "settled");
        if settled.is_some_and(|t| t["state"] == "CompleteCommit") || Instant::now() > deadline {
            return Ok(listed);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn transactions_are_listed_filtered_and_hold_the_last_stable_offset_back() -> Result<()> {
    let broker = Broker::start_default()?;
    let http = broker.http_addr();
    let body = format!(r#"{{"name":"{TOPIC}","partitions":2}}"#);
    let created = request_with_body(
        http,
        "POST",
        "/v1/topics",
        Some("application/json"),
        body.as_bytes(),
    )?;
    assert_eq!(created.status, 201, "{}", created.body);
    let settled = open_transaction(&broker, "settled", 0, &["paid"])?;
    settled.commit_transaction(CLIENT_TIMEOUT)?;
    let _open = open_transaction(&broker, "open", 1, &["pending-1", "pending-2"])?;

    let listed = once_committed(http)?;
    assert_eq!(ids(&listed), ["open", "settled"], "sorted by id");
    let (open, settled) = (&listed[0], &listed[1]);
    assert_eq!(settled["state"], "CompleteCommit", "{settled}");
    assert_eq!(settled["partitions"], json!([]), "completed: none in progress");
    assert_eq!(open["state"], "Ongoing", "{open}");
    assert_eq!(open["partitions"], json!([{ "topic": TOPIC, "partition": 1 }]));
    assert_eq!(open["timeout_ms"], 60_000);
    assert!(open["producer_id"].as_i64() >= Some(0), "{open}");
    assert_ne!(open["producer_id"], settled["producer_id"]);
    assert!(open["producer_epoch"].as_i64() >= Some(0), "{open}");
    let started = open["start_ms"].as_i64().unwrap_or(-1);
    assert!(
        started > 0 && open["last_update_ms"].as_i64() >= Some(started),
        "{open}"
    );

    assert_eq!(ids(&transactions(http, "?state=Ongoing")?), ["open"]);
    assert_eq!(ids(&transactions(http, "?state=CompleteCommit")?), ["settled"]);
    assert!(transactions(http, "?state=PrepareAbort")?.is_empty());
    for (path, status) in [
        ("/v1/transactions?state=ongoing", 400),
        ("/v1/transactions?producer=1", 400),
    ] {
        assert_eq!(request(http, "GET", path)?.status, status, "{path}");
    }
    let refused = request(http, "DELETE", "/v1/transactions")?;
    assert_eq!((refused.status, refused.head.contains("Allow: GET")), (405, true));

    let topic: Value = serde_json::from_str(&get_ok(http, &format!("/v1/topics/{TOPIC}"))?)?;
    let offsets = |p: usize| {
        let partition = &topic["partitions"][p];
        (
            partition["last_stable_offset"].clone(),
            partition["high_watermark"].clone(),
        )
    };
    // Partition 0: the record and its COMMIT marker, all stable. Partition 1: the open
    // transaction's two records, none stable.
    assert_eq!(offsets(0), (2.into(), 2.into()), "{topic}");
    assert_eq!(offsets(1), (0.into(), 2.into()), "{topic}");

    let overview: Value = serde_json::from_str(&get_ok(http, "/v1/overview")?)?;
    let counts = &overview["transactions"];
    assert_eq!(
        (counts["ongoing"].clone(), counts["committed_total"].clone()),
        (1.into(), 1.into()),
        "{overview}"
    );
    assert_eq!(counts["aborted_total"], 0, "{overview}");
    assert_eq!(counts["last_stable_offset_lag"], 2, "{overview}");
    Ok(())
}
