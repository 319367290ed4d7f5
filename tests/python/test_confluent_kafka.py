"""confluent-kafka (librdkafka in its wheel) against a real laminar broker: topics (create with
configs and validate-only, list, describe, incrementally alter, grow, delete), produce with keys,
headers and timestamps and read everything back in order, every codec, seek by offset and by
timestamp, watermarks, DescribeCluster, and kill -9 then restart keeping every acks=all record."""

import time

import pytest
from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                   NewTopic, ResourceType)

from records import BASE_TIMESTAMP_MS, Rec, assert_matches, sample_records

TIMEOUT_S = 15


def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})


def create_topic(broker, name, partitions=1, config=None):
    client = admin(broker)  # must outlive the future: a destroyed handle fails it
    futures = client.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=TIMEOUT_S)
    futures[name].result(TIMEOUT_S)


def produce(broker, topic, records, partition=0, **config):
    """Produces every record with acks=all and returns the acked offsets in send order."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4", "acks": "all",
                         "enable.idempotence": False, "linger.ms": 5, **config})
    acked = [None] * len(records)
    errors = []

    def report(index):
        def on_delivery(err, msg):
            if err is not None:
                errors.append((index, err))
            else:
                assert msg.partition() == partition
                acked[index] = msg.offset()
        return on_delivery

    for i, rec in enumerate(records):
        producer.produce(topic, value=rec.value, key=rec.key, partition=partition, timestamp=rec.timestamp_ms,
                         headers=rec.headers, on_delivery=report(i))
        producer.poll(0)
    remaining = producer.flush(TIMEOUT_S * 2)
    assert remaining == 0, f"{remaining} records not delivered"
    assert not errors, f"delivery errors: {errors[:3]}"
    return acked


def consumer(broker):
    # confluent-kafka insists on a group.id; assign() with explicit offsets never uses the group.
    return Consumer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                     "group.id": "laminar-tests-unused", "enable.auto.commit": False,
                     "enable.auto.offset.store": False, "fetch.wait.max.ms": 100})


def poll_records(c, count):
    got, deadline = [], time.monotonic() + TIMEOUT_S
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} records arrived"
        msg = c.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        ts_type, ts = msg.timestamp()
        got.append((msg.offset(), Rec(msg.key(), msg.value(), msg.headers() or [], ts)))
    return got


def read(broker, topic, count, partition=0, offset=OFFSET_BEGINNING):
    c = consumer(broker)
    try:
        c.assign([TopicPartition(topic, partition, offset)])
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
    # validate_only creates nothing
    futures = client.create_topics([NewTopic(topic_name, 2, 1)], validate_only=True)
    futures[topic_name].result(TIMEOUT_S)
    assert topic_name not in client.list_topics(timeout=TIMEOUT_S).topics

    create_topic(broker, topic_name, 2, {"retention.ms": "3600000", "cleanup.policy": "delete"})
    listed = client.list_topics(timeout=TIMEOUT_S).topics[topic_name]
    assert listed.error is None
    assert sorted(listed.partitions) == [0, 1]

    with pytest.raises(KafkaException) as exists:
        client.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(TIMEOUT_S)
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    resource = ConfigResource(ResourceType.TOPIC, topic_name)
    described = client.describe_configs([resource])[resource].result(TIMEOUT_S)
    assert described["retention.ms"].value == "3600000"
    assert not described["retention.ms"].is_default
    assert described["segment.bytes"].value == "1073741824"  # a default, listed unasked
    assert described["max.message.bytes"].value == "1048588"

    alter = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "2000000", incremental_operation=AlterConfigOpType.SET)])
    client.incremental_alter_configs([alter])[alter].result(TIMEOUT_S)
    described = client.describe_configs([resource])[resource].result(TIMEOUT_S)
    assert described["retention.ms"].value == "7200000"
    assert described["max.message.bytes"].value == "2000000"
    assert described["cleanup.policy"].value == "delete"  # incremental keeps other overrides

    remove = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])
    client.incremental_alter_configs([remove])[remove].result(TIMEOUT_S)
    described = client.describe_configs([resource])[resource].result(TIMEOUT_S)
    assert described["max.message.bytes"].value == "1048588"
    assert described["max.message.bytes"].is_default

    # An unknown key is refused whole with INVALID_CONFIG, naming the key; nothing changes.
    unknown = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("no.such.topic.config", "1", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        client.incremental_alter_configs([unknown])[unknown].result(TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "no.such.topic.config" in refused.value.args[0].str()
    described = client.describe_configs([resource])[resource].result(TIMEOUT_S)
    assert described["retention.ms"].value == "7200000"

    client.create_partitions([NewPartitions(topic_name, 4)])[topic_name].result(TIMEOUT_S)
    assert sorted(client.list_topics(timeout=TIMEOUT_S).topics[topic_name].partitions) == [0, 1, 2, 3]

    client.delete_topics([topic_name], operation_timeout=TIMEOUT_S)[topic_name].result(TIMEOUT_S)
    assert topic_name not in client.list_topics(timeout=TIMEOUT_S).topics


def test_describe_cluster_names_this_broker(broker):
    client = admin(broker)
    cluster = client.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    assert len(cluster.nodes) == 1
    node = cluster.nodes[0]
    assert (node.host, str(node.port)) == tuple(broker.bootstrap.split(":"))
    assert cluster.controller is not None and cluster.controller.id == node.id
    assert cluster.cluster_id


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_roundtrips(broker, topic_name, codec):
    create_topic(broker, topic_name)
    records = sample_records(300, compressible=True)
    offsets = produce(broker, topic_name, records, **{"compression.type": codec, "linger.ms": 50})
    assert offsets == list(range(300))
    assert_matches(records, read(broker, topic_name, 300))


def test_seek_by_offset_and_timestamp_and_watermarks(broker, topic_name):
    create_topic(broker, topic_name)
    records = sample_records(100)
    produce(broker, topic_name, records, **{"linger.ms": 50})
    c = consumer(broker)
    try:
        tp = TopicPartition(topic_name, 0)
        assert c.get_watermark_offsets(tp, timeout=TIMEOUT_S) == (0, 100)
        query = [TopicPartition(topic_name, 0, BASE_TIMESTAMP_MS + 41_500)]
        assert c.offsets_for_times(query, timeout=TIMEOUT_S)[0].offset == 42
        query = [TopicPartition(topic_name, 0, BASE_TIMESTAMP_MS - 1)]
        assert c.offsets_for_times(query, timeout=TIMEOUT_S)[0].offset == 0
        query = [TopicPartition(topic_name, 0, BASE_TIMESTAMP_MS + 10**6)]
        assert c.offsets_for_times(query, timeout=TIMEOUT_S)[0].offset == OFFSET_END

        c.assign([TopicPartition(topic_name, 0, 57)])  # inside a batch
        assert_matches(records[57:60], poll_records(c, 3), 57)
        c.seek(TopicPartition(topic_name, 0, 10))
        assert_matches(records[10:12], poll_records(c, 2), 10)
        by_time = c.offsets_for_times([TopicPartition(topic_name, 0, BASE_TIMESTAMP_MS + 80_000)], timeout=TIMEOUT_S)
        c.seek(by_time[0])
        assert_matches(records[80:], poll_records(c, 20), 80)
    finally:
        c.close()


def test_delete_records_moves_low_watermark(broker, topic_name):
    create_topic(broker, topic_name)
    records = sample_records(50)
    produce(broker, topic_name, records)
    client = admin(broker)
    futures = client.delete_records([TopicPartition(topic_name, 0, 20)], request_timeout=TIMEOUT_S)
    result = list(futures.values())[0].result(TIMEOUT_S)
    assert result.low_watermark == 20
    c = consumer(broker)
    try:
        assert c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=TIMEOUT_S) == (20, 50)
    finally:
        c.close()
    assert_matches(records[20:], read(broker, topic_name, 30), 20)


def test_kill9_then_restart_keeps_every_acks_all_record(own_broker, topic_name):
    create_topic(own_broker, topic_name, 2)
    records = sample_records(1000)
    assert produce(own_broker, topic_name, records, partition=0) == list(range(1000))
    assert produce(own_broker, topic_name, records, partition=1, **{"compression.type": "lz4"}) == list(range(1000))
    own_broker.kill9()
    own_broker.restart()
    for partition in (0, 1):
        assert_matches(records, read(own_broker, topic_name, 1000, partition=partition))
    assert produce(own_broker, topic_name, records[:5]) == list(range(1000, 1005))
