"""Consumer groups and idempotent producers (issue 4): skipped unless LAMINAR_TEST_GROUPS=1.
Two members split partitions; a leaver hands partitions over; a new member resumes from the
committed offset; committed offsets survive kill -9; an idempotent producer with 5 requests in
flight writes thousands of records exactly once, in order (kafka-python and confluent-kafka)."""

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition

from records import sample_records
from test_confluent_kafka import create_topic, read

pytestmark = pytest.mark.groups
TIMEOUT_S = 30


def member(broker, group):
    return Consumer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4", "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 500, "partition.assignment.strategy": "range"})


def await_assignments(members, partitions):
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        for m in members:
            m.poll(0.1)
        owned = [sorted(tp.partition for tp in m.assignment()) for m in members]
        flat = [p for o in owned for p in o]
        if all(owned) and sorted(flat) == list(range(partitions)):
            return owned
        assert time.monotonic() < deadline, f"group never balanced: {owned}"


def first_offset(c):
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is not None and not msg.error():
            return msg.offset()
    raise AssertionError("no record arrived")


def test_two_members_split_partitions_and_leaver_hands_over(broker, topic_name):
    create_topic(broker, topic_name, 4)
    group = f"g-{topic_name}"
    first, second = member(broker, group), member(broker, group)
    first.subscribe([topic_name])
    second.subscribe([topic_name])
    owned = await_assignments([first, second], 4)
    assert [len(o) for o in owned] == [2, 2]
    second.close()
    assert await_assignments([first], 4) == [[0, 1, 2, 3]]
    first.close()


def test_committed_offsets_resume_new_member_and_survive_kill9(own_broker, topic_name):
    create_topic(own_broker, topic_name)
    producer = Producer({"bootstrap.servers": own_broker.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce(topic_name, value=str(i).encode(), partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    group = f"g-{topic_name}"
    c = member(own_broker, group)
    c.subscribe([topic_name])
    assert first_offset(c) == 0
    c.commit(offsets=[TopicPartition(topic_name, 0, 40)], asynchronous=False)
    c.close()
    c = member(own_broker, group)
    c.subscribe([topic_name])
    assert first_offset(c) == 40
    c.commit(offsets=[TopicPartition(topic_name, 0, 61)], asynchronous=False)
    c.close()
    own_broker.kill9()
    own_broker.restart()
    c = member(own_broker, group)
    assert c.committed([TopicPartition(topic_name, 0)], timeout=TIMEOUT_S)[0].offset == 61
    c.subscribe([topic_name])
    assert first_offset(c) == 61
    c.close()


def test_idempotent_confluent_producer_exactly_once_in_order(broker, topic_name):
    create_topic(broker, topic_name)
    records = sample_records(5000)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                         "max.in.flight.requests.per.connection": 5, "batch.num.messages": 50, "linger.ms": 2})
    for rec in records:
        producer.produce(topic_name, value=rec.value, key=rec.key, partition=0, timestamp=rec.timestamp_ms,
                         headers=rec.headers)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    got = read(broker, topic_name, 5000)
    assert [o for o, _ in got] == list(range(5000))
    assert [r.value for _, r in got] == [r.value for r in records]


def test_idempotent_kafka_python_producer_exactly_once_in_order(broker, topic_name):
    create_topic(broker, topic_name)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True,
                             max_in_flight_requests_per_connection=5, batch_size=2048, linger_ms=2)
    futures = [producer.send(topic_name, value=f"v{i}".encode(), partition=0) for i in range(3000)]
    producer.flush(TIMEOUT_S)
    assert [f.get(TIMEOUT_S).offset for f in futures] == list(range(3000))
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    tp = KTopicPartition(topic_name, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(values) < 3000 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(r.value for r in records)
    assert values == [f"v{i}".encode() for i in range(3000)]
    assert consumer.end_offsets([tp])[tp] == 3000
    consumer.close()
