#!/usr/bin/env bash
# First writes after a restart, for builds side by side (alternated): what a partition's first
# use costs once the broker starts on clean logs (its open, its producer state, its first
# append after a checkpoint). One data directory for all runs: a topic of PARTITIONS partitions,
# a few KiB each, written once and closed clean; then each round starts each build's broker on
# it and produces 2 x PARTITIONS keyed 100-byte records (most partitions take one or more), and
# prints the broker's CPU for them, the time they took and the mean record latency. Decision
# 0022 (open on first use and the log state file).
#
#   bench/scripts/first-writes-after-restart.sh "BINARY..." [ROUNDS] [PARTITIONS]
set -u
binaries=$1
rounds=${2:-3}
partitions=${3:-10000}
port=19320
http=127.0.0.1:$((port + 1))
data=$(mktemp -d)
first=${binaries%% *}
source "$(dirname "$0")/broker.sh"

produce() { # binary records json
  "$1" bench produce --brokers 127.0.0.1:$port --topic first-writes --partitions "$partitions" \
    --keyed --num-records "$2" --record-size 100 --no-limits --json "$3" >/dev/null 2>&1
}

json_field() { # json field
  python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))[sys.argv[2]], 3))" "$1" "$2"
}

start_broker "$first"
produce "$first" $((partitions * 20)) /dev/null
stop_broker
for round in $(seq 1 "$rounds"); do
  for binary in $binaries; do
    start_broker "$binary"
    json=$(mktemp)
    before=$(broker_cpu_s)
    produce "$binary" $((partitions * 2)) "$json"
    after=$(broker_cpu_s)
    cpu=$(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.2f", a - b }')
    echo "round $round $binary: broker CPU ${cpu} s, $(json_field "$json" seconds) s," \
      "latency mean $(json_field "$json" latency_ms_avg) ms"
    rm -f "$json"
    stop_broker
  done
done
rm -rf "$data"
