"""The next-generation consumer group protocol (KIP-848, `group.protocol=consumer`) with
confluent-kafka (skipped unless LAMINAR_TEST_GROUPS=1): members join and leave one at a time
while records flow, and every record is consumed once; the classic protocol runs the same
schedule in the same test, and both print how long members that keep partitions stop consuming
during rebalances; a killed member is removed after its session timeout; a regular expression
picks up a topic created later; a static member that comes back keeps its partitions; a group
survives its broker's restart at its epoch; a classic group moves to the new protocol member by
member (a rolling upgrade) while records flow."""

import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from group_members import (Member, PacedProducer, consumed_positions, consumed_values,
                           kept_members_pauses, wait_for)
from laminar_broker import BrokerProcess
from test_confluent_kafka import create_topic

pytestmark = pytest.mark.groups
PARTITIONS = 10
RATE = 1_000
MEMBERS = 5
# Each record keeps its member busy this long: members are at the application's pace, not idle.
PROCESSING_S = 0.001
# Between membership changes: long enough for a rebalance of either protocol to finish.
STEP_S = 6
HEARTBEAT_MS = 2_500
SESSION_MS = 6_000
CONSUMER = {"group.protocol": "consumer"}
CLASSIC = {"group.protocol": "classic", "heartbeat.interval.ms": HEARTBEAT_MS,
           "session.timeout.ms": SESSION_MS}


@pytest.fixture(scope="module")
def broker():
    process = BrokerProcess(overrides={"group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
                                       "group.consumer.session.timeout.ms": str(SESSION_MS),
                                       "group.initial.rebalance.delay.ms": "0"})
    yield process
    process.stop()


