use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};

use super::families::{render, RenderContext, FAMILIES};
use super::*;
use laminar_client::Compression;
use laminar_engine::io::FileRange;
use laminar_engine::partition::RecordBytes;
use laminar_protocol::fetch_response::{FetchAnswer, PartitionAnswer, TopicAnswer};
use laminar_protocol::records::{encode_batch, plain_record};

fn batch(records: usize) -> Bytes {
    let records: Vec<_> = (0..records)
        .map(|i| plain_record(i as i64, 1_000, None, Some(Bytes::from_static(b"value"))))
        .collect();
    let mut out = BytesMut::new();
    encode_batch(&mut out, &records, Compression::None).unwrap();
    out.freeze()
}

fn topic(name: &str) -> TopicName {
    TopicName(name.to_string().into())
}

fn produce_request(parts: &[(&str, i32, Bytes)]) -> ProduceRequest {
    let mut request = ProduceRequest::default();
    for (name, index, records) in parts {
        request.topic_data.push(
            TopicProduceData::default()
                .with_name(topic(name))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(*index)
                    .with_records(Some(records.clone()))]),
        );
    }
    request
}

#[test]
fn produce_counts_only_accepted_partitions() {
    let metrics = ShardMetrics::default();
    let (ok, refused) = (batch(3), batch(2));
    let request = produce_request(&[("a", 0, ok.clone()), ("b", 1, refused)]);
    let response = ProduceResponse::default().with_responses(vec![
        TopicProduceResponse::default()
            .with_name(topic("a"))
            .with_partition_responses(vec![PartitionProduceResponse::default().with_index(0)]),
        TopicProduceResponse::default()
            .with_name(topic("b"))
            .with_partition_responses(vec![PartitionProduceResponse::default()
                .with_index(1)
                .with_error_code(3)]),
    ]);
    metrics.count_produced(ProducedTraffic::of(&request), Some(&response));
    let topics = metrics.topics.borrow();
    assert_eq!(
        topics.get("a"),
        Some(&TopicTraffic {
            bytes_in: ok.len() as u64,
            records_in: 3,
            ..TopicTraffic::default()
        })
    );
    assert!(!topics.contains_key("b"), "refused partition not counted");
}

#[test]
fn fetch_counts_bytes_and_records_per_topic() {
    let metrics = ShardMetrics::default();
    let mut two_batches = BytesMut::from(&batch(4)[..]);
    two_batches.extend_from_slice(&batch(1));
    let two_batches = two_batches.freeze();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("log"), batch(3)).unwrap();
    let file = std::sync::Arc::new(std::fs::File::open(dir.path().join("log")).unwrap().into());
    let in_file = FileRange {
        file,
        position: 0,
        len: batch(3).len() as u64,
    };
    let response = FetchAnswer {
        topics: vec![TopicAnswer {
            name: "t".to_string(),
            partitions: vec![
                PartitionAnswer {
                    records: RecordBytes::Memory(vec![
                        two_batches.slice(..batch(4).len()),
                        two_batches.slice(batch(4).len()..),
                    ]),
                    ..Default::default()
                },
                PartitionAnswer {
                    partition: 1,
                    ..Default::default()
                },
                PartitionAnswer {
                    partition: 2,
                    records: RecordBytes::File {
                        range: in_file,
                        offsets: 7..10,
                    },
                    ..Default::default()
                },
            ],
            ..Default::default()
        }],
        ..FetchAnswer::default()
    };
    metrics.count_fetched(&response);
    metrics.count_fetched(&response);
    let traffic = metrics.topics.borrow()["t"];
    assert_eq!(traffic.bytes_out, 2 * (two_batches.len() + batch(3).len()) as u64);
    assert_eq!(traffic.records_out, 2 * (5 + 3));
}

/// A shard's snapshot with requests, fetches, a topic, a partition and write-behind counters.
/// What a shard's request counters hold, as a snapshot reports them.
fn request_snapshots(metrics: &ShardMetrics) -> BTreeMap<i16, RequestSnapshot> {
    metrics
        .requests
        .borrow()
        .iter()
        .map(|(k, s)| {
            let snapshot = RequestSnapshot {
                served: s.served.get(),
                failed: s.failed.get(),
                latency: s.latency.snapshot(),
            };
            (*k, snapshot)
        })
        .collect()
}

