"""kafka-python 3.x (pure Python; it infers the broker version from ApiVersions) against a real
laminar broker: topics (create with configs and validate-only, list, describe, describe configs,
alter, grow, delete, DescribeCluster), produce with keys, headers and timestamps and read back
in order, every codec kafka-python has, seek by offset and by timestamp, watermarks,
DeleteRecords, and kill -9 then restart keeping every acks=all record. Idempotence is off here
(kafka-python turns it on by default); test_groups_idempotence.py covers it."""

import time
import urllib.request

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource
from kafka.errors import TopicAlreadyExistsError

from laminar_broker import BrokerProcess, free_port
from records import BASE_TIMESTAMP_MS, Rec, assert_matches, sample_records

TIMEOUT_S = 15


def admin(broker):
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)


def create_topic(broker, name, partitions=1, configs=None):
    client = admin(broker)
    try:
        client.create_topics({name: {"num_partitions": partitions, "replication_factor": 1,
                                     "configs": configs or {}}}, timeout_ms=TIMEOUT_S * 1000)
    finally:
        client.close()


def produce(broker, topic, records, partition=0, **config):
    settings = {"acks": "all", "enable_idempotence": False, "linger_ms": 5, **config}
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, **settings)
    try:
        futures = [producer.send(topic, value=r.value, key=r.key, headers=r.headers, partition=partition,
                                 timestamp_ms=r.timestamp_ms) for r in records]
        producer.flush(TIMEOUT_S * 2)
        metadata = [f.get(TIMEOUT_S) for f in futures]
        assert all(m.partition == partition for m in metadata)
        return [m.offset for m in metadata]
    finally:
        producer.close()


def consumer(broker):
    return KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                         fetch_max_wait_ms=100, request_timeout_ms=TIMEOUT_S * 1000 + 1000)


def poll_records(c, count):
    got, deadline = [], time.monotonic() + TIMEOUT_S
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} records arrived"
        for batch in c.poll(timeout_ms=200).values():
            got.extend((r.offset, Rec(r.key, r.value, list(r.headers), r.timestamp)) for r in batch)
    return got


def read(broker, topic, count, partition=0, offset=0):
    c = consumer(broker)
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        c.seek(tp, offset)
        return poll_records(c, count)
    finally:
        c.close()


def test_produce_consume_roundtrip_keeps_keys_headers_timestamps_and_order(broker, topic_name):
    create_topic(broker, topic_name)
    records = sample_records(300)
    assert produce(broker, topic_name, records) == list(range(300))
    assert_matches(records, read(broker, topic_name, 300))


def test_topics_create_list_describe_alter_grow_delete(broker, topic_name):
    client = admin(broker)
    try:
        client.create_topics({topic_name: {"num_partitions": 2, "replication_factor": 1}}, validate_only=True)
        assert topic_name not in client.list_topics()

        create_topic(broker, topic_name, 2, {"retention.ms": "3600000"})
        assert topic_name in client.list_topics()
        [described] = client.describe_topics([topic_name])
        assert described["error_code"] == 0
        assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1]

        with pytest.raises(TopicAlreadyExistsError):
            client.create_topics({topic_name: {"num_partitions": 1, "replication_factor": 1}})

        resource = ConfigResource("TOPIC", topic_name)
        configs = client.describe_configs([resource], config_filter="all")["topic"][topic_name]
        assert configs["retention.ms"]["value"] == "3600000"
        assert configs["cleanup.policy"]["value"] == "delete"
        assert configs["segment.bytes"]["value"] == "1073741824"

        client.alter_configs([ConfigResource("TOPIC", topic_name, configs={"retention.ms": "7200000"})])
        configs = client.describe_configs([resource], config_filter="all")["topic"][topic_name]
        assert configs["retention.ms"]["value"] == "7200000"

        client.create_partitions({topic_name: 3})
        [described] = client.describe_topics([topic_name])
        assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2]

        client.delete_topics([topic_name])
        assert topic_name not in client.list_topics()
    finally:
        client.close()


def test_describe_cluster_names_this_broker(broker):
    client = admin(broker)
    try:
        cluster = client.describe_cluster()
        [node] = cluster["brokers"]
        assert f"{node['host']}:{node['port']}" == broker.bootstrap
        assert cluster["controller_id"] == node["broker_id"]
        assert cluster["cluster_id"]
    finally:
        client.close()


def test_broker_version_is_inferred_as_modern(broker):
    # kafka-python maps the advertised max versions to a Kafka release; an old answer would turn
    # off record batches v2, headers and zstd.
    c = consumer(broker)
    try:
        # The consumer resolves the version from ApiVersions at construction.
        version = c.config["api_version"]
        assert version is not None and version >= (2, 1), f"broker inferred as Kafka {version}"
    finally:
        c.close()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_roundtrips(broker, topic_name, codec):
    create_topic(broker, topic_name)
    records = sample_records(300, compressible=True)
    assert produce(broker, topic_name, records, compression_type=codec, linger_ms=50) == list(range(300))
    assert_matches(records, read(broker, topic_name, 300))


