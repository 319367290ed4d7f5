"""Transactions with kafka-python 3.x (its own KIP-98 client: InitProducerId with a transactional
id, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) against a real laminar broker:
committed records are read by read_committed consumers at exact offsets, aborted ones only by
read_uncommitted ones; an open transaction holds read_committed back; offsets sent in a
transaction become the group's committed offset only when it commits, both with a bare group id
and with a live member's group metadata; a second producer with the same transactional id fences
the first, whose records never become visible."""

import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import InvalidProducerEpochError, KafkaError, ProducerFencedError
from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.groups

TIMEOUT_S = 30


def create_topic(broker, name, partitions=1):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        admin.create_topics({name: {"num_partitions": partitions, "replication_factor": 1}},
                            timeout_ms=TIMEOUT_S * 1000)
    finally:
        admin.close()


def transactional_producer(broker, transactional_id):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=transactional_id,
                             linger_ms=5, max_block_ms=TIMEOUT_S * 1000,
                             request_timeout_ms=TIMEOUT_S * 1000)
    producer.init_transactions()
    return producer


def send_all(producer, topic, values, partitions=1):
    """Sends `values` round-robin over `partitions` and waits for every ack, so the records are
    in the log before the transaction ends (an abort would drop unsent ones client-side)."""
    futures = [producer.send(topic, value=v, partition=i % partitions) for i, v in enumerate(values)]
    producer.flush(TIMEOUT_S)
    return [(m.partition, m.offset) for m in (f.get(TIMEOUT_S) for f in futures)]


def read_all(broker, topic, isolation, partitions=1, expected=None, quiet_s=2.0):
    """Every record of `topic` a consumer with `isolation` reads from the start, as
    (partition, offset, value), until `expected` records came or nothing came for `quiet_s`."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                             isolation_level=isolation, fetch_max_wait_ms=100,
                             request_timeout_ms=TIMEOUT_S * 1000 + 1000)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        records, last, deadline = [], time.monotonic(), time.monotonic() + TIMEOUT_S
        while time.monotonic() - last < quiet_s:
            assert time.monotonic() < deadline, f"still reading after {TIMEOUT_S} s: {records}"
            if expected is not None and len(records) >= expected:
                break
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend((r.partition, r.offset, r.value) for r in batch)
                last = time.monotonic()
        return sorted(records)
    finally:
        consumer.close()


def end_offsets(broker, topic, isolation, partitions=1):
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, isolation_level=isolation,
                             request_timeout_ms=TIMEOUT_S * 1000 + 1000)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return [consumer.end_offsets(tps)[tp] for tp in tps]
    finally:
        consumer.close()


def committed_offset(broker, group, tp):
    """The group's committed (offset, metadata) of `tp` through OffsetFetch; offset -1: none."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        found = admin.list_group_offsets({group: [tp]})[group][tp]
        return (found.offset, found.metadata)
    finally:
        admin.close()


def test_committed_transactions_are_read_committed_and_aborted_ones_only_read_uncommitted(broker, topic_name):
    create_topic(broker, topic_name, partitions=2)
    producer = transactional_producer(broker, f"tx-{topic_name}")
    try:
        acked = {}
        for round_, commit in enumerate([True, False, True]):
            producer.begin_transaction()
            values = [f"r{round_}-{i}".encode() for i in range(6)]
            acked[round_] = list(zip(send_all(producer, topic_name, values, partitions=2), values))
            (producer.commit_transaction if commit else producer.abort_transaction)()
    finally:
        producer.close(timeout=TIMEOUT_S)
    # Each transaction writes 3 records to each partition and then one marker: round r sits at
    # offsets 4r .. 4r+2 of both partitions.
    for round_, records in acked.items():
        assert sorted(po for po, _ in records) == [(p, 4 * round_ + i) for p in (0, 1) for i in range(3)]
    every = sorted((p, o, v) for records in acked.values() for (p, o), v in records)
    committed = sorted((p, o, v) for r in (0, 2) for (p, o), v in acked[r])
    # The last committed record of each partition comes after the aborted ones: once it is read,
    # every aborted record a consumer would return has been returned.
    assert read_all(broker, topic_name, "read_committed", partitions=2, expected=len(committed)) == committed
    assert read_all(broker, topic_name, "read_uncommitted", partitions=2, expected=len(every)) == every
    # Three markers on each partition: the high watermark is 12, and so is the LSO.
    assert end_offsets(broker, topic_name, "read_uncommitted", partitions=2) == [12, 12]
    assert end_offsets(broker, topic_name, "read_committed", partitions=2) == [12, 12]


