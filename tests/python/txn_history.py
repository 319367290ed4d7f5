"""A history of transactions and what read_committed consumers saw of it, and the checker that
looks for the anomalies Jepsen looked for in Kafka-compatible systems: aborted reads (a
read_committed consumer delivered a record of an aborted transaction), lost or duplicated
committed records, a transaction seen in part, and a consumer group whose committed offsets
skip records it was never given.

The workload: transactions of 2 to 5 records spread over a topic's partitions, each committed
or (one in five) aborted, their outcome recorded as the client saw it (committed, aborted, or
unknown when the producer failed before an answer); meanwhile a read_committed reader follows
every partition and a read_committed group member consumes and commits after each batch. At
the end a fresh read_committed read of the whole topic is the reference."""

import random
import threading
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

TIMEOUT_S = 30


def value_of(txn, index, size):
    return f"{txn}:{index}:{size}".encode()


def parse(value):
    txn, index, size = value.decode().split(":")
    return txn, int(index), int(size)


@dataclass
class History:
    committed: set = field(default_factory=set)
    aborted: set = field(default_factory=set)
    unknown: set = field(default_factory=set)
    # What the live reader and the group member were given: [(partition, offset, value)].
    read_live: list = field(default_factory=list)
    read_by_group: list = field(default_factory=list)
    # The group's committed offsets at the end: {partition: offset}.
    group_offsets: dict = field(default_factory=dict)
    producer_restarts: int = 0


def _producer(bootstrap, transactional_id):
    producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "transactional.id": transactional_id, "linger.ms": 2,
                         "transaction.timeout.ms": 10000})
    producer.init_transactions(TIMEOUT_S)
    return producer


def run_producer(bootstrap, topic, partitions, history, stop, seed):
    """Transactions until `stop` is set; each outcome into `history`."""
    rng = random.Random(seed)
    transactional_id = f"history-{uuid.uuid4().hex[:8]}"
    producer = _producer(bootstrap, transactional_id)
    serial = 0
    while not stop.is_set():
        serial += 1
        txn, size = f"t{serial}", rng.randint(2, 5)
        abort = rng.random() < 0.2
        try:
            producer.begin_transaction()
            for index in range(size):
                producer.produce(topic, value=value_of(txn, index, size), partition=rng.randrange(partitions))
            assert producer.flush(TIMEOUT_S) == 0
            if abort:
                producer.abort_transaction(TIMEOUT_S)
                history.aborted.add(txn)
            else:
                producer.commit_transaction(TIMEOUT_S)
                history.committed.add(txn)
        except (KafkaException, AssertionError) as error:
            producer = _recover(bootstrap, transactional_id, producer, error, txn, history)


def _recover(bootstrap, transactional_id, producer, error, txn, history):
    """After a failed transaction: aborted if the client still can, else of unknown outcome
    with a new producer (which fences the old one and aborts what it left open)."""
    kafka_error = error.args[0] if isinstance(error, KafkaException) else None
    if kafka_error is not None and kafka_error.txn_requires_abort():
        try:
            producer.abort_transaction(TIMEOUT_S)
            history.aborted.add(txn)
            return producer
        except KafkaException:
            pass
    history.unknown.add(txn)
    history.producer_restarts += 1
    while True:
        try:
            return _producer(bootstrap, transactional_id)
        except KafkaException:
            time.sleep(1)


def run_live_reader(bootstrap, topic, partitions, history, stop):
    consumer = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "group.id": f"live-{uuid.uuid4().hex[:8]}", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    while not stop.is_set():
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            history.read_live.append((message.partition(), message.offset(), message.value()))
    consumer.close()


def run_group_member(bootstrap, topic, group, history, stop):
    consumer = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    consumer.subscribe([topic])
    while not stop.is_set():
        messages = [m for m in consumer.consume(100, 0.5) if m.error() is None]
        if not messages:
            continue
        history.read_by_group.extend((m.partition(), m.offset(), m.value()) for m in messages)
        try:
            consumer.commit(asynchronous=False)
        except KafkaException:
            pass  # a commit lost to a broker kill: the next one covers it
    consumer.close()


