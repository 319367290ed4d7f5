"""Transactions with confluent-kafka (librdkafka) against a real laminar broker: committed
records are read by read_committed consumers and aborted ones only by read_uncommitted ones; a
consume-transform-produce loop copies every record exactly once, also when its process is
killed with SIGKILL mid-transaction again and again; a second producer with the same
transactional.id fences the first, whose records never become visible; a transaction left
open past its timeout is aborted by the coordinator; offsets sent in an aborted transaction
are never committed."""

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 30
COPIER = Path(__file__).with_name("txn_copier.py")

pytestmark = pytest.mark.groups


def create_topic(broker, name, partitions=1):
    client = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
    client.create_topics([NewTopic(name, partitions, 1)], operation_timeout=TIMEOUT_S)[name].result(TIMEOUT_S)


def transactional_producer(broker, transactional_id, **config):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                         "transactional.id": transactional_id, "linger.ms": 5, **config})
    producer.init_transactions(TIMEOUT_S)
    return producer


def read_all(broker, topic, isolation, expected=None, quiet_s=3.0):
    """Every record of `topic` a consumer with `isolation` reads, as (partition, offset, value),
    until `expected` records came or nothing came for `quiet_s`."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                         "group.id": f"reader-{uuid.uuid4().hex[:8]}", "isolation.level": isolation,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    partitions = consumer.list_topics(topic, TIMEOUT_S).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    records, last = [], time.monotonic()
    deadline = time.monotonic() + 60
    while time.monotonic() - last < quiet_s and time.monotonic() < deadline:
        if expected is not None and len(records) >= expected:
            break
        message = consumer.poll(0.5)
        if message is None or message.error() is not None:
            continue
        records.append((message.partition(), message.offset(), message.value()))
        last = time.monotonic()
    consumer.close()
    return records


def produce_plain(broker, topic, values, partitions=1):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4", "acks": "all"})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % partitions)
    assert producer.flush(TIMEOUT_S) == 0


def test_committed_records_are_read_committed_and_aborted_ones_only_read_uncommitted(broker, topic_name):
    create_topic(broker, topic_name, partitions=2)
    producer = transactional_producer(broker, f"tx-{topic_name}")
    for round_, commit in enumerate([True, False, True, False]):
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic_name, value=f"r{round_}-{i}".encode(), partition=i % 2)
        # Written before the end: an abort drops what the client has not sent yet.
        assert producer.flush(TIMEOUT_S) == 0
        (producer.commit_transaction if commit else producer.abort_transaction)(TIMEOUT_S)
    committed = sorted(v for _, _, v in read_all(broker, topic_name, "read_committed"))
    expected = sorted(f"r{r}-{i}".encode() for r in (0, 2) for i in range(10))
    assert committed == expected
    everything = sorted(v for _, _, v in read_all(broker, topic_name, "read_uncommitted"))
    assert everything == sorted(f"r{r}-{i}".encode() for r in range(4) for i in range(10))


def test_an_open_transaction_holds_back_read_committed_until_it_ends(broker, topic_name):
    create_topic(broker, topic_name)
    producer = transactional_producer(broker, f"tx-{topic_name}")
    producer.begin_transaction()
    producer.produce(topic_name, value=b"open", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    produce_plain(broker, topic_name, [b"after"])
    assert read_all(broker, topic_name, "read_committed", quiet_s=2) == [], "records past the LSO were read"
    producer.commit_transaction(TIMEOUT_S)
    values = [v for _, _, v in read_all(broker, topic_name, "read_committed", expected=2)]
    assert values == [b"open", b"after"]


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(broker, topic_name):
    create_topic(broker, topic_name)
    transactional_id = f"tx-{topic_name}"
    zombie = transactional_producer(broker, transactional_id)
    zombie.begin_transaction()
    zombie.produce(topic_name, value=b"zombie", partition=0)
    assert zombie.flush(TIMEOUT_S) == 0
    successor = transactional_producer(broker, transactional_id)
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(TIMEOUT_S)
    assert fenced.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                            KafkaError.INVALID_PRODUCER_EPOCH), fenced.value
    successor.begin_transaction()
    successor.produce(topic_name, value=b"successor", partition=0)
    successor.commit_transaction(TIMEOUT_S)
    values = [v for _, _, v in read_all(broker, topic_name, "read_committed", expected=1)]
    assert values == [b"successor"]


def test_a_transaction_left_open_past_its_timeout_is_aborted(broker, topic_name):
    create_topic(broker, topic_name)
    producer = transactional_producer(broker, f"tx-{topic_name}", **{"transaction.timeout.ms": 2000})
    producer.begin_transaction()
    producer.produce(topic_name, value=b"abandoned", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    produce_plain(broker, topic_name, [b"later"])
    # The coordinator aborts within its timeout plus its one-second scan; the LSO then passes.
    values = [v for _, _, v in read_all(broker, topic_name, "read_committed", expected=1, quiet_s=8)]
    assert values == [b"later"]


def test_offsets_sent_in_an_aborted_transaction_are_never_committed(broker, topic_name):
    create_topic(broker, topic_name)
    produce_plain(broker, topic_name, [b"a", b"b", b"c"])
    group = f"g-{topic_name}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4", "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    producer = transactional_producer(broker, f"tx-{topic_name}")
    for commit, offset in [(False, 2), (True, 1)]:
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(topic_name, 0, offset)],
                                             consumer.consumer_group_metadata(), TIMEOUT_S)
        (producer.commit_transaction if commit else producer.abort_transaction)(TIMEOUT_S)
    committed = consumer.committed([TopicPartition(topic_name, 0)], TIMEOUT_S)
    assert committed[0].offset == 1
    consumer.close()


def run_copier(broker, names, total, abort_every=0):
    source, sink, group, transactional_id = names
    args = [sys.executable, str(COPIER), broker.bootstrap, source, sink, group, transactional_id, str(total)]
    if abort_every:
        args.append(str(abort_every))
    return subprocess.Popen(args, stderr=subprocess.PIPE, text=True)


def assert_copied_once(broker, sink, values):
    copied = read_all(broker, sink, "read_committed", expected=len(values), quiet_s=5)
    by_source = {}
    for partition, _, value in copied:
        by_source.setdefault(value, []).append(partition)
    duplicated = {v: n for v, n in by_source.items() if len(n) > 1}
    assert not duplicated, f"copied more than once: {list(duplicated)[:5]}"
    missing = {v.upper() for v in values} - set(by_source)
    assert not missing, f"{len(missing)} never copied, e.g. {sorted(missing)[:5]}"
    assert len(copied) == len(values)


def test_consume_transform_produce_copies_every_record_exactly_once(broker, topic_name):
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker, source, partitions=3)
    create_topic(broker, sink, partitions=3)
    values = [f"value-{i}".encode() for i in range(600)]
    produce_plain(broker, source, values, partitions=3)
    copier = run_copier(broker, (source, sink, f"g-{topic_name}", f"tx-{topic_name}"), len(values), abort_every=3)
    _, stderr = copier.communicate(timeout=180)
    assert copier.returncode == 0, stderr
    assert_copied_once(broker, sink, values)


def test_a_copier_killed_mid_transaction_again_and_again_copies_every_record_exactly_once(broker, topic_name):
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker, source, partitions=3)
    create_topic(broker, sink, partitions=3)
    values = [f"value-{i}".encode() for i in range(3000)]
    produce_plain(broker, source, values, partitions=3)
    names = (source, sink, f"g-{topic_name}", f"tx-{topic_name}")
    rng = random.Random(int(os.environ.get("LAMINAR_TXN_SEED", "7")))
    kills = 0
    for _ in range(8):
        copier = run_copier(broker, names, len(values))
        time.sleep(rng.uniform(1.0, 3.0))
        if copier.poll() is not None:
            break
        copier.send_signal(signal.SIGKILL)
        copier.wait()
        kills += 1
    copier = run_copier(broker, names, len(values))
    _, stderr = copier.communicate(timeout=240)
    assert copier.returncode == 0, stderr
    assert kills >= 3, f"only {kills} kills landed mid-run"
    assert_copied_once(broker, sink, values)