def test_an_open_transaction_holds_read_committed_back_until_it_commits(broker, topic_name):
    create_topic(broker, topic_name)
    producer = transactional_producer(broker, f"tx-{topic_name}")
    try:
        producer.begin_transaction()
        assert send_all(producer, topic_name, [b"open-0", b"open-1"]) == [(0, 0), (0, 1)]
        assert end_offsets(broker, topic_name, "read_committed") == [0]
        assert end_offsets(broker, topic_name, "read_uncommitted") == [2]
        assert read_all(broker, topic_name, "read_committed", quiet_s=1.5) == []
        assert read_all(broker, topic_name, "read_uncommitted", expected=2) == [(0, 0, b"open-0"), (0, 1, b"open-1")]
        producer.commit_transaction()
    finally:
        producer.close(timeout=TIMEOUT_S)
    assert read_all(broker, topic_name, "read_committed", expected=2) == [(0, 0, b"open-0"), (0, 1, b"open-1")]
    assert end_offsets(broker, topic_name, "read_committed") == [3]


def test_offsets_sent_with_a_bare_group_id_are_committed_only_when_the_transaction_commits(broker, topic_name):
    create_topic(broker, topic_name)
    group = f"g-{topic_name}"
    tp = TopicPartition(topic_name, 0)
    producer = transactional_producer(broker, f"tx-{topic_name}")
    try:
        producer.begin_transaction()
        send_all(producer, topic_name, [b"a", b"b"])
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(5, "first", -1)}, group)
        assert committed_offset(broker, group, tp) == (-1, ""), "a pending transactional offset was visible"
        producer.commit_transaction()
        assert committed_offset(broker, group, tp) == (5, "first")

        producer.begin_transaction()
        send_all(producer, topic_name, [b"c"])
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(9, "second", -1)}, group)
        producer.abort_transaction()
        assert committed_offset(broker, group, tp) == (5, "first")

        producer.begin_transaction()
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(7, "third", -1)}, group)
        producer.commit_transaction()
        assert committed_offset(broker, group, tp) == (7, "third")
    finally:
        producer.close(timeout=TIMEOUT_S)
    assert [v for _, _, v in read_all(broker, topic_name, "read_committed", expected=2)] == [b"a", b"b"]