def read_final(bootstrap, topic, partitions, quiet_s=5):
    consumer = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "group.id": f"final-{uuid.uuid4().hex[:8]}", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    records, last = [], time.monotonic()
    while time.monotonic() - last < quiet_s:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            records.append((message.partition(), message.offset(), message.value()))
            last = time.monotonic()
    consumer.close()
    return records


def group_offsets(bootstrap, topic, group, partitions):
    consumer = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "group.id": group,
                         "isolation.level": "read_committed"})
    committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], TIMEOUT_S)
    consumer.close()
    return {tp.partition: tp.offset for tp in committed if tp.offset >= 0}


def check(history, final):
    """The anomalies found, as readable strings (empty: none)."""
    anomalies = []
    seen = {}
    for partition, offset, value in final:
        seen.setdefault(value, []).append((partition, offset))
    for value, where in seen.items():
        if len(where) > 1:
            anomalies.append(f"duplicated: {value!r} at {where}")
    by_txn = {}
    for value in seen:
        txn, index, size = parse(value)
        by_txn.setdefault(txn, (size, set()))[1].add(index)
    for txn, (size, indexes) in by_txn.items():
        if txn in history.aborted:
            anomalies.append(f"aborted read: {txn} read with read_committed")
        elif len(indexes) != size:
            anomalies.append(f"transaction seen in part: {txn} {sorted(indexes)} of {size}")
    for txn in history.committed - set(by_txn):
        anomalies.append(f"lost: committed {txn} never read")
    anomalies += _check_reader("live reader", history.read_live, final, history.aborted)
    anomalies += _check_reader("group member", history.read_by_group, final, history.aborted, group=True)
    anomalies += _check_group_offsets(history, final)
    return anomalies


def _check_reader(name, read, final, aborted, group=False):
    """What a consumer was given: nothing aborted, nothing the final read lacks, and per
    partition in offset order (a group member may be given a range again after a rebalance)."""
    anomalies = []
    final_values = {v for _, _, v in final}
    last = {}
    for partition, offset, value in read:
        if parse(value)[0] in aborted:
            anomalies.append(f"{name}: aborted read of {value!r}")
        elif value not in final_values:
            anomalies.append(f"{name}: read {value!r} at {partition}/{offset}, absent from the final read")
        if not group and offset <= last.get(partition, -1):
            anomalies.append(f"{name}: {partition}/{offset} after {last[partition]}")
        last[partition] = offset
    return anomalies


def _check_group_offsets(history, final):
    """Every record below the group's committed offset was given to the group's member."""
    given = {(p, o) for p, o, _ in history.read_by_group}
    skipped = [(p, o) for p, o, _ in final
               if o < history.group_offsets.get(p, -1) and (p, o) not in given]
    return [f"group offsets skip records never given to it: {sorted(skipped)[:5]}"] if skipped else []


def run(bootstrap, topic, partitions, faults, seed=1):
    """Runs the workload while `faults()` (which returns once done) breaks things; returns the
    history with the final read and the group's offsets."""
    history, stop = History(), threading.Event()
    group = f"history-group-{uuid.uuid4().hex[:8]}"
    workers = [threading.Thread(target=run_producer, args=(bootstrap, topic, partitions, history, stop, seed)),
               threading.Thread(target=run_live_reader, args=(bootstrap, topic, partitions, history, stop)),
               threading.Thread(target=run_group_member, args=(bootstrap, topic, group, history, stop))]
    for worker in workers:
        worker.start()
    try:
        faults()
        time.sleep(5)  # a quiet end: the readers catch up
    finally:
        stop.set()
        for worker in workers:
            worker.join(120)
    final = read_final(bootstrap, topic, partitions)
    history.group_offsets = group_offsets(bootstrap, topic, group, partitions)
    return history, final
