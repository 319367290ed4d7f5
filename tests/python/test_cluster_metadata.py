"""confluent-kafka (librdkafka) and kafka-python against a three-node cluster in combined mode: a topic with
replication factor 3 gets leaders on all three brokers, every broker's Metadata shows the same
leaders, replicas and real endpoints, and records produced with acks=1 reach every partition
(the client routes each to its leader)."""

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonPartition
from kafka.admin import NewTopic as KafkaPythonNewTopic

from laminar_broker import BrokerProcess

TIMEOUT_S = 30
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster():
    process = BrokerProcess(cluster=3)
    yield process
    process.stop()


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})


def layout(bootstrap, topic):
    """(brokers as {id: "host:port"}, {partition: (leader, sorted replicas)}) from one broker."""
    metadata = admin(bootstrap).list_topics(topic, timeout=TIMEOUT_S)
    brokers = {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}
    partitions = {p.id: (p.leader, sorted(p.replicas)) for p in metadata.topics[topic].partitions.values()}
    return brokers, partitions


def test_every_broker_shows_the_same_leaders_spread_over_all_three(cluster, topic_name):
    servers = cluster.bootstrap.split(",")
    client = admin(cluster.bootstrap)
    futures = client.create_topics([NewTopic(topic_name, PARTITIONS, 3)], operation_timeout=TIMEOUT_S)
    futures[topic_name].result(TIMEOUT_S)

    deadline = time.monotonic() + TIMEOUT_S
    while True:  # the other brokers learn the topic from the quorum a moment later
        views = [layout(server, topic_name) for server in servers]
        if all(len(parts) == PARTITIONS for _, parts in views) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    brokers, partitions = views[0]
    assert sorted(brokers) == [1, 2, 3]
    assert sorted(brokers.values()) == sorted(servers), "real endpoints"
    assert len(partitions) == PARTITIONS
    assert {leader for leader, _ in partitions.values()} == {1, 2, 3}, partitions
    assert all(replicas == [1, 2, 3] for _, replicas in partitions.values())
    for other in views[1:]:
        assert other == views[0], "every broker answers the same metadata"

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "broker.address.family": "v4", "acks": 1})
    delivered = []
    for partition in range(PARTITIONS):
        producer.produce(topic_name, value=f"to-{partition}".encode(), partition=partition,
                         on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
    assert producer.flush(TIMEOUT_S) == 0
    assert sorted(delivered, key=lambda d: d[1]) == [(None, p, 0) for p in range(PARTITIONS)]


def test_kafka_python_sees_the_same_leaders_and_produces_to_them(cluster, topic_name):
    servers = cluster.bootstrap.split(",")
    creator = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        new = KafkaPythonNewTopic(name=topic_name, num_partitions=PARTITIONS, replication_factor=3)
        creator.create_topics([new], timeout_ms=TIMEOUT_S * 1000)
    finally:
        creator.close()
    consumer = KafkaConsumer(bootstrap_servers=servers)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while consumer.partitions_for_topic(topic_name) != set(range(PARTITIONS)):
            assert time.monotonic() < deadline, "kafka-python never saw every partition"
            consumer.topics()  # refreshes the metadata
            time.sleep(0.1)
        cluster_view = consumer._client.cluster
        leaders = {cluster_view.leader_for_partition(KafkaPythonPartition(topic_name, p)) for p in range(PARTITIONS)}
        assert leaders == {1, 2, 3}
        assert {b.node_id for b in cluster_view.brokers()} == {1, 2, 3}
    finally:
        consumer.close()
    producer = KafkaProducer(bootstrap_servers=servers, acks=1, enable_idempotence=False)
    try:
        sent = [producer.send(topic_name, value=b"kp", partition=p) for p in range(PARTITIONS)]
        producer.flush(TIMEOUT_S)
        assert sorted((m.partition, m.offset) for m in (f.get(TIMEOUT_S) for f in sent)) == \
            [(p, 0) for p in range(PARTITIONS)]
    finally:
        producer.close()

