#!/usr/bin/env bash
# A topic just written, consumed, for builds side by side (alternated): the throughput series'
# consume point at many partitions. Each run starts the build's broker on a data directory of
# its own, produces MIB MiB of 1 KiB records in Kafka's 16 KiB batches from four producers into
# PARTITIONS partitions, waits 25 s (the partitions' first checkpoint), then consumes it all
# twice with four consumers, and prints the broker's CPU and the MB/s of each consume. Decision
# 0027 (fetches over thousands of partitions).
#
#   bench/scripts/consume-just-written.sh "BINARY..." [ROUNDS] [PARTITIONS] [MIB]
set -u
binaries=$1
rounds=${2:-3}
partitions=${3:-10000}
mib=${4:-1024}
port=19330
http=127.0.0.1:$((port + 1))
records=$((mib * 1024))
source "$(dirname "$0")/broker.sh"

mb_per_sec() { # json
  python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['mb_per_sec'], 1))" "$1"
}

for round in $(seq 1 "$rounds"); do
  for binary in $binaries; do
    data=$(mktemp -d)
    start_broker "$binary"
    "$binary" bench produce --brokers 127.0.0.1:$port --topic just-written \
      --partitions "$partitions" --num-records "$records" --producers 4 --batch-bytes 16384 \
      --no-limits >/dev/null 2>&1
    sleep 25
    line="round $round $binary:"
    for consume in first second; do
      json=$(mktemp)
      before=$(broker_cpu_s)
      "$binary" bench consume --brokers 127.0.0.1:$port --topic just-written \
        --num-records "$records" --consumers 4 --no-limits --json "$json" >/dev/null 2>&1
      after=$(broker_cpu_s)
      cpu=$(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.2f", a - b }')
      line="$line $consume consume: broker CPU ${cpu} s, $(mb_per_sec "$json") MB/s;"
      rm -f "$json"
    done
    echo "$line"
    stop_broker
    rm -rf "$data"
  done
done
