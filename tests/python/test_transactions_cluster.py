"""Transactions on a three-node cluster. Exactly-once: a consume-transform-produce loop (txn_copier.py, its
transactions committed by the transaction coordinator on `__transaction_state`) copies its
input while brokers are killed with SIGKILL in turn — the coordinator's, the partitions'
leaders, the group coordinator's — and restarted. Read with read_committed, the output holds
every input record exactly once, and the group's committed offsets reach the input's end."""

import time

import pytest
from confluent_kafka.admin import AdminClient

import txn_history
from laminar_broker import ClusterProcess
from replication_check import create_topic, wait_all_in_sync
from test_transactions import assert_copied_once, produce_plain, run_copier

pytestmark = pytest.mark.groups

SESSION_TIMEOUT_MS = 3000
OVERRIDES = {"min.insync.replicas": "2", "default.replication.factor": "3", "replica.lag.time.max.ms": "3000",
             "leader.imbalance.check.interval.seconds": "2", "offsets.topic.num.partitions": "6",
             "transaction.state.log.num.partitions": "6"}
RECORDS = 3000
# Kills, one node at a time in turn, and the bound on the faulty part of the run.
KILLS = 6
FAULTS_BOUND_S = 150
# Kills while the history is written.
HISTORY_KILLS = 6


@pytest.fixture
def cluster():
    process = ClusterProcess(3, overrides=OVERRIDES, session_timeout_ms=SESSION_TIMEOUT_MS)
    yield process
    process.stop()


def test_a_copier_under_broker_kills_copies_every_record_exactly_once(cluster, topic_name):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "broker.address.family": "v4"})
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    for topic in (source, sink):
        create_topic(admin, topic, 3, 3)
        wait_all_in_sync(admin, topic, 3, [1, 2, 3], 30)
    values = [f"value-{i}".encode() for i in range(RECORDS)]
    produce_plain(cluster, source, values, partitions=3)
    names = (source, sink, f"g-{topic_name}", f"tx-{topic_name}")
    copier, kills, restarts = run_copier(cluster, names, RECORDS, abort_every=4), 0, 0
    started = time.monotonic()
    while kills < KILLS and time.monotonic() - started < FAULTS_BOUND_S:
        time.sleep(4)
        if copier.poll() is not None:
            if copier.returncode == 0:
                break
            copier, restarts = run_copier(cluster, names, RECORDS, abort_every=4), restarts + 1
        node = 1 + kills % 3
        cluster.kill9(node)
        time.sleep(2)
        cluster.restart(node)
        kills += 1
    for topic in (source, sink):
        wait_all_in_sync(admin, topic, 3, [1, 2, 3], 60)
    # A copier the faults left failed is restarted, as its operator would; without faults it
    # must finish.
    for _ in range(3):
        _, stderr = copier.communicate(timeout=240)
        if copier.returncode == 0:
            break
        print(f"copier exited {copier.returncode}: {stderr.splitlines()[-1:]}")
        copier, restarts = run_copier(cluster, names, RECORDS, abort_every=4), restarts + 1
    assert copier.returncode == 0, stderr
    assert kills >= 3, f"only {kills} kills before the copier finished"
    print(f"kills {kills}, copier restarts {restarts}, {time.monotonic() - started:.1f}s")
    assert_copied_once(cluster, sink, values)


def test_a_history_of_transactions_under_broker_kills_has_no_anomaly(cluster, topic_name):
    """Transactions committed and aborted while each broker in turn is killed: no aborted read,
    no committed record lost or duplicated, no transaction seen in part, and no group offset
    skipping a record its member was never given (txn_history.py)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "broker.address.family": "v4"})
    create_topic(admin, topic_name, 6, 3)
    wait_all_in_sync(admin, topic_name, 6, [1, 2, 3], 30)

    def faults():
        time.sleep(5)
        for kill in range(HISTORY_KILLS):
            node = 1 + kill % 3
            cluster.kill9(node)
            time.sleep(2)
            cluster.restart(node)
            time.sleep(4)
        wait_all_in_sync(admin, topic_name, 6, [1, 2, 3], 60)

    history, final = txn_history.run(cluster.bootstrap, topic_name, 6, faults)
    anomalies = txn_history.check(history, final)
    summary = (f"committed {len(history.committed)}, aborted {len(history.aborted)}, unknown "
               f"{len(history.unknown)}, producer restarts {history.producer_restarts}, final read "
               f"{len(final)}, live reads {len(history.read_live)}, group reads {len(history.read_by_group)}")
    print(summary)
    assert not anomalies, f"{summary}\n" + "\n".join(anomalies[:20])
    assert len(history.committed) >= 20 and len(history.aborted) >= 3, summary
    assert history.read_by_group, summary
