"""kcat (Debian's, librdkafka 2.0.2: the oldest librdkafka we promise) against a real laminar
broker: produce with keys (-K:) and headers (-H), consume everything (-C -o beginning -e -J),
metadata (-L), offsets for times (-Q), every codec (-z), and auto-creation on produce."""

import json
import shutil
import subprocess
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (apt-get install kcat)")
TIMEOUT_S = 30


def kcat(broker, *args, stdin=None):
    command = ["kcat", "-b", broker.bootstrap, "-X", "broker.address.family=v4", *args]
    done = subprocess.run(command, input=stdin, capture_output=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}: {done.stderr.decode()[-2000:]}"
    return done


def create_topic(broker, name, partitions=1):
    client = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
    client.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT_S)


def produce_lines(broker, topic, lines, *extra):
    """One record per line, 'key:value', acks=all, to partition 0."""
    data = ("\n".join(lines) + "\n").encode()
    kcat(broker, "-P", "-t", topic, "-p", "0", "-K:", "-X", "acks=all", *extra, stdin=data)


def consume_all(broker, topic, partition=0, count=None):
    args = ["-C", "-t", topic, "-p", str(partition), "-o", "beginning", "-e", "-J"]
    if count is not None:
        args += ["-c", str(count)]
    out = kcat(broker, *args).stdout.decode()
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_produce_with_keys_and_headers_then_consume_everything_in_order(broker, topic_name):
    create_topic(broker, topic_name)
    lines = [f"key-{i}:value {i} " + "z" * (i % 13) for i in range(200)]
    before_ms = int(time.time() * 1000)
    produce_lines(broker, topic_name, lines, "-H", "source=kcat", "-H", "trace=abc=def")
    after_ms = int(time.time() * 1000)
    records = consume_all(broker, topic_name)
    assert [r["offset"] for r in records] == list(range(200))
    for i, r in enumerate(records):
        key, value = lines[i].split(":", 1)
        assert (r["key"], r["payload"]) == (key, value), f"record {i}"
        assert r["headers"] == ["source", "kcat", "trace", "abc=def"], f"record {i} headers"
        assert r["tstype"] == "create" and before_ms - 1000 <= r["ts"] <= after_ms + 1000, f"record {i} ts"


def test_metadata_lists_broker_and_topic_partitions(broker, topic_name):
    create_topic(broker, topic_name, 3)
    metadata = json.loads(kcat(broker, "-L", "-J").stdout)
    [node] = metadata["brokers"]
    assert node["name"] == broker.bootstrap
    [topic] = [t for t in metadata["topics"] if t["topic"] == topic_name]
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2]
    for p in topic["partitions"]:
        assert p["leader"] == node["id"]
        assert [r["id"] for r in p["replicas"]] == [node["id"]]
        assert [r["id"] for r in p["isrs"]] == [node["id"]]


def test_offsets_for_times(broker, topic_name):
    create_topic(broker, topic_name)
    produce_lines(broker, topic_name, [f"early-{i}:e{i}" for i in range(10)])
    time.sleep(0.05)
    middle_ms = int(time.time() * 1000)
    time.sleep(0.05)
    produce_lines(broker, topic_name, [f"late-{i}:l{i}" for i in range(5)])
    out = kcat(broker, "-Q", "-J", "-t", f"{topic_name}:0:{middle_ms}").stdout
    answer = json.loads(out)
    assert answer[topic_name]["0"]["offset"] == 10, out
    out = kcat(broker, "-Q", "-J", "-t", f"{topic_name}:0:0").stdout
    assert json.loads(out)[topic_name]["0"]["offset"] == 0, out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_roundtrips(broker, topic_name, codec):
    create_topic(broker, topic_name)
    lines = [f"k{i}:{i} " + "repetitive payload " * 10 for i in range(300)]
    produce_lines(broker, topic_name, lines, "-z", codec, "-X", "linger.ms=50")
    records = consume_all(broker, topic_name)
    assert [(r["offset"], r["key"], r["payload"]) for r in records] == [
        (i, *line.split(":", 1)) for i, line in enumerate(lines)]


def test_producing_to_a_new_topic_auto_creates_it(broker, topic_name):
    produce_lines(broker, topic_name, ["a:1", "b:2"])
    records = consume_all(broker, topic_name)
    assert [(r["key"], r["payload"]) for r in records] == [("a", "1"), ("b", "2")]
