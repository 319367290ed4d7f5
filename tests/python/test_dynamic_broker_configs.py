"""Dynamic broker configs, as `kafka-configs --alter --entity-type brokers [--entity-default |
--entity-name <id>]` sends them: a default for every broker and a value for one broker change
topic defaults while the brokers run, DescribeConfigs names each value's source as Kafka does, a
static key is refused, and the values survive a restart. On a three-node cluster the default
reaches every broker through the metadata log.

One broker's values go through confluent-kafka's AdminClient. librdkafka and kafka-python cannot
name the default (an empty broker resource name), which Kafka's Java tools can: those go through
`laminar cluster config --entity-default`, which sends the same IncrementalAlterConfigs."""

import subprocess
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from laminar_broker import BrokerProcess, ClusterProcess, laminar_cli

TIMEOUT_S = 30
# The delay within which every broker applies a change made through another one.
APPLIED_WITHIN_S = 15
SMALL = b"x" * 2000
DYNAMIC_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
DYNAMIC_BROKER = ConfigSource.DYNAMIC_BROKER_CONFIG


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})


def alter(bootstrap, broker, key, value):
    """IncrementalAlterConfigs of one key of broker resource `broker` ("" for the default);
    `value=None` deletes it."""
    if broker == "":
        change = ["--delete", key] if value is None else ["--set", f"{key}={value}"]
        laminar_cli("cluster", "config", "--entity-default", *change, "--brokers", bootstrap)
        return
    operation = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    entry = ConfigEntry(key, value, incremental_operation=operation)
    resource = ConfigResource(ResourceType.BROKER, broker, incremental_configs=[entry])
    client = admin(bootstrap)  # alive until the answer: a dropped client cancels its requests
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout=TIMEOUT_S)


def described_default(bootstrap, key):
    """`key`'s value among every broker's dynamic defaults, as `laminar cluster config` shows
    them (None when unset)."""
    shown = laminar_cli("cluster", "config", "--entity-default", "--brokers", bootstrap)
    for line in shown.splitlines()[1:]:
        fields = line.split()
        if fields and fields[0] == key:
            assert "dynamic (every broker)" in line, line
            return fields[1]
    return None


def described(bootstrap, resource_type, name, key):
    """`key` of the resource, its `source` and its synonyms' as ConfigSource members."""
    resource = ConfigResource(resource_type, name)
    client = admin(bootstrap)
    futures = client.describe_configs([resource])
    entries = next(iter(futures.values())).result(timeout=TIMEOUT_S)
    entry = entries.get(key)
    if entry is not None:
        entry.source = ConfigSource(entry.source)
        for synonym in entry.synonyms.values():
            synonym.source = ConfigSource(synonym.source)
    return entry


def described_within(bootstrap, name, key, value):
    """Broker `name`'s `key` once it is `value` (another broker made the change)."""
    deadline = time.monotonic() + APPLIED_WITHIN_S
    while True:
        entry = described(bootstrap, ResourceType.BROKER, name, key)
        if entry is not None and entry.value == value:
            return entry
        assert time.monotonic() < deadline, f"broker {name} still has {key}={entry and entry.value}"
        time.sleep(0.05)