fn sample_write_behind() -> WriteBehindStats {
    WriteBehindStats {
        ranges_submitted: 5,
        ranges_completed: 4,
        bytes_written_back: 4 << 20,
        ranges_deferred: 2,
        in_flight: 1,
        ..WriteBehindStats::default()
    }
}

fn sample_prewrite() -> laminar_engine::io::PrewriteStats {
    laminar_engine::io::PrewriteStats {
        chains_submitted: 3,
        chains_completed: 2,
        chains_failed: 1,
        bytes_prewritten: 16 << 20,
        waits: 5,
        ..Default::default()
    }
}

fn sample_direct_appends() -> laminar_engine::io::DirectAppendStats {
    laminar_engine::io::DirectAppendStats {
        writes: 7,
        bytes_written: 3 << 20,
        waits: 2,
        cache_hits: 9,
        cache_misses: 4,
        cache_bytes: 5 << 20,
        buffers_out: 3,
    }
}

fn sample_shard() -> ShardSnapshot {
    let metrics = ShardMetrics::default();
    metrics.observe_request(Some(0), Duration::from_micros(300), true);
    metrics.observe_request(Some(0), Duration::from_micros(30), false);
    metrics.observe_request(Some(1), Duration::from_millis(2), true);
    metrics.observe_request(None, Duration::from_millis(2), false);
    metrics.observe_durability_wait(Duration::from_millis(1));
    (metrics.fdatasync_observer())(Duration::from_micros(250));
    metrics.count_produced(
        ProducedTraffic::of(&produce_request(&[("we\"ird", 0, batch(1))])),
        None,
    );
    for committed in [true, true, false] {
        metrics.count_transaction_completed(committed);
    }
    let requests = request_snapshots(&metrics);
    let topics = metrics.topics.borrow().clone();
    ShardSnapshot {
        shard: 0,
        requests,
        topics,
        fetch_paths: FetchPaths {
            sendfile: 1000,
            copied: 20,
            memory: 3,
        },
        durability_wait: metrics.durability_wait.snapshot(),
        fdatasync: metrics.fdatasync.snapshot(),
        connections_active: 2,
        connections_moved: 5,
        authentications: [7, 2],
        partition_count: 1,
        log_bytes: 4096,
        partitions: vec![PartitionSnapshot {
            topic: "t".into(),
            partition: 0,
            open: true,
            log_start_offset: 0,
            log_end_offset: 9,
            size_bytes: 4096,
        }],
        kafka_listener_bound: true,
        committed_offsets: Vec::new(),
        write_behind: Some(sample_write_behind()),
        prewrite: Some(sample_prewrite()),
        direct_appends: Some(sample_direct_appends()),
        files: FileCacheStats {
            files: 30,
            parked: 10,
            parks: 12,
            reopens: 7,
            refusals: 1,
        },
        replicas: crate::replication::ReplicaCounts {
            led: 4,
            followed: 6,
            under_replicated: 1,
        },
        transactions: TxnCounts {
            ongoing: 1,
            committed: metrics.transactions_committed.get(),
            aborted: metrics.transactions_aborted.get(),
            last_stable_offset_lag: 7,
        },
    }
}

/// The page for two identical shards (so every counter doubles).
fn rendered_page() -> String {
    let shard = sample_shard();
    let snapshot = BrokerSnapshot {
        shards: vec![shard.clone(), ShardSnapshot { shard: 1, ..shard }],
        descriptors: DescriptorsSnapshot {
            storage_max: 9_000,
            storage_used: 40,
            connections_max: 10_000,
            connections_used: 4,
            connections_refused_total: 3,
            connections_refused_per_ip_total: 4,
            connections_throttled_total: 5,
        },
        ..BrokerSnapshot::default()
    };
    let context = RenderContext {
        version: "0.1.0",
        uptime_seconds: 1.5,
        detail: SnapshotDetail::Partitions,
    };
    render(&snapshot, &context)
}

/// The value of the sample named exactly `prefix` (name and labels).
fn sample_value(page: &str, prefix: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(prefix)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {prefix} in\n{page}"))
        .parse()
        .unwrap()
}

#[test]
fn rendered_page_has_every_family_and_only_documented_ones() {
    let page = rendered_page();
    for family in FAMILIES {
        let header = format!("# TYPE {} ", family.name);
        assert!(page.contains(&header), "{}", family.name);
    }
    for sample in page.lines().filter(|l| !l.starts_with('#')) {
        let name = sample.split(['{', ' ']).next().unwrap();
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .filter(|base| FAMILIES.iter().any(|f| f.name == *base))
            .unwrap_or(name);
        assert!(FAMILIES.iter().any(|f| f.name == base), "undocumented {name}");
    }
}

