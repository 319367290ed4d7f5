"""A consume-transform-produce loop with exactly-once semantics, run as its own process so tests
can kill -9 it mid-transaction: reads `input` with read_committed as group `group`, writes each
record's value, upper-cased, to `output` with the record's offset as key, and commits the input
offsets in the same transaction. Exits 0 once the group's committed offsets reach `total`.

    python txn_copier.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID TOTAL [ABORT_EVERY]

ABORT_EVERY=N aborts every Nth transaction instead of committing it (its input is read again)."""

import sys

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def main():
    bootstrap, source, sink, group, transactional_id, total = sys.argv[1:7]
    total = int(total)
    abort_every = int(sys.argv[7]) if len(sys.argv) > 7 else 0
    common = {"bootstrap.servers": bootstrap, "broker.address.family": "v4"}
    # A killed copier's member stays in the group until its session times out, and the group
    # rebalances only then: short, so the next copier starts soon.
    consumer = Consumer({**common, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    producer = Producer({**common, "transactional.id": transactional_id, "linger.ms": 5,
                         "transaction.timeout.ms": 10000})
    producer.init_transactions(30)
    consumer.subscribe([source])
    done, transactions = 0, 0
    while done < total:
        records = [m for m in consumer.consume(50, 1.0) if m.error() is None]
        if not records:
            done = committed(consumer, source)
            continue
        transactions += 1
        abort = bool(abort_every) and transactions % abort_every == 0
        try:
            copy(producer, consumer, records, sink, abort)
        except KafkaException as error:
            # A broker lost mid-transaction: the transaction can only be aborted, and its
            # records are read again; anything else ends the copier (its caller restarts it).
            if not error.args[0].txn_requires_abort():
                raise
            print(f"copier: aborting after {error}", file=sys.stderr)
            producer.abort_transaction(30)
            abort = True
        if abort:
            rewind(consumer, records)
        done = committed(consumer, source)
    consumer.close()


def copy(producer, consumer, records, sink, abort):
    """One transaction: `records` upper-cased into `sink` and the consumer's positions as the
    group's offsets; committed, or aborted if `abort`."""
    producer.begin_transaction()
    for m in records:
        producer.produce(sink, key=str(m.offset()).encode(), value=m.value().upper(), partition=m.partition())
    positions = consumer.position(consumer.assignment())
    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
    if abort:
        producer.abort_transaction(30)
    else:
        producer.commit_transaction(30)


def committed(consumer, source):
    """The group's committed offsets summed over `source`'s partitions; 0 while the group
    coordinator cannot say (the consumer is still joining)."""
    parts = [TopicPartition(source, p) for p in consumer.list_topics(source, 10).topics[source].partitions]
    try:
        return sum(max(tp.offset, 0) for tp in consumer.committed(parts, 10))
    except KafkaException as error:
        coordinator_moving = (KafkaError._TIMED_OUT, KafkaError.NOT_COORDINATOR,
                              KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE)
        if error.args[0].code() not in coordinator_moving and not error.args[0].retriable():
            raise
        return 0


def rewind(consumer, records):
    firsts = {}
    for m in records:
        firsts.setdefault(m.partition(), m.offset())
    for partition, offset in firsts.items():
        consumer.seek(TopicPartition(records[0].topic(), partition, offset))


if __name__ == "__main__":
    try:
        main()
    except KafkaException as error:
        print(f"copier: {error}", file=sys.stderr)
        sys.exit(3)