def produce_error(bootstrap, topic, value):
    """The error of producing `value` to `topic` (None when it was acknowledged)."""
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "acks": "all"})
    producer.produce(topic, value, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(TIMEOUT_S)
    assert len(errors) == 1, "no delivery report"
    return errors[0]


def create_topic(bootstrap, topic, replication_factor=1, partitions=1):
    client = admin(bootstrap)
    futures = client.create_topics([NewTopic(topic, partitions, replication_factor)])
    futures[topic].result(timeout=TIMEOUT_S)


def node_id(bootstrap):
    return next(iter(admin(bootstrap).list_topics(timeout=TIMEOUT_S).brokers))


def test_a_default_and_a_per_broker_value_change_topic_defaults_live_and_persist(own_broker, topic_name):
    bootstrap = own_broker.bootstrap
    create_topic(bootstrap, topic_name)
    assert produce_error(bootstrap, topic_name, SMALL) is None
    alter(bootstrap, "", "message.max.bytes", "1000")
    assert described_default(bootstrap, "message.max.bytes") == "1000"
    topic_entry = described(bootstrap, ResourceType.TOPIC, topic_name, "max.message.bytes")
    assert (topic_entry.value, topic_entry.source) == ("1000", DYNAMIC_DEFAULT)
    assert produce_error(bootstrap, topic_name, SMALL).code() == KafkaError.MSG_SIZE_TOO_LARGE

    broker = str(node_id(bootstrap))
    alter(bootstrap, broker, "message.max.bytes", "3000")
    entry = described(bootstrap, ResourceType.BROKER, broker, "message.max.bytes")
    assert (entry.value, entry.source) == ("3000", DYNAMIC_BROKER)
    assert produce_error(bootstrap, topic_name, SMALL) is None

    own_broker.restart()
    entry = described(own_broker.bootstrap, ResourceType.BROKER, broker, "message.max.bytes")
    assert (entry.value, entry.source) == ("3000", DYNAMIC_BROKER)
    alter(own_broker.bootstrap, broker, "message.max.bytes", None)
    assert produce_error(own_broker.bootstrap, topic_name, SMALL).code() == KafkaError.MSG_SIZE_TOO_LARGE
    alter(own_broker.bootstrap, "", "message.max.bytes", None)
    assert produce_error(own_broker.bootstrap, topic_name, SMALL) is None


def test_static_and_unknown_keys_and_bad_values_are_refused(broker):
    node = str(node_id(broker.bootstrap))
    for key, value in [("num.partitions", "3"), ("no.such.config", "1"), ("log.retention.ms", "soon")]:
        with pytest.raises(KafkaException) as refused:
            alter(broker.bootstrap, node, key, value)
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG, (key, refused.value)
        with pytest.raises(subprocess.CalledProcessError) as failed:
            alter(broker.bootstrap, "", key, value)
        assert "INVALID_CONFIG" in failed.value.stderr or "InvalidConfig" in failed.value.stderr, failed.value.stderr
    assert described_default(broker.bootstrap, "log.retention.ms") is None
    entry = described(broker.bootstrap, ResourceType.BROKER, node, "num.partitions")
    assert entry.is_read_only and entry.source != DYNAMIC_DEFAULT


@pytest.fixture(scope="module")
def cluster():
    process = ClusterProcess(nodes=3)
    yield process
    process.stop()


def test_a_default_set_through_one_node_holds_on_every_node(cluster, topic_name):
    create_topic(cluster.bootstrap, topic_name, replication_factor=3, partitions=3)
    deadline = time.monotonic() + TIMEOUT_S
    while produce_error(cluster.bootstrap, topic_name, SMALL) is not None:
        assert time.monotonic() < deadline, "the topic never took records"
    started = time.monotonic()
    alter(cluster.node_bootstrap(1), "", "message.max.bytes", "1000")
    for node in cluster.node_ids:
        entry = described_within(cluster.node_bootstrap(node), str(node), "message.max.bytes", "1000")
        assert entry.source == DYNAMIC_DEFAULT
    print(f"the default held on all three nodes {time.monotonic() - started:.2f} s after the change")
    # Every partition's leader refuses what the new default forbids (the partitions spread).
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "broker.address.family": "v4"})
    errors = []
    for partition in range(3):
        producer.produce(topic_name, SMALL, partition=partition, on_delivery=lambda err, _m: errors.append(err))
    producer.flush(TIMEOUT_S)
    assert [e.code() if e else None for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE] * 3

    alter(cluster.node_bootstrap(3), "2", "follower.replication.throttled.rate", "1048576")
    entry = described_within(cluster.node_bootstrap(2), "2", "follower.replication.throttled.rate", "1048576")
    assert entry.source == DYNAMIC_BROKER
    other = described(cluster.node_bootstrap(1), ResourceType.BROKER, "1", "follower.replication.throttled.rate")
    assert other.source == ConfigSource.DEFAULT_CONFIG
    alter(cluster.node_bootstrap(2), "", "message.max.bytes", None)