#[test]
fn request_and_fetch_counters_add_up_over_shards() {
    let page = rendered_page();
    let line = |prefix: &str| sample_value(&page, prefix);
    assert_eq!(line("laminar_kafka_requests_total{request=\"Produce\"}"), 2.0);
    assert_eq!(line("laminar_kafka_fetch_bytes_total{path=\"sendfile\"}"), 2000.0);
    assert_eq!(line("laminar_kafka_fetch_bytes_total{path=\"copied\"}"), 40.0);
    assert_eq!(line("laminar_kafka_fetch_bytes_total{path=\"memory\"}"), 6.0);
    assert_eq!(
        line("laminar_kafka_request_errors_total{request=\"Produce\"}"),
        2.0
    );
    assert_eq!(
        line("laminar_kafka_request_latency_seconds_count{request=\"Produce\"}"),
        4.0
    );
    let fast_produce = "laminar_kafka_request_latency_seconds_bucket{request=\"Produce\",le=\"0.000032\"}";
    assert_eq!(line(fast_produce), 2.0);
    let all_fetches = "laminar_kafka_request_latency_seconds_bucket{request=\"Fetch\",le=\"+Inf\"}";
    assert_eq!(line(all_fetches), 2.0);
    assert_eq!(
        line("laminar_kafka_request_latency_seconds_sum{request=\"Fetch\"}"),
        0.004
    );
    assert_eq!(
        line("laminar_kafka_records_produced_total{topic=\"we\\\"ird\"}"),
        2.0
    );
    assert_eq!(line("laminar_kafka_connections_active{shard=\"1\"}"), 2.0);
    assert_eq!(line("laminar_kafka_connections_moved_total{shard=\"1\"}"), 5.0);
    assert_eq!(
        line("laminar_kafka_authentications_total{result=\"success\"}"),
        14.0
    );
    assert_eq!(
        line("laminar_kafka_authentications_total{result=\"failure\"}"),
        4.0
    );
    assert_eq!(line("laminar_kafka_connections_refused_total"), 3.0);
    assert_eq!(line("laminar_kafka_connections_refused_per_ip_total"), 4.0);
    assert_eq!(line("laminar_kafka_connections_throttled_total"), 5.0);
    assert_eq!(line("laminar_descriptors_max{share=\"storage\"}"), 9_000.0);
    assert_eq!(line("laminar_descriptors_used{share=\"connections\"}"), 4.0);
    assert_eq!(line("laminar_storage_files{shard=\"1\",state=\"open\"}"), 20.0);
    assert_eq!(line("laminar_storage_files{shard=\"0\",state=\"parked\"}"), 10.0);
    assert_eq!(
        line("laminar_storage_file_events_total{shard=\"0\",event=\"reopen\"}"),
        7.0
    );
    assert_eq!(line("laminar_uptime_seconds_total"), 1.5);
}

#[test]
fn storage_and_write_behind_figures_are_rendered_per_shard() {
    let page = rendered_page();
    let line = |prefix: &str| sample_value(&page, prefix);
    assert_eq!(line("laminar_storage_log_bytes{shard=\"0\"}"), 4096.0);
    assert_eq!(line("laminar_kafka_partitions{shard=\"0\"}"), 1.0);
    assert_eq!(line("laminar_storage_fdatasync_latency_seconds_count"), 2.0);
    assert_eq!(line("laminar_storage_fdatasync_latency_seconds_sum"), 0.0005);
    let writeback = |family: &str| line(&format!("laminar_storage_writeback_{family}{{shard=\"1\"}}"));
    assert_eq!(writeback("ranges_submitted_total"), 5.0);
    assert_eq!(writeback("ranges_completed_total"), 4.0);
    assert_eq!(writeback("ranges_failed_total"), 0.0);
    assert_eq!(writeback("ranges_deferred_total"), 2.0);
    assert_eq!(writeback("bytes_total"), 4194304.0);
    assert_eq!(writeback("in_flight"), 1.0);
    let prewrite = |family: &str| line(&format!("laminar_storage_prewrite_{family}{{shard=\"1\"}}"));
    assert_eq!(prewrite("bytes_total"), 16.0 * 1048576.0);
    assert_eq!(prewrite("chains_failed_total"), 1.0);
    assert_eq!(prewrite("waits_total"), 5.0);
    let direct = |family: &str| line(&format!("laminar_storage_direct_{family}{{shard=\"1\"}}"));
    assert_eq!(direct("writes_total"), 7.0);
    assert_eq!(direct("bytes_total"), 3.0 * 1048576.0);
    assert_eq!(direct("waits_total"), 2.0);
    assert_eq!(direct("buffers"), 3.0);
    let cache = |family: &str| line(&format!("laminar_cache_{family}{{shard=\"1\"}}"));
    assert_eq!(cache("hits_total"), 9.0);
    assert_eq!(cache("misses_total"), 4.0);
    assert_eq!(cache("bytes"), 5.0 * 1048576.0);
    assert_eq!(line("laminar_storage_durability_wait_seconds_count"), 2.0);
    assert_eq!(
        line("laminar_kafka_under_replicated_partitions"),
        2.0,
        "1 per shard"
    );
}