def test_a_member_copies_records_and_commits_its_offsets_in_one_transaction(broker, topic_name):
    """Consume-transform-produce with the member's group metadata (TxnOffsetCommit with the
    generation and member id, KIP-447): a committed round moves the group's offset and its
    output becomes readable; an aborted round leaves both as they were."""
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker, source)
    create_topic(broker, sink)
    plain = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=False)
    try:
        for i in range(10):
            plain.send(source, value=f"in-{i}".encode(), partition=0)
        plain.flush(TIMEOUT_S)
    finally:
        plain.close(timeout=TIMEOUT_S)
    group = f"g-{topic_name}"
    tp = TopicPartition(source, 0)
    member = KafkaConsumer(source, bootstrap_servers=broker.bootstrap, group_id=group,
                           enable_auto_commit=False, auto_offset_reset="earliest",
                           isolation_level="read_committed", max_poll_records=4, fetch_max_wait_ms=100,
                           session_timeout_ms=10000, heartbeat_interval_ms=500)
    producer = transactional_producer(broker, f"tx-{topic_name}")
    try:
        def poll_four():
            got, deadline = [], time.monotonic() + TIMEOUT_S
            while len(got) < 4:
                assert time.monotonic() < deadline, f"only {got} arrived"
                for batch in member.poll(timeout_ms=200, max_records=4 - len(got)).values():
                    got.extend(batch)
            return got

        first = poll_four()
        assert [r.offset for r in first] == [0, 1, 2, 3]
        producer.begin_transaction()
        send_all(producer, sink, [r.value.replace(b"in", b"out") for r in first])
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(4, "", -1)}, member.group_metadata())
        producer.commit_transaction()
        assert committed_offset(broker, group, tp) == (4, "")

        second = poll_four()
        assert [r.offset for r in second] == [4, 5, 6, 7]
        producer.begin_transaction()
        send_all(producer, sink, [r.value.replace(b"in", b"out") for r in second])
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(8, "", -1)}, member.group_metadata())
        producer.abort_transaction()
        assert committed_offset(broker, group, tp) == (4, "")
    finally:
        producer.close(timeout=TIMEOUT_S)
        member.close(autocommit=False)
    # Sink: round 1 at offsets 0-3 and its marker at 4; the aborted round 2 at 5-8, marker at 9.
    assert read_all(broker, sink, "read_committed", expected=4) == [(0, i, f"out-{i}".encode()) for i in range(4)]
    assert read_all(broker, sink, "read_uncommitted", expected=8) == (
        [(0, i, f"out-{i}".encode()) for i in range(4)] + [(0, 5 + i, f"out-{4 + i}".encode()) for i in range(4)])


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(broker, topic_name):
    create_topic(broker, topic_name)
    transactional_id = f"tx-{topic_name}"
    zombie = transactional_producer(broker, transactional_id)
    successor = None
    try:
        zombie.begin_transaction()
        assert send_all(zombie, topic_name, [b"zombie"]) == [(0, 0)]
        successor = transactional_producer(broker, transactional_id)
        with pytest.raises(KafkaError) as fenced:
            zombie.commit_transaction()
        assert isinstance(fenced.value, (ProducerFencedError, InvalidProducerEpochError)), repr(fenced.value)
        successor.begin_transaction()
        # The successor's InitProducerId aborted the zombie's transaction: its marker is offset 1.
        assert send_all(successor, topic_name, [b"successor"]) == [(0, 2)]
        successor.commit_transaction()
    finally:
        zombie.close(timeout=5)
        if successor is not None:
            successor.close(timeout=TIMEOUT_S)
    assert read_all(broker, topic_name, "read_committed", expected=1) == [(0, 2, b"successor")]
    assert read_all(broker, topic_name, "read_uncommitted", expected=2) == [(0, 0, b"zombie"), (0, 2, b"successor")]


def test_a_fenced_producer_cannot_send_again(broker, topic_name):
    create_topic(broker, topic_name)
    transactional_id = f"tx-{topic_name}"
    zombie = transactional_producer(broker, transactional_id)
    successor = transactional_producer(broker, transactional_id)
    try:
        zombie.begin_transaction()
        future = zombie.send(topic_name, value=b"zombie", partition=0)
        zombie.flush(TIMEOUT_S)
        with pytest.raises(KafkaError) as fenced:
            future.get(TIMEOUT_S)
        assert isinstance(fenced.value, (ProducerFencedError, InvalidProducerEpochError)), repr(fenced.value)
    finally:
        zombie.close(timeout=5)
        successor.close(timeout=TIMEOUT_S)
    assert end_offsets(broker, topic_name, "read_uncommitted") == [0]


def test_transactional_ids_are_independent(broker, topic_name):
    """Two producers with different transactional ids on one partition: aborting one's
    transaction drops only its records; the other's commit stays readable."""
    create_topic(broker, topic_name)
    first = transactional_producer(broker, f"tx-a-{uuid.uuid4().hex[:6]}")
    second = transactional_producer(broker, f"tx-b-{uuid.uuid4().hex[:6]}")
    try:
        first.begin_transaction()
        second.begin_transaction()
        assert send_all(first, topic_name, [b"a0"]) == [(0, 0)]
        assert send_all(second, topic_name, [b"b0"]) == [(0, 1)]
        assert send_all(first, topic_name, [b"a1"]) == [(0, 2)]
        second.commit_transaction()
        # Still held back: the first transaction is open below the second's records.
        assert end_offsets(broker, topic_name, "read_committed") == [0]
        first.abort_transaction()
    finally:
        first.close(timeout=TIMEOUT_S)
        second.close(timeout=TIMEOUT_S)
    assert read_all(broker, topic_name, "read_committed", expected=1) == [(0, 1, b"b0")]
    assert end_offsets(broker, topic_name, "read_committed") == [5]
