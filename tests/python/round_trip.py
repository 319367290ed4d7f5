"""One confluent-kafka round trip shared by the suites that vary only the client settings (the
security ones): `count` records produced with acks=all, then read back by a consumer group of
its own, in order."""

import uuid

from confluent_kafka import Consumer, Producer

TIMEOUT_S = 30


def produce_and_consume(config, topic, count, value=lambda i: f"record {i}".encode()):
    """Produces `value(i)` for i < `count` over `config`, reads them back, asserts the order."""
    producer = Producer({**config, "acks": "all", "message.timeout.ms": TIMEOUT_S * 1000})
    failures = []
    for i in range(count):
        producer.produce(topic, value(i), on_delivery=lambda e, _m: e and failures.append(e))
    assert producer.flush(TIMEOUT_S) == 0 and not failures, failures
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        while len(values) < count:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, f"only {len(values)} of {count} records within {TIMEOUT_S}s"
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    assert values == [value(i) for i in range(count)]


def kafka_python_produce_and_consume(config, topic, count=20):
    """The same with kafka-python: `count` records acks=all, read back in order."""
    from kafka import KafkaConsumer, KafkaProducer
    producer = KafkaProducer(acks="all", **config)
    for i in range(count):
        producer.send(topic, f"kp {i}".encode()).get(TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=TIMEOUT_S * 1000, **config)
    values = []
    for message in consumer:
        values.append(message.value.decode())
        if len(values) == count:
            break
    consumer.close()
    assert values == [f"kp {i}" for i in range(count)], config.get("security_protocol")
