"""Committed offsets live in the compacted internal topic `__consumer_offsets`: after hundreds of
commits have rolled its segments and compaction has dropped the superseded ones, every group's
latest commit is still what the broker answers — also after a clean restart and after kill -9."""

import glob
import os
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from laminar_broker import BrokerProcess
from test_confluent_kafka import create_topic

pytestmark = pytest.mark.groups
TIMEOUT_S = 30
COMMITS = 300


def committed(broker, group, topic):
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                         "group.id": group, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)],
                                                      timeout=TIMEOUT_S)]
    finally:
        consumer.close()


def offsets_log_bytes(broker):
    files = glob.glob(os.path.join(broker.data_dir, "__consumer_offsets-0", "*.log"))
    return sum(os.path.getsize(f) for f in files), len(files)


def test_latest_commits_survive_compaction_restart_and_kill9(topic_name):
    broker = BrokerProcess(overrides={"offsets.topic.num.partitions": "1",
                                      "log.retention.check.interval.ms": "300"})
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
        # Small segments, so that the commits below roll many of them and compaction has work.
        resource = ConfigResource(ResourceType.TOPIC, "__consumer_offsets", incremental_configs=[
            ConfigEntry("segment.bytes", "2048", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
        create_topic(broker, topic_name, partitions=2)

        groups = ["g-a", "g-b"]
        members = {g: Consumer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                                "group.id": g, "enable.auto.commit": False}) for g in groups}
        for i in range(1, COMMITS + 1):
            for g, consumer in members.items():
                consumer.commit(offsets=[TopicPartition(topic_name, 0, i), TopicPartition(topic_name, 1, 2 * i)],
                                asynchronous=False)
        for consumer in members.values():
            consumer.close()

        # Each commit appended one batch of two offset records: at least 100 bytes (a 61-byte
        # batch header alone). Compaction runs on the 300 ms tick while the commits go in.
        written_min = COMMITS * len(groups) * 100
        deadline = time.time() + TIMEOUT_S
        while offsets_log_bytes(broker)[0] > written_min // 10 and time.time() < deadline:
            time.sleep(0.3)
        compacted, segments = offsets_log_bytes(broker)
        assert compacted <= written_min // 10, f"{compacted} bytes in {segments} segments after compaction"

        for g in groups:
            assert committed(broker, g, topic_name) == [COMMITS, 2 * COMMITS]
        assert broker.terminate() == 0
        broker.restart()
        for g in groups:
            assert committed(broker, g, topic_name) == [COMMITS, 2 * COMMITS], "after a clean restart"
        broker.kill9()
        broker.restart()
        for g in groups:
            assert committed(broker, g, topic_name) == [COMMITS, 2 * COMMITS], "after kill -9"
    finally:
        broker.stop()
