"""ACLs with real clients (confluent-kafka) on a SASL_PLAINTEXT listener with PLAIN users: a super
user grants alice Write and Read on one topic prefix and Read on one group with AdminClient's
CreateAcls; alice then does exactly that and gets Kafka's error code for everything else
(another topic, another group, creating ACLs herself); Metadata hides what she may not
describe; DescribeAcls and DeleteAcls answer as Kafka's, and the ACLs survive a restart."""

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, NewTopic, ResourcePatternType, ResourceType)
from laminar_broker import BrokerProcess

TIMEOUT_S = 30
SASL = "SASL_PLAINTEXT"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def acl_broker():
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(
        f'user_{user}="{password}"' for user, password in USERS.items()) + ";"
    process = BrokerProcess(overrides={
        "sasl.enabled.mechanisms": "PLAIN",
        "laminar.sasl.plain.plaintext.enable": "true",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        # Kafka's class name, as a Kafka config carries it over.
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }, listeners=[SASL])
    yield process
    process.stop()


def as_user(broker, user):
    return {"bootstrap.servers": broker.listeners[SASL], "broker.address.family": "v4",
            "security.protocol": SASL, "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user]}


def produce(config, topic, count=10):
    """Errors of the deliveries (none when all were acknowledged)."""
    # Idempotent: InitProducerId needs Write on some topic (or IdempotentWrite on the cluster).
    producer = Producer({**config, "enable.idempotence": True, "message.timeout.ms": TIMEOUT_S * 1000})
    errors = []
    for i in range(count):
        producer.produce(topic, f"record {i}".encode(), on_delivery=lambda e, _m: e and errors.append(e))
    producer.flush(TIMEOUT_S)
    return errors


def consume(config, topic, group, count):
    """The values read, or the first error the consumer met."""
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values = []
    try:
        while len(values) < count:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, f"only {len(values)} of {count} records within {TIMEOUT_S}s"
            if message.error():
                return message.error()
            values.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def grants(prefix, group):
    topic = (ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED)
    return [
        AclBinding(*topic, "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
        AclBinding(*topic, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
    ]


def create_acls(admin, bindings):
    for binding, future in admin.create_acls(bindings).items():
        assert future.result(TIMEOUT_S) is None, binding


def test_a_principal_does_what_its_acls_allow_and_gets_kafkas_error_for_the_rest(acl_broker):
    run = uuid.uuid4().hex[:8]
    mine, other, group = f"alice-{run}-orders", f"bob-{run}-payments", f"alice-{run}-group"
    admin = AdminClient(as_user(acl_broker, "admin"))
    for name, future in admin.create_topics([NewTopic(mine, 2, 1), NewTopic(other, 1, 1)]).items():
        future.result(TIMEOUT_S)
    create_acls(admin, grants(f"alice-{run}-", group))

    alice = as_user(acl_broker, "alice")
    assert produce(alice, mine) == []
    refused = produce(alice, other, count=1)
    assert [e.code() for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], refused
    values = consume(alice, mine, group, 10)
    assert sorted(values) == sorted(f"record {i}".encode() for i in range(10)), values
    error = consume(alice, mine, f"{group}-not-hers", 1)
    assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error

    seen = AdminClient(alice).list_topics(timeout=TIMEOUT_S).topics
    assert mine in seen and other not in seen, sorted(seen)
    bob_error = consume(as_user(acl_broker, "bob"), mine, f"bob-{run}", 1)
    assert bob_error.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)

    with pytest.raises(KafkaException) as raised:
        create_acls(AdminClient(alice), grants("anything", "any-group"))
    assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_describe_and_delete_acls_answer_what_matches_and_the_acls_survive_a_restart(acl_broker):
    run = uuid.uuid4().hex[:8]
    topic, group = f"carol-{run}-t", f"carol-{run}-g"
    admin = AdminClient(as_user(acl_broker, "admin"))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)
    create_acls(admin, [AclBinding(b.restype, b.name.replace("alice", "carol"), b.resource_pattern_type,
                                   "User:alice", "*", b.operation, b.permission_type)
                        for b in grants(f"carol-{run}-", group)])
    by_prefix = AclBindingFilter(ResourceType.ANY, f"carol-{run}-", ResourcePatternType.PREFIXED,
                                 None, None, AclOperation.ANY, AclPermissionType.ANY)
    assert len(admin.describe_acls(by_prefix).result(TIMEOUT_S)) == 2

    acl_broker.restart()
    admin = AdminClient(as_user(acl_broker, "admin"))
    write = AclBindingFilter(ResourceType.TOPIC, f"carol-{run}-", ResourcePatternType.PREFIXED,
                             "User:alice", None, AclOperation.WRITE, AclPermissionType.ALLOW)
    deleted = admin.delete_acls([write])[write].result(TIMEOUT_S)
    assert [(b.operation, b.name) for b in deleted] == [(AclOperation.WRITE, f"carol-{run}-")]
    refused = produce(as_user(acl_broker, "alice"), topic, count=1)
    assert [e.code() for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], refused
