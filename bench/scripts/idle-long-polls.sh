#!/usr/bin/env bash
# Broker CPU spent on a caught-up consumer's long polls, for builds side by side (alternated).
# Each run starts a fresh broker, writes 100 000 records over 10 000 partitions, leaves it idle
# 12 s (its first checkpoint pass), then assigns one librdkafka consumer to the first N
# partitions at their ends (fetch.wait.max.ms 100) and prints the broker's CPU per second over
# 5 s of its polls. Decision 0027 (fetches over thousands of partitions).
#
#   bench/scripts/idle-long-polls.sh "BINARY..." [ROUNDS] [PARTITION_COUNTS]
#
# Needs python3 with confluent-kafka (tests/.venv after the test command has run once).
set -u
binaries=$1
rounds=${2:-2}
counts=${3:-"2500 10000"}
python=${PYTHON:-$(dirname "$0")/../../tests/.venv/bin/python}
port=19300
for round in $(seq 1 "$rounds"); do
  for binary in $binaries; do
    data=$(mktemp -d)
    "$binary" broker --override log.dirs="$data" --override listeners=PLAINTEXT://127.0.0.1:$port \
      --override laminar.http.listen=127.0.0.1:$((port + 1)) >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 50); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
    "$binary" bench produce --brokers 127.0.0.1:$port --topic t --partitions 10000 \
      --num-records 100000 --producers 4 --batch-bytes 16384 --linger-ms 5 --no-limits >/dev/null 2>&1
    sleep 12
    for count in $counts; do
      figure=$("$python" - "$port" "$count" "$pid" <<'PY'
import sys, time
from confluent_kafka import Consumer, TopicPartition
port, count, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "idle",
                     "enable.auto.commit": False, "fetch.wait.max.ms": 100})
ends = [consumer.get_watermark_offsets(TopicPartition("t", p), timeout=5)[1] for p in range(count)]
consumer.assign([TopicPartition("t", p, ends[p]) for p in range(count)])
def cpu_s():
    fields = open(f"/proc/{pid}/stat").read().split()
    return (int(fields[13]) + int(fields[14])) / 100
until = time.time() + 2
while time.time() < until:
    consumer.poll(0.1)
start = cpu_s(); until = time.time() + 5
while time.time() < until:
    consumer.poll(0.1)
print(f"{(cpu_s() - start) / 5:.3f}")
consumer.close()
PY
)
      echo "round $round $(basename "$binary"): $count caught-up partitions, broker $figure core"
    done
    kill "$pid"
    wait "$pid" 2>/dev/null
    rm -rf "$data"
  done
done
