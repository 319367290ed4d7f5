#!/usr/bin/env python3
"""Consumer groups against a real Laminar broker process, driven by confluent-kafka (librdkafka).

usage: groups_confluent.py <path to the laminar binary>

Checks: two consumers of one group split 4 partitions; when one leaves the other gets all four;
a new consumer resumes from the committed offsets; committed offsets survive kill -9 and a
restart; the admin APIs list, describe and delete groups. Exits non-zero on the first failure.
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TOPIC = "orders"
GROUP = "g1"
PARTITIONS = 4
DEADLINE_S = 40


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    def __init__(self, binary, data_dir, port):
        self.binary, self.data_dir, self.port = binary, data_dir, port
        self.proc = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        log = open(os.path.join(self.data_dir, "broker.log"), "ab")
        self.proc = subprocess.Popen(
            [
                self.binary, "broker",
                "--override", f"log.dirs={self.data_dir}/data",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", "group.initial.rebalance.delay.ms=0",
                "--override", "offsets.topic.num.partitions=8",
                # A free admin port: other brokers (parallel tests) may hold the default 9644.
                "--override", "laminar.http.listen=127.0.0.1:0",
            ],
            stdout=log, stderr=log,
        )
        end = time.time() + 20
        while time.time() < end:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("broker did not start")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill9()


def consumer(broker, name):
    return Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": GROUP,
        "client.id": name,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "topic.metadata.refresh.interval.ms": 1000,
    })


def produce(broker, count, start):
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(start, start + count):
        producer.produce(TOPIC, value=f"m{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(20) == 0, "every message delivered"


def poll_until(consumers, done, what):
    """Polls every consumer until done(received) holds; returns what each received."""
    received = {id(c): [] for c in consumers}
    end = time.time() + DEADLINE_S
    while time.time() < end:
        for c in consumers:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                received[id(c)].append(msg.value().decode())
        if done(received):
            return received
    raise AssertionError(f"timed out waiting for {what}; got {received}, "
                         f"assignments {[c.assignment() for c in consumers]}")


def partitions_of(c):
    return sorted(tp.partition for tp in c.assignment())


def check(condition, message):
    if not condition:
        raise AssertionError(message)
    print(f"ok - {message}", flush=True)


def main(binary):
    work = tempfile.mkdtemp(prefix="laminar-groups-")
    broker = Broker(binary, work, free_port())
    broker.start()
    try:
        run(broker)
    except BaseException:
        print(open(os.path.join(work, "broker.log")).read()[-4000:], file=sys.stderr)
        raise
    finally:
        broker.stop()


def run(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(20)
    produce(broker, 40, 0)

    # Two consumers split the four partitions and read everything between them.
    c1, c2 = consumer(broker, "c1"), consumer(broker, "c2")
    c1.subscribe([TOPIC])
    c2.subscribe([TOPIC])
    got = poll_until(
        [c1, c2],
        lambda r: len(set(m for got in r.values() for m in got)) >= 40 and len(partitions_of(c1)) == 2
        and len(partitions_of(c2)) == 2,
        "40 messages over two members")
    check(sorted(partitions_of(c1) + partitions_of(c2)) == [0, 1, 2, 3],
          f"two consumers split the partitions: {partitions_of(c1)} + {partitions_of(c2)}")
    # c1 may own every partition for a moment before c2 joins; what it read but had not
    # committed is read again by c2 after the rebalance (Kafka's at-least-once), so the check is
    # that every message arrived, none invented.
    check(sorted(set(got[id(c1)] + got[id(c2)]), key=lambda m: int(m[1:])) == [f"m{i}" for i in range(40)],
          "every message read across the group")
    c1.commit(asynchronous=False)
    c2.commit(asynchronous=False)

    # One leaves: the other gets every partition.
    c1.close()
    poll_until([c2], lambda r: partitions_of(c2) == [0, 1, 2, 3], "c2 to own all partitions")
    check(partitions_of(c2) == [0, 1, 2, 3], "after c1 leaves, c2 owns all four partitions")
    committed = c2.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
    check([tp.offset for tp in committed] == [10] * 4, f"committed offsets {[tp.offset for tp in committed]}")
    c2.close()

    # A new consumer resumes from the committed offsets.
    produce(broker, 8, 40)
    c3 = consumer(broker, "c3")
    c3.subscribe([TOPIC])
    got = poll_until([c3], lambda r: len(r[id(c3)]) >= 8, "8 new messages")
    time.sleep(1)
    msg = c3.poll(0.5)
    check(msg is None or msg.error(), "nothing beyond the new messages")
    check(sorted(got[id(c3)], key=lambda m: int(m[1:])) == [f"m{i}" for i in range(40, 48)],
          "a new consumer resumes from the committed offsets")
    c3.commit(asynchronous=False)

    groups = admin.list_consumer_groups().result(10)
    check(GROUP in [g.group_id for g in groups.valid], "ListGroups lists the group")
    described = admin.describe_consumer_groups([GROUP])[GROUP].result(10)
    check(str(described.state).endswith("STABLE") and len(described.members) == 1,
          f"DescribeGroups: {described.state}, {len(described.members)} member")
    try:
        admin.delete_consumer_groups([GROUP])[GROUP].result(10)
        check(False, "deleting a group with members fails")
    except KafkaException as e:
        check("NON_EMPTY_GROUP" in str(e), f"deleting a group with members fails: {e}")
    c3.close()

    # kill -9 and restart: the committed offsets are still there.
    broker.kill9()
    broker.start()
    c4 = consumer(broker, "c4")
    committed = c4.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=20)
    check([tp.offset for tp in committed] == [12] * 4,
          f"committed offsets survive kill -9: {[tp.offset for tp in committed]}")
    produce(broker, 4, 48)
    c4.subscribe([TOPIC])
    got = poll_until([c4], lambda r: len(r[id(c4)]) >= 4, "4 messages after restart")
    check(sorted(got[id(c4)], key=lambda m: int(m[1:])) == [f"m{i}" for i in range(48, 52)],
          "after the restart a consumer resumes where the group left off")
    c4.close()

    # The old admin client's connection died with the broker: a fresh one.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_consumer_groups([GROUP])[GROUP].result(10)
    groups = admin.list_consumer_groups().result(10)
    check(GROUP not in [g.group_id for g in groups.valid], "an empty group can be deleted")
    fresh = consumer(broker, "c5")
    committed = fresh.committed([TopicPartition(TOPIC, 0)], timeout=10)
    check(committed[0].offset < 0, "deleting the group removed its offsets")
    fresh.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