def run_schedule(broker, topic, protocol_config):
    """Members join one at a time, then leave one at a time, while records flow. Returns the
    members, the producer, and the times of the membership changes."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    producer = PacedProducer(broker.bootstrap, topic, RATE)
    members, events = [], []
    for i in range(MEMBERS):
        members.append(Member(broker.bootstrap, group, [topic], f"m{i}", processing_s=PROCESSING_S,
                              **protocol_config))
        events.append(time.monotonic())
        time.sleep(STEP_S)
    for m in members[:-1]:
        m.stop()
        events.append(time.monotonic())
        time.sleep(STEP_S)
    producer.stop()
    last = members[-1]
    wait_for(lambda: len(set(consumed_values(members))) >= producer.sent, 60, "every record consumed")
    last.stop()
    return members, producer, events


def check_once(members, producer):
    values = consumed_values(members)
    assert not producer.errors
    assert set(values) == set(range(producer.sent)), "every record produced is consumed"
    positions = consumed_positions(members)
    repeated = len(positions) - len(set(positions))
    errors = [e for m in members for e in m.errors]
    assert not errors, f"consumer errors: {errors[:5]}"
    return repeated


def test_members_join_and_leave_one_at_a_time_and_every_record_is_consumed_once(broker, topic_name):
    figures = {}
    for protocol, config in [("consumer", CONSUMER), ("classic", CLASSIC)]:
        topic = f"{topic_name}-{protocol}"
        create_topic(broker, topic, partitions=PARTITIONS)
        members, producer, events = run_schedule(broker, topic, config)
        repeated = check_once(members, producer)
        # The first join has nobody to keep partitions; each later change does.
        pauses = kept_members_pauses(members, events[1:], STEP_S - 0.5)
        figures[protocol] = (producer.sent, repeated, pauses)
        if protocol == "consumer":
            assert repeated == 0, "no record is consumed twice: partitions move only once released"
    for protocol, (sent, repeated, pauses) in figures.items():
        print(f"\n{protocol}: {sent} records, {repeated} consumed twice; members keeping partitions "
              f"paused median {statistics.median(pauses):.3f}s max {max(pauses):.3f}s "
              f"over {len(pauses)} (member, rebalance) pairs")


def test_a_killed_member_is_removed_after_its_session_timeout(broker, topic_name):
    create_topic(broker, topic_name, partitions=4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    survivor = Member(broker.bootstrap, group, [topic_name], "survivor", **CONSUMER)
    script = Path(__file__).parent / "member_process.py"
    killed = subprocess.Popen([sys.executable, str(script), broker.bootstrap, group, topic_name,
                               "group.protocol=consumer"], stdout=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: len(survivor.owned()) == 2, 30, "two members, two partitions each")
        while killed.stdout.readline().strip() != "owned 2":
            pass
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        stopped = time.monotonic()
        wait_for(lambda: len(survivor.owned()) == 4, SESSION_MS / 1000 + 15, "the survivor owns every partition")
    finally:
        killed.kill()
    noticed = time.monotonic() - stopped
    print(f"\nkilled member's partitions reassigned after {noticed:.1f}s (session timeout {SESSION_MS / 1000}s)")
    assert noticed >= SESSION_MS / 1000 - HEARTBEAT_MS / 1000, "not before its session could end"
    survivor.stop()


def test_a_regular_expression_picks_up_a_topic_created_later(broker, topic_name):
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    create_topic(broker, f"{prefix}-a", partitions=2)
    member = Member(broker.bootstrap, f"g-{prefix}", [f"^{prefix}-.*"], "rx", **CONSUMER)
    wait_for(lambda: len(member.owned()) == 2, 30, "the first topic's partitions")
    create_topic(broker, f"{prefix}-b", partitions=3)
    wait_for(lambda: {t for t, _ in member.owned()} == {f"{prefix}-a", f"{prefix}-b"}, 30,
             "the topic created later joins the subscription")
    assert len(member.owned()) == 5
    member.stop()


def describe(broker, group):
    client = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
    return client.describe_consumer_groups([group])[group].result(30)


def test_a_static_member_that_comes_back_keeps_its_partitions(broker, topic_name):
    create_topic(broker, topic_name, partitions=6)
    group = f"g-{uuid.uuid4().hex[:8]}"
    static = {**CONSUMER, "group.instance.id": "static-a"}
    a = Member(broker.bootstrap, group, [topic_name], "a", **static)
    b = Member(broker.bootstrap, group, [topic_name], "b", **{**CONSUMER, "group.instance.id": "static-b"})
    wait_for(lambda: len(a.owned()) == 3 and len(b.owned()) == 3, 30, "three partitions each")
    before, b_before, b_changes = a.owned(), b.owned(), len(b.assignments)
    a.stop()
    again = Member(broker.bootstrap, group, [topic_name], "a-again", **static)
    wait_for(lambda: again.owned() == before, 30, "the returning member's partitions")
    assert b.owned() == b_before, "the other member was not disturbed"
    assert len(b.assignments) == b_changes, "the other member saw no rebalance"
    again.stop()
    b.stop()


def test_a_group_survives_its_brokers_restart_at_its_epoch(own_broker, topic_name):
    create_topic(own_broker, topic_name, partitions=2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    member = Member(own_broker.bootstrap, group, [topic_name], "m", **CONSUMER)
    wait_for(lambda: len(member.owned()) == 2, 30, "the member's partitions")
    before = describe(own_broker, group).members
    own_broker.kill9()
    own_broker.restart()
    after = describe(own_broker, group).members
    assert [m.member_id for m in after] == [m.member_id for m in before]
    partitions = [sorted(p.partition for p in m.assignment.topic_partitions) for m in after]
    assert partitions == [[0, 1]], "the member's assignment came back from the log"
    wait_for(lambda: len(member.owned()) == 2 and not member.errors, 30, "the member goes on")
    member.stop()


def assigned_once(members, partitions):
    """Every partition owned by exactly one of `members`."""
    owned = [p for m in members for p in m.owned()]
    return len(owned) == partitions and len(set(owned)) == partitions


def test_a_classic_group_moves_to_the_new_protocol_member_by_member_while_records_flow(broker, topic_name):
    """A rolling upgrade: a classic group of two members; a member of the new protocol joins
    (the group becomes a consumer group, its classic members staying), then each classic member
    restarts with group.protocol=consumer. At every step every partition has one owner, and in
    the end every record was consumed once."""
    create_topic(broker, topic_name, partitions=6)
    group = f"g-{uuid.uuid4().hex[:8]}"
    producer = PacedProducer(broker.bootstrap, topic_name, 200)
    classic = [Member(broker.bootstrap, group, [topic_name], f"classic{i}", **CLASSIC) for i in range(2)]
    wait_for(lambda: assigned_once(classic, 6), 60, "the classic members share the partitions")
    members = list(classic)
    members.append(Member(broker.bootstrap, group, [topic_name], "new0", **CONSUMER))
    wait_for(lambda: all(m.owned() for m in members) and assigned_once(members, 6), 60,
             "a mixed group: two classic members and one of the new protocol", members)
    assert describe(broker, group).type.name == "CONSUMER"
    for i, old in enumerate(classic):
        old.stop()
        members.remove(old)
        members.append(Member(broker.bootstrap, group, [topic_name], f"new{i + 1}", **CONSUMER))
        wait_for(lambda: all(m.owned() for m in members) and assigned_once(members, 6), 60,
                 f"classic member {i} replaced by one of the new protocol", members)
    producer.stop()
    everyone = classic + members
    wait_for(lambda: len(set(consumed_values(everyone))) >= producer.sent, 60, "every record consumed")
    for m in members:
        m.stop()
    repeated = check_once(everyone, producer)
    print(f"\nmigration: {producer.sent} records, {repeated} consumed twice")
    assert repeated == 0


def test_a_mixed_group_becomes_classic_again_when_its_last_new_member_leaves(broker, topic_name):
    """Kafka's downgrade: a member of the new protocol joins a classic group and leaves; the
    group is a classic group again, its two classic members sharing every partition."""
    create_topic(broker, topic_name, partitions=4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    classic = [Member(broker.bootstrap, group, [topic_name], f"classic{i}", **CLASSIC) for i in range(2)]
    wait_for(lambda: assigned_once(classic, 4), 60, "the classic members share the partitions")
    new = Member(broker.bootstrap, group, [topic_name], "new", **CONSUMER)
    wait_for(lambda: new.owned() and assigned_once(classic + [new], 4), 60, "a mixed group", classic + [new])
    assert describe(broker, group).type.name == "CONSUMER"
    new.stop()
    wait_for(lambda: describe(broker, group).type.name == "CLASSIC", 30, "a classic group again")
    wait_for(lambda: assigned_once(classic, 4) and all(m.owned() for m in classic), 60,
             "the classic members share the partitions again")
    for m in classic:
        m.stop()
    assert not [e for m in classic + [new] for e in m.errors]
