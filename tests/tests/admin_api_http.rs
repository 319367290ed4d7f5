//! The JSON admin API under `/v1/` and the console's files on a real broker: topics created,
//! grown, browsed and deleted over HTTP, and every kind of bad request answered with a 4xx while
//! the broker keeps serving.

use anyhow::Result;
use laminar_tests::http::{get_ok, request, request_with_body, HttpAnswer};
use laminar_tests::wire::{produce, record_batch, WireConnection};
use laminar_tests::Broker;
use serde_json::Value;

const JSON: Option<&str> = Some("application/json");

fn json(answer: &HttpAnswer) -> Value {
    serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("{e}: {}", answer.body))
}

#[test]
fn topics_are_created_grown_browsed_and_deleted_over_http() -> Result<()> {
    let broker = Broker::start_default()?;
    let http = broker.http_addr();
    let body = br#"{"name":"web","partitions":2,"configs":{"retention.ms":"60000"}}"#;
    let created = request_with_body(http, "POST", "/v1/topics", JSON, body)?;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(json(&created)["partitions"], 2);
    let again = request_with_body(http, "POST", "/v1/topics", JSON, body)?;
    assert_eq!(again.status, 409, "{}", again.body);
    let mut conn = WireConnection::connect(broker.addr())?;
    let answer = produce(
        &mut conn,
        "web",
        1,
        record_batch(&[b"one", b"two"], 1_700_000_000_000)?,
        -1,
    )?;
    assert_eq!(answer.error_code, 0);

    let listed: Value = serde_json::from_str(&get_ok(http, "/v1/topics")?)?;
    let web = listed["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "web")
        .cloned();
    let web = web.expect("web listed");
    assert_eq!(
        (web["partitions"].clone(), web["records"].clone()),
        (2.into(), 2.into())
    );
    assert_eq!(web["configs"]["retention.ms"], "60000");

    let described: Value = serde_json::from_str(&get_ok(http, "/v1/topics/web")?)?;
    assert_eq!(described["partitions"][1]["high_watermark"], 2);
    assert_eq!(
        described["partitions"][0]["high_watermark"], 0,
        "never written: 0"
    );
    assert_eq!(described["partitions"][1]["leader"], 1);
    let records: Value = serde_json::from_str(&get_ok(http, "/v1/topics/web/records?partition=1&offset=1")?)?;
    assert_eq!(records["records"].as_array().unwrap().len(), 1);
    assert_eq!(records["records"][0]["value"]["text"], "two");
    assert_eq!(records["records"][0]["value"]["hex"], "74776f");
    let by_time = get_ok(
        http,
        "/v1/topics/web/records?partition=1&timestamp=1700000000000&limit=5",
    )?;
    assert_eq!(serde_json::from_str::<Value>(&by_time)?["from_offset"], 0);

    let grown = request_with_body(http, "POST", "/v1/topics/web/partitions", JSON, br#"{"count":4}"#)?;
    assert_eq!(grown.status, 200, "{}", grown.body);
    let shrink = request_with_body(http, "POST", "/v1/topics/web/partitions", JSON, br#"{"count":3}"#)?;
    assert_eq!(shrink.status, 422, "{}", shrink.body);
    let deleted = request(http, "DELETE", "/v1/topics/web")?;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    assert_eq!(request(http, "GET", "/v1/topics/web")?.status, 404);
    assert_eq!(request(http, "DELETE", "/v1/topics/web")?.status, 404);
    Ok(())
}

/// A bad request: method, path, content type, body, and the status it must get.
type BadRequest = (
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static [u8],
    u16,
);

const BAD_REQUESTS: &[BadRequest] = &[
    ("POST", "/v1/topics", None, br#"{"name":"x"}"#, 415),
    ("POST", "/v1/topics", Some("text/plain"), br#"{"name":"x"}"#, 415),
    ("POST", "/v1/topics", JSON, b"{not json", 400),
    ("POST", "/v1/topics", JSON, br#"{"name":"x","surprise":1}"#, 400),
    ("POST", "/v1/topics", JSON, br#"{"name":"bad name"}"#, 422),
    (
        "POST",
        "/v1/topics",
        JSON,
        br#"{"name":"x","partitions":-5}"#,
        422,
    ),
    ("GET", "/v1/topics?bogus=1", None, b"", 400),
    ("GET", "/v1/topics/none/records?partition=0", None, b"", 404),
    ("GET", "/v1/topics/none/records", None, b"", 400),
    ("GET", "/v1/topics/none/records?partition=abc", None, b"", 400),
    (
        "GET",
        "/v1/topics/none/records?partition=0&partition=1",
        None,
        b"",
        400,
    ),
    (
        "GET",
        "/v1/topics/none/records?partition=0&limit=100000",
        None,
        b"",
        400,
    ),
    ("GET", "/v1/topics/%zz", None, b"", 400),
    ("GET", "/v1/groups/nobody", None, b"", 404),
    (
        "POST",
        "/v1/groups/g/reset-offsets",
        JSON,
        br#"{"topic":"t","to":"sideways"}"#,
        400,
    ),
    ("PUT", "/v1/topics", None, b"", 405),
    ("GET", "/v1/nothing", None, b"", 404),
    ("GET", "/ui/nothing.js", None, b"", 404),
    ("POST", "/ui", None, b"", 405),
];

#[test]
fn bad_requests_get_a_4xx_and_the_broker_keeps_serving() -> Result<()> {
    let broker = Broker::start_default()?;
    let http = broker.http_addr();
    for (method, path, content_type, body, status) in BAD_REQUESTS {
        let answer = request_with_body(http, method, path, *content_type, body)?;
        assert_eq!(answer.status, *status, "{method} {path}: {}", answer.body);
        if path.starts_with("/v1/") {
            assert!(
                json(&answer)["error"].is_string(),
                "{method} {path}: {}",
                answer.body
            );
        }
    }
    let too_large = request_with_body(http, "POST", "/v1/topics", JSON, &vec![b' '; 70 * 1024])?;
    assert_eq!(too_large.status, 413);
    assert_eq!(
        request(http, "GET", "/v1/status/ready")?.status,
        200,
        "still serving"
    );
    Ok(())
}

#[test]
fn the_console_and_the_overview_are_served() -> Result<()> {
    let broker = Broker::start_default()?;
    let http = broker.http_addr();
    let page = request(http, "GET", "/ui")?;
    assert_eq!(page.status, 200);
    assert!(page.head.contains("Content-Type: text/html"), "{}", page.head);
    assert!(page.body.contains("/ui/app.js"));
    assert!(get_ok(http, "/ui/app.js")?.contains("/v1/overview"));
    let overview: Value = serde_json::from_str(&get_ok(http, "/v1/overview")?)?;
    assert_eq!(overview["brokers"].as_array().map(Vec::len), Some(1));
    assert!(
        overview["log_dirs"][0]["free_bytes"].as_u64().is_some(),
        "{overview}"
    );
    assert!(
        overview["descriptors"]["open"].as_u64().unwrap_or(0) > 0,
        "{overview}"
    );
    let history: Value = serde_json::from_str(&get_ok(http, "/v1/history")?)?;
    assert_eq!(history["samples_max"], 300);
    Ok(())
}

/// In a cluster the API goes through the quorum like a Kafka client: a topic created on one
/// node has its replicas over all three and an ISR, as every node describes it; deleting it on
/// another node removes it everywhere.
#[test]
fn in_a_cluster_topics_go_through_the_quorum() -> Result<()> {
    let mut cluster = laminar_tests::Cluster::start(3, 3000, laminar_tests::Cluster::node_options())?;
    let body = br#"{"name":"spread","partitions":3,"replication_factor":3}"#;
    let created = request_with_body(cluster.node(1).http_addr(), "POST", "/v1/topics", JSON, body)?;
    assert_eq!(created.status, 201, "{}", created.body);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let described = loop {
        let answer = request(cluster.node(2).http_addr(), "GET", "/v1/topics/spread")?;
        let value = (answer.status == 200).then(|| json(&answer));
        let full = |v: &Value| {
            let partitions = v["partitions"].as_array().cloned().unwrap_or_default();
            partitions.len() == 3
                && partitions
                    .iter()
                    .all(|p| p["isr"].as_array().map(Vec::len) == Some(3))
        };
        match value {
            Some(v) if full(&v) => break v,
            _ if std::time::Instant::now() > deadline => panic!("not replicated: {}", answer.body),
            _ => std::thread::sleep(std::time::Duration::from_millis(200)),
        }
    };
    for partition in described["partitions"].as_array().unwrap() {
        let mut replicas: Vec<i64> = partition["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(Value::as_i64)
            .collect();
        replicas.sort();
        assert_eq!(replicas, vec![1, 2, 3], "{partition}");
    }
    let overview: Value = serde_json::from_str(&get_ok(cluster.node(3).http_addr(), "/v1/overview")?)?;
    assert_eq!(
        overview["brokers"].as_array().map(Vec::len),
        Some(3),
        "{overview}"
    );
    assert_eq!(overview["under_replicated_partitions"], 0, "{overview}");
    let deleted = request(cluster.node(3).http_addr(), "DELETE", "/v1/topics/spread")?;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    Ok(())
}
