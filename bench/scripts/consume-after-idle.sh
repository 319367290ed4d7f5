#!/usr/bin/env bash
# Consume throughput after the broker sat idle, for builds side by side (alternated): the host's
# reclaim takes pages of recent segments here and there meanwhile, and how a fetch deals with a
# range missing some shows here. One data directory for all runs: 512 MiB written once into a
# topic of 1 partition and one of 100; then each round starts each build's broker on it, leaves
# it idle IDLE_S seconds, consumes each topic from the start with one consumer, and prints MB/s
# and the bytes fetched by path (sendfile, copied, memory). Decision 0028 (sendfile of ranges the host reclaim thinned).
#
#   bench/scripts/consume-after-idle.sh "BINARY..." [ROUNDS] [IDLE_S]
set -u
binaries=$1
rounds=${2:-3}
idle_s=${3:-60}
port=19310
http=127.0.0.1:$((port + 1))
data=$(mktemp -d)
first=${binaries%% *}
source "$(dirname "$0")/broker.sh"

mb_per_sec() { # binary topic
  local json
  json=$(mktemp)
  "$1" bench consume --brokers 127.0.0.1:$port --topic "$2" --num-records 524288 \
    --no-limits --json "$json" >/dev/null 2>&1
  grep -o '"mb_per_sec": *[0-9.]*' "$json" | head -1 | grep -o '[0-9.]*$' | awk '{printf "%.0f", $1}'
  rm -f "$json"
}

paths() {
  curl -s "http://$http/metrics" | grep '^laminar_kafka_fetch_bytes_total{' |
    sed 's/laminar_kafka_fetch_bytes_total{path="\(.*\)"} /\1=/' | tr '\n' ' '
}

start_broker "$first"
for partitions in 1 100; do
  "$first" bench produce --brokers 127.0.0.1:$port --topic "idle-$partitions" \
    --partitions "$partitions" --num-records 524288 --record-size 1024 --producers 4 \
    --no-limits >/dev/null 2>&1
done
stop_broker
for round in $(seq 1 "$rounds"); do
  for binary in $binaries; do
    start_broker "$binary"
    sleep "$idle_s"
    one=$(mb_per_sec "$binary" idle-1)
    hundred=$(mb_per_sec "$binary" idle-100)
    echo "round $round $binary: 1 partition ${one} MB/s, 100 partitions ${hundred} MB/s; bytes by path: $(paths)"
    stop_broker
  done
done
rm -rf "$data"