#[test]
fn transaction_counts_add_up_over_shards_into_one_sample() {
    let page = rendered_page();
    let line = |prefix: &str| sample_value(&page, prefix);
    assert_eq!(line("laminar_transactions_ongoing"), 2.0);
    assert_eq!(line("laminar_transactions_committed_total"), 4.0);
    assert_eq!(line("laminar_transactions_aborted_total"), 2.0);
    assert_eq!(line("laminar_transactions_last_stable_offset_lag"), 14.0);
}

#[test]
fn api_key_comes_from_the_frame_head() {
    assert_eq!(api_key_of(&[0, 1, 0, 12]), Some(1));
    assert_eq!(api_key_of(&[0]), None);
    assert_eq!(api_name(3), "Metadata");
    assert_eq!(api_name(999), "api_999");
}

#[test]
fn group_lag_is_end_minus_committed_and_unknown_ends_are_left_out() {
    let committed = |group: &str, topic: &str, partition: i32, offset: i64| GroupOffset {
        group: group.into(),
        topic: topic.into(),
        partition,
        offset,
    };
    let shards = vec![
        ShardSnapshot {
            committed_offsets: vec![committed("g", "t", 1, 4), committed("g", "gone", 0, 1)],
            ..ShardSnapshot::default()
        },
        ShardSnapshot {
            shard: 1,
            committed_offsets: vec![committed("g", "t", 0, 3), committed("h", "t", 1, 9)],
            ..ShardSnapshot::default()
        },
    ];
    let ends = BTreeMap::from([(("t".to_string(), 0), 10), (("t".to_string(), 1), 7)]);
    let lag: Vec<(String, i32, i64)> = group_lag(&shards, &ends)
        .into_iter()
        .map(|l| (format!("{}/{}", l.group, l.topic), l.partition, l.lag))
        .collect();
    assert_eq!(
        lag,
        vec![("g/t".into(), 0, 7), ("g/t".into(), 1, 3), ("h/t".into(), 1, 0)],
        "the unknown topic is left out; a commit past the end is lag 0"
    );
}

#[test]
fn a_default_page_has_group_lag_totals_and_no_series_per_partition() {
    let mut snapshot = BrokerSnapshot {
        shards: vec![sample_shard()],
        ..BrokerSnapshot::default()
    };
    let lag = |partition: i32, lag: i64| GroupLag {
        group: "g".into(),
        topic: "t".into(),
        partition,
        lag,
    };
    snapshot.group_lag = vec![lag(0, 5), lag(1, 2)];
    let context = |detail| RenderContext {
        version: "0.1.0",
        uptime_seconds: 1.0,
        detail,
    };
    let totals = render(&snapshot, &context(SnapshotDetail::Totals));
    assert_eq!(
        sample_value(&totals, "laminar_kafka_consumer_group_lag_sum{group=\"g\"}"),
        7.0
    );
    assert_eq!(
        sample_value(&totals, "laminar_kafka_consumer_group_lag_max{group=\"g\"}"),
        5.0
    );
    assert!(!totals.contains("laminar_kafka_consumer_group_lag{"), "{totals}");
    let detailed = render(&snapshot, &context(SnapshotDetail::Partitions));
    let one = "laminar_kafka_consumer_group_lag{group=\"g\",topic=\"t\",partition=\"1\"}";
    assert_eq!(sample_value(&detailed, one), 2.0);
}
