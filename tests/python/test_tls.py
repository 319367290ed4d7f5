"""TLS with real clients: an SSL listener that requires client certificates, and a SASL_SSL one
with SCRAM-SHA-512. Certificates are made by each run (`laminar-test-certs`); confluent-kafka and
kafka-python produce and consume over both; untrusted, expired and missing client certificates,
a wrong password, a plaintext client and garbage on the TLS ports are refused, and the broker
keeps serving."""

import socket
import ssl
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from laminar_broker import BrokerProcess, controller_binary
from round_trip import kafka_python_produce_and_consume
from round_trip import produce_and_consume as round_trip_produce_and_consume

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("certs")
    tool = Path(controller_binary()).parent / "laminar-test-certs"
    subprocess.run([str(tool), str(directory)], check=True, timeout=60)
    return directory


@pytest.fixture(scope="module")
def tls_broker(certs):
    process = BrokerProcess(overrides={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL",
        "ssl.keystore.location": str(certs / "server.pem"),
        "ssl.truststore.location": str(certs / "ca.pem"),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }, listeners=["SSL", "SASL_SSL"])
    admin = AdminClient({"bootstrap.servers": process.bootstrap, "broker.address.family": "v4"})
    user = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bob-secret")
    admin.alter_user_scram_credentials([user])["bob"].result(TIMEOUT_S)
    yield process
    process.stop()


def ssl_config(broker, certs, client="alice"):
    config = {"bootstrap.servers": broker.listeners["SSL"], "broker.address.family": "v4",
              "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")}
    if client:
        config.update({"ssl.certificate.location": str(certs / f"{client}.crt"),
                       "ssl.key.location": str(certs / f"{client}.key")})
    return config


def sasl_ssl_config(broker, certs, password="bob-secret"):
    return {"bootstrap.servers": broker.listeners["SASL_SSL"], "broker.address.family": "v4",
            "security.protocol": "SASL_SSL", "ssl.ca.location": str(certs / "ca.pem"),
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": password}


def produce_and_consume(config, topic, count=200):
    round_trip_produce_and_consume(config, topic, count, value=lambda i: f"tls {i}".encode() * 20)


def refused(config, expected_code):
    errors = []
    producer = Producer({**config, "error_cb": errors.append})
    producer.poll(10)
    producer.flush(0)
    assert any(e.code() == expected_code for e in errors), errors
    return errors


def test_confluent_kafka_over_ssl_with_a_client_certificate(tls_broker, certs, topic_name):
    produce_and_consume(ssl_config(tls_broker, certs), topic_name)


def test_confluent_kafka_over_sasl_ssl_with_scram(tls_broker, certs, topic_name):
    produce_and_consume(sasl_ssl_config(tls_broker, certs), topic_name)


@pytest.mark.parametrize("client", [None, "untrusted", "expired"])
def test_missing_untrusted_and_expired_client_certificates_are_refused(tls_broker, certs, client):
    refused(ssl_config(tls_broker, certs, client), KafkaError._TRANSPORT)


def test_a_wrong_password_over_sasl_ssl_is_refused(tls_broker, certs):
    errors = refused(sasl_ssl_config(tls_broker, certs, password="not-bobs"), KafkaError._AUTHENTICATION)
    assert "not-bobs" not in " ".join(str(e) for e in errors)


def test_a_plaintext_client_and_garbage_on_tls_ports_are_refused_and_the_broker_serves_on(tls_broker, certs,
                                                                                            topic_name):
    for name in ("SSL", "SASL_SSL"):
        host, port = tls_broker.listeners[name].rsplit(":", 1)
        for garbage in (b"\x00\x00\x00\x0e\x00\x12\x00\x03\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00",
                        b"\x16\x03\x01\xff\xff" + b"\xab" * 300):
            with socket.create_connection((host, int(port)), timeout=10) as conn:
                conn.sendall(garbage)
                conn.settimeout(10)
                try:
                    answer = conn.recv(4096)
                except ConnectionResetError:
                    answer = b""
                # Nothing but a TLS alert (content type 21) may come back, then the close.
                assert answer == b"" or answer[0] == 21, answer[:16]
    produce_and_consume(ssl_config(tls_broker, certs), topic_name, count=5)


def test_kafka_python_over_ssl_and_sasl_ssl(tls_broker, certs, topic_name):
    common = {"ssl_cafile": str(certs / "ca.pem"), "ssl_check_hostname": True}
    configs = [
        {"bootstrap_servers": tls_broker.listeners["SSL"], "security_protocol": "SSL",
         "ssl_certfile": str(certs / "alice.crt"), "ssl_keyfile": str(certs / "alice.key"), **common},
        {"bootstrap_servers": tls_broker.listeners["SASL_SSL"], "security_protocol": "SASL_SSL",
         "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "bob", "sasl_plain_password": "bob-secret",
         **common},
    ]
    for index, config in enumerate(configs):
        kafka_python_produce_and_consume(config, f"{topic_name}-{index}")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_server_speaks_tls_1_2_and_1_3_only(tls_broker, certs):
    host, port = tls_broker.listeners["SASL_SSL"].rsplit(":", 1)
    for version, accepted in ((ssl.TLSVersion.TLSv1_3, True), (ssl.TLSVersion.TLSv1_2, True),
                              (ssl.TLSVersion.TLSv1_1, False)):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_verify_locations(str(certs / "ca.pem"))
        context.minimum_version = context.maximum_version = version
        if version == ssl.TLSVersion.TLSv1_1:
            context.set_ciphers("ALL:@SECLEVEL=0")
        try:
            with socket.create_connection((host, int(port)), timeout=10) as raw:
                with context.wrap_socket(raw, server_hostname="localhost") as conn:
                    assert conn.version() is not None
            assert accepted, version
        except ssl.SSLError:
            assert not accepted, version
