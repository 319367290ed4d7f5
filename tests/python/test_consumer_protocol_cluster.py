"""The next-generation consumer group protocol (KIP-848) on a three-node cluster (skipped unless
LAMINAR_TEST_GROUPS=1): three confluent-kafka members consume while the broker coordinating
their group is killed with SIGKILL. The group goes on at the new coordinator, which loads it from
`__consumer_offsets`: the same members at the same epochs, nobody fenced or made to rejoin, and
no record consumed twice (members commit after processing) or lost."""

import re
import subprocess
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient

from group_members import Member, PacedProducer, consumed_positions, consumed_values, wait_for
from laminar_broker import ClusterProcess, laminar_cli
from replication_check import create_topic, wait_all_in_sync

pytestmark = pytest.mark.groups

OVERRIDES = {"min.insync.replicas": "2", "default.replication.factor": "3", "replica.lag.time.max.ms": "3000",
             "offsets.topic.num.partitions": "6", "group.consumer.heartbeat.interval.ms": "2500",
             "group.consumer.session.timeout.ms": "20000"}
PARTITIONS = 6
RATE = 500


def coordinator_and_epochs(cluster, group):
    """The coordinator's node id, and each member's epoch as `laminar group describe` shows it."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "broker.address.family": "v4"})
    described = admin.describe_consumer_groups([group])[group].result(30)
    try:
        out = laminar_cli("group", "describe", group, "--brokers", cluster.bootstrap)
    except subprocess.CalledProcessError as e:
        raise AssertionError(f"laminar group describe: {e.stderr}") from e
    members = out.split("MEMBERS\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    epochs = {}
    for line in members:
        columns = re.split(r"\s{2,}", line.strip())
        epochs[columns[0]] = int(columns[2])
    return described.coordinator.id, epochs


def test_the_group_goes_on_at_its_epochs_when_its_coordinator_is_killed(topic_name):
    cluster = ClusterProcess(3, overrides=OVERRIDES, session_timeout_ms=3000)
    try:
        run_coordinator_kill(cluster, topic_name)
    finally:
        cluster.stop()


def run_coordinator_kill(cluster, topic):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "broker.address.family": "v4"})
    create_topic(admin, topic, PARTITIONS, 3)
    wait_all_in_sync(admin, topic, PARTITIONS, [1, 2, 3], 30)
    group = f"g-{uuid.uuid4().hex[:8]}"
    producer = PacedProducer(cluster.bootstrap, topic, RATE)
    members = [Member(cluster.bootstrap, group, [topic], f"m{i}", **{"group.protocol": "consumer"})
               for i in range(3)]
    wait_for(lambda: all(len(m.owned()) == 2 for m in members), 60, "two partitions per member")
    time.sleep(3)  # the group is stable: no heartbeat is moving an epoch
    coordinator, epochs = coordinator_and_epochs(cluster, group)
    changes = [len(m.assignments) for m in members]
    cluster.kill9(coordinator)
    killed_at = time.monotonic()
    consumed = len(consumed_values(members))
    wait_for(lambda: len(consumed_values(members)) > consumed + RATE * 5, 120, "consumption goes on")
    resumed = time.monotonic() - killed_at
    new_coordinator, new_epochs = coordinator_and_epochs(cluster, group)
    assert new_coordinator != coordinator
    assert new_epochs == epochs, "the same members at the same epochs"
    assert [len(m.assignments) for m in members] == changes, "no member lost or changed its partitions"
    cluster.restart(coordinator)
    producer.stop()
    wait_for(lambda: len(set(consumed_values(members))) >= producer.sent, 120, "every record consumed")
    for m in members:
        m.stop()
    values = consumed_values(members)
    assert not producer.errors
    assert set(values) == set(range(producer.sent))
    positions = consumed_positions(members)
    assert len(positions) == len(set(positions)), "no record consumed twice"
    errors = [str(e) for m in members for e in m.errors]
    print(f"\ncoordinator {coordinator} killed; {new_coordinator} took over; the next 5 s of records were consumed "
          f"{resumed:.1f}s after the kill; {producer.sent} records once each; member errors meanwhile: {errors[:3]}")