def test_seek_by_offset_and_timestamp_and_watermarks(broker, topic_name):
    create_topic(broker, topic_name)
    records = sample_records(100)
    produce(broker, topic_name, records, linger_ms=50)
    c = consumer(broker)
    try:
        tp = TopicPartition(topic_name, 0)
        assert c.beginning_offsets([tp])[tp] == 0
        assert c.end_offsets([tp])[tp] == 100
        assert c.offsets_for_times({tp: BASE_TIMESTAMP_MS + 41_500})[tp].offset == 42
        assert c.offsets_for_times({tp: BASE_TIMESTAMP_MS})[tp].offset == 0
        assert c.offsets_for_times({tp: BASE_TIMESTAMP_MS + 10**6})[tp] is None
        c.assign([tp])
        c.seek(tp, 57)  # inside a batch
        assert_matches(records[57:60], poll_records(c, 3)[:3], 57)
        c.seek(tp, c.offsets_for_times({tp: BASE_TIMESTAMP_MS + 90_000})[tp].offset)
        assert_matches(records[90:], poll_records(c, 10), 90)
        c.seek_to_beginning(tp)
        assert poll_records(c, 1)[0][0] == 0
    finally:
        c.close()


def test_delete_records_moves_low_watermark(broker, topic_name):
    create_topic(broker, topic_name)
    records = sample_records(50)
    produce(broker, topic_name, records)
    client = admin(broker)
    try:
        tp = TopicPartition(topic_name, 0)
        client.delete_records({tp: 20})
    finally:
        client.close()
    c = consumer(broker)
    try:
        assert c.beginning_offsets([tp])[tp] == 20
        assert c.end_offsets([tp])[tp] == 50
    finally:
        c.close()
    assert_matches(records[20:], read(broker, topic_name, 30, offset=20), 20)


def test_kill9_then_restart_keeps_every_acks_all_record(own_broker, topic_name):
    create_topic(own_broker, topic_name, 2)
    records = sample_records(1000)
    assert produce(own_broker, topic_name, records, partition=0) == list(range(1000))
    assert produce(own_broker, topic_name, records, partition=1, compression_type="gzip") == list(range(1000))
    own_broker.kill9()
    own_broker.restart()
    for partition in (0, 1):
        assert_matches(records, read(own_broker, topic_name, 1000, partition=partition))
    assert produce(own_broker, topic_name, records[:5]) == list(range(1000, 1005))


def _gauge(http, name):
    with urllib.request.urlopen(f"http://{http}/metrics", timeout=TIMEOUT_S) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"/metrics has no {name}")


def test_a_consumer_of_many_partitions_reads_them_all_through_an_incremental_fetch_session(topic_name):
    """kafka-python opens a KIP-227 fetch session (a full fetch at epoch 0), then names only the
    partitions whose position moved; the broker answers only those with new records or a new
    high watermark. Every record still arrives, in order, once, in both rounds."""
    http = f"127.0.0.1:{free_port()}"
    process = BrokerProcess(overrides={"laminar.http.listen": http})
    try:
        partitions = 24
        create_topic(process, topic_name, partitions=partitions)
        first = {p: produce(process, topic_name, sample_records(3), partition=p) for p in range(partitions)}
        assert all(offsets == [0, 1, 2] for offsets in first.values())
        c = consumer(process)
        try:
            c.assign([TopicPartition(topic_name, p) for p in range(partitions)])
            c.seek_to_beginning()
            got = poll_partitions(c, partitions * 3)
            assert {p: [o for o, _ in got[p]] for p in got} == {p: [0, 1, 2] for p in range(partitions)}
            assert _gauge(http, "laminar_kafka_fetch_sessions") >= 1, "the consumer fetches in a session"
            # A second round into a few partitions: the session's fetches find exactly those.
            for p in (3, 17, 23):
                assert produce(process, topic_name, sample_records(2), partition=p) == [3, 4]
            got = poll_partitions(c, 6)
            assert {p: [o for o, _ in got[p]] for p in got} == {3: [3, 4], 17: [3, 4], 23: [3, 4]}
        finally:
            c.close()
    finally:
        process.stop()


def poll_partitions(c, count):
    """`count` records from any partitions: (offset, partition) lists by partition."""
    got, seen, deadline = {}, 0, time.monotonic() + TIMEOUT_S
    while seen < count:
        assert time.monotonic() < deadline, f"only {seen} of {count} records arrived"
        for tp, batch in c.poll(timeout_ms=200).items():
            got.setdefault(tp.partition, []).extend((r.offset, tp.partition) for r in batch)
            seen += len(batch)
    return got
