"""SASL with real clients over a SASL_PLAINTEXT listener: SCRAM users made with confluent-kafka's
AdminClient (AlterUserScramCredentials, on the PLAINTEXT listener), then confluent-kafka,
kafka-python and kcat produce and consume with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; wrong
passwords are refused with Kafka's error and the broker keeps serving."""

import json
import shutil
import subprocess
import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)
from laminar_broker import BrokerProcess
from round_trip import kafka_python_produce_and_consume
from round_trip import produce_and_consume as round_trip_produce_and_consume

TIMEOUT_S = 30
SASL = "SASL_PLAINTEXT"
PLAIN_USERS = {"alice": "alice-secret"}
SCRAM_USERS = {
    "bob": (ScramMechanism.SCRAM_SHA_256, "bob-secret"),
    "carol": (ScramMechanism.SCRAM_SHA_512, "carol-secret"),
}


@pytest.fixture(scope="module")
def sasl_broker():
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(
        f'user_{user}="{password}"' for user, password in PLAIN_USERS.items()) + ";"
    process = BrokerProcess(overrides={
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "laminar.sasl.plain.plaintext.enable": "true",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
    }, listeners=[SASL])
    admin = AdminClient({"bootstrap.servers": process.bootstrap, "broker.address.family": "v4"})
    upsertions = [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 8192), password.encode())
                  for user, (mechanism, password) in SCRAM_USERS.items()]
    for user, future in admin.alter_user_scram_credentials(upsertions).items():
        assert future.result(TIMEOUT_S) is None, user
    yield process
    process.stop()


def sasl_config(broker, mechanism, user, password):
    return {"bootstrap.servers": broker.listeners[SASL], "broker.address.family": "v4",
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def produce_and_consume(config, topic, count=50):
    round_trip_produce_and_consume(config, topic, count)


@pytest.mark.parametrize("user", ["bob", "carol"])
def test_confluent_kafka_produces_and_consumes_with_scram(sasl_broker, topic_name, user):
    mechanism, password = SCRAM_USERS[user]
    produce_and_consume(sasl_config(sasl_broker, mechanism.name.replace("_", "-"), user, password), topic_name)


def test_confluent_kafka_produces_and_consumes_with_plain(sasl_broker, topic_name):
    produce_and_consume(sasl_config(sasl_broker, "PLAIN", "alice", "alice-secret"), topic_name)


@pytest.mark.parametrize("mechanism,user,password", [
    ("SCRAM-SHA-256", "bob", "not-bobs"),
    ("SCRAM-SHA-512", "bob", "bob-secret"),  # bob has SCRAM-SHA-256 only
    ("SCRAM-SHA-256", "nobody", "whatever"),
    ("PLAIN", "alice", "not-alices"),
])
def test_a_wrong_password_is_refused_with_an_authentication_error(sasl_broker, mechanism, user, password):
    errors = []
    config = {**sasl_config(sasl_broker, mechanism, user, password), "error_cb": errors.append}
    producer = Producer(config)
    producer.poll(10)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    text = " ".join(str(e) for e in errors)
    assert "Authentication failed" in text and password not in text, text
    producer.flush(0)


def test_the_broker_keeps_serving_after_refusals(sasl_broker, topic_name):
    for _ in range(3):
        test_a_wrong_password_is_refused_with_an_authentication_error(sasl_broker, "SCRAM-SHA-256", "bob", "not-bobs")
    produce_and_consume(sasl_config(sasl_broker, "SCRAM-SHA-256", "bob", "bob-secret"), topic_name, count=5)


def test_kafka_python_produces_and_consumes_with_scram(sasl_broker, topic_name):
    config = {"bootstrap_servers": sasl_broker.listeners[SASL], "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "carol",
              "sasl_plain_password": "carol-secret"}
    kafka_python_produce_and_consume(config, topic_name)


def test_kafka_python_wrong_password_raises(sasl_broker):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError
    with pytest.raises(KafkaPythonError) as raised:
        KafkaProducer(bootstrap_servers=sasl_broker.listeners[SASL], security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="bob", sasl_plain_password="nope",
                      max_block_ms=10_000)
    assert "nope" not in str(raised.value)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (apt-get install kcat)")
def test_kcat_produces_and_consumes_with_plain(sasl_broker, topic_name):
    security = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
                "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-X", "broker.address.family=v4"]
    base = ["kcat", "-b", sasl_broker.listeners[SASL], *security]
    lines = "".join(f"k{i}:v{i}\n" for i in range(30)).encode()
    produced = subprocess.run([*base, "-P", "-t", topic_name, "-K:", "-X", "acks=all"], input=lines,
                              capture_output=True, timeout=TIMEOUT_S)
    assert produced.returncode == 0, produced.stderr.decode()[-2000:]
    consumed = subprocess.run([*base, "-C", "-t", topic_name, "-o", "beginning", "-e", "-J"],
                              capture_output=True, timeout=TIMEOUT_S)
    assert consumed.returncode == 0, consumed.stderr.decode()[-2000:]
    records = [json.loads(line) for line in consumed.stdout.decode().splitlines() if line.strip()]
    assert [(r["key"], r["payload"]) for r in records] == [(f"k{i}", f"v{i}") for i in range(30)]


def test_scram_users_are_described_without_secrets_and_deleted(sasl_broker):
    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap, "broker.address.family": "v4"})
    described = admin.describe_user_scram_credentials().result(TIMEOUT_S)
    assert {"bob", "carol"} <= set(described)
    infos = described["carol"].scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    user = f"temp-{uuid.uuid4().hex[:6]}"
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info, b"pw")])[user].result(TIMEOUT_S)
    deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)
    admin.alter_user_scram_credentials([deletion])[user].result(TIMEOUT_S)
    with pytest.raises(Exception) as missing:
        admin.alter_user_scram_credentials([deletion])[user].result(TIMEOUT_S)
    assert "RESOURCE_NOT_FOUND" in str(missing.value) or "does not exist" in str(missing.value)
    too_few = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000)
    with pytest.raises(Exception) as refused:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, too_few, b"pw")])[user].result(
            TIMEOUT_S)
    assert "UNACCEPTABLE_CREDENTIAL" in str(refused.value) or "terations" in str(refused.value)
